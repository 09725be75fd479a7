"""Three-node clusters on 127.0.0.1 for bench/run's `cluster` section and bench/failover.

- DeadboltCluster: 3 deadbolt nodes in cluster mode (Raft; every write's reply waits for a
  majority's fsync). Clients find the leader with SENTINEL get-master-addr-by-name; with
  `--cluster-enabled yes` (and `--cluster-groups N`) cluster-mode clients find each group's
  leader with CLUSTER SLOTS (`groups`, `groups_healthy`).
- RedisReplicated: redis-server primary + 2 replicas, optionally with the append-only file and
  3 redis-sentinel processes watching the primary.
- RedisCluster: Redis Cluster (`--cluster-enabled yes`), 3 masters + 3 replicas by default,
  created with `redis-cli --cluster create`.
- ClusterClient: a minimal cluster-mode client (CLUSTER SLOTS, follows -MOVED, retries
  -TRYAGAIN, -CLUSTERDOWN and connection errors).
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


def crc16(data):
    """CRC16-CCITT (XModem), Redis Cluster's key hash."""
    crc = 0
    for b in data:
        crc ^= b << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def key_slot(key):
    """The hash slot of a key, `{hash tags}` included (as Redis Cluster computes it)."""
    k = key.encode() if isinstance(key, str) else key
    s = k.find(b"{")
    if s >= 0:
        e = k.find(b"}", s + 1)
        if e > s + 1:
            k = k[s + 1:e]
    return crc16(k) % 16384


def tag_in(first, last, prefix="fo"):
    """A hash tag `{<prefix><n>}` whose slot lies in first..last."""
    for n in range(1 << 20):
        t = "%s%d" % (prefix, n)
        if first <= key_slot(t) <= last:
            return "{%s}" % t
    raise ValueError("no tag in slots %d-%d" % (first, last))


class ClusterClient:
    """What a cluster-mode client library does, minimally. A slot table from CLUSTER SLOTS
    (asked of the seeds, then of the masters it knew, first answer wins); a command goes to its
    slot's master on a fresh connection (`timeout` to connect and to answer). `-MOVED` is
    followed at once (at most 5 in a row, then it counts as an error); `-TRYAGAIN`,
    `-CLUSTERDOWN`, any other error and a refused, reset or timed-out connection sleep a fixed
    `backoff`, then the table is asked again. Long-lived: the table survives between calls."""

    def __init__(self, seeds, backoff=0.05, timeout=0.5):
        self.seeds, self.backoff, self.timeout = list(seeds), backoff, timeout
        self.table = []  # [(first, last, master port)]
        self.refresh()

    def refresh(self):
        for p in self.seeds + [q for _, _, q in self.table if q not in self.seeds]:
            try:
                r = resp(p, "CLUSTER", "SLOTS", timeout=self.timeout)
            except (OSError, ConnectionError):
                continue
            if isinstance(r, list) and r:
                self.table = [(int(e[0]), int(e[1]), int(e[2][1])) for e in r]
                return True
        return False

    def port_for(self, slot):
        for first, last, port in self.table:
            if first <= slot <= last:
                return port
        return None

    def set_nx(self, name, give_up, t0, px=30000):
        """`SET name token NX PX px` until it is ours: OK, or a nil reply while the key holds our
        token (an earlier attempt was applied and its reply lost). Returns (seconds since t0,
        attempts), or (None, attempts) after give_up seconds."""
        token = "token-%s" % name
        slot = key_slot(name)
        port = self.port_for(slot)
        attempts = redirects = 0
        while time.monotonic() - t0 < give_up:
            attempts += 1
            r = None
            if port is not None:
                try:
                    r = resp(port, "SET", name, token, "NX", "PX", str(px), timeout=self.timeout)
                    if r is None and resp(port, "GET", name, timeout=self.timeout) == token.encode():
                        r = "OK"
                except (OSError, ConnectionError):
                    r = None
            if r == "OK":
                took = time.monotonic() - t0
                if redirects:
                    self.refresh()
                return took, attempts
            if isinstance(r, RespError) and r.startswith("MOVED ") and redirects < 5:
                redirects += 1
                port = int(r.rsplit(":", 1)[1])
                continue
            redirects = 0
            time.sleep(self.backoff)
            self.refresh()
            port = self.port_for(slot)
        return None, attempts


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

    def groups(self, port):
        """This node's view of each Raft group from RAFT STATUS: {group: {"role", "leader" (raft
        id, 0 while unknown), "term", "commit", "applied", "slots" [(first, last)]}}. One group:
        the home group's lines, owning every slot."""
        st = self.raft_status(port)
        out = {}
        for g in range(int(st.get("groups", "1"))):
            if "group%d" % g in st:
                f = dict(kv.split("=", 1) for kv in st["group%d" % g].split(","))
            else:
                f = dict(st, slots="0-16383")
            ranges = [r.partition("-") for r in f.get("slots", "").split()]
            out[g] = {"role": f["role"], "leader": int(f["leader"]) if f["leader"].isdigit() else 0,
                      "term": int(f["term"]), "commit": int(f["commit"]), "applied": int(f["applied"]),
                      "slots": [(int(a), int(b or a)) for a, _, b in ranges]}
        return out

    def groups_healthy(self):
        """{group: leader's client port} once every node runs, every node names the same leader
        of each group, that leader says it leads, and every node has applied the leader's commit
        index of every group; None before."""
        if len(self.live_ports()) != len(self.ports):
            return None
        views = {p: self.groups(p) for p in self.ports}
        out = {}
        for g, v in views[self.ports[0]].items():
            lid = v["leader"]
            if not 1 <= lid <= len(self.ports) or any(w[g]["leader"] != lid for w in views.values()):
                return None
            lport = self.ports[lid - 1]
            lead = self.groups(lport)[g]
            if lead["role"] != "leader" or any(w[g]["applied"] < lead["commit"] for w in views.values()):
                return None
            out[g] = lport
        return out

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


