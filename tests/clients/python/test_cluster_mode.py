"""Cluster-mode clients against a three-node deadbolt cluster with `cluster-enabled yes` and a
real Redis Cluster 7.0 (3 masters, `redis-cli --cluster create`), the reference.

* redis-py 8.1 `RedisCluster` with its `Lock` (SET NX PX, the extend and release scripts).
* Redisson's lock protocol as `useClusterServers()` drives it: the topology from CLUSTER NODES
  (each master's address and slot ranges), every lock script (byte-exact, lua/redisson/,
  SHA1-checked) sent to the master of the lock's slot, the waiter subscribed to
  `redisson_lock__channel:{name}` on that master and woken by the unlock script's PUBLISH. The
  scripts and the RLock client side are test_redisson_protocol.py's, carried by `RedisCluster`
  (which routes EVALSHA by its first key and SUBSCRIBE by the channel's slot, as Redisson does).

`ClusterRLock` adds what Redisson's cluster mode does beyond the scripts: the start-up probes
(`PUBSUB SHARDNUMSUB` answering means sharded pub/sub, so waiters `SSUBSCRIBE` and the unlock
script is given `spublish`; `WAIT 0 0` + `WAITAOF 0 0 0`; `INFO ALL` for `connected_slaves`)
and "synced" evals: each lock script pipelined on the slot master's connection with
`WAIT <connected_slaves> 1000`, failing (NoSyncedSlavesException) when fewer replicas answer.

Failover: the master of a held RLock's slot (deadbolt's leader; on Redis, a cluster with a replica
per master) is SIGKILLed: the next RLock in that slot through the same RedisCluster must be
acquired within a bounded time, the held one is still its owner's and exclusive, and a second
client's waiter, subscribed on the new master, is woken by the holder's unlock message.
"""

import threading
import time

import pytest
from redis.cluster import ClusterNode, RedisCluster

from cluster import Cluster, RedisClusterRef, _cmd, redis_clusters
from conftest import TARGETS

# Kill-to-first-acquire times (printed by conftest's "failover figures" section).
FIGURES = []
FAILOVER_BUDGET = 10.0
import redis
from test_redisson_protocol import SCRIPTS, RLock, _await


@pytest.fixture(scope="module", params=TARGETS)
def cluster_target(request):
    if request.param == "redis":
        c = RedisClusterRef(3)
    else:
        c = Cluster(3, extra=("--cluster-enabled", "yes"))
        c.leader()
    yield c
    c.stop()


@pytest.fixture(params=[pytest.param(2, id="resp2"), pytest.param(3, id="resp3")])
def new_rc(cluster_target, request):
    with redis_clusters(cluster_target.client_ports()) as new:
        yield lambda: new(request.param)


def _masters_from_cluster_nodes(port):
    """What Redisson's ClusterConnectionManager reads: CLUSTER NODES on one node (its own RESP2
    connection), as {slot range: master address} for every connected master."""
    raw = _cmd(port, "CLUSTER", "NODES")
    assert raw.startswith(b"$"), raw
    text = raw.split(b"\r\n", 1)[1].decode()
    ranges = {}
    for line in text.strip().splitlines():
        f = line.split(" ")
        flags = f[2].split(",")
        if "master" not in flags or "fail" in flags or f[7] != "connected":
            continue
        addr = f[1].split("@")[0]
        for s in f[8:]:
            lo, _, hi = s.partition("-")
            ranges[(int(lo), int(hi or lo))] = addr
    return ranges


def _numsub(rc, channel):
    node = rc.get_node_from_key(channel)
    return dict(rc.pubsub_numsub(channel, target_nodes=node)).get(channel.encode(), 0)


def test_cluster_redis_py_lock(new_rc, name):
    rc = new_rc()
    lock = rc.lock(name, timeout=5)
    assert lock.acquire(blocking=False)
    assert rc.get(name) == lock.local.token
    assert 0 < rc.pttl(name) <= 5000
    assert not new_rc().lock(name, timeout=5).acquire(blocking=False)
    assert lock.extend(10)
    assert 5000 < rc.pttl(name) <= 15000
    lock.release()
    assert rc.exists(name) == 0
    again = new_rc().lock(name, timeout=5)
    assert again.acquire(blocking=False)
    again.release()


