"""The client libraries' own test suites, run against redis-server and against deadbolt.

Each suite runs twice, once per target, each time against a fresh server on a free 127.0.0.1
port (`--save '' --appendonly no`, temporary directory). Every test's outcome is recorded
(pytest JUnit XML, mocha JSON) and the two runs are compared: a test that passes on Redis and
not on deadbolt is a difference. Differences listed in expected-differences.txt are reported
but tolerated; any other one makes the run exit 1. Tests that pass on deadbolt but not on Redis
are printed too (informational: Redis is the reference).

Run through ./run (it installs the virtualenv first); see tests/clients/README.md.
"""

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
CACHE = os.environ.get("COMPAT_CACHE") or os.path.join(HERE, ".cache")
VENV_PY = os.path.join(HERE, ".venv", "bin", "python")
EXPECTED = os.path.join(HERE, "expected-differences.txt")

REDIS_PY = "7.4.1"
POTTERY = "3.0.1"

SUITES = ["redis-py", "pottery", "ioredis"]
PASSED = "passed"


def log(msg):
    print(msg, flush=True)


# --------------------------------------------------------------------------------- servers --

def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ping(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=0.2) as s:
            s.sendall(b"PING\r\n")
            return s.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class Server:
    def __init__(self, kind):
        self.kind = kind
        self.dir = tempfile.mkdtemp(prefix=f"compat-{kind}-")
        self.proc = None
        self.port = None

    def __enter__(self):
        for _ in range(5):
            port = free_port()
            if self.kind == "redis":
                argv = [shutil.which("redis-server") or "redis-server", "--port", str(port),
                        "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
                        "--daemonize", "no", "--dir", self.dir]
            else:
                argv = [os.environ["DEADBOLT_BIN"], "--port", str(port), "--bind", "127.0.0.1",
                        "--save", "", "--appendonly", "no", "--dir", self.dir]
            out = open(os.path.join(self.dir, "server.log"), "wb")
            proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, cwd=self.dir)
            deadline = time.time() + 10
            while time.time() < deadline and proc.poll() is None:
                if ping(port):
                    self.proc, self.port = proc, port
                    return self
                time.sleep(0.02)
            proc.kill()
            proc.wait()
        with open(os.path.join(self.dir, "server.log"), errors="replace") as f:
            raise RuntimeError(f"{self.kind} did not start:\n{f.read()}")

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


# ---------------------------------------------------------------------------------- install --

def pip_sdist(name, version, post=None):
    """Unpacks the PyPI sdist of name==version into the cache (then post(dir)); returns it."""
    dest = os.path.join(CACHE, f"{name}-{version}")
    if os.path.isfile(os.path.join(dest, ".unpacked")):
        return dest
    dl = os.path.join(CACHE, "sdist")
    os.makedirs(dl, exist_ok=True)
    archive = os.path.join(dl, f"{name}-{version}.tar.gz")
    if not os.path.exists(archive):
        log(f"compat: pip download {name}=={version} (sdist)")
        subprocess.run([VENV_PY, "-m", "pip", "download", "-q", "--disable-pip-version-check",
                        "--no-deps", "--no-binary", ":all:", "-d", dl, f"{name}=={version}"],
                       check=True)
    shutil.rmtree(dest, ignore_errors=True)
    with tarfile.open(archive) as t:
        # filter= exists from Python 3.11.4 on (Debian 12 ships 3.11.2).
        if hasattr(tarfile, "data_filter"):
            t.extractall(CACHE, filter="data")
        else:
            t.extractall(CACHE)
    if post:
        post(dest)
    open(os.path.join(dest, ".unpacked"), "w").close()
    return dest


def install_redis_py():
    return pip_sdist("redis", REDIS_PY)


