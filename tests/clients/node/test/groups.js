'use strict';
// The three-node deadbolt cluster with `cluster-enabled yes` and `cluster-groups 3` that the
// cluster-mode test files share (each file starts its own): slots 0-5460, 5461-10922 and
// 10923-16383, each group led by one node once the leadership has spread. Not a test file
// (test/*.test.js): helpers only.
const Redis = require('ioredis');
const { createCluster } = require('redis');
const { startCluster, slotMasterPort, sleep } = require('../servers');

// Lazily started, so a run filtered to other tests starts none. `up()` resolves to the leader's
// node index per group (`cluster.groupLeaders()`); `stop()` kills the nodes.
function groupsCluster() {
  const g = {
    cluster: null,
    async up() {
      if (!g.cluster) {
        g.cluster = await startCluster(3, { clusterEnabled: true, groups: 3 });
        g.cluster.nodes = () => g.cluster.clientPorts().map((port) => ({ host: '127.0.0.1', port }));
      }
      return g.cluster.groupLeaders();
    },
    // The group serving `slot` now, from a live node's CLUSTER SLOTS (an earlier test may have
    // moved it), as an index into `leaders`.
    async groupOf(leaders, slot) {
      const c = g.cluster;
      const port = await slotMasterPort(c.clientPorts()[c.live()[0]], slot);
      return leaders.indexOf(c.clientPorts().indexOf(port));
    },
    // Resolves once every node's CLUSTER SLOTS names node `port` as the master of `slot`;
    // throws after `budget` ms.
    async slotServedBy(slot, port, budget) {
      const c = g.cluster;
      const t0 = performance.now();
      for (;;) {
        const seen = await Promise.all(c.clientPorts().map((p) => slotMasterPort(p, slot)));
        if (seen.every((p) => p === port)) return performance.now() - t0;
        if (performance.now() - t0 > budget) {
          throw new Error(`slot ${slot} never moved to ${port} within ${budget} ms: ${seen}\n${c.logs()}`);
        }
        await sleep(5);
      }
    },
    async stop() { if (g.cluster) await g.cluster.stop(); },
  };
  return g;
}

// An unchanged node-redis `createCluster` client on the cluster's nodes, connected, with quick
// reconnects (documented options only); `extra` is merged into its options (e.g. `scripts`).
async function nodeRedisCluster(cluster, extra = {}) {
  const c = createCluster({
    rootNodes: cluster.nodes().map(({ host, port }) => ({ url: `redis://${host}:${port}` })),
    defaults: { socket: { connectTimeout: 1000, reconnectStrategy: (n) => Math.min(20 * n, 200) } },
    ...extra,
  });
  c.on('error', () => {});
  await c.connect();
  return c;
}

// An unchanged ioredis `Cluster` on the cluster's nodes with quick retries while a slot has no
// reachable master (documented options only), errors swallowed (the calls report them); pushed
// onto `open` so the test file's `after` disconnects it.
function ioredisCluster(cluster, open) {
  const c = new Redis.Cluster(cluster.nodes(), {
    clusterRetryStrategy: (times) => Math.min(20 * times, 200),
    retryDelayOnFailover: 50,
    retryDelayOnClusterDown: 50,
    slotsRefreshTimeout: 1000,
    redisOptions: { connectTimeout: 1000 },
  });
  c.on('error', () => {});
  open.push(c);
  return c;
}

module.exports = { groupsCluster, nodeRedisCluster, ioredisCluster };
