"""Redisson's sentinel mode failing over with a deadbolt cluster, driven the way Redisson does it.

No JVM here, so this emulates what SentinelConnectionManager and the lock code send (read from
redisson/redisson master; see docs/cluster.md, "The Sentinel surface clients use"), with the byte-exact lock scripts of
lua/redisson/ (SHA1-checked like test_redisson_protocol.py):

* start-up (doConnect): per sentinel, SENTINEL GET-MASTER-ADDR-BY-NAME (must not be nil), SENTINEL
  SLAVES (`ip`, `port`, `flags` with s_down/disconnected, `master-link-status` containing "err"),
  SENTINEL SENTINELS, each listed sentinel connected; checkSentinelsList needs >= 2 of them;
* every scanInterval (100 ms, the documented setting for fast failover; default 1000) a shuffled
  sentinel is asked GET-MASTER-ADDR-BY-NAME (a change switches the master connections and
  re-attaches subscriptions there), SLAVES (kept only if not down, not `promoted` and their
  master-host/master-port is the current master: isUseSameMaster) and SENTINELS (down ones dropped);
* lock scripts are "synced evals": the first one probes `WAIT 0 0` + `WAITAOF 0 0 0`, then
  `INFO ALL` gives connected_slaves, and each script is pipelined with `WAIT <connected_slaves>
  1000`; a WAIT answer different from connected_slaves makes the next one re-read INFO, and 0
  synced while slaves were expected is NoSyncedSlavesException (checkLockSyncedSlaves). tryLock
  and unlock are NoRetry (an error reaches the caller); the watchdog renewal retries (4 attempts,
  jittered delay) and READONLY counts as retryable, as RedisReadonlyException does;
* RESP2, EVALSHA with SCRIPT LOAD on NOSCRIPT (useScriptCache), subscriptions on the master.

The scenario: an RLock held (watchdog renewing) when the leader is SIGKILLed, a waiter of another
client subscribed to the lock's channel through the kill, the holder unlocking after failover and
the waiter woken by the unlock's PUBLISH, not by its timed wait.
"""

import hashlib
import os
import random
import threading
import time
import uuid

import pytest
import redis
from redis.backoff import NoBackoff
from redis.exceptions import ConnectionError, NoScriptError, ReadOnlyError, ResponseError, TimeoutError
from redis.retry import Retry

from cluster import MASTER, Cluster
from conftest import REPO, TARGETS

pytestmark = pytest.mark.skipif("deadbolt" not in TARGETS, reason="cluster failover: deadbolt target only")

FIGURES = []
FAILOVER_BUDGET = 10.0
SCAN_INTERVAL = 0.1
WATCHDOG_MS = 6000  # lockWatchdogTimeout: renewed every 2 s, so renewals cross the failover
SLAVES_SYNC_TIMEOUT = 1000
RETRYABLE = (ConnectionError, TimeoutError, ReadOnlyError)


def _script(name):
    path = f"redisson/{name}.lua"
    with open(os.path.join(REPO, "lua", path), "rb") as f:
        body = f.read()
    with open(os.path.join(REPO, "lua", "MANIFEST.tsv"), encoding="utf-8") as f:
        sha = {c[0]: c[4] for c in (line.rstrip("\n").split("\t") for line in f) if len(c) >= 5}
    assert hashlib.sha1(body).hexdigest() == sha[path], path
    return body


LOCK, UNLOCK, RENEW = (_script(n) for n in ("rlock_trylockinnerasync", "rlock_unlockinnerasync",
                                             "watchdog_locktask"))


class NoSyncedSlaves(Exception):
    pass


def _conn(host, port):
    # No redis-py retry: Redisson's own retry rules are applied on top, below.
    return redis.Redis(host=host, port=int(port), protocol=2, decode_responses=False,
                       socket_timeout=5, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))


def _pairs(flat):
    return {flat[i].decode(): flat[i + 1].decode() for i in range(0, len(flat), 2)}


