"""Redisson's lock protocol, driven the way RedissonLock / RedissonReadWriteLock do it.

No JVM client can be installed here, so this drives Redisson's byte-exact scripts (lua/redisson/,
SHA1-checked against lua/MANIFEST.tsv) and its channel protocol: tryLock with wait and lease times,
the watchdog renewing every lockWatchdogTimeout/3, reentrancy, unlock publishing "0" on
redisson_lock__channel:{name}, waiters subscribed to that channel woken by the message, and the
read/write lock (readers share, a writer waits for the "0" on redisson_rwlock:{name}).
"""

import hashlib
import os
import threading
import time
import uuid

import pytest
import redis

from conftest import REPO

LUA = os.path.join(REPO, "lua")


def _scripts():
    sha = {}
    with open(os.path.join(LUA, "MANIFEST.tsv"), encoding="utf-8") as f:
        for line in f:
            cols = line.rstrip("\n").split("\t")
            if len(cols) >= 5 and cols[0].startswith("redisson/"):
                sha[cols[0]] = cols[4]
    out = {}
    for name in ["rlock_trylockinnerasync", "rlock_unlockinnerasync", "rlock_forceunlock",
                 "watchdog_locktask", "readlock_trylock", "readlock_unlock",
                 "writelock_trylock", "writelock_unlock"]:
        path = f"redisson/{name}.lua"
        with open(os.path.join(LUA, path), "rb") as f:
            body = f.read()
        assert hashlib.sha1(body).hexdigest() == sha[path], path
        out[name] = body
    return out


SCRIPTS = _scripts()
PROTOCOLS = [pytest.param(3, id="resp3"), pytest.param(2, id="resp2")]


@pytest.fixture(params=PROTOCOLS)
def new_client(server, request):
    made = []

    def new():
        c = redis.Redis(port=server.port, protocol=None if request.param == 3 else 2)
        made.append(c)
        return c

    yield new
    for c in made:
        c.close()


class RLock:
    """RedissonLock's client side: owner `<uuid>:<threadId>`, EVALSHA of the exact scripts."""

    def __init__(self, client, name, watchdog_timeout_ms=30000):
        self.r = client
        self.name = name
        self.owner = f"{uuid.uuid4()}:{threading.get_ident()}"
        self.channel = f"redisson_lock__channel:{{{name}}}"
        self.watchdog_timeout_ms = watchdog_timeout_ms
        self.s = {k: client.register_script(v) for k, v in SCRIPTS.items()}
        self._renewal = None

    def _try_acquire(self, lease_ms):
        return self.s["rlock_trylockinnerasync"](keys=[self.name], args=[lease_ms, self.owner])

    def try_lock(self, wait_s, lease_ms=-1):
        internal = lease_ms if lease_ms > 0 else self.watchdog_timeout_ms
        deadline = time.monotonic() + wait_s
        ttl = self._try_acquire(internal)
        if ttl is None:
            return self._acquired(lease_ms)
        if wait_s <= 0:
            return False
        ps = self.r.pubsub()
        ps.subscribe(self.channel)
        _await(ps, "subscribe", self.channel)
        try:
            while True:
                ttl = self._try_acquire(internal)
                if ttl is None:
                    return self._acquired(lease_ms)
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                # Wait for the unlock message, at most the holder's TTL (no message on expiry).
                wait = min(ttl / 1000, left) if ttl >= 0 else left
                end = time.monotonic() + wait
                while time.monotonic() < end:
                    m = ps.get_message(timeout=max(0.0, end - time.monotonic()))
                    if m and m["type"] == "message":
                        assert m["data"] == b"0", m
                        break
        finally:
            ps.unsubscribe(self.channel)
            ps.close()

    def _acquired(self, lease_ms):
        if lease_ms <= 0 and self._renewal is None:
            self._renewal = threading.Event()
            threading.Thread(target=self._watchdog, args=(self._renewal,), daemon=True).start()
        return True

    def _watchdog(self, stop):
        # Redisson's LockTask: renew every lockWatchdogTimeout/3 while the owner still holds it.
        while not stop.wait(self.watchdog_timeout_ms / 3000):
            res = self.s["watchdog_locktask"](keys=[self.name], args=[self.watchdog_timeout_ms, self.owner])
            if res != [1]:
                return

    def unlock(self):
        latch = f"redisson_unlock_latch:{{{self.name}}}:{uuid.uuid4().hex}"
        res = self.s["rlock_unlockinnerasync"](
            keys=[self.name, self.channel, latch],
            args=[0, self.watchdog_timeout_ms, self.owner, "publish", 1000])
        self.r.delete(latch)
        if res is None:
            raise RuntimeError("IllegalMonitorStateException: not locked by this owner")
        if res == 1 and self._renewal is not None:
            self._renewal.set()
            self._renewal = None
        return res


