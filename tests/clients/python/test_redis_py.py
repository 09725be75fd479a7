"""redis-py 8 (RESP3 by default, and protocol=2): redis.lock.Lock sync and asyncio, pipelines."""

import asyncio
import threading
import time

import pytest
import redis
import redis.asyncio
from redis.exceptions import LockError, LockNotOwnedError, WatchError

PROTOCOLS = [pytest.param(3, id="resp3"), pytest.param(2, id="resp2")]


@pytest.fixture(params=PROTOCOLS)
def proto(request):
    return request.param


@pytest.fixture
def r(server, proto):
    # protocol=None is redis-py 8's default: it must be RESP3 (HELLO 3 on every connection).
    c = redis.Redis(port=server.port, protocol=None if proto == 3 else 2)
    yield c
    c.close()


def test_default_handshake_is_resp3_hello(server):
    c = redis.Redis(port=server.port)
    assert c.ping() is True
    conn = c.connection_pool.get_connection()
    try:
        assert conn.protocol in (3, "3")
        hello = conn.handshake_metadata
        assert hello[b"proto"] == 3 if b"proto" in hello else hello["proto"] == 3
    finally:
        c.connection_pool.release(conn)
    c.close()


def test_acquire_release_and_ownership(r, name):
    lock = r.lock(name, timeout=5)
    assert lock.acquire(blocking=False)
    assert lock.locked() and lock.owned()
    assert 4000 < r.pttl(name) <= 5000
    other = r.lock(name, timeout=5)
    assert not other.acquire(blocking=False)
    assert not other.owned()
    lock.release()
    assert not lock.locked()
    assert r.exists(name) == 0


def test_lock_without_timeout_has_no_ttl(r, name):
    lock = r.lock(name)
    assert lock.acquire(blocking=False)
    assert r.ttl(name) == -1
    lock.release()


def test_blocking_acquire_times_out_then_succeeds_after_release(r, name):
    holder = r.lock(name, timeout=10, thread_local=False)
    assert holder.acquire()
    waiter = r.lock(name, timeout=10, sleep=0.02)
    t0 = time.monotonic()
    assert waiter.acquire(blocking=True, blocking_timeout=0.3) is False
    assert 0.25 <= time.monotonic() - t0 < 2.0

    timer = threading.Timer(0.2, holder.release)
    timer.start()
    t0 = time.monotonic()
    assert waiter.acquire(blocking=True, blocking_timeout=5) is True
    assert time.monotonic() - t0 < 2.0
    timer.join()
    assert waiter.owned()
    waiter.release()


def test_extend_adds_or_replaces_ttl(r, name):
    lock = r.lock(name, timeout=2)
    assert lock.acquire(blocking=False)
    assert lock.extend(3)
    assert 4000 < r.pttl(name) <= 5000
    assert lock.extend(1, replace_ttl=True)
    assert 0 < r.pttl(name) <= 1000
    lock.release()


def test_reacquire_resets_ttl(r, name):
    lock = r.lock(name, timeout=5)
    assert lock.acquire(blocking=False)
    r.pexpire(name, 100)
    assert lock.reacquire()
    assert 4000 < r.pttl(name) <= 5000
    lock.release()


def test_noscript_path_after_script_flush(r, name):
    lock = r.lock(name, timeout=5)
    assert lock.acquire(blocking=False)
    r.script_flush()  # EVALSHA → NOSCRIPT → SCRIPT LOAD → EVALSHA
    assert lock.extend(1)
    r.script_flush()
    lock.release()
    assert r.exists(name) == 0


def test_release_of_lock_owned_by_another(r, name):
    mine = r.lock(name, timeout=5)
    assert mine.acquire(blocking=False)
    # Same name, another token: the release script must refuse it.
    thief = r.lock(name, timeout=5)
    thief.local.token = b"not-the-owner"
    with pytest.raises(LockNotOwnedError):
        thief.extend(1)
    with pytest.raises(LockNotOwnedError):
        thief.release()  # release() forgets the token before asking the server
    thief.local.token = b"not-the-owner"
    with pytest.raises(LockNotOwnedError):
        thief.reacquire()
    assert mine.owned()
    mine.release()
    with pytest.raises(LockError):
        mine.release()  # no token any more