class SentinelManager:
    """SentinelConnectionManager: the current master, its slaves, the known sentinels."""

    def __init__(self, addrs, check_sentinels_list=True):
        self.lock = threading.Lock()
        self.sentinels = {}
        self.master_addr = None
        self.slaves = set()
        self.available_slaves = -1  # MasterSlaveEntry.availableSlaves, kept across master changes
        self.wait_supported = None
        self.changes = []  # (monotonic time, new master address)
        self.changed = threading.Condition(self.lock)
        self.errors = []
        for host, port in addrs:
            c = _conn(host, port)
            try:
                master = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
                assert master, "Master node is undefined! SENTINEL GET-MASTER-ADDR-BY-NAME returns empty result!"
                self.master_addr = (master[0].decode(), int(master[1]))
                for s in map(_pairs, c.execute_command("SENTINEL", "SLAVES", MASTER)):
                    if not self._down(s):
                        self.slaves.add((s["ip"], int(s["port"])))
                for s in map(_pairs, c.execute_command("SENTINEL", "SENTINELS", MASTER)):
                    self._register((s["ip"], int(s["port"])))
                self._register((host, port))
                break
            except (ConnectionError, TimeoutError):
                continue
            finally:
                c.close()
        if check_sentinels_list and len(self.sentinels) < 2:
            raise AssertionError("SENTINEL SENTINELS command returns less than 2 nodes")
        assert self.master_addr, "Can't connect to servers!"
        self.master = _conn(*self.master_addr)
        self.stop = threading.Event()
        self.poller = threading.Thread(target=self._poll, daemon=True)
        self.poller.start()

    @staticmethod
    def _down(m):
        return "s_down" in m.get("flags", "") or "disconnected" in m.get("flags", "") \
            or "err" in m.get("master-link-status", "")  # checkSlaveStatusWithSyncing

    def _register(self, addr):
        if addr in self.sentinels:
            return
        c = _conn(*addr)
        try:
            c.ping()
        except (ConnectionError, TimeoutError):
            c.close()
            return
        self.sentinels[addr] = c

    def _poll(self):
        while not self.stop.wait(SCAN_INTERVAL):
            order = list(self.sentinels.items())
            random.shuffle(order)
            for addr, c in order:
                try:
                    self._check(c, addr)
                    break
                except Exception as e:  # "Can't update cluster state": the next sentinel
                    self.errors.append(repr(e))

    def _check(self, c, addr):
        m = c.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER)
        new = (m[0].decode(), int(m[1]))  # nil fails here, as RedisURIDecoder does
        if new != self.master_addr:
            with self.lock:
                self.master_addr = new
                self.master = _conn(*new)
                self.changes.append((time.monotonic(), new))
                self.changed.notify_all()
        slaves = set()
        for s in map(_pairs, c.execute_command("SENTINEL", "SLAVES", MASTER)):
            if self._down(s) or "promoted" in s.get("flags", ""):
                continue
            if s.get("master-host") == "?":
                continue
            if (s["master-host"], int(s["master-port"])) != self.master_addr \
                    and (s["ip"], int(s["port"])) != self.master_addr:
                continue  # isUseSameMaster
            slaves.add((s["ip"], int(s["port"])))
        self.slaves = slaves
        listed = {(s["ip"], int(s["port"])) for s in map(_pairs, c.execute_command("SENTINEL", "SENTINELS", MASTER))
                  if not self._down(s)}
        listed.add(addr)
        for a in listed:
            self._register(a)
        for a in [a for a in self.sentinels if a not in listed]:
            self.sentinels.pop(a).close()

    def await_master_change(self, since, timeout):
        with self.lock:
            ok = self.changed.wait_for(lambda: any(t > since for t, _ in self.changes), timeout)
            return next((t, a) for t, a in self.changes if t > since) if ok else None

    def synced_eval(self, body, keys, args, retry):
        """CommandAsyncService.syncedEval: the script pipelined with WAIT connected_slaves."""
        attempts = 4 if retry else 0
        for attempt in range(attempts + 1):
            try:
                return self._synced_eval(body, keys, args)
            except RETRYABLE:
                if attempt == attempts:
                    raise
                d = min(2.0, 1.0 * 2 ** attempt)  # EqualJitterDelay(1 s, 2 s)
                time.sleep(d / 2 + random.random() * d / 2)

    def _synced_eval(self, body, keys, args):
        r = self.master
        if self.wait_supported is None:
            p = r.pipeline(transaction=False)
            p.execute_command("WAIT", 0, 0)
            p.execute_command("WAITAOF", 0, 0, 0)
            res = p.execute(raise_on_error=False)
            # Redis 7.0 has no WAITAOF (nor has deadbolt): Redisson drops what is unknown.
            self.wait_supported = [n for n, x in zip(("WAIT", "WAITAOF"), res)
                                   if not (isinstance(x, ResponseError) and "unknown command" in repr(x.args))]
            assert "WAIT" in self.wait_supported, res
        if self.available_slaves < 0:
            self.available_slaves = int(r.info("all").get("connected_slaves", 0))
        n = self.available_slaves
        sha = hashlib.sha1(body).hexdigest()
        for _ in range(2):
            p = r.pipeline(transaction=False)
            p.execute_command("EVALSHA", sha, len(keys), *keys, *args)
            if n > 0:
                p.execute_command("WAIT", n, SLAVES_SYNC_TIMEOUT)
            res = p.execute(raise_on_error=False)
            if isinstance(res[0], NoScriptError):
                r.script_load(body)
                continue
            if isinstance(res[0], Exception):
                raise res[0]
            synced = res[1] if n > 0 else 0
            if synced != n:
                self.available_slaves = -1
            if synced == 0 and n > 0:
                raise NoSyncedSlaves("None of slaves were synced")
            return res[0]
        raise AssertionError("NOSCRIPT after SCRIPT LOAD")

    def close(self):
        self.stop.set()
        self.poller.join(5)
        for c in self.sentinels.values():
            c.close()
        self.master.close()