def _await(ps, kind, channel, timeout=5):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        m = ps.get_message(timeout=0.5)
        if m and m["type"] == kind and m["channel"] == channel.encode():
            return m
    raise AssertionError(f"no {kind} on {channel}")


def _await_subscribers(c, channel, n, timeout=5):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if dict(c.pubsub_numsub(channel)).get(channel.encode(), 0) >= n:
            return
        time.sleep(0.005)
    raise AssertionError(f"{channel} never had {n} subscriber(s)")


def test_reentrancy_and_unlock_message(new_client, name):
    c = new_client()
    lock = RLock(c, name)
    monitor = new_client().pubsub()
    monitor.subscribe(lock.channel)
    _await(monitor, "subscribe", lock.channel)
    assert lock.try_lock(0, lease_ms=10000)
    assert lock.try_lock(0, lease_ms=10000)  # reentrant: same owner
    assert c.hget(name, lock.owner) == b"2"
    assert lock.unlock() == 0  # still held once
    assert c.hget(name, lock.owner) == b"1"
    assert 0 < c.pttl(name) <= 30000
    assert lock.unlock() == 1
    assert c.exists(name) == 0
    msg = _await(monitor, "message", lock.channel)
    assert msg["data"] == b"0"
    with pytest.raises(RuntimeError, match="IllegalMonitorState"):
        lock.unlock()
    monitor.close()


