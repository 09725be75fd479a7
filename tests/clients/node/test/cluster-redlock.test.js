'use strict';
// redlock-universal (pinned in package.json), unchanged, driving node-redis 6: its
// NodeRedisAdapter over a `createCluster` client (the library's documented cluster use, a
// SimpleLock per key), and its RedLock over three `createClient` clients (the Redlock algorithm
// on independent servers).
// * Cluster, on three deadbolt nodes with `cluster-enabled yes` and `cluster-groups 3`, and the
//   same checks on a real Redis Cluster 7.0 (3 masters), the reference: acquire, extend, release
//   and using() in every group's slots, each lock held by the slot's master; a rival refused.
// * deadbolt only (Redis Cluster has no Raft groups or RAFT RESHARD): two clients contending
//   never both hold; a lock held across a SIGKILL of its group's leader stays held (the contender
//   is refused by the new leader, never granted), and its holder extends and releases it after;
//   a lock held across `RAFT RESHARD` of its slot to another group, with contenders locking in
//   that slot throughout, stays its holder's on the new master and exclusive.
// * RedLock on three single servers, redis-server and deadbolt: quorum acquire on all three,
//   extend after SCRIPT FLUSH (NOSCRIPT, load, retry), release; one server killed while held.
// Every wait has a deadline.
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const { createClient } = require('redis');
const {
  createLock, createRedlock, NodeRedisAdapter, LockAcquisitionError,
} = require('redlock-universal');
const {
  TARGETS, startServer, startClusterTarget, call, sleep, uniq, keySlot, keyInGroup, slotMasterPort,
} = require('../servers');
const { groupsCluster, nodeRedisCluster } = require('./groups');
// Its package.json is not among its exports: read from the file beside dist/.
const libVersion = JSON.parse(require('node:fs').readFileSync(
  require('node:path').join(require.resolve('redlock-universal'), '..', '..', 'package.json'), 'utf8')).version;
const { version: nodeRedisVersion } = require('redis/package.json');

// node-redis waits for its own slot rediscovery (~5 s) before it retries a dead master.
const FAILOVER_BUDGET = 20000;
const RESHARD_BUDGET = 10000;
// Each Redis command the library sends is bounded by the adapter (its `timeout` option).
const COMMAND_TIMEOUT = 2000;

const adapter = (client) => new NodeRedisAdapter(client, { timeout: COMMAND_TIMEOUT });
// One attempt, no retries. The circuit breaker (documented `circuitBreaker` option) is off for
// the contenders of the fault tests, whose failed attempts would otherwise open it for a minute.
const lockOf = (client, key, ttl, extra = {}) => createLock({ adapter: adapter(client), key, ttl, retryAttempts: 0, ...extra });
// A lock held by another owner makes acquire() fail with this message; anything else is an error
// the library passed on (`brief` names it for the counts the tests print).
const heldElsewhere = (e) => e instanceof LockAcquisitionError && /is already held/.test(e.message);
const brief = (e) => String(e.cause?.message ?? e.message).split(' ').slice(0, 5).join(' ');

