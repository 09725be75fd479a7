"""Contention safety test: W workers in P processes contend on L locks.

Two lock protocols, byte-for-byte what clients send:
  * redisson: Redisson's RLock scripts (clients.md §1.6; FencedLock §1.13 for fencing), waiters
    SUBSCRIBE to redisson_lock__channel:{name} and are woken by the PUBLISH inside the unlock script.
  * setnx:    SET key token NX PX lease, compare-and-delete / compare-and-pexpire scripts, polling.

Two modes:
  * safe:  leases (5 s) far outlast the work. Inside the critical section a non-atomic
           GET + SET on a counter; lost updates (increments done - counter) must be 0.
  * short: leases (30 ms) shorter than much of the work (0..60 ms). Acquisition returns a fencing
           token (INCR inside the acquire script). Every release/extend by a former holder (one
           whose token is older than one already issued) must be refused; the protected counter
           accepts a read or write only with a token >= the highest it has seen, so it must end
           equal to the number of accepted writes (0 stale writes accepted, 0 lost updates). An
           unfenced counter updated the same way shows the hazard fencing removes (reported only).

Run alone: python contention.py --port 6379 [--protocol redisson|setnx] [--mode safe|short]
"""

import argparse
import hashlib
import json
import multiprocessing
import os
import random
import threading
import time
import uuid

import redis

# Redisson RLock tryLockInnerAsync / unlockInnerAsync (3.45+), byte-exact.
R_TRYLOCK = (
    "if ((redis.call('exists', KEYS[1]) == 0) or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "redis.call('hincrby', KEYS[1], ARGV[2], 1); redis.call('pexpire', KEYS[1], ARGV[1]); return nil; end; "
    "return redis.call('pttl', KEYS[1]);"
)
R_UNLOCK = (
    "local val = redis.call('get', KEYS[3]); if val ~= false then return tonumber(val);end; "
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil;end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); if (counter > 0) then "
    "redis.call('pexpire', KEYS[1], ARGV[2]); redis.call('set', KEYS[3], 0, 'px', ARGV[5]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); "
    "redis.call('set', KEYS[3], 1, 'px', ARGV[5]); return 1; end; "
)
# Redisson FencedLock tryLockAndGetToken: {-1, token} when acquired, {pttl, -1} otherwise.
R_FENCED_TRYLOCK = (
    "if (redis.call('exists', KEYS[1]) == 0 or (redis.call('hexists', KEYS[1], ARGV[2]) == 1)) then "
    "local token = redis.call('incr', KEYS[2]);redis.call('hincrby', KEYS[1], ARGV[2], 1); "
    "redis.call('pexpire', KEYS[1], ARGV[1]); return {-1, token}; end; "
    "return {redis.call('pttl', KEYS[1]), -1};"
)
# Redisson watchdog (LockTask, 3.44+): renew every listed lock still owned.
R_WATCHDOG = (
    "local result = {} for i = 1, #KEYS, 1 do if (redis.call('hexists', KEYS[i], ARGV[i + 1]) == 1) then "
    "redis.call('pexpire', KEYS[i], ARGV[1]); table.insert(result, 1); else table.insert(result, 0); end; end; "
    "return result;"
)
# The SHA1s Redisson sends in EVALSHA (clients.md §11, lua/MANIFEST.tsv): proof of byte-exactness.
for _script, _sha in [(R_TRYLOCK, "149c5a8bf18676fd99e9e6e24923bd64d9b62f94"),
                      (R_UNLOCK, "6866459238a13a701d42f4971f12d9f3a50e2442"),
                      (R_FENCED_TRYLOCK, "49babb5a1e6a0c5f188c2ae62b93b51cdfd63e45"),
                      (R_WATCHDOG, "6a3d31570dc6f4b0bd32bcdc8e75667747c6f635")]:
    assert hashlib.sha1(_script.encode()).hexdigest() == _sha, _sha

# SET NX PX protocol (redlock-style single instance).
S_ACQUIRE_FENCED = """
if redis.call('set', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('incr', KEYS[2])
end
return 0
"""
S_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('del', KEYS[1])
end
return 0
"""
S_EXTEND = """
if redis.call('get', KEYS[1]) == ARGV[1] then
  return redis.call('pexpire', KEYS[1], ARGV[2])
