// bench/failover's ioredis client: one long-lived `new Redis({sentinels, name})` at ioredis's
// default settings. stdin: `go NAME` → SET NAME NX PX 30000 until one succeeds (retrying on any
// error after 10 ms), then prints `ok SECONDS ATTEMPTS` (seconds since it read the line).
const Redis = require("ioredis");
const readline = require("readline");
const ports = process.argv[2].split(",").map(Number);
const redis = new Redis({ sentinels: ports.map((port) => ({ host: "127.0.0.1", port })), name: "mymaster" });
redis.on("error", () => {});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const rl = readline.createInterface({ input: process.stdin });
let queue = Promise.resolve();
rl.on("line", (line) => {
  const name = line.split(" ")[1];
  queue = queue.then(async () => {
    const t0 = process.hrtime.bigint();
    let attempts = 0;
    for (;;) {
      attempts++;
      try {
        if ((await redis.set(name, "t" + attempts, "PX", 30000, "NX")) === "OK") break;
      } catch (e) {}
      await sleep(10);
    }
    const s = Number(process.hrtime.bigint() - t0) / 1e9;
    process.stdout.write(`ok ${s.toFixed(4)} ${attempts}\n`);
  });
});
redis.once("ready", () => process.stdout.write("ready\n"));
rl.on("close", () => redis.disconnect());
