"""A three-node deadbolt cluster on free loopback ports, for the Sentinel failover tests.

Every node answers the Sentinel discovery commands for master name `mymaster`, so the clients are
given the nodes' client ports as their sentinels. `kill_leader()` SIGKILLs the leader, as a crash
would, and returns the monotonic time of the kill; `leader()` waits until every live node names
the same leader through SENTINEL get-master-addr-by-name (as a Sentinel client asks) and it
accepts a write.

FAILOVER_SABOTAGE=single (one node, so nothing can take over) or =nokill (the leader is left
running) shows that the failover tests fail when there is no real failover.

For cluster-mode clients (`cluster-enabled yes`, and `cluster-groups 3`): `slot_master(slot)` is
the node every live node's CLUSTER SLOTS names for a slot, once it accepts a write there;
`group_leaders()` waits until each node leads one group; `key_slot`, `key_in_group` pick keys.
"""

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time

from conftest import _free_port, deadbolt_bin

MASTER = "mymaster"


def _cmd(port, *args, timeout=2.0):
    """One command on a fresh RESP2 connection; returns the raw reply bytes (b"" on error)."""
    req = b"*%d\r\n" % len(args) + b"".join(
        b"$%d\r\n%s\r\n" % (len(a), a) for a in (x if isinstance(x, bytes) else str(x).encode() for x in args))
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(req)
            buf = b""
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                chunk = s.recv(65536)
                if not chunk:
                    break
                buf += chunk
                if _complete(buf):
                    return buf
            return buf
    except OSError:
        return b""


def _complete(buf):
    def parse(i):
        nl = buf.find(b"\r\n", i)
        if nl < 0:
            return None
        kind, line = buf[i:i + 1], buf[i + 1:nl]
        if kind in b"+-:":
            return nl + 2
        if kind == b"$":
            n = int(line)
            return nl + 2 if n < 0 else (nl + 2 + n + 2 if len(buf) >= nl + 2 + n + 2 else None)
        if kind == b"*":
            j = nl + 2
            for _ in range(max(0, int(line))):
                j = parse(j)
                if j is None:
                    return None
            return j
        return nl + 2

    try:
        return parse(0) == len(buf)
    except (ValueError, IndexError):
        return False


def _parse(buf, i=0):
    """One RESP2 reply from buf[i:]: (value, next index). Errors come back as RespError."""
    nl = buf.index(b"\r\n", i)
    kind, line = buf[i:i + 1], buf[i + 1:nl]
    if kind == b"+":
        return line.decode(), nl + 2
    if kind == b"-":
        return RespError(line.decode()), nl + 2
    if kind == b":":
        return int(line), nl + 2
    if kind == b"$":
        n = int(line)
        return (None, nl + 2) if n < 0 else (buf[nl + 2:nl + 2 + n], nl + 2 + n + 2)
    if kind == b"*":
        out, j = [], nl + 2
        for _ in range(max(0, int(line))):
            v, j = _parse(buf, j)
            out.append(v)
        return out, j
    raise ValueError(f"not RESP2: {buf[i:i + 20]!r}")


class RespError(str):
    pass


def call(port, *args, timeout=2.0):
    """One command on a fresh RESP2 connection, parsed; None when the node did not answer."""
    raw = _cmd(port, *args, timeout=timeout)
    if not raw or not _complete(raw):
        return None
    return _parse(raw)[0]


def _crc16(data):
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) if crc & 0x8000 else crc << 1
            crc &= 0xFFFF
    return crc