def test_cluster_redisson_topology_names_the_slot_master(new_rc, name):
    rc = new_rc()
    slot = rc.keyslot(name)
    channel = f"redisson_lock__channel:{{{name}}}"
    assert rc.keyslot(channel) == slot  # Redisson's hash tag keeps lock, channel and latch together
    routed = rc.get_node_from_key(name)
    for node in rc.get_nodes():
        ranges = _masters_from_cluster_nodes(node.port)
        assert sum(hi - lo + 1 for lo, hi in ranges) == 16384, ranges
        owner = [a for (lo, hi), a in ranges.items() if lo <= slot <= hi]
        assert owner == [f"{routed.host}:{routed.port}"], (node.name, ranges)


def test_cluster_redisson_rlock_reentry_and_unlock_message(new_rc, name):
    rc = new_rc()
    lock = RLock(rc, name)
    monitor = new_rc().pubsub()
    monitor.subscribe(lock.channel)
    _await(monitor, "subscribe", lock.channel)
    assert lock.try_lock(0, lease_ms=10000)
    assert lock.try_lock(0, lease_ms=10000)  # reentrant: same owner
    assert rc.hget(name, lock.owner) == b"2"
    assert not RLock(new_rc(), name).try_lock(0, lease_ms=10000)
    assert lock.unlock() == 0
    assert 0 < rc.pttl(name) <= 30000
    assert lock.unlock() == 1
    assert rc.exists(name) == 0
    assert _await(monitor, "message", lock.channel)["data"] == b"0"
    with pytest.raises(RuntimeError, match="IllegalMonitorState"):
        lock.unlock()
    monitor.close()