// `promise`, or `onTimeout()`'s value once `ms` have passed first (the timer is cleared either way).
function bounded(promise, ms, onTimeout) {
  let timer;
  const timeout = new Promise((resolve, reject) => {
    timer = setTimeout(() => { try { resolve(onTimeout()); } catch (e) { reject(e); } }, Math.max(0, ms));
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

// Runs `op` until it resolves, passing on errors (a node-redis client reconnecting, -TRYAGAIN
// while a slot moves), each try and the whole bounded by `deadline` (performance.now()).
async function retrying(what, deadline, op) {
  let last;
  for (;;) {
    const left = deadline - performance.now();
    if (left <= 0) throw new Error(`${what}: no answer before the deadline (last error: ${last?.message})`);
    try {
      return await bounded(op(), left, () => { throw new Error('timed out'); });
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      last = e;
      await sleep(20);
    }
  }
}

// One acquire that must not be granted: true when a serving node refused it (held by another
// owner); any other error is thrown.
async function refused(lock) {
  let h;
  try { h = await lock.acquire(); } catch (e) {
    if (heldElsewhere(e)) return true;
    throw e;
  }
  assert.fail(`granted a lock another owner holds (${h.value})`);
}

// release(h) until it answers: true, or false only after an attempt that failed (that attempt
// may have released it before its error came back).
async function releaseRetrying(lock, h, what, deadline) {
  let failedBefore = false;
  for (;;) {
    try {
      const ok = await lock.release(h);
      assert.ok(ok || failedBefore, `${what}: the lock was gone before its release`);
      return;
    } catch (e) {
      if (e instanceof assert.AssertionError) throw e;
      assert.ok(performance.now() < deadline, `${what}: no answer before the deadline (${brief(e)})`);
      failedBefore = true;
      await sleep(20);
    }
  }
}

// The checks of an unchanged lock user on a cluster whose slots are split over three masters
// as `redis-cli --cluster create` splits them (deadbolt: one group per range).
async function lockEverySlotRange(cluster, open) {
  const [a, b] = [await open(), await open()];
  for (let g = 0; g < 3; g++) {
    const k = keyInGroup(uniq(`rlu${g}`), g);
    const masterPort = await slotMasterPort(cluster.clientPorts()[0], keySlot(k));
    const lock = lockOf(a, k, 3000);
    const h = await lock.acquire();
    assert.equal(await call(masterPort, ['GET', k]), h.value, `the master of slot ${keySlot(k)} does not hold the lock`);
    const rival = lockOf(b, k, 3000);
    await assert.rejects(rival.acquire(), heldElsewhere);
    // A handle with another owner's value neither extends nor releases it.
    const forged = { ...h, value: 'not-the-owner' };
    assert.equal(await lock.extend(forged, 9000), false);
    assert.equal(await lock.release(forged), false);
    assert.equal(await lock.extend(h, 8000), true);
    const pttl = await b.pTTL(k);
    assert.ok(pttl > 6000 && pttl <= 8000, String(pttl));
    assert.equal(await lock.release(h), true);
    assert.equal(await lock.release(h), false, 'a second release must find nothing');
    assert.equal(await b.exists(k), 0);
    const again = await rival.acquire();
    assert.equal(await rival.release(again), true);
  }
  // using(): extended while the routine runs past the TTL, released after.
  const k = uniq('rlu-using');
  const lock = lockOf(a, k, 3000);
  const out = await lock.using(async (signal) => {
    await sleep(4500);
    assert.equal(signal.aborted, false, `the lock was lost: ${signal.error?.message}`);
    await assert.rejects(lockOf(b, k, 3000).acquire(), heldElsewhere);
    return 'done';
  });
  assert.equal(out, 'done');
  assert.equal(await b.exists(k), 0);
}

describe(`redlock-universal ${libVersion} on node-redis ${nodeRedisVersion} createCluster, a Redis Cluster 7.0 (3 masters): the reference`,
  { skip: TARGETS.includes('redis') ? false : 'CLIENT_TARGETS has no redis' }, () => {
    it('acquire, extend, release, using() in every slot range; a rival is refused', { timeout: 90000 }, async () => {
      const cluster = await startClusterTarget('redis');
      const clients = [];
      try {
        await lockEverySlotRange(cluster, async () => { const c = await nodeRedisCluster(cluster); clients.push(c); return c; });
      } finally {
        for (const c of clients) await c.close().catch(() => {});
        await cluster.stop();
      }
    });
  });

const skip = TARGETS.includes('deadbolt') ? false : 'Raft groups are deadbolt\'s (CLIENT_TARGETS has no deadbolt)';

describe(`redlock-universal ${libVersion} on node-redis ${nodeRedisVersion} createCluster, deadbolt cluster-groups 3`, { skip }, () => {
  const g = groupsCluster();
  const clients = [];
  const open = async () => { const c = await nodeRedisCluster(g.cluster); clients.push(c); return c; };
  after(async () => {
    for (const c of clients) await c.close().catch(() => {});
    await g.stop();
  });

  // Workers on two clients take turns on one lock key until `state.stop`; records overlaps.
  function contend(cs, key, state) {
    const worker = async (c, id) => {
      while (!state.stop) {
        const lock = lockOf(c, key, 5000, { circuitBreaker: false });
        let h;
        try { h = await lock.acquire(); } catch (e) {
          if (!heldElsewhere(e)) state.errors[brief(e)] = (state.errors[brief(e)] || 0) + 1;
          await sleep(2);
          continue;
        }
        if (state.inside !== null) state.overlaps.push([state.inside, id]);
        state.inside = id;
        state.grants.push(performance.now());
        await sleep(1);
        state.inside = null;
        // A release cut by a moving slot (-TRYAGAIN) or a reconnect is retried.
        await releaseRetrying(lock, h, `release by ${id}`, performance.now() + RESHARD_BUDGET);
      }
    };
    return Promise.all(cs.flatMap((c, i) => [worker(c, `c${i}a`), worker(c, `c${i}b`)]));
  }

  it('acquire, extend, release, using() in every group\'s slots, each lock on its group\'s leader; a rival is refused', { timeout: 60000 }, async () => {
    await g.up();
    await lockEverySlotRange(g.cluster, open);
  });

  it('two clients, two workers each, on one lock: never two holders', { timeout: 60000 }, async () => {
    await g.up();
    const cs = [await open(), await open()];
    const key = uniq('rlu-mutex');
    const state = { inside: null, overlaps: [], grants: [], errors: {}, stop: false };
    const running = contend(cs, key, state);
    const t0 = performance.now();
    try {
      while (state.grants.length < 40) {
        assert.ok(performance.now() - t0 < 30000, `only ${state.grants.length} grants in 30 s: ${JSON.stringify(state.errors)}`);
        await sleep(10);
      }
    } finally {
      state.stop = true;
      await running;
    }
    assert.deepEqual(state.overlaps, [], 'two holders at once');
    assert.equal(await cs[0].exists(key), 0);
    console.log(`contention: redlock-universal on createCluster, 4 workers: ${state.grants.length} grants, errors passed on: ${JSON.stringify(state.errors)}`);
  });

  it('RAFT RESHARD of the lock\'s slot under contention: the held lock moves with it, stays exclusive, its holder releases it', { timeout: 90000 }, async () => {
    const leaders = await g.up();
    const tag = uniq('rlu-rs');
    const slot = keySlot(`{${tag}}`);
    const src = await g.groupOf(leaders, slot);
    const dest = (src + 1) % 3;
    const srcPort = g.cluster.clientPorts()[leaders[src]];
    const destPort = g.cluster.clientPorts()[leaders[dest]];
    const [holderClient, c1, c2] = [await open(), await open(), await open()];
    const heldKey = `{${tag}}:held`;
    const holder = lockOf(holderClient, heldKey, 60000);
    const h = await holder.acquire();
    const contender = lockOf(c1, heldKey, 60000, { circuitBreaker: false });
    const state = { inside: null, overlaps: [], grants: [], errors: {}, stop: false };
    const running = contend([c1, c2], `{${tag}}:contended`, state);
    let moved;
    try {
      const t = performance.now();
      while (state.grants.length < 20) {
        assert.ok(performance.now() - t < 10000, `the contenders never got going: ${JSON.stringify(state.errors)}`);
        await sleep(10);
      }
      const t0 = performance.now();
      assert.equal(await call(srcPort, ['RAFT', 'RESHARD', slot, slot, dest]), 'OK');
      moved = await g.slotServedBy(slot, destPort, RESHARD_BUDGET);
      const at = state.grants.length;
      while (state.grants.length < at + 20) {
        assert.ok(performance.now() - t0 < RESHARD_BUDGET, `locking did not resume after the move: +${state.grants.length - at}, ${JSON.stringify(state.errors)}`);
        await sleep(5);
      }
    } finally {
      state.stop = true;
      await running;
    }
    assert.deepEqual(state.overlaps, [], 'two holders at once');
    // The held lock moved with its slot: the new master has it, the contender is refused, the
    // holder extends and releases it through the same client.
    assert.equal(await call(destPort, ['GET', heldKey]), h.value);
    const deadline = performance.now() + RESHARD_BUDGET;
    assert.equal(await retrying('contender after the move', deadline, () => refused(contender)), true);
    assert.equal(await retrying('holder extend', deadline, () => holder.extend(h, 60000)), true);
    await releaseRetrying(holder, h, 'holder release', deadline);
    assert.equal(await call(destPort, ['EXISTS', heldKey]), 0);
    const mine = await contender.acquire();
    assert.equal(await call(destPort, ['GET', heldKey]), mine.value);
    assert.equal(await contender.release(mine), true);
    // The old group's leader redirects the slot, as a Redis Cluster master does.
    const r = await call(srcPort, ['GET', heldKey]);
    assert.ok(r instanceof Error && r.message === `MOVED ${slot} 127.0.0.1:${destPort}`, String(r));
    console.log(`reshard: redlock-universal ${libVersion} + node-redis ${nodeRedisVersion} createCluster, slot ${slot} group ${src} -> ${dest} `
      + `moved in ${moved.toFixed(0)} ms; ${state.grants.length} grants to 4 contenders; errors the library passed on: ${JSON.stringify(state.errors)}`);
  });

  it('SIGKILL of the lock group\'s leader: the lock stays held, the contender is refused, the holder extends and releases', { timeout: 90000 }, async () => {
    const leaders = await g.up();
    const victim = 1;
    const old = leaders[victim];
    // A key of the group's slots (not the one slot an earlier test may have moved off it).
    let key;
    do key = keyInGroup(uniq('rlu-kill'), victim); while (await g.groupOf(leaders, keySlot(key)) !== victim);
    const slot = keySlot(key);
    const [holderClient, contenderClient] = [await open(), await open()];
    const holder = lockOf(holderClient, key, 30000);
    const h = await holder.acquire();
    const contender = lockOf(contenderClient, key, 30000, { circuitBreaker: false });
    assert.equal(await refused(contender), true);
    const killedAt = await g.cluster.kill(old);
    // The contender tries until a serving node answers: a refusal, never a grant.
    const deadline = killedAt + FAILOVER_BUDGET;
    let refusedAfter = null;
    const errors = {};
    while (refusedAfter === null) {
      const left = deadline - performance.now();
      assert.ok(left > 0, `no node answered the contender ${FAILOVER_BUDGET} ms after the kill: ${JSON.stringify(errors)}\n${g.cluster.logs()}`);
      let granted;
      try {
        granted = await bounded(contender.acquire(), left, () => null);
      } catch (e) {
        if (heldElsewhere(e)) { refusedAfter = performance.now() - killedAt; break; }
        errors[brief(e)] = (errors[brief(e)] || 0) + 1;
        await sleep(20);
        continue;
      }
      assert.equal(granted, null, 'the contender was granted a lock its holder still holds');
    }
    const now = await g.cluster.slotMaster(slot, 15000, old);
    assert.notEqual(now, old);
    const nowPort = g.cluster.clientPorts()[now];
    assert.equal(await call(nowPort, ['GET', key]), h.value, 'the new leader lost the lock');
    // The holder's own client follows the new master; the lock is still its to extend.
    const t = performance.now();
    assert.equal(await retrying('holder extend', t + FAILOVER_BUDGET, () => holder.extend(h, 30000)), true);
    const extendTook = performance.now() - t;
    const pttl = await call(nowPort, ['PTTL', key]);
    assert.ok(pttl > 25000 && pttl <= 30000, String(pttl));
    assert.equal(await refused(contender), true);
    await releaseRetrying(holder, h, 'holder release', performance.now() + FAILOVER_BUDGET);
    const mine = await contender.acquire();
    assert.equal(await call(nowPort, ['GET', key]), mine.value);
    assert.equal(await contender.release(mine), true);
    console.log(`failover: redlock-universal ${libVersion} + node-redis ${nodeRedisVersion} createCluster, group ${victim}'s leader killed: `
      + `the contender's first answer (refused) ${refusedAfter.toFixed(0)} ms after the kill, the holder's extend ${extendTook.toFixed(0)} ms after that; `
      + `errors the library passed on meanwhile: ${JSON.stringify(errors)}`);
  });
});

for (const target of TARGETS) {
  describe(`redlock-universal RedLock on node-redis createClient, three ${target} servers`, () => {
    let servers = [];
    const clients = [];
    before(async () => { servers = await Promise.all([0, 1, 2].map(() => startServer(target))); });
    after(async () => {
      for (const c of clients) await c.close().catch(() => {});
      await Promise.all(servers.map((s) => s.stop()));
    });
    const connect = async () => {
      const cs = [];
      for (const s of servers) {
        // A dead server: fail each command at once instead of queueing it (a refused vote).
        const c = createClient({ socket: { port: s.port, host: '127.0.0.1', connectTimeout: 1000,
          reconnectStrategy: () => 200 }, disableOfflineQueue: true });
        c.on('error', () => {});
        await c.connect();
        clients.push(c);
        cs.push(c);
      }
      return cs;
    };
    const values = (key) => Promise.all(servers.map((s) => call(s.port, ['GET', key])));
    const redlockOf = (cs, key, ttl) => createRedlock({ adapters: cs.map(adapter), key, ttl, retryAttempts: 0 });

    it('acquire on all three, a rival refused, extend after SCRIPT FLUSH, release', { timeout: 30000 }, async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniq('rlu-redlock');
      const lock = redlockOf(a, key, 2000);
      const h = await lock.acquire();
      assert.deepEqual(await values(key), [h.value, h.value, h.value]);
      await assert.rejects(redlockOf(b, key, 2000).acquire(), LockAcquisitionError);
      // The next extend meets NOSCRIPT on every server, loads the script again and retries.
      for (const s of servers) assert.equal(await call(s.port, ['SCRIPT', 'FLUSH']), 'OK');
      assert.equal(await lock.extend(h, 5000), true);
      for (const s of servers) {
        const pttl = await call(s.port, ['PTTL', key]);
        assert.ok(pttl > 4000 && pttl <= 5000, String(pttl));
      }
      assert.equal(await lock.release(h), true);
      assert.deepEqual(await values(key), [null, null, null]);
      const again = await redlockOf(b, key, 1000).acquire();
      assert.equal(await redlockOf(b, key, 1000).release(again), true);
    });

    it('one server killed while the lock is held: still refused to a rival, extended and released by quorum', { timeout: 30000 }, async () => {
      const [a, b] = [await connect(), await connect()];
      const key = uniq('rlu-quorum');
      const lock = redlockOf(a, key, 10000);
      const h = await lock.acquire();
      await servers[2].kill();
      await assert.rejects(redlockOf(b, key, 10000).acquire(), LockAcquisitionError);
      assert.equal(await lock.extend(h, 10000), true);
      assert.equal(await lock.release(h), true);
      const fresh = await redlockOf(b, key, 2000).acquire();
      assert.deepEqual((await values(key)).slice(0, 2), [fresh.value, fresh.value]);
      assert.equal(await redlockOf(b, key, 2000).release(fresh), true);
      servers[2] = await startServer(target);
    });
  });
}