def key_slot(key):
    """Redis Cluster's hash slot of a key ({hash tag} included), computed here."""
    k = key.encode() if isinstance(key, str) else key
    s = k.find(b"{")
    if s >= 0:
        e = k.find(b"}", s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    return _crc16(k) & 16383


# `cluster-groups 3`: the slots split as `redis-cli --cluster create` splits them among three
# masters; group n's preferred leader is node n + 1.
GROUP_RANGES = [(0, 5460), (5461, 10922), (10923, 16383)]


def key_in_group(prefix, group):
    """A key `prefix:<n>` whose slot the group owns at creation."""
    lo, hi = GROUP_RANGES[group]
    n = 0
    while not lo <= key_slot(f"{prefix}:{n}") <= hi:
        n += 1
    return f"{prefix}:{n}"


def key_in_slot(prefix, slot):
    n = 0
    while key_slot(f"{prefix}:{n}") != slot:
        n += 1
    return f"{prefix}:{n}"


def slot_masters(port):
    """CLUSTER SLOTS on one node as [(first, last, master port)], or None if it did not answer."""
    r = call(port, "CLUSTER", "SLOTS")
    if not isinstance(r, list):
        return None
    return [(lo, hi, int(m[1])) for lo, hi, m, *_ in r]


def master_port_of(port, slot):
    for lo, hi, m in slot_masters(port) or []:
        if lo <= slot <= hi:
            return m
    return None


class Cluster:
    def __init__(self, n=3, extra=()):
        if os.environ.get("FAILOVER_SABOTAGE") == "single":
            n = 1
        self.dir = tempfile.mkdtemp(prefix="clients-cluster-")
        self.ports = [(_free_port(), _free_port()) for _ in range(n)]
        peers = " ".join(f"{i + 1}@127.0.0.1:{p}:{pp}" for i, (p, pp) in enumerate(self.ports))
        # Cluster mode refuses to start without the peer port's shared secret.
        secret = secrets.token_hex(32)
        self.procs = []
        self.argv = []
        exe = deadbolt_bin()
        assert os.path.exists(exe), f"deadbolt binary not found at {exe} (cargo build)"
        for i, (port, _) in enumerate(self.ports):
            d = os.path.join(self.dir, f"n{i + 1}")
            os.makedirs(d)
            self.argv.append([exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", d,
                              "--cluster-node-id", str(i + 1), "--cluster-peers", peers,
                              "--cluster-secret", secret, *extra])
            self.procs.append(self._spawn(i))
        deadline = time.monotonic() + 20
        for port in self.client_ports():
            while not _cmd(port, "PING", timeout=0.3).startswith(b"+PONG"):
                assert time.monotonic() < deadline, f"node on {port} never answered PING\n{self.logs()}"
                time.sleep(0.02)

    def _spawn(self, i):
        d = os.path.join(self.dir, f"n{i + 1}")
        log = open(os.path.join(d, "server.log"), "ab")
        return subprocess.Popen(self.argv[i], stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, cwd=d)

    def restart(self, i, timeout=20.0):
        """Starts a killed node again on its data directory (it rejoins as a follower)."""
        assert not self.alive(i), f"node {i + 1} is still running"
        self.procs[i] = self._spawn(i)
        deadline = time.monotonic() + timeout
        while not _cmd(self.client_ports()[i], "PING", timeout=0.3).startswith(b"+PONG"):
            assert time.monotonic() < deadline, f"node {i + 1} never answered PING after a restart\n{self.logs()}"
            time.sleep(0.02)

    def client_ports(self):
        return [p for p, _ in self.ports]

    def slot_master(self, slot, timeout=15.0, not_=None):
        """Index of the node every live node's CLUSTER SLOTS names as master of `slot`, once it
        accepts a write to a key of that slot (so its group has a serving leader)."""
        probe = key_in_slot("__probe", slot)
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            seen = [master_port_of(self.client_ports()[i], slot) for i in range(len(self.procs)) if self.alive(i)]
            if seen and seen[0] and all(s == seen[0] for s in seen) and seen[0] in self.client_ports():
                i = self.index_of(seen[0])
                if i != not_ and self.alive(i) and call(seen[0], "SET", probe, "1") == "OK":
                    return i
            time.sleep(0.02)
        raise AssertionError(f"no agreed master of slot {slot} within {timeout}s: {seen}\n{self.logs()}")

    def group_leaders(self, timeout=20.0):
        """With `cluster-groups 3` on three nodes: waits until each node leads one group (the
        spread) as every node's CLUSTER SLOTS names it, and returns the leader index per group."""
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            seen = [self.slot_master(lo, timeout=max(0.1, deadline - time.monotonic())) for lo, _ in GROUP_RANGES]
            if sorted(seen) == list(range(len(GROUP_RANGES))):
                return seen
            time.sleep(0.02)
        raise AssertionError(f"the groups' leaders never spread over the nodes: {seen}\n{self.logs()}")

    def sentinels(self):
        return [("127.0.0.1", p) for p in self.client_ports()]

    def alive(self, i):
        return self.procs[i].poll() is None

    def index_of(self, port):
        return self.client_ports().index(int(port))

    def master_addr(self, i):
        """SENTINEL get-master-addr-by-name on node i: (ip, port) or None."""
        r = _cmd(self.client_ports()[i], "SENTINEL", "get-master-addr-by-name", MASTER)
        parts = r.split(b"\r\n")
        if not r.startswith(b"*2\r\n") or len(parts) < 5:
            return None
        return parts[2].decode(), int(parts[4])

    def leader(self, timeout=15.0, not_=None):
        """Index of the leader every live node names, once it accepts a write."""
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            seen = [self.master_addr(i) for i in range(len(self.procs)) if self.alive(i)]
            if seen and seen[0] and all(s == seen[0] for s in seen):
                i = self.index_of(seen[0][1])
                if i != not_ and self.alive(i) and \
                        _cmd(self.client_ports()[i], "SET", "__probe", "1", timeout=2) == b"+OK\r\n":
                    return i
            time.sleep(0.02)
        raise AssertionError(f"no agreed leader within {timeout}s: {seen}\n{self.logs()}")

    def kill(self, i):
        if os.environ.get("FAILOVER_SABOTAGE") == "nokill":
            return time.monotonic()
        self.procs[i].kill()
        t = time.monotonic()
        self.procs[i].wait()
        return t

    def logs(self):
        out = []
        for i in range(len(self.procs)):
            try:
                with open(os.path.join(self.dir, f"n{i + 1}", "server.log"), "rb") as f:
                    out.append(f"--- node {i + 1} ---\n" + f.read().decode(errors="replace")[-1500:])
            except OSError:
                pass
        return "\n".join(out)

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisClusterRef:
    """A real Redis Cluster 7.0: `masters` masters (`redis-server --cluster-enabled yes`) with
    `replicas` replicas each, slots spread by `redis-cli --cluster create`, once every node
    reports cluster_state:ok (and every replica's master link is up). The reference for the
    cluster-mode client tests. With replicas, `cluster-node-timeout 1000`, so a killed master
    fails over in seconds. Same `client_ports()`/`kill()`/`logs()`/`stop()` as `Cluster`;
    `master_of(key)` plays the part of `Cluster.leader()`."""

    def __init__(self, masters=3, replicas=0):
        exe = shutil.which("redis-server")
        assert exe, "redis-server is not installed (tests/clients/run-all installs it)"
        self.dir = tempfile.mkdtemp(prefix="clients-rcluster-")
        self.ports = [(_free_port(), _free_port()) for _ in range(masters * (1 + replicas))]
        self.procs = []
        for i, (port, bus) in enumerate(self.ports):
            d = os.path.join(self.dir, f"n{i + 1}")
            os.makedirs(d)
            argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                    "--cluster-port", str(bus), "--cluster-config-file", os.path.join(d, "nodes.conf"),
                    *(["--cluster-node-timeout", "1000"] if replicas else []),
                    "--save", "", "--appendonly", "no", "--dir", d]
            log = open(os.path.join(d, "server.log"), "wb")
            self.procs.append(subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                               stdin=subprocess.DEVNULL, cwd=d))
        deadline = time.monotonic() + 30
        for port in self.client_ports():
            while not _cmd(port, "PING", timeout=0.3).startswith(b"+PONG"):
                assert time.monotonic() < deadline, f"redis-server on {port} never answered PING"
                time.sleep(0.02)
        create = subprocess.run(
            ["redis-cli", "--cluster", "create", *(f"127.0.0.1:{p}" for p in self.client_ports()),
             "--cluster-replicas", str(replicas), "--cluster-yes"], capture_output=True, timeout=30)
        assert create.returncode == 0, create.stdout + create.stderr
        for port in self.client_ports():
            while True:
                repl = _cmd(port, "INFO", "replication")
                if b"cluster_state:ok" in _cmd(port, "CLUSTER", "INFO") and \
                        (b"role:master" in repl or b"master_link_status:up" in repl):
                    break
                assert time.monotonic() < deadline, f"redis-server on {port} never settled"
                time.sleep(0.05)

    def client_ports(self):
        return [p for p, _ in self.ports]

    def alive(self, i):
        return self.procs[i].poll() is None

    def master_of(self, key, timeout=15.0, not_=None):
        """Index of the node every live node's CLUSTER NODES names as master of `key`'s slot."""
        live = [i for i in range(len(self.procs)) if self.alive(i)]
        raw = _cmd(self.client_ports()[live[0]], "CLUSTER", "KEYSLOT", key)
        slot = int(raw[1:].strip())
        deadline = time.monotonic() + timeout
        seen = None
        while time.monotonic() < deadline:
            seen = [self._master_of_slot(self.client_ports()[i], slot) for i in live]
            if seen[0] and all(m == seen[0] for m in seen):
                i = self.client_ports().index(int(seen[0].split(":")[1]))
                if i != not_ and self.alive(i):
                    return i
            time.sleep(0.02)
        raise AssertionError(f"no agreed master of slot {slot} within {timeout}s: {seen}")

    @staticmethod
    def _master_of_slot(port, slot):
        raw = _cmd(port, "CLUSTER", "NODES")
        if not raw.startswith(b"$"):
            return None
        for line in raw.split(b"\r\n", 1)[1].decode().strip().splitlines():
            f = line.split(" ")
            if len(f) < 9 or "master" not in f[2].split(",") or "fail" in f[2]:
                continue
            for r in f[8:]:
                lo, _, hi = r.partition("-")
                if lo.isdigit() and int(lo) <= slot <= int(hi or lo):
                    return f[1].split("@")[0]
        return None

    def kill(self, i):
        self.procs[i].kill()
        t = time.monotonic()
        self.procs[i].wait()
        return t

    def logs(self):
        return ""

    def stop(self):
        for p in self.procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


@contextlib.contextmanager
def redis_clusters(client_ports):
    """A factory of unchanged redis-py `RedisCluster` clients on these ports (`new(protocol)`),
    every client it made closed on exit: the cluster-mode fixtures' shared body."""
    from redis.cluster import ClusterNode, RedisCluster

    made = []

    def new(protocol=2):
        rc = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in client_ports],
                          protocol=protocol)
        made.append(rc)
        return rc

    try:
        yield new
    finally:
        for rc in made:
            rc.close()
