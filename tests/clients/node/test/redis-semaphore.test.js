'use strict';
// redis-semaphore 5.8.0 on ioredis 6: Mutex, Semaphore, MultiSemaphore (+ RedlockMutex on 3 servers).
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const Redis = require('ioredis');
const { Mutex, Semaphore, MultiSemaphore, RedlockMutex } = require('redis-semaphore');
const { TARGETS, startServer, sleep, uniq } = require('../servers');

const FAST = { acquireTimeout: 300, retryInterval: 20 };

for (const target of TARGETS) {
  describe(`redis-semaphore on ${target}`, () => {
    let servers = [];
    const open = [];
    let r;
    before(async () => {
      servers = await Promise.all([0, 1, 2].map(() => startServer(target)));
      r = client(servers[0]);
    });
    after(async () => { for (const c of open) c.disconnect(); await Promise.all(servers.map((s) => s.stop())); });
    function client(s) {
      const c = new Redis({ port: s.port, maxRetriesPerRequest: 1 });
      c.on('error', () => {});
      open.push(c);
      return c;
    }

    it('Mutex: acquire, exclusion, refresh keeps it past lockTimeout, release', async () => {
      const k = uniq('mx');
      const m = new Mutex(r, k, { lockTimeout: 1000, refreshInterval: 200, ...FAST });
      await m.acquire();
      assert.equal(m.isAcquired, true);
      assert.equal(await r.get(`mutex:${k}`), m.identifier);
      const rival = new Mutex(client(servers[0]), k, { lockTimeout: 500, ...FAST });
      assert.equal(await rival.tryAcquire(), false);
      await sleep(1400); // > lockTimeout: only the refresh script keeps it alive
      assert.equal(m.isAcquired, true);
      assert.equal(await rival.tryAcquire(), false);
      await r.script('FLUSH'); // refresh/release go EVALSHA → NOSCRIPT → EVAL
      await sleep(300); // at least one refresh after the flush
      assert.equal(m.isAcquired, true);
      await m.release();
      assert.equal(await r.exists(`mutex:${k}`), 0);
      assert.equal(await rival.tryAcquire(), true);
      await rival.release();
    });

    it('Mutex: lost lock is reported when the key is taken away', async () => {
      const k = uniq('mxlost');
      let lost = null;
      const m = new Mutex(r, k, { lockTimeout: 400, refreshInterval: 100, ...FAST,
        onLockLost: (err) => { lost = err; } });
      await m.acquire();
      await r.set(`mutex:${k}`, 'someone-else');
      for (let i = 0; i < 50 && !lost; i++) await sleep(20);
      assert.ok(lost, 'onLockLost was not called');
      assert.equal(m.isAcquired, false);
    });

    it('Semaphore: limit 2 admits two holders, refuses a third, frees on release', async () => {
      const k = uniq('sem');
      const mk = () => new Semaphore(r, k, 2, { lockTimeout: 2000, ...FAST });
      const [a, b, c] = [mk(), mk(), mk()];
      await a.acquire();
      await b.acquire();
      assert.equal(await r.zcard(`semaphore:${k}`), 2);
      assert.equal(await c.tryAcquire(), false);
      await a.release();
      assert.equal(await c.tryAcquire(), true);
      await b.release();
      await c.release();
      assert.equal(await r.zcard(`semaphore:${k}`), 0);
    });

    it('MultiSemaphore: permits are taken and returned together (unpack in Lua)', async () => {
      const k = uniq('msem');
      const big = new MultiSemaphore(r, k, 5, 3, { lockTimeout: 2000, ...FAST });
      const other = new MultiSemaphore(r, k, 5, 3, { lockTimeout: 2000, ...FAST });
      const small = new MultiSemaphore(r, k, 5, 2, { lockTimeout: 2000, ...FAST });
      await big.acquire();
      assert.equal(await r.zcard(`semaphore:${k}`), 3);
      assert.equal(await other.tryAcquire(), false);
      assert.equal(await small.tryAcquire(), true);
      assert.equal(await r.zcard(`semaphore:${k}`), 5);
      await big.release();
      assert.equal(await r.zcard(`semaphore:${k}`), 2);
      assert.equal(await other.tryAcquire(), true);
      await other.release();
      await small.release();
      assert.equal(await r.zcard(`semaphore:${k}`), 0);
    });

    it('RedlockMutex across three servers', async () => {
      const cs = servers.map(client);
      const k = uniq('rlmx');
      const m = new RedlockMutex(cs, k, { lockTimeout: 1000, ...FAST });
      await m.acquire();
      const held = await Promise.all(cs.map((c) => c.get(`mutex:${k}`)));
      assert.deepEqual(held, [m.identifier, m.identifier, m.identifier]);
      assert.equal(await new RedlockMutex(cs, k, { lockTimeout: 1000, ...FAST }).tryAcquire(), false);
      await m.release();
      assert.deepEqual(await Promise.all(cs.map((c) => c.exists(`mutex:${k}`))), [0, 0, 0]);
    });
  });
}