def test_cluster_redisson_waiter_woken_by_unlock_message(new_rc, name):
    holder = RLock(new_rc(), name)
    assert holder.try_lock(0, lease_ms=30000)
    waiter = RLock(new_rc(), name)
    got = {}

    def wait():
        t0 = time.monotonic()
        got["ok"] = waiter.try_lock(10, lease_ms=30000)
        got["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=wait)
    t.start()
    probe = new_rc()
    end = time.monotonic() + 5
    while _numsub(probe, holder.channel) < 1:
        assert time.monotonic() < end, "the waiter never subscribed on the slot's master"
        time.sleep(0.005)
    # Let the waiter finish its post-SUBSCRIBE tryAcquire so the wake-up normally comes from the
    # message (either order must succeed).
    time.sleep(0.05)
    assert holder.unlock() == 1
    t.join(15)
    # Only the PUBLISH from the unlock script can wake it this early: the TTL was 30 s.
    assert got.get("ok") is True and got["elapsed"] < 3, got
    assert probe.hget(name, waiter.owner) == b"1"
    assert waiter.unlock() == 1
    assert probe.exists(name) == 0


@pytest.mark.parametrize("target", TARGETS)
def test_cluster_redisson_rlock_across_leader_kill(target, name):
    """deadbolt: the leader is killed. Redis, the reference: 3 masters + 3 replicas, the master
    of the lock's slot is killed (after WAIT 1 1000: Redis replicates asynchronously)."""
    if target == "redis":
        cl = RedisClusterRef(3, replicas=1)
        master_of = cl.master_of
    else:
        cl = Cluster(3, extra=("--cluster-enabled", "yes"))
        master_of = lambda _key, not_=None: cl.leader(not_=not_)  # noqa: E731 - every slot's master
    made = []

    def new_rc():
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in cl.client_ports()], protocol=2)
        made.append(rc)
        return rc

    try:
        old = master_of(name)
        rc = new_rc()
        holder = RLock(rc, name)
        assert holder.try_lock(0, lease_ms=30000)
        if target == "redis":
            assert rc.get_redis_connection(rc.get_node_from_key(name)).execute_command("WAIT", 1, 1000) == 1
        killed = cl.kill(old)
        # Redisson retries a command that failed on a closed connection (retryAttempts); the
        # application here retries the whole tryLock the same way, within the budget.
        took, last, n = None, None, 0
        while took is None:
            assert time.monotonic() - killed < FAILOVER_BUDGET, f"no RLock acquired {FAILOVER_BUDGET} s after the kill: {last!r}\n{cl.logs()}"
            try:
                # Same slot as the held lock: its master is the one killed.
                if RLock(rc, f"{{{name}}}:after:{n}").try_lock(0, lease_ms=30000):
                    took = time.monotonic() - killed
            except Exception as e:  # noqa: BLE001 - any client error is retried, as Redisson does
                last = e
                time.sleep(0.02)
            n += 1
        now = master_of(name, not_=old)
        assert now != old
        routed = rc.get_node_from_key(name)
        assert routed.port == cl.client_ports()[now], "RedisCluster does not route to the new leader"
        # The RLock acquired before the kill is still its owner's, and exclusive.
        assert rc.hget(name, holder.owner) == b"1"
        # A new leader counts a key's deadline plus `cluster-clock-drift` (500 ms by default),
        # so an expiry can never come early across the change.
        assert 0 < rc.pttl(name) <= 30000 + 500
        assert not RLock(new_rc(), name).try_lock(0, lease_ms=30000)
        waiter = RLock(new_rc(), name)
        got = {}

        def wait():
            t0 = time.monotonic()
            got["ok"] = waiter.try_lock(10, lease_ms=30000)
            got["elapsed"] = time.monotonic() - t0

        t = threading.Thread(target=wait)
        t.start()
        end = time.monotonic() + 5
        while _numsub(rc, holder.channel) < 1:
            assert time.monotonic() < end, "the waiter never subscribed on the new master"
            time.sleep(0.005)
        time.sleep(0.05)
        assert holder.unlock() == 1
        t.join(15)
        assert got.get("ok") is True and got["elapsed"] < 3, got
        assert waiter.unlock() == 1
        assert rc.exists(name) == 0
        what = "Redis Cluster 7.0 (3 masters + 3 replicas, cluster-node-timeout 1000)" if target == "redis" \
            else "deadbolt cluster-enabled"
        FIGURES.append(f"failover: redis-py {redis.__version__} RedisCluster + Redisson RLock on {what}: "
                       f"kill -> next lock {took * 1000:.0f} ms ({n} tries)")
    finally:
        for rc in made:
            rc.close()
        cl.stop()


