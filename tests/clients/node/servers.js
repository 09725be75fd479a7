'use strict';
// Servers for the Node client suites: each test file runs its tests once per target,
// `redis` (a real redis-server 7.0, the reference) and `deadbolt` ($DEADBOLT_BIN).
const { spawn, spawnSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');

const REPO = path.resolve(__dirname, '..', '..', '..');
const TARGETS = (process.env.CLIENT_TARGETS || 'redis,deadbolt').split(',').filter(Boolean);

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function ping(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = '';
    const done = (ok) => { s.destroy(); resolve(ok); };
    s.setTimeout(300, () => done(false));
    s.on('error', () => done(false));
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => { buf += d; if (buf.includes('\r\n')) done(buf.startsWith('+PONG')); });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

class Server {
  constructor(kind) { this.kind = kind; this.dir = fs.mkdtempSync(path.join(os.tmpdir(), `clients-${kind}-`)); }

  async start() {
    for (let attempt = 0; attempt < 5; attempt++) {
      const port = await freePort();
      let exe; let args;
      if (this.kind === 'redis') {
        exe = 'redis-server';
        args = ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir];
      } else {
        exe = process.env.DEADBOLT_BIN || path.join(REPO, 'target', 'debug', 'deadbolt');
        if (!fs.existsSync(exe)) throw new Error(`deadbolt binary not found at ${exe} (cargo build)`);
        args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', this.dir, '--appendonly', 'no'];
      }
      const log = fs.openSync(path.join(this.dir, 'server.log'), 'w');
      const proc = spawn(exe, args, { cwd: this.dir, stdio: ['ignore', log, log] });
      let exited = false;
      proc.on('exit', () => { exited = true; });
      const deadline = Date.now() + 10000;
      while (Date.now() < deadline && !exited) {
        if (await ping(port)) { this.proc = proc; this.port = port; return this; }
        await sleep(20);
      }
      proc.kill('SIGKILL');
    }
    throw new Error(`${this.kind} did not start: ${fs.readFileSync(path.join(this.dir, 'server.log'), 'utf8').slice(-2000)}`);
  }

  kill() {
    if (!this.proc || this.proc.exitCode !== null || this.proc.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => { this.proc.once('exit', resolve); this.proc.kill('SIGKILL'); });
  }

  async stop() { await this.kill(); fs.rmSync(this.dir, { recursive: true, force: true }); }
}

async function startServer(kind) { return new Server(kind).start(); }

