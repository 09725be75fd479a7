"""bench/failover's redis-py client: one long-lived Sentinel(...).master_for(...) at redis-py's
default settings. stdin: `go NAME` → it SETs NAME NX PX 30000 until one succeeds (retrying on
any error after 10 ms) and prints `ok SECONDS ATTEMPTS` (seconds since it read the line)."""
import sys
import time

from redis.sentinel import Sentinel

ports = [int(p) for p in sys.argv[1].split(",")]
sentinel = Sentinel([("127.0.0.1", p) for p in ports])
master = sentinel.master_for("mymaster")
print("ready", flush=True)
for line in sys.stdin:
    name = line.split()[1]
    t0 = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        try:
            if master.set(name, "t%d" % attempts, nx=True, px=30000):
                break
        except Exception:  # noqa: BLE001 - any failure: try again, as an application would
            pass
        time.sleep(0.01)
    print("ok %.4f %d" % (time.monotonic() - t0, attempts), flush=True)
