'use strict';
// ioredis 6 (RESP3 by default, RESP2 fallback on NOPROTO, protocol 2) and ioredis 5 (RESP2).
const { describe, it, before, after } = require('node:test');
const assert = require('node:assert/strict');
const net = require('node:net');
const Redis6 = require('ioredis');
const Redis5 = require('ioredis5');
const { TARGETS, startServer, uniq } = require('../servers');

// A pass-through proxy that turns the client's `hello 3` into `hello 4`, so the *server* answers
// NOPROTO and ioredis 6 must take its RESP2 fallback path (clients.md §5.1).
function helloDowngradeProxy(port) {
  return new Promise((resolve) => {
    const srv = net.createServer((c) => {
      const s = net.connect(port, '127.0.0.1');
      c.on('data', (d) => s.write(Buffer.from(d.toString('latin1').replace('$5\r\nhello\r\n$1\r\n3\r\n', '$5\r\nhello\r\n$1\r\n4\r\n'), 'latin1')));
      s.on('data', (d) => c.write(d));
      c.on('close', () => s.destroy()); s.on('close', () => c.destroy());
      c.on('error', () => s.destroy()); s.on('error', () => c.destroy());
    });
    srv.listen(0, '127.0.0.1', () => resolve(srv));
  });
}

async function exercise(r, sub) {
  const k = uniq('io');
  assert.equal(await r.set(k, 'v1', 'PX', 5000, 'NX'), 'OK');
  assert.equal(await r.set(k, 'v2', 'PX', 5000, 'NX'), null);
  assert.equal(await r.get(k), 'v1');
  const pttl = await r.pttl(k);
  assert.ok(pttl > 4000 && pttl <= 5000, String(pttl));
  // defineCommand: EVAL the first time on a socket, EVALSHA after, EVAL again on NOSCRIPT.
  r.defineCommand(`cad${k.replace(/\W/g, '')}`, {
    numberOfKeys: 1,
    lua: "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end",
  });
  const cad = r[`cad${k.replace(/\W/g, '')}`].bind(r);
  assert.equal(await cad(k, 'nope'), 0);
  await r.script('FLUSH');
  assert.equal(await cad(k, 'nope'), 0);
  assert.equal(await cad(k, 'v1'), 1);
  assert.equal(await r.exists(k), 0);
  // MULTI/EXEC and pipelines.
  const res = await r.multi().set(k, 1).incr(k).incrby(k, 5).get(k).exec();
  assert.deepEqual(res, [[null, 'OK'], [null, 2], [null, 7], [null, '7']]);
  const pipe = await r.pipeline().hset(`${k}:h`, 'a', '1', 'b', '2').hgetall(`${k}:h`).exec();
  assert.deepEqual(pipe[1][1], { a: '1', b: '2' });
  // Binary-safe values.
  const bin = Buffer.from([0, 13, 10, 255, 1, 2, 3]);
  await r.set(`${k}:bin`, bin);
  assert.deepEqual(await r.getBuffer(`${k}:bin`), bin);
  // Pub/sub.
  const ch = `${k}:ch`;
  const got = new Promise((resolve) => sub.on('message', (c, m) => { if (c === ch) resolve(m); }));
  assert.equal(await sub.subscribe(ch), 1);
  assert.equal(await r.publish(ch, 'hello'), 1);
  assert.equal(await got, 'hello');
  await sub.unsubscribe(ch);
}

for (const target of TARGETS) {
  describe(`ioredis on ${target}`, () => {
    let server;
    const open = [];
    before(async () => { server = await startServer(target); });
    after(async () => { for (const c of open) c.disconnect(); await server.stop(); });
    const mk = (Cls, opts = {}) => {
      const c = new Cls({ port: server.port, lazyConnect: true, maxRetriesPerRequest: 1, ...opts });
      open.push(c);
      return c;
    };

    it('ioredis 6 default: HELLO 3 (RESP3), INFO ready check, scripts, MULTI, pub/sub', async () => {
      const r = mk(Redis6); const sub = mk(Redis6);
      await r.connect(); await sub.connect();
      assert.equal(r.condition.protocol, 3);
      await exercise(r, sub);
    });

    it('ioredis 6 falls back to RESP2 when the server refuses the protocol (NOPROTO)', async () => {
      const proxy = await helloDowngradeProxy(server.port);
      try {
        const r = mk(Redis6, { port: proxy.address().port });
        const sub = mk(Redis6, { port: proxy.address().port });
        await r.connect(); await sub.connect();
        assert.equal(r.condition.protocol, 2);
        await exercise(r, sub);
        r.disconnect(); sub.disconnect();
      } finally { proxy.close(); }
    });

    it('ioredis 6 with protocol: 2', async () => {
      const r = mk(Redis6, { protocol: 2 }); const sub = mk(Redis6, { protocol: 2 });
      await r.connect(); await sub.connect();
      assert.equal(r.condition.protocol, 2);
      await exercise(r, sub);
    });

    it('ioredis 5 (RESP2, no HELLO)', async () => {
      const r = mk(Redis5); const sub = mk(Redis5);
      await r.connect(); await sub.connect();
      await exercise(r, sub);
    });

    it('quit() gets OK and the connection ends', async () => {
      const r = mk(Redis6);
      await r.connect();
      assert.equal(await r.quit(), 'OK');
    });
  });
}