# pottery's tests and doctests hard-code redis://localhost:6379 (and Redis(), whose default is
# the same). Rewritten once, at unpack time, to read the target from the environment
# (POTTERY_REDIS_HOST / POTTERY_REDIS_PORT, REDIS_URL), which run_pottery sets per target.
POTTERY_TEST_HEADER = (
    "import os  # added by deadbolt's tests/clients/compat: target server from the environment\n"
    "POTTERY_HOST = os.environ['POTTERY_REDIS_HOST']\n"
    "POTTERY_PORT = os.environ['POTTERY_REDIS_PORT']\n"
)


def rewrite_pottery(src):
    tests = os.path.join(src, "tests")
    for name in sorted(os.listdir(tests)):
        if not name.endswith(".py"):
            continue
        path = os.path.join(tests, name)
        text = open(path).read()
        new = re.sub(r"f?'redis://(localhost|127\.0\.0\.1):6379/",
                     "f'redis://{POTTERY_HOST}:{POTTERY_PORT}/", text)
        new = new.replace("host=localhost,port=6379", "host={POTTERY_HOST},port={POTTERY_PORT}")
        new = new.replace("Redis()", "Redis(host=POTTERY_HOST, port=int(POTTERY_PORT))")
        if new != text:
            first_import = re.search(r"^(import|from) ", new, re.M).start()
            new = new[:first_import] + POTTERY_TEST_HEADER + new[first_import:]
            open(path, "w").write(new)
    # Doctests (pottery/*.py docstrings, README.md): same target, via pottery's own REDIS_URL.
    docs = [os.path.join(src, "README.md")]
    for root, _, files in os.walk(os.path.join(src, "pottery")):
        docs += [os.path.join(root, f) for f in files if f.endswith(".py")]
    for path in docs:
        text = open(path).read()
        new = text.replace("Redis()", "Redis.from_url(__import__('os').environ['REDIS_URL'])")
        new = new.replace("'redis://localhost:6379/1'",
                          "__import__('os').environ['REDIS_URL'][:-1] + '1'")
        if new != text:
            open(path, "w").write(new)
    left = subprocess.run(["grep", "-rnE", "--exclude=conftest.py", "6379|localhost", "tests",
                           "README.md", "pottery"],
                          cwd=src, capture_output=True, text=True).stdout
    left = [line for line in left.splitlines()
            if "connection_kwargs.get('port', 6379)" not in line
            and "REDIS_URL', 'redis://localhost:6379/0'" not in line]
    if left:
        raise RuntimeError("pottery: hard-coded server addresses left after the rewrite:\n"
                           + "\n".join(left))


def install_pottery():
    return pip_sdist("pottery", POTTERY, post=prepare_pottery)


def prepare_pottery(dest):
    # The sdist ships tests/ without conftest.py and pytest.ini: vendored from the v3.0.1 tag.
    for f in ("conftest.py", "__init__.py"):
        shutil.copy(os.path.join(HERE, "pottery", f), os.path.join(dest, "tests", f))
    shutil.copy(os.path.join(HERE, "pottery", "pytest.ini"), os.path.join(dest, "pytest.ini"))
    rewrite_pottery(dest)


def install_ioredis():
    """The vendored functional tests plus node_modules from the pinned lock file."""
    src = os.path.join(HERE, "ioredis")
    dest = os.path.join(CACHE, "ioredis")
    os.makedirs(dest, exist_ok=True)
    want = open(os.path.join(src, "package-lock.json"), "rb").read()
    stamp = os.path.join(dest, "node_modules", ".package-lock.json.installed")
    if not (os.path.exists(stamp) and open(stamp, "rb").read() == want):
        for f in ("package.json", "package-lock.json"):
            shutil.copy(os.path.join(src, f), dest)
        log("compat: ioredis: npm ci")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                       cwd=dest, check=True)
        open(stamp, "wb").write(want)
    # The tests import the client as ../../lib/...: point lib at the published build.
    lib = os.path.join(dest, "lib")
    if not os.path.islink(lib):
        os.symlink(os.path.join("node_modules", "ioredis", "built"), lib)
    for f in ("tsconfig.json", "compat-port.js", "LICENSE"):
        shutil.copy(os.path.join(src, f), dest)
    test = os.path.join(dest, "test")
    shutil.rmtree(test, ignore_errors=True)
    shutil.copytree(os.path.join(src, "test"), test)
    return dest


