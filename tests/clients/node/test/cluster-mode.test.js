'use strict';
// Cluster-mode clients, unchanged, against a three-node deadbolt cluster started with
// `cluster-enabled yes` and against a real Redis Cluster 7.0 (3 masters, `redis-cli --cluster
// create`), the reference: ioredis 6 `Cluster` under redis-semaphore's Mutex and
// @sesamecare-oss/redlock, node-redis 6 `createCluster` with a SET NX PX + compare-and-delete lock
// (`defineScript`). Each client discovers the topology with CLUSTER SLOTS, sends a lock's commands
// to its slot's master and follows MOVED. Failover: the master of a held Mutex's slot (deadbolt's
// leader) is SIGKILLed (three kills, the killed node restarted each time): the next acquire in
// that slot through the same ioredis Cluster must succeed within a bounded time, the held Mutex
// must still be its owner's; the median kill -> next lock is printed. The reference there is a
// Redis Cluster with a replica per master (cluster-node-timeout 1 s), killed once.
const { describe, it, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { createCluster, defineScript } = require('redis');
const { Mutex } = require('redis-semaphore');
const { Redlock, ExecutionError } = require('@sesamecare-oss/redlock');
const { TARGETS, startClusterTarget, sleep, uniq } = require('../servers');
const { ioredisCluster } = require('./groups');
const { version: ioredisVersion } = require('ioredis/package.json');
const { version: nodeRedisVersion } = require('redis/package.json');

// Failure detection is 0.5-1 s of silence plus an election; the rest is client back-off.
const FAILOVER_BUDGET = 10000;
const KILLS = 3;
const NODE_REDIS_BUDGET = 20000;

const RELEASE = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end';
const EXTEND = 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("pexpire", KEYS[1], ARGV[2]) else return 0 end';

for (const target of TARGETS) {
  describe(`cluster-mode clients on a ${target} cluster`, () => {
    let cluster;
    const open = [];
    // Started by the first test that runs, so a run filtered to other tests starts none.
    const up = async () => { if (!cluster) cluster = await startClusterTarget(target); };
    after(async () => {
      for (const c of open) { try { c.disconnect(); } catch { /* already closed */ } }
      if (cluster) await cluster.stop();
    });

    const ioCluster = () => ioredisCluster(cluster, open);

    it('ioredis Cluster + redis-semaphore Mutex: acquire, value and TTL, release; two clients never overlap', { timeout: 60000 }, async () => {
      await up();
      const [a, b] = [ioCluster(), ioCluster()];
      const k = uniq('cm-mutex');
      const m = new Mutex(a, k, { lockTimeout: 5000, refreshInterval: 0, acquireTimeout: 1, retryInterval: 10 });
      assert.equal(await m.tryAcquire(), true);
      assert.equal(await b.get(`mutex:${k}`), m.identifier);
      const pttl = await b.pttl(`mutex:${k}`);
      assert.ok(pttl > 0 && pttl <= 5000 + 500, String(pttl));
      const rival = new Mutex(b, k, { lockTimeout: 5000, refreshInterval: 0, acquireTimeout: 1, retryInterval: 10 });
      assert.equal(await rival.tryAcquire(), false);
      await m.release();
      assert.equal(await a.exists(`mutex:${k}`), 0);
      assert.equal(await rival.tryAcquire(), true);
      await rival.release();

      // Two clients, two workers each, on one Mutex: no two holders at once.
      const state = { inside: null, overlaps: [], grants: 0 };
      const worker = async (c, id) => {
        while (state.grants < 40) {
          const w = new Mutex(c, `${k}:contended`, { lockTimeout: 5000, refreshInterval: 0, acquireTimeout: 2000, retryInterval: 5 });
          if (!(await w.tryAcquire())) continue;
          if (state.inside !== null) state.overlaps.push([state.inside, id]);
          state.inside = id;
          state.grants++;
          await sleep(1);
          state.inside = null;
          await w.release();
        }
      };
      await Promise.all([worker(a, 'a1'), worker(a, 'a2'), worker(b, 'b1'), worker(b, 'b2')]);
      assert.deepEqual(state.overlaps, [], 'two holders at once');
      assert.equal(await a.exists(`mutex:${k}:contended`), 0);
    });

    it('@sesamecare-oss/redlock on an ioredis Cluster: lock, extend, release', { timeout: 30000 }, async () => {
      await up();
      const c = ioCluster();
      const redlock = new Redlock([c], { retryCount: 0 });
      const k = uniq('cm-redlock');
      const lock = await redlock.acquire([k], 3000);
      assert.equal(await c.get(k), lock.value);
      await assert.rejects(redlock.acquire([k], 3000), ExecutionError);
      const extended = await lock.extend(8000);
      const pttl = await c.pttl(k);
      assert.ok(pttl > 6000 && pttl <= 8000 + 500, String(pttl));
      assert.equal(await c.get(k), extended.value);
      await extended.release();
      assert.equal(await c.exists(k), 0);
      const again = await redlock.acquire([k], 1000);
      await again.release();
    });

    it('node-redis createCluster: SET NX PX, extend and compare-and-delete scripts', { timeout: 30000 }, async () => {
      await up();
      const c = createCluster({
        rootNodes: cluster.nodes().map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
        scripts: {
          release: defineScript({ NUMBER_OF_KEYS: 1, SCRIPT: RELEASE,
            parseCommand(parser, key, token) { parser.pushKey(key); parser.push(token); } }),
          extend: defineScript({ NUMBER_OF_KEYS: 1, SCRIPT: EXTEND,
            parseCommand(parser, key, token, ms) { parser.pushKey(key); parser.push(token); parser.push(String(ms)); } }),
        },
      });
      c.on('error', () => {});
      await c.connect();
      try {
        const k = uniq('cm-node-redis');
        assert.equal(await c.set(k, 'mine', { NX: true, PX: 3000 }), 'OK');
        assert.equal(await c.set(k, 'theirs', { NX: true, PX: 3000 }), null);
        assert.equal(await c.extend(k, 'theirs', 9000), 0);
        assert.equal(await c.extend(k, 'mine', 9000), 1);
        const pttl = await c.pTTL(k);
        assert.ok(pttl > 7000 && pttl <= 9000 + 500, String(pttl));
        assert.equal(await c.release(k, 'theirs'), 0);
        assert.equal(await c.get(k), 'mine');
        assert.equal(await c.release(k, 'mine'), 1);
        assert.equal(await c.exists(k), 0);
        assert.equal(await c.set(k, 'theirs', { NX: true, PX: 3000 }), 'OK');
      } finally {
        await c.close();
      }
    });

    it('ioredis Cluster scaleReads "slave" (READONLY on replicas) reads each lock value just written; pub/sub wake-up', { timeout: 30000 }, async () => {
      await up();
      const w = ioCluster();
      const r = new Redis.Cluster(cluster.nodes(), { scaleReads: 'slave', redisOptions: { connectTimeout: 1000 } });
      r.on('error', () => {});
      open.push(r);
      const sub = ioCluster();
      const k = uniq('cm-reads');
      // A replica read after READONLY stays linearizable on deadbolt (the read barrier); Redis
      // Cluster here has no replicas, so its reads go to the master.
      const getsOnReplicas = async () => {
        let n = 0;
        for (const node of r.nodes('slave')) n += Number((/cmdstat_get:calls=(\d+)/.exec(await node.info('commandstats')) || [0, 0])[1]);
        return n;
      };
      const before = await getsOnReplicas();
      for (let i = 0; i < 20; i++) {
        assert.equal(await w.set(k, `v${i}`, 'PX', 5000), 'OK');
        assert.equal(await r.get(k), `v${i}`);
      }
      if (target === 'deadbolt') {
        assert.equal(r.nodes('slave').length, 2);
        assert.ok((await getsOnReplicas()) - before >= 20, 'the reads did not go to the replicas');
      }
      const channel = `redisson_lock__channel:{${k}}`;
      const got = new Promise((resolve) => sub.on('message', (ch, msg) => { if (ch === channel) resolve(msg); }));
      await sub.subscribe(channel);
      const release = `local v = redis.call("get", KEYS[1]) if v == ARGV[1] then redis.call("del", KEYS[1]) redis.call("publish", KEYS[2], "0") return 1 end return 0`;
      assert.equal(await w.eval(release, 2, k, channel, 'v19'), 1);
      assert.equal(await Promise.race([got, sleep(5000).then(() => 'timeout')]), '0');
    });
  });
}

for (const target of TARGETS) {
  // deadbolt: the Raft leader masters every slot. Redis: 3 masters + 3 replicas with
  // cluster-node-timeout 1 s, the reference failover; the killed node is the master of the held
  // Mutex's slot, and the next acquires share that slot ({hash tag}).
  describe(`cluster-mode failover on a ${target} cluster`, () => {
    let cluster;
    const open = [];
    const up = async () => { if (!cluster) cluster = await startClusterTarget(target, { replicas: 1 }); };
    after(async () => {
      for (const c of open) { try { c.disconnect(); } catch { /* already closed */ } }
      if (cluster) await cluster.stop();
    });

    it('ioredis Cluster + Mutex across SIGKILLs of the slot\'s master: the held Mutex stays, the next acquire succeeds', { timeout: 120000 }, async () => {
      await up();
      const c = new Redis.Cluster(cluster.nodes(), {
        clusterRetryStrategy: (times) => Math.min(20 * times, 200),
        retryDelayOnFailover: 50,
        retryDelayOnClusterDown: 50,
        slotsRefreshTimeout: 1000,
        redisOptions: { connectTimeout: 1000 },
      });
      c.on('error', () => {});
      open.push(c);
      const times = [];
      // One kill of the reference (its failover takes seconds); three of deadbolt's.
      const kills = target === 'redis' ? 1 : KILLS;
      for (let kill = 0; kill < kills; kill++) {
        const k = `{${uniq('cm-kill')}}`;
        const old = await cluster.masterOf(`mutex:${k}:held`);
        const held = new Mutex(c, `${k}:held`, { lockTimeout: 30000, refreshInterval: 0, acquireTimeout: 5000, retryInterval: 20 });
        await held.acquire();
        if (target === 'redis') {
          // Redis replicates asynchronously: without WAIT a failover may lose an acknowledged
          // lock. deadbolt acknowledges only what a majority holds.
          const master = c.nodes('master').find((n) => n.options.port === cluster.clientPorts()[old]);
          assert.equal(await master.call('WAIT', 1, 5000), 1);
        }
        const killedAt = await cluster.kill(old);
        let first = null;
        for (let n = 0; first === null; n++) {
          const left = FAILOVER_BUDGET - (performance.now() - killedAt);
          assert.ok(left > 0, `no acquire acknowledged ${FAILOVER_BUDGET} ms after kill ${kill + 1}\n${cluster.logs()}`);
          const attempt = new Mutex(c, `${k}:after:${n}`, { lockTimeout: 30000, refreshInterval: 0, acquireTimeout: 1, retryInterval: 10 }).tryAcquire();
          try {
            // The budget is enforced around the call: ioredis may queue it while no master is known.
            if (await Promise.race([attempt, sleep(left).then(() => false)])) first = performance.now() - killedAt;
          } catch { await sleep(10); }
        }
        times.push(first);
        const now = await cluster.masterOf(`mutex:${k}:held`, 15000, old);
        assert.notEqual(now, old);
        // The acquire acknowledged before the kill survived it, and is still exclusive.
        assert.equal(await c.get(`mutex:${k}:held`), held.identifier);
        const rival = new Mutex(c, `${k}:held`, { lockTimeout: 1000, refreshInterval: 0, acquireTimeout: 1, retryInterval: 10 });
        assert.equal(await rival.tryAcquire(), false);
        await held.release();
        assert.equal(await c.exists(`mutex:${k}:held`), 0);
        await cluster.restart(old);
      }
      const sorted = [...times].sort((x, y) => x - y);
      const what = target === 'redis' ? 'Redis Cluster 7.0 (3 masters + 3 replicas, cluster-node-timeout 1000)' : 'deadbolt cluster-enabled';
      console.log(`failover: ioredis ${ioredisVersion} Cluster + redis-semaphore Mutex on ${what}: kill -> next lock `
        + `median ${sorted[Math.floor(sorted.length / 2)].toFixed(0)} ms over ${kills} kill(s) (${times.map((t) => t.toFixed(0)).join(', ')} ms)`);
    });

    it('node-redis createCluster across a SIGKILL of the slot\'s master: the held lock stays, the next SET NX PX succeeds', { timeout: 60000 }, async () => {
      await up();
      const c = createCluster({
        rootNodes: cluster.nodes().map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
        defaults: { socket: { connectTimeout: 1000, reconnectStrategy: (n) => Math.min(20 * n, 200) } },
        scripts: { release: defineScript({ NUMBER_OF_KEYS: 1, SCRIPT: RELEASE,
          parseCommand(parser, key, token) { parser.pushKey(key); parser.push(token); } }) },
      });
      c.on('error', () => {});
      await c.connect();
      try {
        const k = `{${uniq('cm-nr-kill')}}`;
        const old = await cluster.masterOf(`${k}:held`);
        assert.equal(await c.set(`${k}:held`, 'mine', { NX: true, PX: 30000 }), 'OK');
        if (target === 'redis') assert.equal(await c.sendCommand(`${k}:held`, false, ['WAIT', '1', '5000']), 1);
        const killedAt = await cluster.kill(old);
        let first = null;
        for (let n = 0; first === null; n++) {
          const left = NODE_REDIS_BUDGET - (performance.now() - killedAt);
          assert.ok(left > 0, `no SET NX PX acknowledged ${NODE_REDIS_BUDGET} ms after the kill\n${cluster.logs()}`);
          // node-redis queues a command for a node it is reconnecting to until it rediscovers
          // the slots (about 5 s, on Redis Cluster as on deadbolt); the budget bounds each wait.
          const attempt = c.set(`${k}:after:${n}`, 'x', { NX: true, PX: 30000 });
          try {
            if ((await Promise.race([attempt, sleep(left).then(() => null)])) === 'OK') first = performance.now() - killedAt;
          } catch { await sleep(20); }
        }
        const now = await cluster.masterOf(`${k}:held`, 15000, old);
        assert.notEqual(now, old);
        assert.equal(await c.get(`${k}:held`), 'mine');
        assert.equal(await c.set(`${k}:held`, 'theirs', { NX: true, PX: 30000 }), null);
        assert.equal(await c.release(`${k}:held`, 'mine'), 1);
        assert.equal(await c.exists(`${k}:held`), 0);
        console.log(`failover: node-redis ${nodeRedisVersion} createCluster on ${target}: kill -> next lock ${first.toFixed(0)} ms`);
      } finally {
        await c.close().catch(() => {});
      }
    });
  });
}