end
return 0
"""
# The protected resource: it remembers the highest token it has seen and refuses older ones.
FENCED_READ = """
local seen = tonumber(redis.call('get', KEYS[1]) or '0')
if tonumber(ARGV[1]) < seen then return false end
redis.call('set', KEYS[1], ARGV[1])
return redis.call('get', KEYS[2]) or '0'
"""
FENCED_WRITE = """
local seen = tonumber(redis.call('get', KEYS[1]) or '0')
if tonumber(ARGV[1]) < seen then return 0 end
redis.call('set', KEYS[1], ARGV[1])
redis.call('set', KEYS[2], ARGV[2])
return 1
"""

MODES = {
    # lease_ms, work_ms range
    "safe": (5000, (0.0, 0.5)),
    "short": (30, (0.0, 60.0)),
}


def _names(prefix, i, protocol):
    lock = f"{prefix}:lock:{i}"
    return {
        "lock": lock,
        "channel": f"redisson_lock__channel:{{{lock}}}",
        "token": f"redisson_lock_token:{{{lock}}}" if protocol == "redisson" else f"{lock}:token",
        "counter": f"{prefix}:counter:{i}",
        "fence": f"{prefix}:fence:{i}",
        "fenced": f"{prefix}:fenced:{i}",
    }


class Worker:
    def __init__(self, port, protocol, mode, prefix, locks, deadline, seed):
        self.r = redis.Redis(port=port)  # redis-py 8 default: RESP3
        self.protocol, self.mode, self.prefix, self.locks = protocol, mode, prefix, locks
        self.lease, self.work = MODES[mode]
        self.deadline = deadline
        self.rng = random.Random(seed)
        self.owner = f"{uuid.uuid4()}:{threading.get_ident()}"
        self.ps = self.r.pubsub() if protocol == "redisson" else None
        sc = self.r.register_script
        self.s = {k: sc(v) for k, v in dict(
            r_trylock=R_TRYLOCK, r_unlock=R_UNLOCK, r_fenced=R_FENCED_TRYLOCK, r_watchdog=R_WATCHDOG,
            s_acq=S_ACQUIRE_FENCED, s_rel=S_RELEASE, s_ext=S_EXTEND,
            f_read=FENCED_READ, f_write=FENCED_WRITE).items()}
        self.st = dict(acquisitions=0, increments=0, latencies=[], unfinished_at_deadline=0,
                       release_ok=0, release_refused=0, extend_ok=0, extend_refused=0,
                       violations=0, fenced_accepted=0, stale_read_rejected=0,
                       stale_write_rejected=0)

    # ---- one attempt at the lock; returns (acquired, token or pttl) --------------------------
    def _try(self, n, value):
        fenced = self.mode == "short"
        if self.protocol == "redisson":
            if fenced:
                ttl, token = self.s["r_fenced"](keys=[n["lock"], n["token"]], args=[self.lease, self.owner])
                return (True, token) if ttl == -1 else (False, ttl)
            ttl = self.s["r_trylock"](keys=[n["lock"]], args=[self.lease, self.owner])
            return (True, None) if ttl is None else (False, ttl)
        if fenced:
            token = self.s["s_acq"](keys=[n["lock"], n["token"]], args=[value, self.lease])
            return (True, token) if token else (False, None)
        ok = self.r.set(n["lock"], value, nx=True, px=self.lease)
        return (True, None) if ok else (False, None)

    def acquire(self, n, value):
        ok, res = self._try(n, value)
        if ok:
            return True, res
        if self.protocol == "setnx":
            while time.monotonic() < self.deadline:
                time.sleep(self.rng.uniform(0.0005, 0.003))
                ok, res = self._try(n, value)
                if ok:
                    return True, res
            return False, None
        # Redisson: subscribe, retry, then wait for the unlock message at most the holder's TTL.
        ch = n["channel"]
        self.ps.subscribe(ch)
        self._await_ack("subscribe", ch)
        try:
            while time.monotonic() < self.deadline:
                ok, res = self._try(n, value)
                if ok:
                    return True, res
                wait = res / 1000 if res and res > 0 else 0.05
                wait = min(wait, max(0.0, self.deadline - time.monotonic()))
                end = time.monotonic() + wait
                while time.monotonic() < end:
                    m = self.ps.get_message(timeout=max(0.0, end - time.monotonic()))
                    if m and m["type"] == "message":
                        break
            return False, None
        finally:
            self.ps.unsubscribe(ch)
            self._await_ack("unsubscribe", ch)

    def _await_ack(self, kind, ch):
        end = time.monotonic() + 5
        while time.monotonic() < end:
            m = self.ps.get_message(timeout=1)
            if m and m["type"] == kind and m["channel"] == ch.encode():
                return
        raise RuntimeError(f"no {kind} ack for {ch}")

    def release(self, n, value):
        if self.protocol == "redisson":
            latch = f"redisson_unlock_latch:{{{n['lock']}}}:{uuid.uuid4().hex}"
            res = self.s["r_unlock"](keys=[n["lock"], n["channel"], latch],
                                     args=[0, self.lease, self.owner, "publish", 1000])
            self.r.delete(latch)
            return res == 1
        return self.s["s_rel"](keys=[n["lock"]], args=[value]) == 1

    def extend(self, n, value):
        if self.protocol == "redisson":
            return self.s["r_watchdog"](keys=[n["lock"]], args=[self.lease, self.owner]) == [1]
        return self.s["s_ext"](keys=[n["lock"]], args=[value, self.lease]) == 1

    def run(self):
        st = self.st
        while time.monotonic() < self.deadline:
            i = self.rng.randrange(self.locks)
            n = _names(self.prefix, i, self.protocol)
            value = uuid.uuid4().hex
            t0 = time.perf_counter()
            ok, token = self.acquire(n, value)
            if not ok:
                st["unfinished_at_deadline"] += 1
                continue
            st["latencies"].append(time.perf_counter() - t0)
            st["acquisitions"] += 1
            # The critical section: a deliberately non-atomic read-modify-write.
            v = int(self.r.get(n["counter"]) or 0)
            fenced_v = None
            if token is not None:
                fenced_v = self.s["f_read"](keys=[n["fence"], n["fenced"]], args=[token])
                if fenced_v is None:
                    st["stale_read_rejected"] += 1
            lo, hi = self.work
            if hi:
                time.sleep(self.rng.uniform(lo, hi) / 1000)
            self.r.set(n["counter"], v + 1)
            st["increments"] += 1
            if fenced_v is not None:
                if self.s["f_write"](keys=[n["fence"], n["fenced"]], args=[token, int(fenced_v) + 1]) == 1:
                    st["fenced_accepted"] += 1
                else:
                    st["stale_write_rejected"] += 1
            # A holder whose token is older than the newest issued is a former holder: the server
            # must refuse its extend and release. Tokens only grow, so reading first is safe.
            superseded = token is not None and int(self.r.get(n["token"]) or 0) > token
            if self.mode == "short" and self.rng.random() < 0.5:
                if self.extend(n, value):
                    st["extend_ok"] += 1
                    st["violations"] += superseded
                else:
                    st["extend_refused"] += 1
            if token is not None:
                superseded = int(self.r.get(n["token"]) or 0) > token
            if self.release(n, value):
                st["release_ok"] += 1
                st["violations"] += superseded
            else:
                st["release_refused"] += 1
        if self.ps:
            self.ps.close()
        self.r.close()
        return st


def _proc_main(args):
    port, protocol, mode, prefix, locks, deadline_wall, threads, seed, out = args
    deadline = time.monotonic() + (deadline_wall - time.time())
    results = [None] * threads

    def body(k):
        results[k] = Worker(port, protocol, mode, prefix, locks, deadline, seed * 100 + k).run()

    ts = [threading.Thread(target=body, args=(k,)) for k in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    out.put(results)


def run(port, protocol="setnx", mode="safe", procs=4, threads=2, locks=3, duration=3.0):
    prefix = "ct:" + uuid.uuid4().hex[:8]
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    start = time.time() + 0.3  # let every process connect before the clock starts
    deadline_wall = start + duration
    ps = [ctx.Process(target=_proc_main,
                      args=((port, protocol, mode, prefix, locks, deadline_wall, threads, p, out),))
          for p in range(procs)]
    for p in ps:
        p.start()
    stats = []
    for _ in ps:
        stats.extend(out.get(timeout=duration + 60))
    for p in ps:
        p.join(10)
    r = redis.Redis(port=port, protocol=2)
    counters = sum(int(r.get(_names(prefix, i, protocol)["counter"]) or 0) for i in range(locks))
    fenced = sum(int(r.get(_names(prefix, i, protocol)["fenced"]) or 0) for i in range(locks))
    r.close()
    tot = {k: sum(s[k] for s in stats) for k in stats[0] if k != "latencies"}
    lat = sorted(x for s in stats for x in s["latencies"])

    def pct(q):
        return round(lat[min(len(lat) - 1, int(q * len(lat)))] * 1000, 3) if lat else None

    res = dict(protocol=protocol, mode=mode, workers=procs * threads, processes=procs, locks=locks,
               lease_ms=MODES[mode][0], work_ms=list(MODES[mode][1]), duration_s=duration,
               acquisitions_per_s=round(tot["acquisitions"] / duration, 1),
               p50_acquire_ms=pct(0.50), p99_acquire_ms=pct(0.99),
               lost_updates=tot["increments"] - counters, **tot)
    if mode == "short":
        res["fenced_lost_updates"] = tot["fenced_accepted"] - fenced
        res["unfenced_lost_updates_expected_hazard"] = res.pop("lost_updates")
    return res


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--port", type=int, default=6379)
    ap.add_argument("--protocol", choices=["redisson", "setnx"], action="append")
    ap.add_argument("--mode", choices=["safe", "short"], action="append")
    ap.add_argument("--procs", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--locks", type=int, default=3)
    ap.add_argument("--duration", type=float, default=3.0)
    a = ap.parse_args()
    for proto in a.protocol or ["redisson", "setnx"]:
        for mode in a.mode or ["safe", "short"]:
            print(json.dumps(run(a.port, proto, mode, a.procs, a.threads, a.locks, a.duration)))