# ------------------------------------------------------------------------------------ suites --

def nodeid(cwd, classname, name):
    """pytest's node id (tests/test_x.py::Class::test) from JUnit's dotted classname."""
    parts = classname.split(".")
    for i in range(len(parts), 0, -1):
        path = "/".join(parts[:i]) + ".py"
        if os.path.isfile(os.path.join(cwd, path)):
            return "::".join([path, *parts[i:], name])
    return "::".join([classname, name]) if classname else name


def junit_outcomes(path, cwd):
    """test id -> (passed/failed/error/skipped/xfailed, first line of the failure message)."""
    out = {}
    if not os.path.exists(path):
        return out
    for case in ET.parse(path).getroot().iter("testcase"):
        tid = nodeid(cwd, case.get("classname", ""), case.get("name", ""))
        bad = case.find("error")
        outcome = "error"
        if bad is None:
            bad, outcome = case.find("failure"), "failed"
        if bad is None:
            skipped = case.find("skipped")
            if skipped is None:
                outcome = PASSED
            else:
                outcome = "xfailed" if skipped.get("type") == "pytest.xfail" else "skipped"
        msg = (bad.get("message") or "").strip().split("\n")[0][:300] if bad is not None else ""
        # A test that errors in teardown after passing appears twice; keep the worst.
        if out.get(tid, (None,))[0] in (None, PASSED, "skipped"):
            out[tid] = (outcome, msg)
    return out


def run_pytest(cwd, args, env, xml, logfile):
    cmd = [VENV_PY, "-m", "pytest", "-p", "no:cacheprovider", "--timeout", "30", "-q",
           "--tb=native", "--durations=5", "-o", "junit_family=xunit1", f"--junitxml={xml}", *args]
    with open(logfile, "w") as f:
        subprocess.run(cmd, cwd=cwd, env=env, stdout=f, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL)
    return junit_outcomes(xml, cwd)


def run_redis_py(name, server, outdir, extra, only):
    src = install_redis_py()
    tests = list(only) if only else ["tests/test_commands.py"]
    return run_pytest(src, [*tests, f"--redis-url=redis://127.0.0.1:{server.port}/9", *extra],
                      dict(os.environ), os.path.join(outdir, f"{name}.xml"),
                      os.path.join(outdir, f"{name}.log"))


# pottery 3.0.1 pins redis-py 5.3 (its requirements.txt: 5.3.0b3); its repr tests assert
# redis-py 5's client repr (redis-py 7 adds socket_timeout), so its suite runs on the last 5.3
# release, ahead of the venv's redis-py 7.4.1 on PYTHONPATH. With it the suite passes whole on
# redis-server.
POTTERY_DEPS = ["redis==5.3.1", "PyJWT==2.10.1", "async-timeout==5.0.1"]


def install_pottery_deps():
    dest = os.path.join(CACHE, "pottery-deps")
    stamp = os.path.join(dest, ".installed")
    want = " ".join(POTTERY_DEPS)
    if os.path.isfile(stamp) and open(stamp).read() == want:
        return dest
    shutil.rmtree(dest, ignore_errors=True)
    log(f"compat: pip install --target {dest} {want}")
    subprocess.run([VENV_PY, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                    "--no-deps", "--target", dest, *POTTERY_DEPS], check=True)
    with open(stamp, "w") as f:
        f.write(want)
    return dest


