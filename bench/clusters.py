"""Three-node clusters on 127.0.0.1 for bench/run's `cluster` section and bench/failover.

- DeadboltCluster: 3 deadbolt nodes in cluster mode (Raft; every write's reply waits for a
  majority's fsync). Clients find the leader with SENTINEL get-master-addr-by-name.
- RedisReplicated: redis-server primary + 2 replicas, optionally with the append-only file and
  3 redis-sentinel processes watching the primary.
- EtcdCluster: 3 etcd members (etcd fsyncs its WAL before acknowledging, by default).

Python 3 standard library only. Every process is started by this module and stopped by it; data
lives in a temporary directory on disk (not tmpfs, so fsync costs what it costs).
"""

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

MASTER = "mymaster"

# The servers run in their own sessions (a Ctrl-C in the terminal must not kill a node mid-kill
# test), so a SIGTERM to the script must unwind through its `finally` blocks to stop them.
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RespError(str):
    pass


def _enc(args):
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(a), a))
    return b"".join(out)


class Resp:
    """A minimal blocking RESP2 client."""

    def __init__(self, port, timeout=2.0):
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.f = self.sock.makefile("rb")

    def close(self):
        try:
            self.f.close()
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *a):
        self.close()

    def read(self):
        line = self.f.readline()
        if not line:
            raise ConnectionError("closed")
        t, body = line[:1], line[1:-2]
        if t == b"+":
            return body.decode()
        if t == b"-":
            return RespError(body.decode(errors="replace"))
        if t == b":":
            return int(body)
        if t == b"$":
            n = int(body)
            return None if n < 0 else self.f.read(n + 2)[:-2]
        if t in (b"*", b">"):
            n = int(body)
            return None if n < 0 else [self.read() for _ in range(n)]
        if t == b"_":
            return None
        raise ConnectionError("bad reply %r" % line)

    def cmd(self, *args):
        self.sock.sendall(_enc(args))
        return self.read()


def resp(port, *args, timeout=1.0):
    """One command on a fresh connection; raises OSError/ConnectionError when unreachable."""
    with Resp(port, timeout) as c:
        return c.cmd(*args)


def info(port, section):
    raw = resp(port, "INFO", section)
    out = {}
    for line in (raw or b"").decode(errors="replace").splitlines():
        if ":" in line and not line.startswith("#"):
            k, v = line.split(":", 1)
            out[k] = v
    return out


def wait_until(pred, timeout, what, step=0.05):
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < timeout:
        try:
            if pred():
                return time.monotonic() - t0
        except (OSError, ConnectionError, ValueError, KeyError) as e:
            last = e
        time.sleep(step)
    raise RuntimeError("%s: not within %ss (%s)" % (what, timeout, last))


def sentinel_master(ports):
    """What a Sentinel client does: ask each sentinel in turn, first answer wins."""
    for p in ports:
        try:
            r = resp(p, "SENTINEL", "get-master-addr-by-name", MASTER, timeout=0.3)
        except (OSError, ConnectionError):
            continue
        if isinstance(r, list) and len(r) == 2 and r[0] is not None:
            return int(r[1])
    return None


