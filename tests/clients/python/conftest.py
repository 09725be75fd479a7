"""Servers for the client suites: every test runs once per target.

Targets: `redis` (a real redis-server 7.0, the reference: a test that fails there is a broken
test) and `deadbolt` (the binary under test, $DEADBOLT_BIN or <repo>/target/debug/deadbolt).
CLIENT_TARGETS=redis or CLIENT_TARGETS=deadbolt restricts the run to one of them.
"""

import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
TARGETS = [t for t in os.environ.get("CLIENT_TARGETS", "redis,deadbolt").split(",") if t]


def deadbolt_bin():
    return os.environ.get("DEADBOLT_BIN") or os.path.join(REPO, "target", "debug", "deadbolt")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ping(port, timeout=0.2):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class Server:
    """One server process on 127.0.0.1; `kill()` stops it hard (SIGKILL), as a crash would."""

    def __init__(self, kind):
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix=f"clients-{kind}-")
        self.proc = None
        self.port = None
        self.start()

    def start(self):
        for _ in range(5):
            port = _free_port()
            if self.kind == "redis":
                exe = shutil.which("redis-server")
                assert exe, "redis-server is not installed (tests/clients/run-all installs it)"
                argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
                        "--appendonly", "no", "--daemonize", "no", "--dir", self.dir]
            else:
                exe = deadbolt_bin()
                assert os.path.exists(exe), f"deadbolt binary not found at {exe} (cargo build)"
                argv = [exe, "--port", str(port), "--bind", "127.0.0.1", "--dir", self.dir,
                        "--appendonly", "no"]
            log = open(os.path.join(self.dir, "server.log"), "wb")
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=self.dir)
            deadline = time.time() + 10
            while time.time() < deadline and proc.poll() is None:
                if _ping(port):
                    self.proc, self.port = proc, port
                    return
                time.sleep(0.02)
            proc.kill()
            proc.wait()
        raise RuntimeError(f"{self.kind} did not start; log:\n{self.log()}")

    def log(self):
        try:
            with open(os.path.join(self.dir, "server.log"), "rb") as f:
                return f.read().decode(errors="replace")[-4000:]
        except OSError:
            return ""

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)

    def url(self, db=0):
        return f"redis://127.0.0.1:{self.port}/{db}"


@pytest.fixture(scope="session")
def _servers():
    started = {}

    def get(kind):
        srv = started.get(kind)
        if srv is None or srv.proc.poll() is not None:
            srv = started[kind] = Server(kind)
        return srv

    yield get
    for srv in started.values():
        srv.stop()


@pytest.fixture(params=TARGETS)
def target(request):
    return request.param


@pytest.fixture
def server(_servers, target):
    """A shared server of the current target, flushed before the test."""
    srv = _servers(target)
    import redis

    c = redis.Redis(port=srv.port, protocol=2)
    c.flushall()
    c.close()
    return srv


@pytest.fixture
def three(target):
    """Three fresh independent servers of the current target (Redlock masters)."""
    srvs = [Server(target) for _ in range(3)]
    yield srvs
    for s in srvs:
        s.stop()


@pytest.fixture
def name():
    """A unique key name per test so leftovers can never make a test pass."""
    return "t:" + uuid.uuid4().hex[:12]


def pytest_terminal_summary(terminalreporter):
    import sys

    # Kill-to-first-acquire times of the failover tests and the resharding gaps (printed, not
    # written to a file).
    failover = [line for mod in ("test_sentinel_redis_py", "test_sentinel_redisson", "test_cluster_mode",
                                          "test_cluster_groups")
                for line in getattr(sys.modules.get(mod), "FIGURES", [])]
    if failover:
        terminalreporter.section("failover figures")
        for line in failover:
            terminalreporter.write_line(line)
    try:
        import test_contention
    except ImportError:
        return
    lines = test_contention.pytest_terminal_summary_lines()
    if not lines:
        return
    out = os.environ.get("CONTENTION_RESULTS")
    if out:
        with open(out, "a") as f:
            f.write("\n".join(lines) + "\n")
    terminalreporter.section("contention figures")
    for line in lines:
        terminalreporter.write_line(line)