def test_waiter_is_woken_by_the_unlock_message(new_client, name):
    holder = RLock(new_client(), name)
    assert holder.try_lock(0, lease_ms=30000)
    waiter = RLock(new_client(), name)
    got = {}

    def wait():
        t0 = time.monotonic()
        got["ok"] = waiter.try_lock(10, lease_ms=30000)
        got["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=wait)
    t.start()
    _await_subscribers(new_client(), holder.channel, 1)
    # Let the waiter finish its post-SUBSCRIBE tryAcquire so the wake-up normally comes from the
    # message (either order must succeed; nothing on the server shows which wait it is in).
    time.sleep(0.05)
    holder.unlock()
    t.join(15)
    # Only the PUBLISH from the unlock script can wake it this early: the TTL was 30 s.
    assert got["ok"] is True and got["elapsed"] < 3, got
    assert waiter.unlock() == 1


def test_wait_time_runs_out(new_client, name):
    holder = RLock(new_client(), name)
    assert holder.try_lock(0, lease_ms=30000)
    rival = RLock(new_client(), name)
    t0 = time.monotonic()
    assert rival.try_lock(0.3, lease_ms=30000) is False
    assert 0.25 <= time.monotonic() - t0 < 3
    assert holder.unlock() == 1


def test_lease_expiry_lets_waiter_in_without_message(new_client, name):
    holder = RLock(new_client(), name)
    assert holder.try_lock(0, lease_ms=300)
    waiter = RLock(new_client(), name)
    t0 = time.monotonic()
    assert waiter.try_lock(5, lease_ms=5000)  # waits the returned PTTL, then retries
    assert 0.2 <= time.monotonic() - t0 < 3
    with pytest.raises(RuntimeError):
        holder.unlock()
    assert waiter.unlock() == 1


def test_watchdog_renews_until_unlock(new_client, name):
    c = new_client()
    lock = RLock(c, name, watchdog_timeout_ms=900)  # renewed every 300 ms
    assert lock.try_lock(0)  # no lease: the watchdog keeps it
    time.sleep(2.0)
    assert c.hget(name, lock.owner) == b"1"
    assert 0 < c.pttl(name) <= 900
    assert not RLock(new_client(), name).try_lock(0, lease_ms=1000)
    # The watchdog script refuses a lock this owner doesn't hold.
    other = c.register_script(SCRIPTS["watchdog_locktask"])
    assert other(keys=[name, name + ":none"], args=[900, "someone-else", lock.owner]) == [0, 0]
    assert lock.unlock() == 1
    assert c.exists(name) == 0


def test_force_unlock_publishes(new_client, name):
    c = new_client()
    lock = RLock(c, name)
    assert lock.try_lock(0, lease_ms=10000)
    monitor = new_client().pubsub()
    monitor.subscribe(lock.channel)
    _await(monitor, "subscribe", lock.channel)
    force = c.register_script(SCRIPTS["rlock_forceunlock"])
    assert force(keys=[name, lock.channel], args=[0, "publish"]) == 1
    assert _await(monitor, "message", lock.channel)["data"] == b"0"
    assert force(keys=[name, lock.channel], args=[0, "publish"]) == 0
    monitor.close()


def test_read_write_lock(new_client, name):
    c = new_client()
    s = {k: c.register_script(v) for k, v in SCRIPTS.items()}
    channel = f"redisson_rwlock:{{{name}}}"
    readers = [f"{uuid.uuid4()}:{i}" for i in range(2)]
    writer = f"{uuid.uuid4()}:9"

    def read_lock(owner, lease=10000):
        return s["readlock_trylock"](keys=[name, f"{{{name}}}:{owner}:rwlock_timeout"],
                                     args=[lease, owner, owner + ":write"])

    def read_unlock(owner):
        latch = f"redisson_unlock_latch:{{{name}}}:{uuid.uuid4().hex}"
        res = s["readlock_unlock"](keys=[name, channel, f"{{{name}}}:{owner}:rwlock_timeout", f"{{{name}}}", latch],
                                   args=[0, owner, "publish", 1000])
        c.delete(latch)
        return res

    def write_lock(owner, lease=10000):
        return s["writelock_trylock"](keys=[name], args=[lease, owner + ":write"])

    def write_unlock(owner):
        latch = f"redisson_unlock_latch:{{{name}}}:{uuid.uuid4().hex}"
        res = s["writelock_unlock"](keys=[name, channel, latch], args=[1, 10000, owner + ":write", "publish", 1000])
        c.delete(latch)
        return res

    monitor = new_client().pubsub()
    monitor.subscribe(channel)
    _await(monitor, "subscribe", channel)

    assert read_lock(readers[0]) is None
    assert read_lock(readers[1]) is None  # readers share
    assert read_lock(readers[0]) is None  # and re-enter
    assert c.hget(name, "mode") == b"read"
    assert c.hget(name, readers[0]) == b"2"
    pttl = write_lock(writer)
    assert isinstance(pttl, int) and 0 < pttl <= 10000  # the writer must wait
    assert read_unlock(readers[0]) == 0
    assert read_unlock(readers[0]) == 0  # reader 1 still holds it
    assert read_unlock(readers[1]) == 1
    assert _await(monitor, "message", channel)["data"] == b"0"
    assert c.exists(name) == 0

    assert write_lock(writer) is None
    assert c.hget(name, "mode") == b"write"
    assert isinstance(read_lock(readers[0]), int)  # others can't read
    assert read_lock(writer) is None  # the writer itself may also read (downgrade)
    assert write_unlock(readers[1]) is None  # not the owner
    assert write_unlock(writer) == 1
    assert c.hget(name, "mode") == b"read"  # the writer's read lock remains
    assert read_unlock(writer) == 1
    assert c.exists(name) == 0
    monitor.close()
