'use strict';
// Cluster-mode clients on three deadbolt nodes running three Raft groups (`cluster-enabled yes`,
// `cluster-groups 3`: slots 0-5460, 5461-10922, 10923-16383, each node leading one group), so
// the lock keys of different groups have different masters, as on a three-master Redis Cluster:
// ioredis 6 `Cluster` with redis-semaphore's Mutex and @sesamecare-oss/redlock, node-redis 6
// `createCluster` with a SET NX PX + compare-and-delete lock (`defineScript`).
// * Locks in every group's slots, each served by its group's leader.
// * Resharding: while ioredis clients contend for a Mutex and a node-redis client locks in one
//   slot, and a Mutex, a Redlock lock and a node-redis lock are held there, `RAFT RESHARD <slot>
//   <slot> <other group>` is sent to the slot's group leader; the test polls every node's
//   CLUSTER SLOTS until it names the other group's leader. The clients follow -MOVED; ioredis
//   retries -TRYAGAIN (retryDelayOnTryAgain), node-redis passes it on and the application
//   retries (counted, printed). Checked: never two holders, locking goes on after the move, the
//   held locks are still their owners' on the new master, exclusive and releasable. The longest
//   gap between two granted locks per client is printed.
// * Leader kill: the leader of group 1 (node 2) is SIGKILLed while a Mutex and a node-redis lock
//   are held in its slots: the next lock in that slot through the same clients must be
//   acknowledged within a bound, the other groups keep locking, the held locks stay.
// deadbolt only: Redis Cluster has no Raft groups or RAFT RESHARD (its failover reference is in
// cluster-mode.test.js).
const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const { defineScript } = require('redis');
const { Mutex } = require('redis-semaphore');
const { Redlock, ExecutionError } = require('@sesamecare-oss/redlock');
const {
  TARGETS, call, sleep, uniq, keySlot, keyInGroup,
} = require('../servers');
const { groupsCluster, nodeRedisCluster, ioredisCluster } = require('./groups');
const { version: ioredisVersion } = require('ioredis/package.json');
const { version: nodeRedisVersion } = require('redis/package.json');

const FAILOVER_BUDGET = 10000;
// node-redis waits for its own slot rediscovery (~5 s) before it retries a dead master.
const NODE_REDIS_BUDGET = 20000;
// Locking must resume within this after RAFT RESHARD (the move of a few keys takes milliseconds).
const RESHARD_BUDGET = 10000;

const RELEASE = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end';

const skip = TARGETS.includes('deadbolt') ? false : 'Raft groups are deadbolt\'s (CLIENT_TARGETS has no deadbolt)';

function longest(times) {
  let max = 0;
  for (let i = 1; i < times.length; i++) max = Math.max(max, times[i] - times[i - 1]);
  return max;
}

