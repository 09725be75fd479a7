'use strict';
// ioredis 6's `sentinels` option failing over with a three-node deadbolt cluster, unchanged, with
// redis-semaphore's Mutex (SET NX PX, refresh and release scripts) as the lock library on top.
// The leader is SIGKILLed while one Mutex is held (its refresh timer running) and three workers
// contend on another. ioredis sees the socket close, reconnects through the sentinels (the other
// nodes) and re-sends what was in flight; its ready check demands `role:master` in INFO. Checked:
// the held Mutex's identifier is on the new leader, a rival can't take it, it was never reported
// lost and its release works; no two workers hold the contended Mutex at once; locking resumes.
// The surviving nodes publish `+switch-master` (what ioredis's failoverDetector listens to).
// Printed: the time from the kill to the first acquire the new leader acknowledged.
// deadbolt only: a real Redis + Sentinel failover takes far longer and is measured elsewhere.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { Mutex } = require('redis-semaphore');
const { TARGETS, startCluster, sleep, uniq } = require('../servers');
const { version } = require('ioredis/package.json');

// Detection takes 0.5-1 s of silence plus an election, the rest is client back-off.
const FAILOVER_BUDGET = 10000;

describe('ioredis sentinels failover on a deadbolt cluster', { skip: !TARGETS.includes('deadbolt') && 'deadbolt target only' }, () => {
  let cluster;
  const open = [];
  before(async () => { cluster = await startCluster(3); });
  after(async () => { for (const c of open) c.disconnect(); if (cluster) await cluster.stop(); });

  function client() {
    // Documented options only: fast reconnects, a READONLY reply (a leader that stepped down)
    // makes ioredis reconnect through the sentinels and re-send the command.
    const c = new Redis({
      sentinels: cluster.sentinels(),
      name: 'mymaster',
      retryStrategy: (times) => Math.min(times * 20, 200),
      sentinelRetryStrategy: (times) => Math.min(times * 20, 200),
      reconnectOnError: (err) => (err.message.startsWith('READONLY') ? 2 : false),
      connectTimeout: 1000,
      maxRetriesPerRequest: 100,
    });
    c.on('error', () => {});
    open.push(c);
    return c;
  }

  it('a Mutex held across a leader SIGKILL stays held; workers never overlap; locking resumes', { timeout: 60000 }, async () => {
    const old = await cluster.leader();
    const ports = cluster.clientPorts();
    const r = client();
    await new Promise((resolve) => r.once('ready', resolve));
    assert.equal(r.stream.remotePort, ports[old]);

    // What ioredis's failoverDetector subscribes to on every sentinel: the surviving nodes must
    // announce the new leader there.
    const switches = [];
    for (const [i, port] of ports.entries()) {
      if (i === old) continue;
      const sub = new Redis({ port, maxRetriesPerRequest: 1 });
      sub.on('error', () => {});
      open.push(sub);
      sub.on('message', (ch, msg) => { if (ch === '+switch-master') switches.push([port, msg]); });
      await sub.subscribe('+switch-master');
    }

    const k = uniq('sfo');
    let lost = null;
    const held = new Mutex(r, `${k}:held`, { lockTimeout: 10000, refreshInterval: 1000, acquireTimeout: 1000, retryInterval: 20,
      onLockLost: (err) => { lost = err; } });
    await held.acquire();

    const state = { inside: null, overlaps: [], grants: [], errors: 0 };
    let stop = false;
    async function worker(id) {
      while (!stop) {
        const m = new Mutex(r, `${k}:contended`, { lockTimeout: 3000, refreshInterval: 0, acquireTimeout: 300, retryInterval: 10 });
        let got;
        try { got = await m.tryAcquire(); } catch { state.errors++; continue; } // the application retries
        if (!got) continue;
        if (state.inside !== null) state.overlaps.push([state.inside, id]);
        state.inside = id;
        state.grants.push(performance.now());
        await sleep(2);
        state.inside = null;
        try { await m.release(); } catch { state.errors++; }
      }
    }
    const workers = [0, 1, 2].map(worker);
    const since = (t) => state.grants.filter((g) => g > t).length;
    try {
      while (state.grants.length < 5) await sleep(10);
      const killedAt = await cluster.kill(old);

      // The first acquire sent after the kill: only a new leader can acknowledge it.
      let first = null;
      for (let n = 0; first === null; n++) {
        assert.ok(performance.now() - killedAt < FAILOVER_BUDGET, `no acquire acknowledged ${FAILOVER_BUDGET} ms after the kill\n${cluster.logs()}`);
        // ioredis queues commands while no sentinel names a reachable master (forever when none
        // can), so the budget is enforced around the call.
        const attempt = new Mutex(r, `${k}:probe:${n}`, { lockTimeout: 10000, refreshInterval: 0, acquireTimeout: 1, retryInterval: 10 }).tryAcquire();
        const left = FAILOVER_BUDGET - (performance.now() - killedAt);
        try {
          if (await Promise.race([attempt, sleep(Math.max(0, left)).then(() => false)])) {
            first = performance.now() - killedAt;
          }
        } catch { await sleep(10); }
      }
      const grantsAtFirst = since(killedAt);

      const now = await cluster.leader(15000, old);
      assert.notEqual(now, old);
      assert.equal(r.stream.remotePort, ports[now], 'ioredis is not connected to the new leader');
      assert.match(await r.info('replication'), /role:master/);
      const want = `mymaster 127.0.0.1 ${ports[old]} 127.0.0.1 ${ports[now]}`;
      for (const [i, port] of ports.entries()) {
        if (i === old) continue;
        for (let n = 0; !switches.some(([p, m]) => p === port && m === want); n++) {
          assert.ok(n < 500, `no '+switch-master ${want}' from the node on ${port}: ${JSON.stringify(switches)}`);
          await sleep(10);
        }
      }

      // The Mutex acquired before the kill is still its owner's on the new leader.
      assert.equal(await r.get(`mutex:${k}:held`), held.identifier);
      const pttl = await r.pttl(`mutex:${k}:held`);
      assert.ok(pttl > 0 && pttl <= 10000 + 500, String(pttl)); // + the cluster clock bound
      assert.equal(await new Mutex(r, `${k}:held`, { lockTimeout: 1000, acquireTimeout: 1, retryInterval: 10 }).tryAcquire(), false);

      const deadline = performance.now() + FAILOVER_BUDGET;
      while (since(killedAt) < grantsAtFirst + 10) {
        assert.ok(performance.now() < deadline, 'the workers did not get the lock back after failover');
        await sleep(10);
      }
      stop = true;
      await Promise.all(workers);
      await sleep(1100); // one more refresh of the held Mutex, on the new leader
      assert.equal(lost, null, `the held Mutex was reported lost: ${lost}`);
      assert.equal(held.isAcquired, true);
      await held.release();
      assert.equal(await r.exists(`mutex:${k}:held`), 0);
      assert.deepEqual(state.overlaps, [], 'two holders at once');
      console.log(`failover: ioredis ${version} sentinels + redis-semaphore Mutex: kill -> first acquire ${first.toFixed(0)} ms `
        + `(retryStrategy min(20 ms * n, 200 ms); contended grants ${state.grants.length}, ${since(killedAt)} after the kill, `
        + `client errors surfaced ${state.errors})`);
    } finally {
      stop = true;
      await Promise.race([Promise.all(workers), sleep(5000)]);
    }
  });
});