// One command on a fresh connection; resolves to the raw reply ('' on error or timeout).
function rawCmd(port, args, timeout = 2000) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = '';
    const done = (r) => { s.destroy(); resolve(r); };
    s.setTimeout(timeout, () => done(''));
    s.on('error', () => done(''));
    s.on('connect', () => s.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join('')}`));
    // Replies asked for here are one line, or `*2 $ip $port`, or nil.
    s.on('data', (d) => {
      buf += d;
      const lines = buf.split('\r\n');
      if (!buf.startsWith('*2') ? buf.includes('\r\n') : lines.length >= 6) done(buf);
    });
  });
}

// One RESP2 reply parsed from buf at i: [value, next index], or null while incomplete. Errors
// come back as Error objects.
function parseResp(buf, i = 0) {
  const nl = buf.indexOf('\r\n', i);
  if (nl < 0) return null;
  const kind = String.fromCharCode(buf[i]);
  const line = buf.toString('latin1', i + 1, nl);
  if (kind === '+') return [line, nl + 2];
  if (kind === '-') return [new Error(line), nl + 2];
  if (kind === ':') return [Number(line), nl + 2];
  if (kind === '$') {
    const n = Number(line);
    if (n < 0) return [null, nl + 2];
    return buf.length >= nl + 2 + n + 2 ? [buf.toString('utf8', nl + 2, nl + 2 + n), nl + 2 + n + 2] : null;
  }
  if (kind === '*') {
    const out = [];
    let j = nl + 2;
    for (let k = 0; k < Number(line); k++) {
      const r = parseResp(buf, j);
      if (!r) return null;
      out.push(r[0]);
      [, j] = r;
    }
    return [out, j];
  }
  throw new Error(`not RESP2: ${buf.toString('latin1', i, i + 20)}`);
}

// One command on a fresh connection, its reply parsed (undefined on a connection error or timeout).
function call(port, args, timeout = 2000) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1');
    let buf = Buffer.alloc(0);
    const done = (r) => { s.destroy(); resolve(r); };
    s.setTimeout(timeout, () => done(undefined));
    s.on('error', () => done(undefined));
    // A node may close a connection without a reply (a leader stepping down closes its clients).
    s.on('close', () => done(undefined));
    s.on('connect', () => s.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(String(a))}\r\n${a}\r\n`).join('')}`));
    s.on('data', (d) => {
      buf = Buffer.concat([buf, d]);
      const r = parseResp(buf);
      if (r) done(r[0]);
    });
  });
}

function crc16(bytes) {
  let crc = 0;
  for (const b of bytes) {
    crc ^= b << 8;
    for (let k = 0; k < 8; k++) crc = (crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1) & 0xffff;
  }
  return crc;
}

// Redis Cluster's hash slot of a key ({hash tag} included), computed here.
function keySlot(key) {
  let k = Buffer.from(key);
  const s = k.indexOf('{');
  if (s >= 0) {
    const e = k.indexOf('}', s + 1);
    if (e > s + 1) k = k.subarray(s + 1, e);
  }
  return crc16(k) & 16383;
}

// `cluster-groups 3`: the slots split as `redis-cli --cluster create` splits them among three
// masters; group n's preferred leader is node n + 1.
const GROUP_RANGES = [[0, 5460], [5461, 10922], [10923, 16383]];

// A key `prefix:<n>` whose slot satisfies `want(slot)`.
function keyWhere(prefix, want) {
  for (let n = 0; ; n++) if (want(keySlot(`${prefix}:${n}`))) return `${prefix}:${n}`;
}
const keyInGroup = (prefix, g) => keyWhere(prefix, (s) => s >= GROUP_RANGES[g][0] && s <= GROUP_RANGES[g][1]);
const keyInSlot = (prefix, slot) => keyWhere(prefix, (s) => s === slot);

// The master port CLUSTER SLOTS on `port` names for `slot` (null if none or no answer).
async function slotMasterPort(port, slot) {
  const r = await call(port, ['CLUSTER', 'SLOTS']);
  if (!Array.isArray(r)) return null;
  for (const [lo, hi, m] of r) if (slot >= lo && slot <= hi) return Number(m[1]);
  return null;
}

// A cluster of deadbolt nodes on free ports, each also a Sentinel for master `mymaster`.
// FAILOVER_SABOTAGE=single (one node) or =nokill (kill() leaves the leader running) shows that
// the failover tests fail without a real failover.
// With `{ clusterEnabled: true }` every node also speaks the Redis Cluster protocol
// (`cluster-enabled yes`): the leader masters all 16,384 slots, followers answer MOVED.
class Cluster {
  constructor(n, { clusterEnabled = false, groups = 0 } = {}) {
    this.n = process.env.FAILOVER_SABOTAGE === 'single' ? 1 : n;
    this.extra = clusterEnabled ? ['--cluster-enabled', 'yes'] : [];
    if (groups) this.extra.push('--cluster-groups', String(groups));
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clients-cluster-'));
  }

  async start() {
    const exe = process.env.DEADBOLT_BIN || path.join(REPO, 'target', 'debug', 'deadbolt');
    if (!fs.existsSync(exe)) throw new Error(`deadbolt binary not found at ${exe} (cargo build)`);
    this.ports = [];
    for (let i = 0; i < this.n; i++) this.ports.push([await freePort(), await freePort()]);
    const peers = this.ports.map(([p, pp], i) => `${i + 1}@127.0.0.1:${p}:${pp}`).join(' ');
    // Cluster mode refuses to start without the peer port's shared secret.
    const secret = require('crypto').randomBytes(32).toString('hex');
    this.spawnNode = (i) => {
      const dir = path.join(this.dir, `n${i + 1}`);
      fs.mkdirSync(dir, { recursive: true });
      const log = fs.openSync(path.join(dir, 'server.log'), 'a');
      const proc = spawn(exe, ['--port', String(this.ports[i][0]), '--bind', '127.0.0.1', '--dir', dir,
        '--cluster-node-id', String(i + 1), '--cluster-peers', peers, '--cluster-secret', secret, ...this.extra],
        { cwd: dir, stdio: ['ignore', log, log] });
      proc.exited = false;
      proc.on('exit', () => { proc.exited = true; });
      return proc;
    };
    this.procs = this.ports.map((_, i) => this.spawnNode(i));
    const deadline = Date.now() + 20000;
    for (const [port] of this.ports) {
      while (!(await ping(port))) {
        if (Date.now() > deadline) throw new Error(`node on ${port} never answered PING\n${this.logs()}`);
        await sleep(20);
      }
    }
    return this;
  }

  // Starts a killed node i again on its data directory (it rejoins as a follower).
  async restart(i) {
    if (!this.procs[i].exited) throw new Error(`node ${i + 1} is still running`);
    this.procs[i] = this.spawnNode(i);
    const deadline = Date.now() + 20000;
    while (!(await ping(this.ports[i][0]))) {
      if (Date.now() > deadline) throw new Error(`node ${i + 1} never answered PING after a restart\n${this.logs()}`);
      await sleep(20);
    }
  }

  clientPorts() { return this.ports.map(([p]) => p); }

  sentinels() { return this.clientPorts().map((port) => ({ host: '127.0.0.1', port })); }

  async masterAddr(i) {
    const r = await rawCmd(this.clientPorts()[i], ['SENTINEL', 'get-master-addr-by-name', 'mymaster']);
    const parts = r.split('\r\n');
    return r.startsWith('*2\r\n') ? `${parts[2]}:${parts[4]}` : null;
  }

  // Index of the leader every live node names through SENTINEL get-master-addr-by-name, once
  // it accepts a write (and is not `not`).
  async leader(timeout = 15000, not = -1) {
    const deadline = Date.now() + timeout;
    let seen = [];
    while (Date.now() < deadline) {
      const live = this.procs.map((p, i) => i).filter((i) => !this.procs[i].exited);
      seen = await Promise.all(live.map((i) => this.masterAddr(i)));
      if (seen[0] && seen.every((s) => s === seen[0])) {
        const i = this.clientPorts().indexOf(Number(seen[0].split(':')[1]));
        if (i !== not && i >= 0 && !this.procs[i].exited
            && (await rawCmd(this.clientPorts()[i], ['SET', '__probe', '1'])) === '+OK\r\n') return i;
      }
      await sleep(20);
    }
    throw new Error(`no agreed leader within ${timeout} ms: ${seen}\n${this.logs()}`);
  }

  live() { return this.procs.map((p, i) => i).filter((i) => !this.procs[i].exited); }

  // Index of the node every live node's CLUSTER SLOTS names as master of `slot` (not `not`),
  // once it accepts a write to a key of that slot (its group has a serving leader).
  async slotMaster(slot, timeout = 15000, not = -1) {
    const probe = keyInSlot('__probe', slot);
    const deadline = Date.now() + timeout;
    let seen = [];
    while (Date.now() < deadline) {
      seen = await Promise.all(this.live().map((i) => slotMasterPort(this.clientPorts()[i], slot)));
      const i = this.clientPorts().indexOf(seen[0]);
      if (seen[0] && seen.every((s) => s === seen[0]) && i >= 0 && i !== not && !this.procs[i].exited
          && (await call(seen[0], ['SET', probe, '1'])) === 'OK') return i;
      await sleep(20);
    }
    throw new Error(`no agreed master of slot ${slot} within ${timeout} ms: ${seen}\n${this.logs()}`);
  }

  // With `groups: 3` on three nodes: waits until each node leads one group as every node's
  // CLUSTER SLOTS says (the spread), and resolves to the leader's index per group.
  async groupLeaders(timeout = 20000) {
    const deadline = Date.now() + timeout;
    let seen = [];
    while (Date.now() < deadline) {
      seen = [];
      for (const [lo] of GROUP_RANGES) seen.push(await this.slotMaster(lo, Math.max(100, deadline - Date.now())));
      if ([...seen].sort().join() === '0,1,2') return seen;
      await sleep(20);
    }
    throw new Error(`the groups' leaders never spread over the nodes: ${seen}\n${this.logs()}`);
  }

  // SIGKILL node i, as a crash would; resolves to the time of the kill (performance.now()).
  kill(i) {
    const t = performance.now();
    if (process.env.FAILOVER_SABOTAGE === 'nokill') return Promise.resolve(t);
    const p = this.procs[i];
    if (p.exited) return Promise.resolve(t);
    return new Promise((resolve) => { p.once('exit', () => resolve(t)); p.kill('SIGKILL'); });
  }

  logs() {
    return this.procs.map((p, i) => {
      try {
        return `--- node ${i + 1} ---\n${fs.readFileSync(path.join(this.dir, `n${i + 1}`, 'server.log'), 'utf8').slice(-1500)}`;
      } catch { return ''; }
    }).join('\n');
  }

  async stop() {
    await Promise.all(this.procs.map((p) => (p.exited ? null
      : new Promise((resolve) => { p.once('exit', resolve); p.kill('SIGKILL'); }))));
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

async function startCluster(n = 3, opts = {}) { return new Cluster(n, opts).start(); }

// redis-cli against one node: its stdout ('' when it fails).
function cli(port, ...args) {
  const r = spawnSync('redis-cli', ['-p', String(port), ...args], { encoding: 'utf8', timeout: 3000 });
  return r.status === 0 ? r.stdout : '';
}

// The master of `slot` in a node's CLUSTER NODES ("host:port"), or null.
function masterOfSlot(port, slot) {
  for (const line of cli(port, 'CLUSTER', 'NODES').split('\n')) {
    const f = line.trim().split(' ');
    if (f.length < 9 || !f[2].split(',').includes('master') || f[2].includes('fail')) continue;
    for (const r of f.slice(8)) {
      const [lo, hi = lo] = r.split('-').map(Number);
      if (slot >= lo && slot <= hi) return f[1].split('@')[0];
    }
  }
  return null;
}

// A real Redis Cluster 7.0: `masters` masters (`redis-server --cluster-enabled yes`), each with
// `replicas` replicas, slots spread by `redis-cli --cluster create`, once every node reports
// cluster_state:ok. The reference for the cluster-mode client tests. With replicas, a
// `cluster-node-timeout` of 1 s so a killed master fails over in seconds.
class RedisCluster {
  constructor(masters, replicas = 0) {
    this.masters = masters;
    this.replicas = replicas;
    this.n = masters * (1 + replicas);
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'clients-rcluster-'));
  }

  spawnNode(i) {
    const [port, bus] = this.ports[i];
    const dir = path.join(this.dir, `n${i + 1}`);
    fs.mkdirSync(dir, { recursive: true });
    const log = fs.openSync(path.join(dir, 'server.log'), 'a');
    const timeout = this.replicas > 0 ? ['--cluster-node-timeout', '1000'] : [];
    const proc = spawn('redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--cluster-enabled', 'yes',
      '--cluster-port', String(bus), '--cluster-config-file', path.join(dir, 'nodes.conf'), ...timeout, '--save', '',
      '--appendonly', 'no', '--dir', dir], { cwd: dir, stdio: ['ignore', log, log] });
    proc.exited = false;
    proc.on('exit', () => { proc.exited = true; });
    return proc;
  }

  async waitPing(i, deadline) {
    while (!(await ping(this.ports[i][0]))) {
      if (Date.now() > deadline) throw new Error(`redis-server on ${this.ports[i][0]} never answered PING`);
      await sleep(20);
    }
  }

  async start() {
    this.ports = [];
    for (let i = 0; i < this.n; i++) this.ports.push([await freePort(), await freePort()]);
    this.procs = this.ports.map((_, i) => this.spawnNode(i));
    const deadline = Date.now() + 30000;
    for (let i = 0; i < this.n; i++) await this.waitPing(i, deadline);
    const create = spawnSync('redis-cli', ['--cluster', 'create', ...this.ports.map(([p]) => `127.0.0.1:${p}`),
      '--cluster-replicas', String(this.replicas), '--cluster-yes'], { encoding: 'utf8', timeout: 30000 });
    if (create.status !== 0) throw new Error(`redis-cli --cluster create failed: ${create.stdout}${create.stderr}`);
    await this.settled(deadline);
    return this;
  }

  // Every live node reports cluster_state:ok, and every live replica's link to its master is up.
  async settled(deadline) {
    for (let i = 0; i < this.n; i++) {
      if (this.procs[i].exited) continue;
      const port = this.ports[i][0];
      for (;;) {
        const info = cli(port, 'CLUSTER', 'INFO');
        const repl = cli(port, 'INFO', 'replication');
        if (info.includes('cluster_state:ok') && (repl.includes('role:master') || repl.includes('master_link_status:up'))) break;
        if (Date.now() > deadline) throw new Error(`redis-server on ${port} never settled: ${info.split('\n')[0]} ${repl}`);
        await sleep(50);
      }
    }
  }

  clientPorts() { return this.ports.map(([p]) => p); }

  // Index of the node every live node names as master of `key`'s slot (not `not`).
  async masterOf(key, timeout = 15000, not = -1) {
    const live = () => this.procs.map((p, i) => i).filter((i) => !this.procs[i].exited);
    const slot = Number(cli(this.ports[live()[0]][0], 'CLUSTER', 'KEYSLOT', key));
    const deadline = Date.now() + timeout;
    let seen = [];
    for (;;) {
      seen = live().map((i) => masterOfSlot(this.ports[i][0], slot));
      if (seen[0] && seen.every((m) => m === seen[0])) {
        const i = this.clientPorts().indexOf(Number(seen[0].split(':')[1]));
        if (i >= 0 && i !== not && !this.procs[i].exited) return i;
      }
      if (Date.now() > deadline) throw new Error(`no agreed master of slot ${slot} within ${timeout} ms: ${seen}`);
      await sleep(20);
    }
  }

  kill(i) {
    const t = performance.now();
    const p = this.procs[i];
    if (p.exited) return Promise.resolve(t);
    return new Promise((resolve) => { p.once('exit', () => resolve(t)); p.kill('SIGKILL'); });
  }

  // Starts a killed node again on its nodes.conf (a killed master rejoins as a replica).
  async restart(i) {
    this.procs[i] = this.spawnNode(i);
    const deadline = Date.now() + 20000;
    await this.waitPing(i, deadline);
    await this.settled(deadline);
  }

  logs() { return ''; }

  async stop() {
    await Promise.all(this.procs.map((p) => (p.exited ? null
      : new Promise((resolve) => { p.once('exit', resolve); p.kill('SIGKILL'); }))));
    fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

// A cluster of the target kind for cluster-mode clients: a real Redis Cluster (3 masters, and
// `replicas` replicas each) or a three-node deadbolt cluster with `cluster-enabled yes`, whose
// leader masters every slot. `nodes()` are the startup nodes; `masterOf(key, timeout, not)` the
// index of the node that masters the key's slot, once every live node agrees (deadbolt: the
// leader, once it accepts writes).
async function startClusterTarget(kind, { replicas = 0 } = {}) {
  const c = kind === 'redis' ? await new RedisCluster(3, replicas).start() : await startCluster(3, { clusterEnabled: true });
  c.nodes = () => c.clientPorts().map((port) => ({ host: '127.0.0.1', port }));
  if (kind !== 'redis') c.masterOf = (key, timeout = 15000, not = -1) => c.leader(timeout, not);
  return c;
}

let seq = 0;
function uniq(prefix = 't') { return `${prefix}:${process.pid}:${Date.now().toString(36)}:${seq++}`; }

module.exports = {
  TARGETS, startServer, startCluster, startClusterTarget, rawCmd, call, sleep, uniq,
  keySlot, keyInGroup, keyInSlot, slotMasterPort, GROUP_RANGES,
};