class RedisCluster:
    """Redis Cluster: `masters` masters with `replicas` replicas each (`redis-server
    --cluster-enabled yes`, its own `--cluster-port`), created with `redis-cli --cluster create
    ... --cluster-replicas R --cluster-yes`; append-only file with `appendfsync always` unless
    aof=False; `cluster-node-timeout` node_timeout_ms (Redis's default 15000). A node restarted
    after a kill comes back with its nodes.conf and append-only file, as a replica of the
    replica that took its slots; `give_back` makes it master again with CLUSTER FAILOVER."""
    kind = "redis-cluster"

    def __init__(self, binary="redis-server", cli="redis-cli", masters=3, replicas=1,
                 node_timeout_ms=15000, aof=True, root=None):
        self.binary, self.cli, self.aof = binary, cli, aof
        self.node_timeout_ms, self.masters, self.replicas = node_timeout_ms, masters, replicas
        self.dir = tempfile.mkdtemp(prefix="bench-rcluster-", dir=root)
        n = masters * (1 + replicas)
        self.ports = [free_port() for _ in range(n)]
        self.bus_ports = [free_port() for _ in range(n)]
        self.nodes = [Proc(self.argv(i), os.path.join(self.dir, "r%d.log" % i)) for i in range(n)]

    def argv(self, i):
        d = os.path.join(self.dir, "r%d" % i)
        os.makedirs(d, exist_ok=True)
        a = [self.binary, "--port", str(self.ports[i]), "--bind", "127.0.0.1", "--dir", d, "--save", "",
             "--daemonize", "no", "--logfile", "", "--cluster-enabled", "yes",
             "--cluster-port", str(self.bus_ports[i]), "--cluster-config-file", os.path.join(d, "nodes.conf"),
             "--cluster-node-timeout", str(self.node_timeout_ms)]
        return a + (["--appendonly", "yes", "--appendfsync", "always"] if self.aof else ["--appendonly", "no"])

    def start_node(self, i):
        self.nodes[i].start()
        wait_until(lambda: resp(self.ports[i], "PING") == "PONG", 15, "redis cluster node %d up" % i)

    def start(self, timeout=60):
        for i in range(len(self.nodes)):
            self.start_node(i)
        r = subprocess.run([self.cli, "--cluster", "create"] + ["127.0.0.1:%d" % p for p in self.ports]
                           + ["--cluster-replicas", str(self.replicas), "--cluster-yes"],
                           capture_output=True, timeout=timeout)
        if r.returncode != 0:
            raise RuntimeError("redis-cli --cluster create: %s" % (r.stdout + r.stderr).decode(errors="replace"))
        return self.wait_healthy(timeout)

    def slots(self, port):
        """CLUSTER SLOTS as [(first, last, master port)], by first slot."""
        return sorted((int(e[0]), int(e[1]), int(e[2][1])) for e in resp(port, "CLUSTER", "SLOTS"))

    def healthy(self):
        """[(first, last, master port)] once every node runs, says cluster_state:ok with all
        16,384 slots ok and every node known, flags no node as failing (or in handshake), gives
        the same CLUSTER SLOTS, and every master has `replicas` replicas with their link up;
        None before."""
        if len(self.live_ports()) != len(self.ports):
            return None
        table = None
        for p in self.ports:
            inf = dict(l.split(":", 1) for l in resp(p, "CLUSTER", "INFO").decode().splitlines() if ":" in l)
            if inf.get("cluster_state") != "ok" or inf.get("cluster_slots_ok") != "16384" \
                    or inf.get("cluster_known_nodes") != str(len(self.ports)):
                return None
            for line in resp(p, "CLUSTER", "NODES").decode().splitlines():
                if set(line.split(" ")[2].split(",")) & {"fail", "fail?", "pfail", "handshake", "noaddr"}:
                    return None
            t = self.slots(p)
            if table is not None and t != table:
                return None
            table = t
        linked = {}
        for p in self.ports:
            rep = info(p, "replication")
            if rep.get("role") == "slave" and rep.get("master_link_status") == "up" \
                    and rep.get("master_sync_in_progress") == "0":
                linked[int(rep["master_port"])] = linked.get(int(rep["master_port"]), 0) + 1
        if any(linked.get(m, 0) < self.replicas for _, _, m in table):
            return None
        return table

    def wait_healthy(self, timeout=60):
        out = {}

        def ok():
            out["t"] = self.healthy()
            return out["t"] is not None
        wait_until(ok, timeout, "redis cluster healthy", step=0.1)
        return out["t"]

    def give_back(self, port, timeout=30):
        """Makes the replica on `port` master of its master's slots again (CLUSTER FAILOVER, the
        coordinated manual failover: no acknowledged write is lost), once its link is up."""
        def link_up():
            rep = info(port, "replication")
            return rep.get("role") == "master" or (rep.get("master_link_status") == "up"
                                                   and rep.get("master_sync_in_progress") == "0")
        wait_until(link_up, timeout, "redis node %d's replication link" % port)
        t0 = time.monotonic()
        while info(port, "replication").get("role") != "master":
            if time.monotonic() - t0 > timeout:
                raise RuntimeError("redis node %d: CLUSTER FAILOVER did not make it master within %ss"
                                   % (port, timeout))
            r = resp(port, "CLUSTER", "FAILOVER")
            if r != "OK":
                raise RuntimeError("redis node %d: CLUSTER FAILOVER answered %r" % (port, r))
            try:  # a manual failover times out after 5 s on the master's side; then ask again
                wait_until(lambda: info(port, "replication").get("role") == "master", 7,
                           "redis node %d master" % port)
            except RuntimeError:
                pass

    def live_ports(self):
        return [p for p, n in zip(self.ports, self.nodes) if n.alive()]

    def node_of(self, port):
        return self.nodes[self.ports.index(port)]

    def save_logs(self, dest):
        shutil.copytree(self.dir, dest, dirs_exist_ok=True)
        return dest

    def stop(self):
        for n in self.nodes:
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
