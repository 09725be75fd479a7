// Loaded by tests/clients/compat/compat.py with mocha --require (not part of ioredis's suite).
// ioredis's functional tests expect the server on 127.0.0.1:6379 (`new Redis()`, explicit
// 6379s, raw sockets). Every TCP connection to port 6379 on the loopback is sent to the target
// server's port, $COMPAT_REDIS_PORT, instead; nothing else changes (client options still say
// 6379, as the tests check; mock servers on other ports are untouched).
"use strict";
const net = require("net");

const target = Number(process.env.COMPAT_REDIS_PORT);
if (!target) throw new Error("COMPAT_REDIS_PORT is not set");
const loopback = new Set([undefined, null, "", "localhost", "127.0.0.1", "::1"]);

function redirect(options) {
  if (options && typeof options === "object" && !options.path &&
      Number(options.port) === 6379 && loopback.has(options.host)) {
    return { ...options, port: target, host: "127.0.0.1" };
  }
  return options;
}

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function (...args) {
  if (Array.isArray(args[0])) {
    // net.createConnection's normalized form: [options, callback] with a marker symbol.
    const normalized = args[0];
    normalized[0] = redirect(normalized[0]);
  } else if (args[0] && typeof args[0] === "object") {
    args[0] = redirect(args[0]);
  } else if (Number(args[0]) === 6379 && (typeof args[1] !== "string" || loopback.has(args[1]))) {
    args[0] = target;
    if (typeof args[1] === "string") args[1] = "127.0.0.1";
  }
  return connect.apply(this, args);
};