class ClusterRLock:
    """RedissonLock as `useClusterServers()` drives it, over the slot master's own connection."""

    def __init__(self, rc, name, publish):
        self.rc = rc
        self.name = name
        self.publish = publish  # "spublish" once the SHARDNUMSUB probe answered, else "publish"
        self.owner = f"{__import__('uuid').uuid4()}:{threading.get_ident()}"
        self.channel = f"redisson_lock__channel:{{{name}}}"
        self.sha = {k: __import__("hashlib").sha1(v).hexdigest() for k, v in SCRIPTS.items()}
        self.node = rc.get_node_from_key(name)
        self.waiting = threading.Event()  # set once a waiter waits for the message (test hook)
        self.woken = False
        self.conn = rc.get_redis_connection(self.node)
        # The WAIT/WAITAOF probe, then the replica count from INFO ALL (cached, as Redisson does).
        probe = self.conn.pipeline(transaction=False)
        probe.execute_command("WAIT", 0, 0)
        probe.execute_command("WAITAOF", 0, 0, 0)
        waits = probe.execute(raise_on_error=False)
        assert isinstance(waits[0], int), waits
        info = self.conn.info("all")
        assert info["role"] == "master", info["role"]
        self.slaves = int(info["connected_slaves"])

    def _synced_eval(self, script, keys, args):
        for _ in range(2):  # NOSCRIPT: SCRIPT LOAD on the same node, then once more
            p = self.conn.pipeline(transaction=False)
            p.evalsha(self.sha[script], len(keys), *keys, *args)
            if self.slaves > 0:
                p.execute_command("WAIT", self.slaves, 1000)
            out = p.execute(raise_on_error=False)
            if isinstance(out[0], redis.exceptions.NoScriptError):
                self.conn.script_load(SCRIPTS[script])
                continue
            if isinstance(out[0], Exception):
                raise out[0]
            if self.slaves > 0:
                assert out[1] >= self.slaves, f"NoSyncedSlavesException: WAIT {self.slaves} 1000 -> {out[1]}"
            return out[0]
        raise AssertionError("NOSCRIPT after SCRIPT LOAD")

    def _try_acquire(self, lease_ms):
        return self._synced_eval("rlock_trylockinnerasync", [self.name], [lease_ms, self.owner])

    def try_lock(self, wait_s, lease_ms):
        deadline = time.monotonic() + wait_s
        if self._try_acquire(lease_ms) is None:
            return True
        sharded = self.publish == "spublish"
        ps = self.rc.pubsub()
        if sharded:
            ps.ssubscribe(self.channel)
        else:
            ps.subscribe(self.channel)

        def next_message(timeout):
            if sharded:
                return ps.get_sharded_message(timeout=timeout, target_node=self.node)
            return ps.get_message(timeout=timeout)

        try:
            while True:
                ttl = self._try_acquire(lease_ms)
                if ttl is None:
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                end = time.monotonic() + min(ttl / 1000, left)
                self.waiting.set()
                while time.monotonic() < end:
                    m = next_message(max(0.0, end - time.monotonic()))
                    if m and m["type"] in ("message", "smessage"):
                        assert m["channel"] == self.channel.encode() and m["data"] == b"0", m
                        self.woken = True
                        break
        finally:
            if sharded:
                ps.sunsubscribe(self.channel)
            else:
                ps.unsubscribe(self.channel)
            ps.close()

    def unlock(self):
        latch = f"redisson_unlock_latch:{{{self.name}}}:{__import__('uuid').uuid4().hex}"
        res = self._synced_eval("rlock_unlockinnerasync", [self.name, self.channel, latch],
                                [0, 30000, self.owner, self.publish, 1000])
        self.conn.delete(latch)
        return res


@pytest.mark.parametrize("publish", ["spublish", "publish"])
def test_cluster_redisson_synced_lock_and_waiter(cluster_target, publish, name):
    ports = cluster_target.client_ports()
    made = []

    def new_rc():
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports], protocol=2)
        made.append(rc)
        return rc

    try:
        rc = new_rc()
        # Redisson's start-up probe: SHARDNUMSUB answering selects sharded pub/sub.
        assert rc.pubsub_shardnumsub("redisson-probe", target_nodes=RedisCluster.RANDOM) == [(b"redisson-probe", 0)]
        holder = ClusterRLock(rc, name, publish)
        assert holder.try_lock(0, 30000)
        assert rc.hget(name, holder.owner) == b"1"
        waiter = ClusterRLock(new_rc(), name, publish)
        got = {}

        def wait():
            t0 = time.monotonic()
            got["ok"] = waiter.try_lock(10, 30000)
            got["elapsed"] = time.monotonic() - t0

        t = threading.Thread(target=wait)
        t.start()
        node = rc.get_node_from_key(holder.channel)
        end = time.monotonic() + 5
        while True:
            if publish == "spublish":
                n = rc.pubsub_shardnumsub(holder.channel, target_nodes=node)
            else:
                n = rc.pubsub_numsub(holder.channel, target_nodes=node)
            if dict(n).get(holder.channel.encode(), 0) >= 1:
                break
            assert time.monotonic() < end, f"the waiter never subscribed on the slot's master: {n}"
            time.sleep(0.005)
        # Unlock only once the waiter is past its post-subscribe tryAcquire, so only the
        # message can wake it before the holder's 30 s lease runs out.
        assert waiter.waiting.wait(5)
        assert holder.unlock() == 1
        t.join(15)
        assert got.get("ok") is True and got["elapsed"] < 3, got
        assert waiter.woken, "the waiter got the lock without the unlock message"
        assert rc.hget(name, waiter.owner) == b"1"
        assert waiter.unlock() == 1
        assert rc.exists(name) == 0
    finally:
        for rc in made:
            rc.close()
