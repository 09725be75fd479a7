"""Cluster-mode clients on three deadbolt nodes running three Raft groups (`cluster-enabled yes`,
`cluster-groups 3`: slots 0-5460, 5461-10922, 10923-16383, each node leading one group), so the
lock keys of different groups have different masters, as on a three-master Redis Cluster.

* Locks in every group's slots: redis-py 8.1 `RedisCluster` with its `Lock`, and Redisson's
  RLock (test_redisson_protocol.py's, carried by `RedisCluster`) with a waiter woken by the
  unlock message, in each group's slots; each lock's slot is served by its group's leader.
* Resharding: while two `RedisCluster` clients (two threads each) contend for a `Lock` in one
  slot and a `Lock` and an RLock are held there, `RAFT RESHARD <slot> <slot> <other group>` is
  sent to the slot's group leader; the test polls every node's CLUSTER SLOTS until it names the
  other group's leader. The clients follow -MOVED and retry -TRYAGAIN themselves; what their
  retries did not absorb reaches the workers, which retry (counted, printed). Checked: never two
  holders, locking goes on after the move, the held locks are still their owners' on the new
  master, exclusive and releasable, the RLock waiter is woken by the unlock message there. The
  longest gap between two granted locks is printed (conftest's "failover figures").
* Leader kill: the home group's leader (node 1) is SIGKILLed while a `Lock` and an RLock are held
  in its slots; the next lock in that slot through the same `RedisCluster` must be acknowledged
  within a bound, the other groups' slots keep locking, the held locks stay their owners'.

deadbolt only: Redis Cluster has no Raft groups or RAFT RESHARD (its failover reference is in
test_cluster_mode.py).
"""

import collections
import threading
import time
import uuid

import pytest
import redis

from redis.exceptions import LockError, LockNotOwnedError, RedisError

from cluster import Cluster, call, key_in_group, key_slot, master_port_of, redis_clusters
from conftest import TARGETS
from test_cluster_mode import ClusterRLock
from test_redisson_protocol import RLock

FIGURES = []
FAILOVER_BUDGET = 10.0
# Locking must resume within this after RAFT RESHARD (a move of a few keys takes milliseconds;
# the bound only catches a move that never finishes or clients that never follow it).
RESHARD_BUDGET = 10.0

pytestmark = pytest.mark.skipif("deadbolt" not in TARGETS,
                                reason="Raft groups are deadbolt's (CLIENT_TARGETS has no deadbolt)")


@pytest.fixture(scope="module")
def groups():
    c = Cluster(3, extra=("--cluster-enabled", "yes", "--cluster-groups", "3"))
    try:
        c.group_leaders()
        yield c
    finally:
        c.stop()


@pytest.fixture
def new_rc(groups):
    with redis_clusters(groups.client_ports()) as new:
        yield new


def _uniq(prefix):
    return f"{prefix}:{uuid.uuid4().hex[:10]}"


def _group_of_key(cl, leaders, key):
    """The group serving the key's slot now, from the live CLUSTER SLOTS (not the creation table:
    an earlier test may have moved a slot)."""
    port = master_port_of(cl.client_ports()[0], key_slot(key))
    return leaders.index(cl.index_of(port))