describe('cluster-mode clients on a deadbolt cluster with cluster-groups 3', { skip }, () => {
  const g = groupsCluster();
  let cluster;
  const open = [];
  const closers = [];
  const up = async () => {
    const leaders = await g.up();
    ({ cluster } = g);
    return leaders;
  };
  after(async () => {
    for (const c of open) { try { c.disconnect(); } catch { /* already closed */ } }
    for (const c of closers) await c.close().catch(() => {});
    await g.stop();
  });

  const ioCluster = () => ioredisCluster(cluster, open);

  async function nodeRedis() {
    const c = await nodeRedisCluster(cluster, {
      scripts: { release: defineScript({ NUMBER_OF_KEYS: 1, SCRIPT: RELEASE,
        parseCommand(parser, key, token) { parser.pushKey(key); parser.push(token); } }) },
    });
    closers.push(c);
    return c;
  }

  const groupOf = (leaders, slot) => g.groupOf(leaders, slot);

  it('locks in every group\'s slots: ioredis Mutex and Redlock, node-redis; each served by its group\'s leader', { timeout: 60000 }, async () => {
    const leaders = await up();
    const [a, b] = [ioCluster(), ioCluster()];
    const nr = await nodeRedis();
    const redlock = new Redlock([a], { retryCount: 0 });
    for (let g = 0; g < 3; g++) {
      const port = cluster.clientPorts()[leaders[g]];
      // redis-semaphore's Mutex: key `mutex:<name>`, so the name's hash tag picks the slot.
      const k = `{${keyInGroup(uniq(`g${g}`), g)}}`;
      const mk = `mutex:${k}`;
      assert.equal(await groupOf(leaders, keySlot(mk)), g);
      const m = new Mutex(a, k, { lockTimeout: 5000, refreshInterval: 0, acquireTimeout: 1, retryInterval: 10 });
      assert.equal(await m.tryAcquire(), true);
      assert.equal(await call(port, ['GET', mk]), m.identifier, `group ${g}'s leader does not hold the Mutex`);
      assert.deepEqual(a.slots[keySlot(mk)][0], `127.0.0.1:${port}`);
      const rival = new Mutex(b, k, { lockTimeout: 5000, refreshInterval: 0, acquireTimeout: 1, retryInterval: 10 });
      assert.equal(await rival.tryAcquire(), false);
      await m.release();
      assert.equal(await b.exists(mk), 0);
      // @sesamecare-oss/redlock on the ioredis Cluster.
      const rk = keyInGroup(uniq(`rl${g}`), g);
      const lock = await redlock.acquire([rk], 3000);
      assert.equal(await call(port, ['GET', rk]), lock.value);
      await assert.rejects(redlock.acquire([rk], 3000), ExecutionError);
      const extended = await lock.extend(8000);
      const pttl = await b.pttl(rk);
      assert.ok(pttl > 6000 && pttl <= 8000 + 500, String(pttl));
      await extended.release();
      assert.equal(await b.exists(rk), 0);
      // node-redis: SET NX PX + compare-and-delete.
      const nk = keyInGroup(uniq(`nr${g}`), g);
      assert.equal(await nr.set(nk, 'mine', { NX: true, PX: 5000 }), 'OK');
      assert.equal(await call(port, ['GET', nk]), 'mine');
      assert.equal(await nr.set(nk, 'theirs', { NX: true, PX: 5000 }), null);
      assert.equal(await nr.release(nk, 'theirs'), 0);
      assert.equal(await nr.release(nk, 'mine'), 1);
      assert.equal(await nr.exists(nk), 0);
    }
  });

  it('RAFT RESHARD of the lock slot under ioredis and node-redis locking: no two holders, locking resumes, held locks move', { timeout: 60000 }, async () => {
    const leaders = await up();
    const tag = uniq('rs');
    const slot = keySlot(`{${tag}}`);
    const src = await groupOf(leaders, slot);
    const dest = (src + 1) % 3;
    const srcPort = cluster.clientPorts()[leaders[src]];
    const destPort = cluster.clientPorts()[leaders[dest]];
    const [a, b, c] = [ioCluster(), ioCluster(), ioCluster()];
    const nr = await nodeRedis();
    const state = { inside: null, overlaps: [], io: [], nr: [], errors: {}, stop: false };
    const count = (what) => { state.errors[what] = (state.errors[what] || 0) + 1; };
    const ioWorker = async (client, id) => {
      while (!state.stop) {
        const w = new Mutex(client, `{${tag}}:contended`, { lockTimeout: 5000, refreshInterval: 0, acquireTimeout: 1, retryInterval: 1 });
        let got;
        try { got = await w.tryAcquire(); } catch (e) { count(`ioredis: ${e.message.split(' ')[0]}`); await sleep(5); continue; }
        if (!got) { await sleep(1); continue; }
        if (state.inside !== null) state.overlaps.push([state.inside, id]);
        state.inside = id;
        state.io.push(performance.now());
        await sleep(1);
        state.inside = null;
        for (;;) {
          try { await w.release(); break; } catch (e) { count(`ioredis release: ${e.message.split(' ')[0]}`); await sleep(5); }
        }
      }
    };
    const nrWorker = async () => {
      for (let n = 0; !state.stop; n++) {
        const k = `{${tag}}:nr`;
        let got;
        try { got = await nr.set(k, `t${n}`, { NX: true, PX: 5000 }); } catch (e) { count(`node-redis: ${e.message.split(' ')[0]}`); await sleep(5); continue; }
        assert.equal(got, 'OK', 'the node-redis lock is its alone: it must never find it held');
        state.nr.push(performance.now());
        for (;;) {
          try { assert.equal(await nr.release(k, `t${n}`), 1); break; } catch (e) {
            if (e instanceof assert.AssertionError) throw e;
            count(`node-redis release: ${e.message.split(' ')[0]}`);
            await sleep(5);
          }
        }
      }
    };
    const workers = [ioWorker(a, 'a1'), ioWorker(a, 'a2'), ioWorker(b, 'b1'), ioWorker(b, 'b2'), nrWorker()];
    let moved;
    let before;
    let held;
    let rlock;
    try {
      const t = performance.now();
      while (state.io.length < 20 || state.nr.length < 20) {
        assert.ok(performance.now() - t < 10000, `the workers never got going: ${JSON.stringify(state.errors)}`);
        await sleep(10);
      }
      held = new Mutex(c, `{${tag}}:held`, { lockTimeout: 60000, refreshInterval: 0, acquireTimeout: 1 });
      assert.equal(await held.tryAcquire(), true);
      rlock = await new Redlock([c], { retryCount: 0 }).acquire([`{${tag}}:redlock`], 60000);
      assert.equal(await nr.set(`{${tag}}:nrheld`, 'mine', { NX: true, PX: 60000 }), 'OK');
      before = [state.io.length, state.nr.length];
      const t0 = performance.now();
      assert.equal(await call(srcPort, ['RAFT', 'RESHARD', slot, slot, dest]), 'OK');
      // The move is done when every node's CLUSTER SLOTS names the other group's leader.
      await g.slotServedBy(slot, destPort, RESHARD_BUDGET - (performance.now() - t0));
      moved = performance.now() - t0;
      const at = [state.io.length, state.nr.length];
      while (state.io.length < at[0] + 20 || state.nr.length < at[1] + 20) {
        assert.ok(performance.now() - t0 < RESHARD_BUDGET,
          `locking did not resume after the move: ioredis +${state.io.length - at[0]}, node-redis +${state.nr.length - at[1]}, ${JSON.stringify(state.errors)}`);
        await sleep(5);
      }
    } finally {
      state.stop = true;
      await Promise.all(workers);
    }
    assert.deepEqual(state.overlaps, [], 'two holders at once');
    // The held locks moved with the slot: on the new master, their owners', exclusive, releasable.
    assert.equal(await call(destPort, ['GET', `mutex:{${tag}}:held`]), held.identifier);
    assert.equal(await c.get(`mutex:{${tag}}:held`), held.identifier);
    assert.deepEqual(c.slots[slot][0], `127.0.0.1:${destPort}`, 'ioredis did not follow the move');
    const rival = new Mutex(a, `{${tag}}:held`, { lockTimeout: 1000, refreshInterval: 0, acquireTimeout: 1 });
    assert.equal(await rival.tryAcquire(), false);
    await held.release();
    assert.equal(await c.exists(`mutex:{${tag}}:held`), 0);
    assert.equal(await call(destPort, ['GET', `{${tag}}:redlock`]), rlock.value);
    await assert.rejects(new Redlock([a], { retryCount: 0 }).acquire([`{${tag}}:redlock`], 3000), ExecutionError);
    await (await rlock.extend(30000)).release();
    assert.equal(await c.exists(`{${tag}}:redlock`), 0);
    assert.equal(await nr.get(`{${tag}}:nrheld`), 'mine');
    assert.equal(await nr.set(`{${tag}}:nrheld`, 'theirs', { NX: true, PX: 60000 }), null);
    assert.equal(await nr.release(`{${tag}}:nrheld`, 'mine'), 1);
    // The old group's leader redirects the slot to the new one, as a Redis Cluster does.
    const r = await call(srcPort, ['SET', `{${tag}}:probe`, 'x']);
    assert.ok(r instanceof Error && r.message === `MOVED ${slot} 127.0.0.1:${destPort}`, String(r));
    const med = (xs) => { const g = xs.slice(1).map((x, i) => x - xs[i]).sort((p, q) => p - q); return g[Math.floor(g.length / 2)]; };
    console.log(`reshard: deadbolt cluster-groups 3, slot ${slot} group ${src} -> ${dest}: moved in ${moved.toFixed(0)} ms; `
      + `ioredis ${ioredisVersion} Cluster + redis-semaphore Mutex x4 workers: longest gap between locks ${longest(state.io).toFixed(0)} ms `
      + `(median ${med(state.io).toFixed(1)} ms, ${state.io.length} locks, ${state.io.length - before[0]} after RESHARD); `
      + `node-redis ${nodeRedisVersion} createCluster: longest gap ${longest(state.nr).toFixed(0)} ms (median ${med(state.nr).toFixed(1)} ms, ${state.nr.length} locks); `
      + `errors the clients passed on: ${JSON.stringify(state.errors)}`);
  });

  it('SIGKILL of group 1\'s leader: the held locks stay, the next locks in its slots succeed, the other groups keep locking', { timeout: 90000 }, async () => {
    const leaders = await up();
    const victim = 1;
    const old = leaders[victim];
    const tag = keyInGroup(uniq('kill'), victim);
    const slot = keySlot(tag);
    assert.equal(await groupOf(leaders, slot), victim);
    const c = ioCluster();
    const nr = await nodeRedis();
    const held = new Mutex(c, `{${tag}}:held`, { lockTimeout: 30000, refreshInterval: 0, acquireTimeout: 1 });
    assert.equal(await held.tryAcquire(), true);
    assert.equal(await nr.set(`{${tag}}:nrheld`, 'mine', { NX: true, PX: 30000 }), 'OK');
    const killedAt = await cluster.kill(old);
    const io = (async () => {
      for (let n = 0; ; n++) {
        const left = FAILOVER_BUDGET - (performance.now() - killedAt);
        assert.ok(left > 0, `no ioredis acquire acknowledged ${FAILOVER_BUDGET} ms after the kill\n${cluster.logs()}`);
        const attempt = new Mutex(c, `{${tag}}:after:${n}`, { lockTimeout: 30000, refreshInterval: 0, acquireTimeout: 1, retryInterval: 10 }).tryAcquire();
        try {
          if (await Promise.race([attempt, sleep(left).then(() => false)])) return performance.now() - killedAt;
        } catch { await sleep(10); }
      }
    })();
    const nrFirst = (async () => {
      for (let n = 0; ; n++) {
        const left = NODE_REDIS_BUDGET - (performance.now() - killedAt);
        assert.ok(left > 0, `no node-redis SET NX PX acknowledged ${NODE_REDIS_BUDGET} ms after the kill\n${cluster.logs()}`);
        const attempt = nr.set(`{${tag}}:nrafter:${n}`, 'x', { NX: true, PX: 30000 });
        try {
          if ((await Promise.race([attempt, sleep(left).then(() => null)])) === 'OK') return performance.now() - killedAt;
        } catch { await sleep(20); }
      }
    })();
    const [ioTook, nrTook] = await Promise.all([io, nrFirst]);
    // The other groups' slots lock too (their leaders are alive).
    for (const g of [0, 2]) {
      const m = new Mutex(c, keyInGroup(uniq(`other${g}`), g), { lockTimeout: 5000, refreshInterval: 0, acquireTimeout: 2000, retryInterval: 10 });
      await m.acquire();
      await m.release();
      const k = keyInGroup(uniq(`nrother${g}`), g);
      assert.equal(await nr.set(k, 'x', { NX: true, PX: 5000 }), 'OK');
      assert.equal(await nr.release(k, 'x'), 1);
    }
    const now = await cluster.slotMaster(slot, 15000, old);
    assert.notEqual(now, old);
    // The locks acknowledged before the kill survived it, and are still exclusive.
    assert.equal(await c.get(`mutex:{${tag}}:held`), held.identifier);
    const rival = new Mutex(c, `{${tag}}:held`, { lockTimeout: 1000, refreshInterval: 0, acquireTimeout: 1 });
    assert.equal(await rival.tryAcquire(), false);
    await held.release();
    assert.equal(await c.exists(`mutex:{${tag}}:held`), 0);
    assert.equal(await nr.get(`{${tag}}:nrheld`), 'mine');
    assert.equal(await nr.set(`{${tag}}:nrheld`, 'theirs', { NX: true, PX: 30000 }), null);
    assert.equal(await nr.release(`{${tag}}:nrheld`, 'mine'), 1);
    console.log(`failover: deadbolt cluster-groups 3, group ${victim}'s leader killed: ioredis ${ioredisVersion} Cluster + Mutex kill -> next lock ${ioTook.toFixed(0)} ms; `
      + `node-redis ${nodeRedisVersion} createCluster ${nrTook.toFixed(0)} ms`);
  });
});
