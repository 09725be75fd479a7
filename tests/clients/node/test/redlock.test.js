'use strict';
// Redlock across three independent servers: @sesamecare-oss/redlock 1.4.0 (ioredis 6),
// classic redlock 4.2.0 (npm `latest`) and redlock 5.0.0-beta.2 (ioredis 5).
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis6 = require('ioredis');
const Redis5 = require('ioredis5');
const { Redlock: SesameRedlock, ExecutionError } = require('@sesamecare-oss/redlock');
const ClassicRedlock = require('redlock');
const Redlock5 = require('redlock5').default;
const { TARGETS, startServer, sleep, uniq } = require('../servers');

for (const target of TARGETS) {
  describe(`redlock on three ${target} servers`, () => {
    let servers = [];
    const open = [];
    before(async () => { servers = await Promise.all([0, 1, 2].map(() => startServer(target))); });
    after(async () => { for (const c of open) c.disconnect(); await Promise.all(servers.map((s) => s.stop())); });
    const clients = (Cls) => servers.map((s) => {
      // Fail fast on a dead master instead of queueing: a refused vote, not a hang.
      const c = new Cls({ port: s.port, maxRetriesPerRequest: 0, enableOfflineQueue: true,
        retryStrategy: () => 200 });
      c.on('error', () => {});
      open.push(c);
      return c;
    });
    const holders = async (cs, key) => (await Promise.all(cs.map((c) => c.get(key).catch(() => null))));

    it('@sesamecare-oss/redlock: acquire, contention, extend, release, multi-resource', async () => {
      const cs = clients(Redis6);
      const redlock = new SesameRedlock(cs, { retryCount: 0 });
      const [a, b] = [uniq('ses'), uniq('ses')];
      const lock = await redlock.acquire([a, b], 2000);
      // acquire/extend/release resolve at quorum; each attempt's stats resolve once every server voted.
      await Promise.all(lock.attempts);
      assert.deepEqual(await holders(cs, a), [lock.value, lock.value, lock.value]);
      await assert.rejects(redlock.acquire([b], 2000), ExecutionError);
      for (const c of cs) await c.script('FLUSH'); // next calls: EVALSHA → NOSCRIPT → EVAL
      const extended = await lock.extend(5000);
      await Promise.all(extended.attempts);
      const pttls = await Promise.all(cs.map((c) => c.pttl(a)));
      for (const p of pttls) assert.ok(p > 4000 && p <= 5000, String(pttls));
      const rel = await extended.release();
      assert.equal(rel.attempts.length, 1);
      // release() resolves once a quorum answered; its stats resolve when the last server did.
      await Promise.all(rel.attempts);
      assert.deepEqual(await holders(cs, a), [null, null, null]);
      const again = await redlock.acquire([b], 1000);
      await again.release();
    });

    it('@sesamecare-oss/redlock: using() auto-extends a lock past its duration', async () => {
      const cs = clients(Redis6);
      // Extension fires 900 ms before expiry: wide margins, so a loaded machine can't expire it.
      const redlock = new SesameRedlock(cs, { retryCount: 0, automaticExtensionThreshold: 900 });
      const k = uniq('ses-using');
      let extensions = 0;
      const result = await redlock.using([k], 1200, async (signal, ctx) => {
        await sleep(2000); // well past the initial 1200 ms
        assert.equal(signal.aborted, false);
        // Still exclusively held, long after the initial 1200 ms.
        await assert.rejects(redlock.acquire([k], 1000), ExecutionError);
        extensions = ctx.extensions;
        return 'done';
      });
      assert.equal(result, 'done');
      assert.ok(extensions >= 2, `extensions=${extensions}`);
      assert.deepEqual(await holders(cs, k), [null, null, null]);
    });

    it('classic redlock 4.2.0: lock, contention, extend, unlock', async () => {
      const cs = clients(Redis5);
      const redlock = new ClassicRedlock(cs, { retryCount: 0 });
      const k = uniq('rl4');
      const lock = await redlock.lock(k, 2000);
      assert.deepEqual(await holders(cs, k), [lock.value, lock.value, lock.value]);
      await assert.rejects(redlock.lock(k, 2000), ClassicRedlock.LockError);
      for (const c of cs) await c.script('FLUSH');
      const ext = await lock.extend(5000);
      for (const p of await Promise.all(cs.map((c) => c.pttl(k)))) assert.ok(p > 4000 && p <= 5000, String(p));
      await ext.unlock();
      assert.deepEqual(await holders(cs, k), [null, null, null]);
      await (await redlock.lock(k, 500)).unlock();
    });

    it('redlock 5.0.0-beta.2: acquire, extend, release, using', async () => {
      const cs = clients(Redis5);
      const redlock = new Redlock5(cs, { retryCount: 0, automaticExtensionThreshold: 900 });
      const k = uniq('rl5');
      const lock = await redlock.acquire([k], 2000);
      await assert.rejects(redlock.acquire([k], 2000));
      const ext = await lock.extend(4000);
      // release() resolves at quorum; its attempt stats resolve once the last server answered.
      const rel = await ext.release();
      await Promise.all(rel.attempts);
      assert.deepEqual(await holders(cs, k), [null, null, null]);
      const out = await redlock.using([k], 1200, async (signal) => {
        await sleep(1600);
        assert.equal(signal.aborted, false);
        await assert.rejects(redlock.acquire([k], 500));
        return 42;
      });
      assert.equal(out, 42);
    });

    it('quorum survives one killed master (sesame, classic)', async () => {
      const cs6 = clients(Redis6);
      const cs5 = clients(Redis5);
      const ses = new SesameRedlock(cs6, { retryCount: 0 });
      const classic = new ClassicRedlock(cs5, { retryCount: 0 });
      const k = uniq('quorum');
      const lock = await ses.acquire([k], 5000);
      await servers[2].kill(); // crash one of three while the lock is held
      await assert.rejects(ses.acquire([k], 5000), ExecutionError); // 2 live masters still refuse
      const ext = await lock.extend(5000); // 2 of 3 votes
      await ext.release();
      const l2 = await ses.acquire([k], 2000); // a fresh quorum on the 2 live masters
      await l2.release();
      const l3 = await classic.lock(uniq('quorum4'), 2000);
      await l3.unlock();
      servers[2] = await startServer(target); // leave three servers for later tests
    });
  });
}
