'use strict';
// node-redis 6 (`redis` package, RESP3 by default: a refused HELLO would be fatal) and 4 (RESP2).
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const redis6 = require('redis');
const redis4 = require('redis4');
const { TARGETS, startServer, uniq } = require('../servers');

const CAD = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";

for (const target of TARGETS) {
  describe(`node-redis on ${target}`, () => {
    let server;
    const open = [];
    before(async () => { server = await startServer(target); });
    after(async () => {
      for (const c of open) if (c.isOpen) { try { await c.disconnect(); } catch { /* already closed */ } }
      await server.stop();
    });

    it('node-redis 6: RESP3 handshake, SET NX PX, defineScript NOSCRIPT → EVAL, MULTI, pub/sub', async () => {
      const scripts = { cad: redis6.defineScript({ NUMBER_OF_KEYS: 1, SCRIPT: CAD,
        parseCommand(parser, key, token) { parser.pushKey(key); parser.push(token); } }) };
      const c = redis6.createClient({ socket: { port: server.port, host: '127.0.0.1', reconnectStrategy: false }, scripts });
      c.on('error', () => {});
      open.push(c);
      await c.connect();
      assert.equal(c.options.RESP ?? 3, 3);
      const k = uniq('nr6');
      assert.equal(await c.set(k, 'tok', { NX: true, PX: 5000 }), 'OK');
      assert.equal(await c.set(k, 'other', { NX: true, PX: 5000 }), null);
      assert.equal(await c.get(k), 'tok');
      await c.scriptFlush();
      assert.equal(await c.cad(k, 'nope'), 0); // EVALSHA → NOSCRIPT → EVAL
      assert.equal(await c.cad(k, 'tok'), 1);  // EVALSHA (cached by the EVAL)
      assert.equal(await c.exists(k), 0);
      const res = await c.multi().set(k, '1').incr(k).get(k).exec();
      assert.deepEqual(res, ['OK', 2, '2']);
      await c.hSet(`${k}:h`, { a: '1', b: '2' });
      assert.deepEqual({ ...(await c.hGetAll(`${k}:h`)) }, { a: '1', b: '2' });

      const sub = c.duplicate();
      sub.on('error', () => {});
      open.push(sub);
      await sub.connect();
      const ch = `${k}:ch`;
      let resolveMsg;
      const got = new Promise((resolve) => { resolveMsg = resolve; });
      await sub.subscribe(ch, (m) => resolveMsg(m)); // resolves on the server's subscribe ack
      assert.equal(await c.publish(ch, 'hi'), 1);
      assert.equal(await got, 'hi');
      await sub.unsubscribe(ch);
      await sub.close();
      await c.close();
    });

    it('node-redis 4: RESP2, SET NX PX, scripts, MULTI, pub/sub', async () => {
      const scripts = { cad: redis4.defineScript({ NUMBER_OF_KEYS: 1, SCRIPT: CAD,
        transformArguments(key, token) { return [key, token]; } }) };
      const c = redis4.createClient({ socket: { port: server.port, host: '127.0.0.1', reconnectStrategy: false }, scripts });
      c.on('error', () => {});
      open.push(c);
      await c.connect();
      const k = uniq('nr4');
      assert.equal(await c.set(k, 'tok', { NX: true, PX: 5000 }), 'OK');
      assert.equal(await c.set(k, 'x', { NX: true, PX: 5000 }), null);
      await c.scriptFlush();
      assert.equal(await c.cad(k, 'nope'), 0);
      assert.equal(await c.cad(k, 'tok'), 1);
      const res = await c.multi().set(k, '1').incr(k).get(k).exec();
      assert.deepEqual(res, ['OK', 2, '2']);
      const sub = c.duplicate();
      sub.on('error', () => {});
      open.push(sub);
      await sub.connect();
      const ch = `${k}:ch`;
      let resolveMsg;
      const got = new Promise((resolve) => { resolveMsg = resolve; });
      await sub.subscribe(ch, (m) => resolveMsg(m));
      assert.equal(await c.publish(ch, 'hi4'), 1);
      assert.equal(await got, 'hi4');
      await sub.quit();
      assert.equal(await c.quit(), 'OK');
    });
  });
}
