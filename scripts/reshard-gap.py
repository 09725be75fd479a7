#!/usr/bin/env python3
"""Online resharding under load: the longest gap a locking client sees, and no key lost.

Starts three deadbolt nodes running two Raft groups (group 1 owns slots 8192-16383), loads
N keys into the slot range FIRST-LAST (group 1's), keeps one client taking locks
(SET NX PX) in that range while `RAFT RESHARD FIRST LAST 0` moves it to the home group,
following -MOVED and retrying -TRYAGAIN, then reads back every 97th key on every node.

  scripts/reshard-gap.py [--bin target/release/deadbolt] [--keys 100000] [--first 9000] [--last 16383]
"""
import argparse, os, shutil, socket, subprocess, sys, tempfile, threading, time

def crc16(b):
    crc = 0
    for x in b:
        crc ^= x << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc

def slot(k):
    return crc16(k.encode()) & 16383

def enc(*a):
    out = b"*%d\r\n" % len(a)
    for x in a:
        x = x if isinstance(x, bytes) else str(x).encode()
        out += b"$%d\r\n%s\r\n" % (len(x), x)
    return out

class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.f = self.s.makefile("rb")

    def read(self):
        line = self.f.readline()
        if not line:
            raise OSError("closed")
        if line[:1] == b"$":
            n = int(line[1:])
            if n < 0:
                return None
            return self.f.read(n + 2)[:-2]
        return line.decode().strip()

    def call(self, *a):
        self.s.sendall(enc(*a))
        return self.read()

def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="target/release/deadbolt")
    ap.add_argument("--keys", type=int, default=100000)
    ap.add_argument("--first", type=int, default=9000)
    ap.add_argument("--last", type=int, default=16383)
    o = ap.parse_args()
    d = tempfile.mkdtemp(prefix="reshard-gap-")
    ports = [(free_port(), free_port()) for _ in range(3)]
    peers = " ".join("%d@127.0.0.1:%d:%d" % (i + 1, p, pp) for i, (p, pp) in enumerate(ports))
    env = dict(os.environ, DEADBOLT_CLUSTER_GROUPS="1:8192-16383")
    procs = []
    try:
        for i, (p, _) in enumerate(ports):
            nd = os.path.join(d, "n%d" % (i + 1))
            os.makedirs(nd)
            procs.append(subprocess.Popen(
                [o.bin, "--port", str(p), "--bind", "127.0.0.1", "--dir", nd,
                 "--cluster-node-id", str(i + 1), "--cluster-peers", peers,
                 "--cluster-secret", "reshard-gap-secret-0123456789abcdef",
                 "--cluster-enabled", "yes"],
                env=env, stdout=open(os.path.join(nd, "log"), "w"), stderr=subprocess.STDOUT))
        cports = [p for p, _ in ports]

        def leader_of(key):
            deadline = time.time() + 30
            while time.time() < deadline:
                for p in cports:
                    try:
                        if Conn(p).call("SET", "{%s}:probe" % key, "x") == "+OK":
                            return p
                    except OSError:
                        pass
                time.sleep(0.05)
            sys.exit("no leader for %s" % key)

        keys, i = [], 0
        while len(keys) < o.keys:
            k = "k:%d" % i
            i += 1
            if o.first <= slot(k) <= o.last:
                keys.append(k)
        time.sleep(3)  # leadership spreads over the nodes after the first election
        src = leader_of(keys[0])
        c = Conn(src)
        t = time.time()
        for j in range(0, len(keys), 1000):
            batch = keys[j:j + 1000]
            c.s.sendall(b"".join(enc("SET", k, k, "PX", "600000") for k in batch))
            for _ in batch:
                r = c.read()
                assert r == "+OK", r
        print("loaded %d keys into slots %d-%d in %.1f s" % (len(keys), o.first, o.last, time.time() - t))
        time.sleep(3)
        src = leader_of(keys[0])
        stop, gaps, counts = [False], [], {"ok": 0, "tryagain": 0, "moved": 0, "broken": 0}

        def churn():
            p, cc, last, n = src, Conn(src), time.time(), 0
            while not stop[0]:
                k = "lock:{%s}:%d" % (keys[(n * 7919) % len(keys)], n)
                n += 1
                try:
                    r = cc.call("SET", k, "t", "NX", "PX", "60000")
                except OSError:
                    counts["broken"] += 1
                    p = cports[n % 3]
                    try:
                        cc = Conn(p)
                    except OSError:
                        time.sleep(0.01)
                    continue
                if isinstance(r, str) and r.startswith("-MOVED"):
                    counts["moved"] += 1
                    p = int(r.split(":")[-1])
                    cc = Conn(p)
                    continue
                if isinstance(r, str) and r.startswith("-"):
                    counts["tryagain" if r.startswith("-TRYAGAIN") else "broken"] += 1
                    time.sleep(0.001)
                    continue
                assert r == "+OK", r
                now = time.time()
                gaps.append(now - last)
                last = now
                counts["ok"] += 1

        th = threading.Thread(target=churn)
        th.start()
        time.sleep(1)
        t0 = time.time()
        print("RAFT RESHARD:", Conn(src).call("RAFT", "RESHARD", o.first, o.last, 0))
        want = ":%d\r\n:%d\r\n" % (o.first, o.last)
        while True:
            home = leader_of("bar")
            c = Conn(home)
            c.s.sendall(enc("CLUSTER", "SLOTS"))
            time.sleep(0.01)
            raw = c.s.recv(1 << 20)
            if want.encode() in raw and b":%d\r\n" % home in raw.split(want.encode())[1][:80]:
                break
        print("moved in %.3f s" % (time.time() - t0))
        time.sleep(1)
        stop[0] = True
        th.join()
        gaps.sort()
        print("client: %d locks, %d TRYAGAIN, %d MOVED, %d other; longest gap between locks %.3f s, median %.4f s"
              % (counts["ok"], counts["tryagain"], counts["moved"], counts["broken"], gaps[-1], gaps[len(gaps) // 2]))
        missing = 0
        for p in cports:
            c = Conn(p)
            c.call("READONLY")
            for k in keys[::97]:
                if c.call("GET", k) != k.encode():
                    missing += 1
        print("keys checked on 3 nodes: %d, missing or wrong: %d" % (3 * len(keys[::97]), missing))
    finally:
        for pr in procs:
            pr.kill()
            pr.wait()
        shutil.rmtree(d, ignore_errors=True)

if __name__ == "__main__":
    main()