class RLock:
    """RedissonLock on a SentinelManager: owner `<client uuid>:<threadId>`."""

    def __init__(self, mgr, name, client_id):
        self.m = mgr
        self.name = name
        self.owner = f"{client_id}:{threading.get_ident()}"
        self.channel = f"redisson_lock__channel:{{{name}}}"
        self.renewals = []
        self._stop_renewal = None

    def try_acquire(self, lease_ms=-1):
        try:
            ttl = self.m.synced_eval(LOCK, [self.name], [lease_ms if lease_ms > 0 else WATCHDOG_MS, self.owner],
                                     retry=False)
        except NoSyncedSlaves:
            # handleNoSync: undo the acquire, then the caller gets the exception.
            try:
                self.unlock()
            except Exception:
                pass
            raise
        if ttl is None and lease_ms <= 0 and self._stop_renewal is None:
            self._stop_renewal = threading.Event()
            threading.Thread(target=self._renew, args=(self._stop_renewal,), daemon=True).start()
        return ttl

    def _renew(self, stop):
        while not stop.wait(WATCHDOG_MS / 3000):
            try:
                res = self.m.synced_eval(RENEW, [self.name], [WATCHDOG_MS, self.owner], retry=True)
            except Exception as e:  # RenewalTask logs "Can't update locks expiration" and goes on
                self.renewals.append((time.monotonic(), repr(e)))
                continue
            self.renewals.append((time.monotonic(), res))
            if res != [1]:
                return

    def unlock(self):
        latch = f"redisson_unlock_latch:{{{self.name}}}:{uuid.uuid4().hex}"
        res = self.m.synced_eval(UNLOCK, [self.name, self.channel, latch],
                                 [0, WATCHDOG_MS, self.owner, "publish", 1000], retry=False)
        self.m.master.delete(latch)
        if res is None:
            raise RuntimeError("IllegalMonitorStateException: not locked by this owner")
        if res == 1 and self._stop_renewal is not None:
            self._stop_renewal.set()
        return res


