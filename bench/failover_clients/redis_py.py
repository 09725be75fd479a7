"""bench/failover's redis-py client: one long-lived Sentinel(...).master_for(...), or with
`cluster` one long-lived RedisCluster(startup_nodes=...), at redis-py's default settings.
stdin: `go NAME` → it SETs NAME NX PX 30000 until the lock is its own (retrying on any error
after 10 ms) and prints `ok SECONDS ATTEMPTS` (seconds since it read the line). A nil reply
while the key holds this client's token counts as acquired: an earlier attempt was applied and
its reply lost (a connection cut as leadership moved)."""
import sys
import time

ports = [int(p) for p in sys.argv[1].split(",")]
if sys.argv[2:] == ["cluster"]:
    from redis.cluster import ClusterNode, RedisCluster

    master = RedisCluster(startup_nodes=[ClusterNode("127.0.0.1", p) for p in ports])
else:
    from redis.sentinel import Sentinel

    master = Sentinel([("127.0.0.1", p) for p in ports]).master_for("mymaster")
print("ready", flush=True)
for line in sys.stdin:
    name = line.split()[1]
    token = "t-" + name
    t0 = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        try:
            if master.set(name, token, nx=True, px=30000) or master.get(name) == token.encode():
                break
        except Exception:  # noqa: BLE001 - any failure: try again, as an application would
            pass
        time.sleep(0.01)
    print("ok %.4f %d" % (time.monotonic() - t0, attempts), flush=True)
