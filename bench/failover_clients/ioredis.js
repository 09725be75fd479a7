// bench/failover's ioredis client: one long-lived `new Redis({sentinels, name})`, or with
// `cluster` one long-lived `new Redis.Cluster(nodes)`, at ioredis's default settings. stdin:
// `go NAME` → SET NAME NX PX 30000 until the lock is its own (retrying on any error after
// 10 ms), then prints `ok SECONDS ATTEMPTS` (seconds since it read the line). A nil reply while
// the key holds this client's token counts as acquired: an earlier attempt was applied and its
// reply lost.
const Redis = require("ioredis");
const readline = require("readline");
const ports = process.argv[2].split(",").map(Number);
const nodes = ports.map((port) => ({ host: "127.0.0.1", port }));
const redis = process.argv[3] === "cluster"
  ? new Redis.Cluster(nodes)
  : new Redis({ sentinels: nodes, name: "mymaster" });
redis.on("error", () => {});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rl = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
rl.on("line", (line) => {
  const name = line.split(" ")[1];
  const token = "t-" + name;
  queue = queue.then(async () => {
    const t0 = process.hrtime.bigint();
    let attempts = 0;
    for (;;) {
      attempts++;
      try {
        if ((await redis.set(name, token, "PX", 30000, "NX")) === "OK") break;
        if ((await redis.get(name)) === token) break;
      } catch (e) {}
      await sleep(10);
    }
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    process.stdout.write(`ok ${s.toFixed(4)} ${attempts}\n`);
  });
});
redis.once("ready", () => process.stdout.write("ready\n"));
rl.on("close", () => redis.disconnect());
