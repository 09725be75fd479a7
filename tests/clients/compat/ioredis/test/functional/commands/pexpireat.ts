import Redis from "../../../lib/Redis";
import { expect } from "chai";
import { RESP_CONFIGS } from "../../helpers/respConfigs";

for (const { name, opts } of RESP_CONFIGS) {
  describe(`pexpireat (${name})`, () => {
    let redis: Redis;

    beforeEach(async () => {
      redis = new Redis(opts);
      await redis.flushdb();
    });

    afterEach(() => {
      redis.disconnect();
    });

    it("returns 0 when the key does not exist", async () => {
      const key = `pexpireat:${Date.now()}`;

      expect(await redis.pexpireat(key, 1)).to.equal(0);
    });

    it("returns 1 when the timeout is set", async () => {
      const key = `pexpireat:${Date.now()}`;
      const expireAt = Date.now() + 60_000;
      await redis.set(key, "value");

      expect(await redis.pexpireat(key, expireAt)).to.equal(1);
      expect(await redis.pttl(key)).to.be.greaterThan(0);
    });
  });
}