def _waiter_woken_by_unlock(rc_holder, holder, waiter_rc, probe_rc):
    """A second RLock waits on the held one; the holder's unlock PUBLISH must wake it."""
    waiter = RLock(waiter_rc, holder.name)
    got = {}

    def wait():
        t0 = time.monotonic()
        got["ok"] = waiter.try_lock(10, lease_ms=30000)
        got["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=wait)
    t.start()
    node = probe_rc.get_node_from_key(holder.channel)
    end = time.monotonic() + 5
    while dict(probe_rc.pubsub_numsub(holder.channel, target_nodes=node)).get(holder.channel.encode(), 0) < 1:
        assert time.monotonic() < end, "the waiter never subscribed on the slot's master"
        time.sleep(0.005)
    # Let the waiter finish its post-SUBSCRIBE tryAcquire, so the message wakes it (either order
    # must succeed: the 30 s lease means nothing but the message can wake it within 3 s).
    time.sleep(0.05)
    assert holder.unlock() == 1
    t.join(15)
    assert got.get("ok") is True and got["elapsed"] < 3, got
    assert rc_holder.hget(holder.name, waiter.owner) == b"1"
    assert waiter.unlock() == 1
    assert rc_holder.exists(holder.name) == 0


@pytest.mark.parametrize("protocol", [2, 3], ids=["resp2", "resp3"])
def test_groups_locks_in_every_group(groups, new_rc, protocol):
    leaders = groups.group_leaders()
    rc, rival = new_rc(protocol), new_rc(protocol)
    served = set()
    for g in range(3):
        name = key_in_group(_uniq(f"g{g}"), g)
        assert _group_of_key(groups, leaders, name) == g
        node = rc.get_node_from_key(name)
        assert node.port == groups.client_ports()[leaders[g]], (g, node.name)
        served.add(node.port)
        lock = rc.lock(name, timeout=5)
        assert lock.acquire(blocking=False)
        assert rc.get(name) == lock.local.token
        assert 0 < rc.pttl(name) <= 5000
        assert not rival.lock(name, timeout=5).acquire(blocking=False)
        assert lock.extend(10)
        lock.release()
        assert rc.exists(name) == 0
        # Redisson's RLock in the same group's slots, its waiter woken by the unlock message.
        holder = RLock(rc, key_in_group(_uniq(f"r{g}"), g))
        assert holder.try_lock(0, lease_ms=30000)
        assert not RLock(rival, holder.name).try_lock(0, lease_ms=30000)
        _waiter_woken_by_unlock(rc, holder, new_rc(protocol), rival)
    assert len(served) == 3, "each group's locks go to its own leader"


def test_groups_redisson_cluster_servers_path_in_every_group(groups, new_rc):
    """Redisson's useClusterServers() path (test_cluster_mode.ClusterRLock) in each group's slots:
    its start-up probes on a fresh connection to the slot's master, synced evals there, the
    waiter SSUBSCRIBEd there and woken by the unlock's SPUBLISH."""
    leaders = groups.group_leaders()
    for g in range(3):
        name = key_in_group(_uniq(f"c{g}"), g)
        holder = ClusterRLock(new_rc(), name, "spublish")
        assert holder.node.port == groups.client_ports()[leaders[g]], (g, holder.node.name)
        assert holder.try_lock(0, 30000)
        probe = new_rc()
        waiter = ClusterRLock(new_rc(), name, "spublish")
        got = {}
        t = threading.Thread(target=lambda: got.update(ok=waiter.try_lock(10, 30000)))
        t.start()
        end = time.monotonic() + 5
        while dict(probe.pubsub_shardnumsub(holder.channel, target_nodes=holder.node)).get(holder.channel.encode(), 0) < 1:
            assert time.monotonic() < end, "the waiter never SSUBSCRIBEd on the slot's master"
            time.sleep(0.005)
        assert waiter.waiting.wait(5), "the waiter never waited"
        assert holder.unlock() == 1
        t.join(15)
        assert got.get("ok") is True and waiter.woken, (got, waiter.woken)
        assert waiter.unlock() == 1


def test_groups_reshard_of_the_lock_slot(groups, new_rc):
    cl = groups
    leaders = cl.group_leaders()
    name = _uniq("rs")
    slot = key_slot(name)
    src = _group_of_key(cl, leaders, name)
    dest = (src + 1) % 3
    src_port, dest_port = cl.client_ports()[leaders[src]], cl.client_ports()[leaders[dest]]
    contended = f"{{{name}}}:contended"
    state = {"inside": None, "overlaps": [], "grants": [], "errors": collections.Counter()}
    stop = threading.Event()

    def worker(rc, wid):
        while not stop.is_set():
            lk = rc.lock(contended, timeout=5)
            try:
                if not lk.acquire(blocking=False):
                    time.sleep(0.001)
                    continue
            except RedisError as e:
                state["errors"][type(e).__name__] += 1
                time.sleep(0.005)
                continue
            if state["inside"] is not None:
                state["overlaps"].append((state["inside"], wid))
            state["inside"] = wid
            state["grants"].append(time.monotonic())
            time.sleep(0.001)
            state["inside"] = None
            while True:
                try:
                    lk.release()
                    break
                except LockNotOwnedError:
                    state["errors"]["released after expiry"] += 1
                    break
                except (RedisError, LockError) as e:
                    state["errors"][f"release: {type(e).__name__}"] += 1
                    time.sleep(0.005)

    a, b = new_rc(), new_rc()
    rc = new_rc()
    threads = [threading.Thread(target=worker, args=(c, f"{i}{j}")) for i, c in enumerate((a, b)) for j in range(2)]
    for t in threads:
        t.start()
    try:
        end = time.monotonic() + 10
        while len(state["grants"]) < 20:
            assert time.monotonic() < end, f"the workers never got going: {state['errors']}"
            time.sleep(0.01)
        held = rc.lock(f"{{{name}}}:held", timeout=60)
        assert held.acquire(blocking=False)
        rheld = RLock(rc, name)
        assert rheld.try_lock(0, lease_ms=60000)
        before = len(state["grants"])
        t0 = time.monotonic()
        assert call(src_port, "RAFT", "RESHARD", slot, slot, dest) == "OK"
        # The move is done when every node's CLUSTER SLOTS names the other group's leader.
        while any(master_port_of(p, slot) != dest_port for p in cl.client_ports()):
            assert time.monotonic() - t0 < RESHARD_BUDGET, \
                f"slot {slot} never moved to group {dest}: {[master_port_of(p, slot) for p in cl.client_ports()]}\n{cl.logs()}"
            time.sleep(0.005)
        moved = time.monotonic() - t0
        after = len(state["grants"])
        while len(state["grants"]) < after + 20:
            assert time.monotonic() - t0 < RESHARD_BUDGET, \
                f"locking did not resume after the move: {len(state['grants']) - after} grants, {state['errors']}"
            time.sleep(0.005)
    finally:
        stop.set()
        for t in threads:
            t.join(15)
    assert state["overlaps"] == [], f"two holders at once: {state['overlaps']}"
    grants = state["grants"]
    gaps = [y - x for x, y in zip(grants, grants[1:])]
    # The held locks moved with the slot: on the new master, their owners', exclusive, releasable.
    assert call(dest_port, "GET", held.name) == held.local.token
    assert rc.get(held.name) == held.local.token
    assert rc.get_node_from_key(held.name).port == dest_port, "RedisCluster did not follow the move"
    assert not new_rc().lock(held.name, timeout=5).acquire(blocking=False)
    held.release()
    assert rc.exists(held.name) == 0
    assert rc.hget(name, rheld.owner) == b"1"
    assert not RLock(new_rc(), name).try_lock(0, lease_ms=30000)
    _waiter_woken_by_unlock(rc, rheld, new_rc(), new_rc())
    # The old group's leader now redirects the slot to the new one, as a Redis Cluster does.
    r = call(src_port, "SET", f"{{{name}}}:probe", "x")
    assert isinstance(r, str) and r == f"MOVED {slot} 127.0.0.1:{dest_port}", r
    FIGURES.append(
        f"reshard: redis-py {redis.__version__} RedisCluster Lock x4 workers on deadbolt cluster-groups 3, "
        f"slot {slot} group {src} -> {dest}: moved in {moved * 1000:.0f} ms; "
        f"longest gap between locks {max(gaps) * 1000:.0f} ms (median {sorted(gaps)[len(gaps) // 2] * 1000:.1f} ms, "
        f"{len(grants)} locks, {after - before} during the move); errors the client passed on: {dict(state['errors']) or 'none'}")


def test_groups_home_leader_kill(groups, new_rc):
    """Kept last in the module: it leaves node 1 dead (the cluster runs on in two nodes)."""
    cl = groups
    leaders = cl.group_leaders()
    victim = 0  # the home group: discovery and the Sentinel answers wait for its election too
    old = leaders[victim]
    name = key_in_group(_uniq("kill"), victim)
    assert _group_of_key(cl, leaders, name) == victim
    slot = key_slot(name)
    others = [key_in_group(_uniq(f"other{g}"), g) for g in range(3) if g != victim]
    rc = new_rc()
    held = rc.lock(f"{{{name}}}:held", timeout=30)
    assert held.acquire(blocking=False)
    rheld = RLock(rc, name)
    assert rheld.try_lock(0, lease_ms=30000)
    killed = cl.kill(old)
    took, last, n = None, None, 0
    while took is None:
        assert time.monotonic() - killed < FAILOVER_BUDGET, \
            f"no lock acquired {FAILOVER_BUDGET} s after the kill: {last!r}\n{cl.logs()}"
        try:
            # Same slot as the held locks: its group's leader is the one killed.
            if rc.lock(f"{{{name}}}:after:{n}", timeout=30).acquire(blocking=False):
                took = time.monotonic() - killed
        except RedisError as e:  # the application retries what the client passes on
            last = e
            time.sleep(0.02)
        n += 1
    # The other groups' slots lock too (their leaders are alive).
    for k in others:
        lk = rc.lock(k, timeout=5)
        assert lk.acquire(blocking=False)
        lk.release()
    now = cl.slot_master(slot, not_=old)
    assert now != old
    assert rc.get_node_from_key(name).port == cl.client_ports()[now], "RedisCluster does not route to the new leader"
    assert rc.get(held.name) == held.local.token, "the lock acknowledged before the kill was lost"
    assert not new_rc().lock(held.name, timeout=5).acquire(blocking=False)
    held.release()
    assert rc.hget(name, rheld.owner) == b"1"
    # A new leader counts a deadline plus `cluster-clock-drift` (500 ms by default).
    assert 0 < rc.pttl(name) <= 30000 + 500
    assert not RLock(new_rc(), name).try_lock(0, lease_ms=30000)
    _waiter_woken_by_unlock(rc, rheld, new_rc(), new_rc())
    FIGURES.append(f"failover: redis-py {redis.__version__} RedisCluster Lock on deadbolt cluster-groups 3, "
                   f"home group's leader killed: kill -> next lock {took * 1000:.0f} ms ({n} tries)")
