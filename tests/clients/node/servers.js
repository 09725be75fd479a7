'use strict';
// Servers for the Node client suites: each test file runs its tests once per target,
// `redis` (a real redis-server 7.0, the reference) and `deadbolt` ($DEADBOLT_BIN).
const { spawn } = require('node:child_process');
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

let seq = 0;
function uniq(prefix = 't') { return `${prefix}:${process.pid}:${Date.now().toString(36)}:${seq++}`; }

module.exports = { TARGETS, startServer, sleep, uniq };