class Waiter:
    """RedissonLock.tryLock(waitTime) of another client: subscribe, retry on each unlock message,
    otherwise wait the holder's TTL; the subscription follows the master (re-attached there)."""

    def __init__(self, mgr, name, wait_s):
        self.lock = RLock(mgr, name, uuid.uuid4())
        self.m = mgr
        self.wait_s = wait_s
        self.events = []
        self.subscribed = threading.Event()
        self.waiting = threading.Event()
        self.result = None
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _subscribe(self):
        ps = self.m.master.pubsub()
        ps.subscribe(self.lock.channel)
        while True:
            msg = ps.get_message(timeout=5)
            assert msg, "no subscribe confirmation"
            if msg["type"] == "subscribe":
                self.sub_time = time.monotonic()
                self.events.append((self.sub_time, "subscribed", self.m.master_addr))
                return ps

    def _run(self):
        deadline = time.monotonic() + self.wait_s
        ps = self._subscribe()
        self.subscribed.set()
        try:
            while True:
                ttl = self.lock.try_acquire(lease_ms=30000)
                if ttl is None:
                    self.events.append((time.monotonic(), "acquired", None))
                    self.result = True
                    return
                left = deadline - time.monotonic()
                if left <= 0:
                    self.result = False
                    return
                end = time.monotonic() + min(ttl / 1000, left)
                self.waiting.set()
                while True:
                    remaining = end - time.monotonic()
                    if remaining <= 0:
                        self.events.append((time.monotonic(), "ttl-timeout", ttl))
                        break
                    try:
                        msg = ps.get_message(timeout=remaining)
                    except (ConnectionError, TimeoutError):
                        # The master's connection is gone: re-attach once the manager switched.
                        self.events.append((time.monotonic(), "subscription-lost", None))
                        assert self.m.await_master_change(self.sub_time, FAILOVER_BUDGET)
                        ps = self._subscribe()
                        self.subscribed.set()
                        continue
                    if msg and msg["type"] == "message":
                        assert msg["data"] == b"0", msg
                        self.events.append((time.monotonic(), "message", None))
                        break
        except Exception as e:
            self.events.append((time.monotonic(), "error", repr(e)))
            self.result = e
        finally:
            ps.close()


@pytest.fixture
def cluster():
    c = Cluster()
    yield c
    c.stop()


