"""python-redis-lock 4.0.1: SET NX EX, BLPOP wake-ups pushed from Lua, auto-renewal, reset, expiry."""

import threading
import time

import pytest
import redis
import redis_lock

PROTOCOLS = [pytest.param(3, id="resp3"), pytest.param(2, id="resp2")]


@pytest.fixture(params=PROTOCOLS)
def conn(server, request):
    proto = request.param
    made = []

    def new():
        c = redis.Redis(port=server.port, protocol=None if proto == 3 else 2)
        made.append(c)
        return c

    yield new
    for c in made:
        c.close()


def wait_blocked(c, n=1, timeout=5.0):
    """Until n clients are blocked (the waiter sits in BLPOP), as INFO clients reports it."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if c.info("clients")["blocked_clients"] >= n:
            return
        time.sleep(0.01)
    raise AssertionError("the waiter never blocked in BLPOP")


def test_acquire_release(conn, name):
    c = conn()
    lock = redis_lock.Lock(c, name, expire=5)
    assert lock.acquire(blocking=False)
    assert lock.locked()
    assert c.get("lock:" + name) == lock.id.encode()
    assert 0 < c.ttl("lock:" + name) <= 5
    assert not redis_lock.Lock(conn(), name, expire=5).acquire(blocking=False)
    assert lock.get_owner_id() == lock.id
    lock.release()
    assert not lock.locked()
    with pytest.raises(redis_lock.NotAcquired):
        lock.release()


def test_blpop_signal_wakes_waiter(conn, name):
    """The waiter sits in BLPOP lock-signal:<name> for up to `timeout` seconds: only the LPUSH done
    inside the unlock script can wake it well before that."""
    holder = redis_lock.Lock(conn(), name, expire=30)
    assert holder.acquire()
    waiter = redis_lock.Lock(conn(), name, expire=30)
    got = {}

    def wait():
        t0 = time.monotonic()
        got["ok"] = waiter.acquire(blocking=True, timeout=20)
        got["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=wait)
    t.start()
    wait_blocked(conn())
    assert t.is_alive()
    holder.release()
    t.join(10)
    assert got["ok"] is True
    assert got["elapsed"] < 3, got
    waiter.release()


def test_acquire_timeout(conn, name):
    holder = redis_lock.Lock(conn(), name, expire=30)
    assert holder.acquire()
    waiter = redis_lock.Lock(conn(), name, expire=30)
    t0 = time.monotonic()
    assert waiter.acquire(timeout=1) is False
    assert 0.9 <= time.monotonic() - t0 < 3
    holder.release()


def test_auto_renewal_keeps_lock_past_expire(conn, name):
    c = conn()
    lock = redis_lock.Lock(c, name, expire=2, auto_renewal=True)  # renewed every 1.33 s
    assert lock.acquire()
    time.sleep(2.6)
    assert lock.locked()
    assert c.get("lock:" + name) == lock.id.encode()
    assert not redis_lock.Lock(conn(), name, expire=2).acquire(blocking=False)
    lock.release()
    assert not lock.locked()


def test_extend(conn, name):
    c = conn()
    lock = redis_lock.Lock(c, name, expire=2)
    assert lock.acquire()
    lock.extend(10)
    assert 8 < c.ttl("lock:" + name) <= 10
    no_ttl = redis_lock.Lock(c, name + "x")
    assert no_ttl.acquire()
    assert c.ttl("lock:" + name + "x") == -1
    with pytest.raises(redis_lock.NotExpirable):
        no_ttl.extend(5)
    no_ttl.release()
    lock.release()


def test_expire_lets_another_in(conn, name):
    first = redis_lock.Lock(conn(), name, expire=1)
    assert first.acquire()
    second = redis_lock.Lock(conn(), name, expire=5)
    assert not second.acquire(blocking=False)
    time.sleep(1.2)  # expiry sends no signal: nothing to await but the clock
    assert second.acquire(blocking=False)
    with pytest.raises(redis_lock.NotAcquired):
        first.release()
    with pytest.raises(redis_lock.NotAcquired):
        first.extend(5)
    second.release()


def test_reset_wakes_waiter(conn, name):
    c = conn()
    holder = redis_lock.Lock(c, name, expire=30)
    assert holder.acquire()
    waiter = redis_lock.Lock(conn(), name, expire=30)
    got = {}

    def wait():
        t0 = time.monotonic()
        got["ok"] = waiter.acquire(timeout=20)
        got["elapsed"] = time.monotonic() - t0

    t = threading.Thread(target=wait)
    t.start()
    wait_blocked(c)
    redis_lock.Lock(c, name).reset()
    t.join(10)
    assert got["ok"] is True and got["elapsed"] < 3, got
    waiter.release()


def test_reset_all(conn, name):
    c = conn()
    locks = [redis_lock.Lock(c, f"{name}:{i}", expire=30) for i in range(3)]
    for lock in locks:
        assert lock.acquire()
    redis_lock.reset_all(c)
    assert c.keys("lock:" + name + "*") == []
    for i in range(3):
        assert redis_lock.Lock(c, f"{name}:{i}", expire=30).acquire(blocking=False)


def test_noscript_after_script_flush(conn, name):
    c = conn()
    lock = redis_lock.Lock(c, name, expire=5)
    assert lock.acquire()
    c.script_flush()
    lock.extend(5)
    c.script_flush()
    lock.release()
    assert not lock.locked()