def run_pottery(name, server, outdir, extra, only):
    src = install_pottery()
    env = dict(os.environ, POTTERY_REDIS_HOST="127.0.0.1", POTTERY_REDIS_PORT=str(server.port),
               REDIS_URL=f"redis://127.0.0.1:{server.port}/0", PYTHONPATH=install_pottery_deps())
    return run_pytest(src, [*(list(only) if only else ["tests"]), *extra], env,
                      os.path.join(outdir, f"{name}.xml"), os.path.join(outdir, f"{name}.log"))


def run_ioredis(name, server, outdir, extra, only):
    src = install_ioredis()
    out = os.path.join(outdir, f"{name}.json")
    env = dict(os.environ, TS_NODE_TRANSPILE_ONLY="true", NODE_ENV="test",
               COMPAT_REDIS_PORT=str(server.port))
    grep = []
    if only:
        titles = sorted({t.split(" > ", 1)[1] for t in only})
        grep = ["--grep", "^(" + "|".join(re.escape(t) for t in titles) + ")$"]
    cmd = [os.path.join("node_modules", ".bin", "mocha"), "--no-experimental-strip-types",
           "--require", "ts-node/register", "--require", "./compat-port.js",
           "--exit", "--timeout", "8000", "--recursive",
           "--reporter", "json", "--reporter-option", f"output={out}", *grep,
           "test/helpers/*.ts", "test/functional/**/*.ts", *extra]
    with open(os.path.join(outdir, f"{name}.log"), "w") as f:
        subprocess.run(cmd, cwd=src, env=env, stdout=f, stderr=subprocess.STDOUT,
                       stdin=subprocess.DEVNULL)
    outcomes = {}
    if not os.path.exists(out):
        return outcomes
    report = json.load(open(out))
    for kind, outcome in (("passes", PASSED), ("pending", "skipped"), ("failures", "failed")):
        for t in report.get(kind, []):
            tid = os.path.relpath(t.get("file") or "?", src) + " > " + t["fullTitle"]
            msg = str((t.get("err") or {}).get("message") or "").strip().split("\n")[0][:300]
            if outcomes.get(tid, (None,))[0] in (None, PASSED, "skipped"):
                outcomes[tid] = (outcome, msg)
    return outcomes


RUNNERS = {"redis-py": run_redis_py, "pottery": run_pottery, "ioredis": run_ioredis}


def run_suite(suite, target, outdir, extra, only=None, tag=""):
    name = f"{suite}-{target}{tag}"
    log(f"=== compat {suite} on {target}{' (re-run of the differing tests)' if only else ''} ===")
    start = time.time()
    with Server(target) as server:
        res = RUNNERS[suite](name, server, outdir, extra, only)
    log(f"compat {suite} on {target}: {summary(res) or 'no test ran'}"
        f" ({time.time() - start:.0f}s; log {outdir}/{name}.log)")
    return res


# ----------------------------------------------------------------------------------- compare --

def load_expected():
    expected = {}
    if os.path.exists(EXPECTED):
        for line in open(EXPECTED):
            tid, _, reason = line.partition("#")
            tid = tid.strip()
            if tid:
                expected[tid] = reason.strip()
    return expected


def summary(outcomes):
    counts = {}
    for o, _ in outcomes.values():
        counts[o] = counts.get(o, 0) + 1
    return ", ".join(f"{counts[k]} {k}" for k in sorted(counts))