def test_expiry_while_held(r, name):
    first = r.lock(name, timeout=0.2)
    assert first.acquire(blocking=False)
    time.sleep(0.35)
    assert not first.locked()
    second = r.lock(name, timeout=5)
    assert second.acquire(blocking=False)
    with pytest.raises(LockNotOwnedError):
        first.extend(1)
    with pytest.raises(LockNotOwnedError):
        first.release()
    assert second.owned()
    second.release()


def test_context_manager(r, name):
    with r.lock(name, timeout=5, blocking_timeout=1) as lock:
        assert lock.owned()
        assert r.get(name) == lock.local.token
    assert r.exists(name) == 0


def test_binary_token(r, name):
    # A token with NUL, CR, LF and high bytes must round-trip through SET NX and the scripts.
    lock = r.lock(name, timeout=5)
    token = b"\x00\r\n\xff\xfe" + bytes(range(1, 30))
    assert lock.acquire(blocking=False, token=token)
    assert r.get(name) == token
    assert lock.extend(1)
    lock.release()
    assert r.exists(name) == 0


def test_pipeline_multi_exec(r, name):
    with r.pipeline(transaction=True) as p:
        p.set(name, 10).incr(name).incrby(name, 5).get(name).pexpire(name, 5000)
        assert p.execute() == [True, 11, 16, b"16", True]
    assert 0 < r.pttl(name) <= 5000


def test_pipeline_error_inside_transaction(r, name):
    r.set(name, "not-a-number")
    with r.pipeline(transaction=True) as p:
        p.incr(name).set(name + ":2", "x")
        res = p.execute(raise_on_error=False)
    assert isinstance(res[0], redis.ResponseError)
    assert res[1] is True
    assert r.get(name + ":2") == b"x"


def test_watch_aborts_on_concurrent_write(r, server, proto, name):
    other = redis.Redis(port=server.port, protocol=proto)
    r.set(name, 1)
    with r.pipeline(transaction=True) as p:
        p.watch(name)
        value = int(p.get(name))
        other.set(name, 100)
        p.multi()
        p.set(name, value + 1)
        with pytest.raises(WatchError):
            p.execute()
    assert r.get(name) == b"100"

    def bump(p):
        v = int(p.get(name))
        p.multi()
        p.set(name, v + 1)

    r.transaction(bump, name)
    assert r.get(name) == b"101"
    other.close()


def test_non_transactional_pipeline(r, name):
    with r.pipeline(transaction=False) as p:
        for i in range(50):
            p.set(f"{name}:{i}", i, px=5000, nx=True)
        p.mget([f"{name}:{i}" for i in range(50)])
        res = p.execute()
    assert res[:50] == [True] * 50
    assert res[50] == [str(i).encode() for i in range(50)]


# ---- asyncio ----------------------------------------------------------------------------------


def _aio(server, proto):
    return redis.asyncio.Redis(port=server.port, protocol=None if proto == 3 else 2)


def test_asyncio_lock(server, proto, name):
    async def main():
        r = _aio(server, proto)
        other = _aio(server, proto)
        try:
            lock = r.lock(name, timeout=5)
            assert await lock.acquire(blocking=False)
            assert await lock.owned()
            waiter = other.lock(name, timeout=5, sleep=0.02)
            t0 = time.monotonic()
            assert await waiter.acquire(blocking_timeout=0.3) is False
            assert time.monotonic() - t0 >= 0.25

            async def release_later():
                await asyncio.sleep(0.2)
                await lock.release()

            task = asyncio.create_task(release_later())
            assert await waiter.acquire(blocking_timeout=5) is True
            await task
            assert await waiter.extend(2)
            assert 5000 < await r.pttl(name) <= 7000
            assert await waiter.reacquire()
            assert 4000 < await r.pttl(name) <= 5000

            thief = r.lock(name, timeout=5)
            thief.local.token = b"someone-else"
            with pytest.raises(LockNotOwnedError):
                await thief.release()
            await r.script_flush()
            await waiter.release()
            assert await r.exists(name) == 0

            short = r.lock(name, timeout=0.2)
            assert await short.acquire(blocking=False)
            await asyncio.sleep(0.35)
            assert await other.lock(name, timeout=5).acquire(blocking=False)
            with pytest.raises(LockNotOwnedError):
                await short.release()

            async with r.pipeline(transaction=True) as p:
                p.set(name + ":c", 1).incr(name + ":c").get(name + ":c")
                assert await p.execute() == [True, 2, b"2"]
        finally:
            await r.aclose()
            await other.aclose()

    asyncio.run(main())