class Proc:
    def __init__(self, argv, log):
        self.argv, self.log = argv, log
        self.p = None

    def start(self):
        with open(self.log, "ab") as f:
            self.p = subprocess.Popen(self.argv, stdout=f, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def pid(self):
        return self.p.pid

    def alive(self):
        return self.p is not None and self.p.poll() is None

    def kill(self):
        if self.alive():
            self.p.send_signal(signal.SIGKILL)
            self.p.wait()

    def stop(self):
        if self.alive():
            self.p.send_signal(signal.SIGTERM)
            try:
                self.p.wait(10)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()

    def cpu_seconds(self):
        with open("/proc/%d/stat" % self.pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class DeadboltCluster:
    kind = "deadbolt"

    def __init__(self, binary, extra=(), n=3, root=None):
        self.dir = tempfile.mkdtemp(prefix="bench-dbc-", dir=root)
        self.ports = [free_port() for _ in range(n)]
        self.peer_ports = [free_port() for _ in range(n)]
        peers = " ".join("%d@127.0.0.1:%d:%d" % (i + 1, self.ports[i], self.peer_ports[i]) for i in range(n))
        # Cluster mode refuses to start without the peer port's shared secret.
        secret = secrets.token_hex(32)
        self.nodes = []
        for i in range(n):
            d = os.path.join(self.dir, "n%d" % (i + 1))
            os.makedirs(d)
            argv = [binary, "--port", str(self.ports[i]), "--bind", "127.0.0.1", "--dir", d,
                    "--cluster-node-id", str(i + 1), "--cluster-peers", peers,
                    "--cluster-secret", secret] + list(extra)
            self.nodes.append(Proc(argv, os.path.join(d, "deadbolt.log")))

    def start(self, timeout=20):
        for n in self.nodes:
            n.start()
        return self.wait_leader(timeout)

    def writable(self, port):
        r = resp(port, "SET", "bench:probe", "1", "PX", "1000", timeout=1.0)
        return r == "OK"

    def wait_leader(self, timeout=20):
        """Leader port, once a write through it succeeds (committed on a majority)."""
        out = {}

        def ok():
            p = sentinel_master(self.live_ports())
            if p is not None and self.writable(p):
                out["p"] = p
                return True
            return False
        wait_until(ok, timeout, "deadbolt cluster leader")
        return out["p"]

    def live_ports(self):
        return [p for p, n in zip(self.ports, self.nodes) if n.alive()]

    def node_of(self, port):
        return self.nodes[self.ports.index(port)]

    def raft_status(self, port):
        raw = resp(port, "RAFT", "STATUS")
        return dict(l.split(":", 1) for l in raw.decode().splitlines() if ":" in l)

    def save_logs(self, dest):
        """Copies every node's log (and its cluster/ files) for a post-mortem."""
        shutil.copytree(self.dir, dest, dirs_exist_ok=True)
        return dest

    def caught_up(self, port):
        """The node answers and its applied index has reached the leader's commit index."""
        leader = sentinel_master(self.live_ports())
        if leader is None or leader == port:
            return False
        a, b = self.raft_status(leader), self.raft_status(port)
        return int(b["applied"]) >= int(a["commit"])

    def stop(self):
        for n in self.nodes:
            n.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


class RedisReplicated:
    kind = "redis"

    def __init__(self, binary="redis-server", aof=True, sentinels=0, sentinel_binary="redis-sentinel",
                 down_after_ms=1000, failover_timeout_ms=6000, root=None):
        self.binary = binary
        self.dir = tempfile.mkdtemp(prefix="bench-redis-", dir=root)
        self.ports = [free_port() for _ in range(3)]
        self.aof = aof
        self.nodes = [None] * 3
        self.sentinel_ports = [free_port() for _ in range(sentinels)]
        self.sentinels = []
        for i, sp in enumerate(self.sentinel_ports):
            conf = os.path.join(self.dir, "sentinel%d.conf" % i)
            with open(conf, "w") as f:
                f.write("port %d\nbind 127.0.0.1\ndir %s\n" % (sp, self.dir))
                f.write("sentinel monitor %s 127.0.0.1 %d 2\n" % (MASTER, self.ports[0]))
                f.write("sentinel down-after-milliseconds %s %d\n" % (MASTER, down_after_ms))
                f.write("sentinel failover-timeout %s %d\n" % (MASTER, failover_timeout_ms))
                f.write("sentinel parallel-syncs %s 1\n" % MASTER)
            self.sentinels.append(Proc([sentinel_binary, conf], os.path.join(self.dir, "sentinel%d.log" % i)))

    def argv(self, i, replicaof=None):
        d = os.path.join(self.dir, "r%d" % i)
        os.makedirs(d, exist_ok=True)
        a = [self.binary, "--port", str(self.ports[i]), "--bind", "127.0.0.1", "--dir", d, "--save", "",
             "--daemonize", "no", "--logfile", ""]
        a += ["--appendonly", "yes", "--appendfsync", "always"] if self.aof else ["--appendonly", "no"]
        if replicaof:
            a += ["--replicaof", "127.0.0.1", str(replicaof)]
        return a

    def start_node(self, i, replicaof=None):
        self.nodes[i] = Proc(self.argv(i, replicaof), os.path.join(self.dir, "r%d.log" % i))
        self.nodes[i].start()
        wait_until(lambda: resp(self.ports[i], "PING") == "PONG", 15, "redis %d up" % i)

    def start(self, timeout=30):
        self.start_node(0)
        for i in (1, 2):
            self.start_node(i, self.ports[0])
        self.wait_replicas(self.ports[0], timeout)
        for s in self.sentinels:
            s.start()
        if self.sentinels:
            self.wait_sentinels(self.ports[0], timeout)
        return self.ports[0]

    def wait_replicas(self, primary, timeout=30):
        def ok():
            inf = info(primary, "replication")
            if inf.get("role") != "master" or int(inf.get("connected_slaves", 0)) < 2:
                return False
            return all("state=online" in inf.get("slave%d" % k, "") for k in range(2))
        wait_until(ok, timeout, "redis primary with 2 online replicas")

    def wait_sentinels(self, primary, timeout=30):
        """Every sentinel names this primary, sees 2 healthy replicas and the 2 other sentinels."""
        def ok():
            for sp in self.sentinel_ports:
                m = resp(sp, "SENTINEL", "get-master-addr-by-name", MASTER)
                if not m or int(m[1]) != primary:
                    return False
                flat = resp(sp, "SENTINEL", "master", MASTER)
                d = dict(zip([x.decode() for x in flat[0::2]], [x.decode() for x in flat[1::2]]))
                if d.get("flags") != "master" or int(d.get("num-slaves", 0)) < 2 \
                        or int(d.get("num-other-sentinels", 0)) < 2:
                    return False
                reps = resp(sp, "SENTINEL", "replicas", MASTER)
                for r in reps:
                    rd = dict(zip([x.decode() for x in r[0::2]], [x.decode() for x in r[1::2]]))
                    if rd.get("flags") != "slave" or rd.get("master-link-status") != "ok":
                        return False
            return True
        wait_until(ok, timeout, "sentinels agree on primary %d" % primary, step=0.2)

    def live_ports(self):
        return [p for p, n in zip(self.ports, self.nodes) if n is not None and n.alive()]

    def node_of(self, port):
        return self.nodes[self.ports.index(port)]

    def stop(self):
        for s in self.sentinels:
            s.stop()
        for n in self.nodes:
            if n is not None:
                n.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def http_post(port, path, body, timeout=2.0):
    req = urllib.request.Request("http://127.0.0.1:%d%s" % (port, path), data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"{}")


class EtcdCluster:
    kind = "etcd"

    def __init__(self, binary="etcd", root=None):
        self.dir = tempfile.mkdtemp(prefix="bench-etcd-", dir=root)
        self.ports = [free_port() for _ in range(3)]
        self.peer_ports = [free_port() for _ in range(3)]
        initial = ",".join("e%d=http://127.0.0.1:%d" % (i, self.peer_ports[i]) for i in range(3))
        self.nodes = []
        for i in range(3):
            argv = [binary, "--name", "e%d" % i, "--data-dir", os.path.join(self.dir, "e%d" % i),
                    "--listen-client-urls", "http://127.0.0.1:%d" % self.ports[i],
                    "--advertise-client-urls", "http://127.0.0.1:%d" % self.ports[i],
                    "--listen-peer-urls", "http://127.0.0.1:%d" % self.peer_ports[i],
                    "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.peer_ports[i],
                    "--initial-cluster", initial, "--initial-cluster-state", "new",
                    "--initial-cluster-token", "bench"]
            self.nodes.append(Proc(argv, os.path.join(self.dir, "e%d.log" % i)))

    def start(self, timeout=30):
        for n in self.nodes:
            n.start()
        return self.wait_leader(timeout)

    def wait_leader(self, timeout=30):
        out = {}

        def ok():
            for p in self.ports:
                try:
                    st = http_post(p, "/v3/maintenance/status", {}, timeout=0.5)
                except OSError:
                    continue
                if st.get("leader") and st["leader"] == st["header"]["member_id"]:
                    # A write through it proves the cluster has a working quorum.
                    http_post(p, "/v3/kv/put", {"key": "YmVuY2g6cHJvYmU=", "value": "MQ=="})
                    out["p"] = p
                    return True
            return False
        wait_until(ok, timeout, "etcd leader", step=0.1)
        return out["p"]

    def count_prefix(self, port, prefix):
        import base64
        k = prefix.encode()
        end = k[:-1] + bytes([k[-1] + 1])
        r = http_post(port, "/v3/kv/range", {"key": base64.b64encode(k).decode(),
                                             "range_end": base64.b64encode(end).decode(), "count_only": True})
        return int(r.get("count", 0))

    def stop(self):
        for n in self.nodes:
            n.stop()
        shutil.rmtree(self.dir, ignore_errors=True)