def outcome(results, tid):
    return results.get(tid, ("not run", ""))[0]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("suites", nargs="*", default=None)
    ap.add_argument("--results", default=None, help="directory for logs and reports")
    ap.add_argument("--extra", action="append", default=[],
                    help="extra argument for the suite's runner (repeatable)")
    args = ap.parse_args()
    suites = args.suites or [s for s in os.environ.get("COMPAT_SUITES", ",".join(SUITES)).split(",") if s]
    for s in suites:
        if s not in RUNNERS:
            ap.error(f"unknown suite {s!r} (known: {', '.join(SUITES)})")
    targets = [t for t in os.environ.get("CLIENT_TARGETS", "redis,deadbolt").split(",") if t]
    outdir = os.path.abspath(args.results or tempfile.mkdtemp(prefix="compat-results-"))
    os.makedirs(outdir, exist_ok=True)
    os.makedirs(CACHE, exist_ok=True)
    expected = load_expected()

    rc = 0
    lines = []
    counts = []  # read by tests/clients/run-all
    for suite in suites:
        results = {}
        for target in targets:
            results[target] = run_suite(suite, target, outdir, args.extra)
            if not any(o == PASSED for o, _ in results[target].values()):
                log(f"compat {suite} on {target}: no test passed, the suite did not run")
                rc = 1
        if set(targets) != {"redis", "deadbolt"}:
            res = results[targets[0]]
            bad = sum(1 for o, _ in res.values() if o in ("failed", "error"))
            good = sum(1 for o, _ in res.values() if o == PASSED)
            counts.append(f"compat counts {suite}: passed {good} failed {bad} "
                          f"skipped {len(res) - good - bad}")
            continue
        redis, dead = results["redis"], results["deadbolt"]
        ids = sorted(set(redis) | set(dead))
        diffs = [t for t in ids if outcome(redis, t) == PASSED and outcome(dead, t) != PASSED]
        # Timing-sensitive tests fail now and then on a loaded machine: a difference counts
        # only if the test fails again on deadbolt when re-run alone.
        flaky = []
        if diffs:
            again = run_suite(suite, "deadbolt", outdir, args.extra, only=diffs, tag="-rerun")
            flaky = [t for t in diffs if outcome(again, t) == PASSED]
            diffs = [t for t in diffs if t not in flaky]
        bonus = [t for t in ids if outcome(dead, t) == PASSED and outcome(redis, t) != PASSED]
        new = [t for t in diffs if f"{suite}::{t}" not in expected]
        known = [t for t in diffs if f"{suite}::{t}" in expected]
        stale = [e for e in expected if e.startswith(suite + "::") and e[len(suite) + 2:] not in diffs]
        log(f"--- compat {suite}: redis {summary(redis)}; deadbolt {summary(dead)}")
        for t in new:
            log(f"DIFFERENCE {suite}::{t}  (deadbolt: {outcome(dead, t)}: {dead.get(t, ('', ''))[1]})")
        for t in known:
            log(f"expected difference {suite}::{t}  # {expected[f'{suite}::{t}']}")
        for t in flaky:
            log(f"flaky on deadbolt (failed, then passed when re-run) {suite}::{t}")
        for t in bonus:
            log(f"deadbolt only {suite}::{t}  (redis: {outcome(redis, t)}: {redis.get(t, ('', ''))[1]})")
        for e in stale:
            log(f"no longer differs (remove from expected-differences.txt): {e}")
        lines.append(f"{suite:9} redis: {summary(redis)} | deadbolt: {summary(dead)} | "
                     f"differences: {len(new)} new, {len(known)} expected, {len(flaky)} flaky; "
                     f"deadbolt-only passes: {len(bonus)}")
        with open(os.path.join(outdir, f"{suite}-differences.txt"), "w") as f:
            for t in new + known:
                f.write(f"{suite}::{t}\t{outcome(dead, t)}\t{dead.get(t, ('', ''))[1]}\n")
        # run-all's figures: passed = passing on both, failed = unexpected differences,
        # skipped = expected or flaky differences.
        matched = sum(1 for t in ids if outcome(redis, t) == PASSED and outcome(dead, t) == PASSED)
        counts.append(f"compat counts {suite}: passed {matched} failed {len(new)} "
                      f"skipped {len(known) + len(flaky)}")
        if new:
            rc = 1
    log("")
    log(f"=== compat summary (deadbolt: {os.environ.get('DEADBOLT_BIN')}; results: {outdir}) ===")
    for line in lines + counts:
        log(line)
    return rc


if __name__ == "__main__":
    # SIGTERM (a CI time-out, an interrupted run-all) unwinds like Ctrl-C, so the servers stop.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