def test_rlock_held_across_leader_kill_waiter_woken_by_unlock(cluster, name):
    old = cluster.leader()
    ports = cluster.client_ports()
    holder_mgr = SentinelManager(cluster.sentinels())
    waiter_mgr = SentinelManager(cluster.sentinels())
    assert len(holder_mgr.sentinels) == 3
    assert holder_mgr.master_addr == ("127.0.0.1", ports[old])

    holder = RLock(holder_mgr, name, uuid.uuid4())
    assert holder.try_acquire() is None  # watchdog mode
    for i in range(3):
        _eventually(lambda: cluster_hget(ports[i], name, holder.owner) == b"1", 5,
                    lambda: f"the lock never reached node {i + 1}")

    waiter = Waiter(waiter_mgr, name, wait_s=25)
    waiter.thread.start()
    # Killed while the waiter sits in its timed wait (its tryAcquire would otherwise meet the
    # kill, and a NoRetry error ends tryLock).
    assert waiter.waiting.wait(5), waiter.events
    _await_numsub(ports[old], holder.channel, 1)
    waiter.subscribed.clear()

    killed_at = cluster.kill(old)
    first_acquire, prober_errors, n = None, 0, 0
    while first_acquire is None:
        assert time.monotonic() - killed_at < FAILOVER_BUDGET, \
            f"no tryLock succeeded {FAILOVER_BUDGET}s after the kill; manager errors {holder_mgr.errors[-3:]}"
        n += 1
        try:
            if RLock(holder_mgr, f"{name}:probe:{n}", uuid.uuid4()).try_acquire(lease_ms=10000) is None:
                first_acquire = time.monotonic() - killed_at
        except (*RETRYABLE, NoSyncedSlaves):
            prober_errors += 1  # tryLock is NoRetry: the application tries again
            time.sleep(0.01)
    change = holder_mgr.await_master_change(killed_at, FAILOVER_BUDGET)
    assert change, "the manager never saw a new master"
    switched = change[0] - killed_at
    new_addr = change[1]
    assert new_addr != ("127.0.0.1", ports[old]) and new_addr[1] in ports
    new = cluster.index_of(new_addr[1])
    assert cluster.leader(not_=old) == new
    # SENTINEL SLAVES names the new master as every live slave's master (else isUseSameMaster
    # would skip them) and the dead node is not among the usable slaves for long.
    _eventually(lambda: holder_mgr.slaves == {("127.0.0.1", p) for i, p in enumerate(ports) if i not in (old, new)},
                5, lambda: f"slaves {holder_mgr.slaves}")

    # The held lock is still its owner's on the new leader; another client can't take it.
    assert cluster_hget(ports[new], name, holder.owner) == b"1"
    rival = RLock(waiter_mgr, name, uuid.uuid4())
    ttl = _retry(lambda: rival.try_acquire(lease_ms=1000))
    assert isinstance(ttl, int) and ttl > 0, ttl

    # The waiter's subscription was re-attached on the new master before the unlock publishes.
    assert waiter.subscribed.wait(FAILOVER_BUDGET), waiter.events
    _await_numsub(ports[new], holder.channel, 1)
    unlocked_at = time.monotonic()
    assert _retry(holder.unlock) == 1
    waiter.thread.join(10)
    assert waiter.result is True, waiter.events
    kinds = [k for _, k, _ in waiter.events]
    assert "subscription-lost" in kinds, kinds  # it really waited across the kill
    # Woken by the unlock's PUBLISH: the last wake before acquiring is a message after the unlock.
    wakes = [(t, k) for t, k, _ in waiter.events if k in ("message", "ttl-timeout")]
    assert wakes and wakes[-1][1] == "message" and wakes[-1][0] >= unlocked_at, waiter.events
    woken = waiter.events[-1][0] - unlocked_at
    renewals_after = [r for t, r in holder.renewals if t > killed_at]
    assert all(r == [1] for _, r in holder.renewals), holder.renewals
    assert waiter.lock.unlock() == 1

    FIGURES.append(
        f"failover: Redisson sentinel flow (emulated, scanInterval {SCAN_INTERVAL * 1000:.0f} ms): "
        f"kill -> master switch {switched * 1000:.0f} ms, -> first tryLock {first_acquire * 1000:.0f} ms "
        f"({prober_errors} tryLock errors retried by the app); unlock -> waiter acquired {woken * 1000:.0f} ms; "
        f"watchdog renewals after the kill {len(renewals_after)}")
    holder_mgr.close()
    waiter_mgr.close()


def cluster_hget(port, key, field):
    c = _conn("127.0.0.1", port)
    try:
        return c.hget(key, field)
    finally:
        c.close()


def _await_numsub(port, channel, n, timeout=5):
    c = _conn("127.0.0.1", port)
    try:
        _eventually(lambda: dict(c.pubsub_numsub(channel)).get(channel.encode(), 0) >= n, timeout,
                    lambda: f"{channel} never had {n} subscriber(s) on {port}")
    finally:
        c.close()


def _eventually(cond, timeout, what):
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, what()
        time.sleep(0.01)


def _retry(f, timeout=FAILOVER_BUDGET):
    """The application's retry around a NoRetry call that may land in the failover window."""
    end = time.monotonic() + timeout
    while True:
        try:
            return f()
        except (*RETRYABLE, NoSyncedSlaves):
            if time.monotonic() > end:
                raise
            time.sleep(0.01)
