"""redis-py 8's `Sentinel` failing over with a deadbolt cluster, unchanged.

Three deadbolt nodes are given to `Sentinel([...])` as its sentinels; `master_for("mymaster")`
finds the leader through SENTINEL MASTERS. A `Lock` is held while the leader is SIGKILLed and
workers keep contending on another lock through the failover with redis-py's own `Retry` (a
killed master's socket raises ConnectionError; the retry reconnects, which rediscovers the master)
plus the application-side retry redis-py users write around it. Checked: the held lock's token
is on the new leader, a rival can't take it and its owner releases it; no two workers ever hold
the contended lock at once; locking resumes. The time from the kill to the first acquire the new
leader acknowledged is printed in the "failover figures" section.

deadbolt only: a real Redis + Sentinel failover takes far longer and is measured elsewhere.
"""

import threading
import time

import pytest
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError, LockNotOwnedError, TimeoutError
from redis.retry import Retry
from redis.sentinel import Sentinel

from cluster import MASTER, Cluster
from conftest import TARGETS

pytestmark = pytest.mark.skipif("deadbolt" not in TARGETS, reason="cluster failover: deadbolt target only")

FIGURES = []
# Detection takes 0.5-1 s of silence plus an election; the rest is client back-off. Generous for a
# loaded 2-core machine, but a single node (no new leader ever) or a missed kill still fails.
FAILOVER_BUDGET = 10.0


@pytest.fixture
def cluster():
    c = Cluster()
    yield c
    c.stop()


def _client(cluster, protocol):
    # What a redis-py user configures for fast failover: short back-off on the master, enough
    # attempts to outlast an election; a dead sentinel skipped at once (redis-py's default retry
    # would spend seconds of back-off on it before asking the next one).
    retry = Retry(ExponentialBackoff(cap=0.1, base=0.01), retries=40)
    sentinel = Sentinel(cluster.sentinels(), socket_timeout=5, socket_connect_timeout=1, protocol=protocol,
                        sentinel_kwargs={"socket_timeout": 1, "socket_connect_timeout": 1,
                                         "retry": Retry(NoBackoff(), 0), "protocol": protocol})
    return sentinel, sentinel.master_for(MASTER, socket_timeout=5, socket_connect_timeout=1, retry=retry)


# redis-py 8 speaks RESP3 by default (SENTINEL replies are maps then); protocol=2 is the other.
@pytest.mark.parametrize("protocol", [pytest.param(None, id="resp3"), pytest.param(2, id="resp2")])
def test_lock_held_across_leader_kill(cluster, name, protocol):
    old = cluster.leader()
    sentinel, master = _client(cluster, protocol)
    assert sentinel.discover_master(MASTER) == ("127.0.0.1", cluster.client_ports()[old])

    held = master.lock(f"{name}:held", timeout=30)
    assert held.acquire(blocking=False)
    token = held.local.token

    contended = f"{name}:contended"
    state = {"inside": None, "overlaps": [], "grants": [], "errors": 0, "crashed": []}
    guard = threading.Lock()
    stop = threading.Event()

    def worker(wid):
        try:
            work(wid)
        except BaseException as e:  # a dead worker must fail the test, not just stop
            state["crashed"].append(repr(e))

    def work(wid):
        while not stop.is_set():
            lk = master.lock(contended, timeout=3, sleep=0.01)
            try:
                got = lk.acquire(blocking_timeout=0.3)
            except (ConnectionError, TimeoutError):
                state["errors"] += 1  # the application-side retry: try again
                continue
            if not got:
                continue
            with guard:
                if state["inside"] is not None:
                    state["overlaps"].append((state["inside"], wid))
                state["inside"] = wid
                state["grants"].append(time.monotonic())
            time.sleep(0.002)
            with guard:
                state["inside"] = None
            tok = lk.local.token
            try:
                lk.release()
            except LockNotOwnedError:
                # Only a release whose first attempt reached the old leader and got no reply
                # may find its own deletion already done; the lock must not still be ours.
                if master.get(contended) == tok:
                    state["crashed"].append(f"release refused while {tok} still holds the lock")
            except (ConnectionError, TimeoutError):
                state["errors"] += 1

    workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(3)]
    for w in workers:
        w.start()
    try:
        while len(state["grants"]) < 5:
            time.sleep(0.01)
        killed_at = cluster.kill(old)

        # The first acquire sent after the kill: only a new leader can acknowledge it (the old one
        # is dead, followers answer READONLY).
        first = None
        n = 0
        while first is None:
            assert time.monotonic() - killed_at < FAILOVER_BUDGET, \
                f"no acquire acknowledged {FAILOVER_BUDGET}s after the kill\n{cluster.logs()}"
            n += 1
            try:
                if master.lock(f"{name}:probe:{n}", timeout=10).acquire(blocking=False):
                    first = time.monotonic() - killed_at
            except (ConnectionError, TimeoutError):
                time.sleep(0.01)
        grants_at_first = len([g for g in state["grants"] if g > killed_at])

        new = cluster.leader(not_=old)
        assert new != old
        assert sentinel.discover_master(MASTER) == ("127.0.0.1", cluster.client_ports()[new])
        assert master.connection_pool.get_master_address()[1] == cluster.client_ports()[new]

        # The lock acquired before the kill is still its owner's on the new leader.
        assert master.get(f"{name}:held") == token
        assert 0 < master.pttl(f"{name}:held") <= 30000 + 500  # + the cluster clock bound
        assert held.owned()
        assert master.lock(f"{name}:held", timeout=5).acquire(blocking=False) is False

        # Locking resumes: the contending workers get the lock again after the failover.
        deadline = time.monotonic() + FAILOVER_BUDGET
        while len([g for g in state["grants"] if g > killed_at]) < grants_at_first + 10:
            assert time.monotonic() < deadline and not state["crashed"], \
                f"the workers did not get the lock back after failover: {state['crashed']}"
            time.sleep(0.01)
    finally:
        stop.set()
        for w in workers:
            w.join(10)

    held.release()
    assert master.exists(f"{name}:held") == 0
    assert state["overlaps"] == [], f"two holders at once: {state['overlaps']}"
    assert state["crashed"] == [], state["crashed"]
    after = len([g for g in state["grants"] if g > killed_at])
    FIGURES.append(
        f"failover: redis-py {_version()} Sentinel ({'RESP2' if protocol == 2 else 'RESP3'}): kill -> first acquire {first * 1000:.0f} ms "
        f"(Retry ExponentialBackoff cap 0.1 s; contended grants {len(state['grants'])}, "
        f"{after} after the kill, client errors surfaced {state['errors']})")
    master.close()
    sentinel.close()


def _version():
    import redis

    return redis.__version__
