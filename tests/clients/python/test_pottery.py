"""pottery 3.0.1 Redlock and AIORedlock across three independent servers, one killed mid-test."""

import asyncio
import logging

import pytest
import redis
import redis.asyncio
from pottery import AIORedlock, Redlock, ReleaseUnlockedLock
from redis.backoff import NoBackoff
from redis.retry import Retry


def _masters(servers, aio=False):
    # No client-side retries: a dead master must count as one failed vote at once.
    kw = dict(retry=Retry(NoBackoff(), 0), socket_connect_timeout=0.5, socket_timeout=2)
    if aio:
        return [redis.asyncio.Redis(port=s.port, **kw) for s in servers]
    return [redis.Redis(port=s.port, **kw) for s in servers]


@pytest.fixture(autouse=True)
def _quiet_pottery(caplog):
    # pottery logs a traceback per unreachable master; that is the scenario under test.
    caplog.set_level(logging.CRITICAL, logger="pottery")


def test_redlock_acquire_extend_release(three, name):
    masters = _masters(three)
    lock = Redlock(key=name, masters=masters, auto_release_time=2)
    assert lock.acquire(blocking=False)
    ttl = lock.locked()
    assert 0 < ttl <= 2000
    for m in masters:
        assert m.get("redlock:" + name) is not None
    rival = Redlock(key=name, masters=masters, auto_release_time=2)
    assert not rival.acquire(blocking=False)
    lock.extend()
    assert lock.locked() > 0
    for m in masters:
        m.script_flush()  # the next calls go EVALSHA → NOSCRIPT → SCRIPT LOAD → EVALSHA
    lock.release()
    assert lock.locked() == 0
    for m in masters:
        assert m.exists("redlock:" + name) == 0
    with pytest.raises(ReleaseUnlockedLock):
        lock.release()
    assert rival.acquire(blocking=False)
    rival.release()


def test_redlock_quorum_survives_killed_master(three, name):
    masters = _masters(three)
    lock = Redlock(key=name, masters=masters, auto_release_time=5)
    assert lock.acquire(blocking=False)
    three[2].kill()  # one of three masters crashes while the lock is held
    assert lock.locked() > 0  # 2 of 3 still vouch for it
    lock.extend()
    rival = Redlock(key=name, masters=masters, auto_release_time=5)
    assert not rival.acquire(blocking=False)
    lock.release()
    # A fresh lock still reaches quorum (2 of 3) with the dead master refusing connections.
    assert rival.acquire(blocking=False)
    assert rival.locked() > 0
    rival.release()
    three[1].kill()  # now only 1 of 3: no quorum, acquisition must fail
    assert not Redlock(key=name + "2", masters=masters).acquire(blocking=False)


def test_redlock_expires(three, name):
    masters = _masters(three)
    lock = Redlock(key=name, masters=masters, auto_release_time=0.3)
    assert lock.acquire(blocking=False)
    rival = Redlock(key=name, masters=masters, auto_release_time=2)
    assert rival.acquire(blocking=True, timeout=3)
    assert lock.locked() == 0
    with pytest.raises(ReleaseUnlockedLock):
        lock.release()
    rival.release()


def test_aioredlock(three, name):
    async def main():
        masters = _masters(three, aio=True)
        try:
            lock = AIORedlock(key=name, masters=masters, auto_release_time=2)
            assert await lock.acquire(blocking=False)
            assert 0 < await lock.locked() <= 2000
            rival = AIORedlock(key=name, masters=masters, auto_release_time=2)
            assert not await rival.acquire(blocking=False)
            await lock.extend()
            three[0].kill()
            assert await lock.locked() > 0
            await lock.release()
            assert await lock.locked() == 0
            async with AIORedlock(key=name, masters=masters, auto_release_time=2) as held:
                assert await held.locked() > 0
        finally:
            for m in masters:
                await m.aclose()

    asyncio.run(main())
