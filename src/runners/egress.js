'use strict';
// The JavaScript runner's side of egress (issue 24): a program's fetch(),
// http and https requests go through hutch's proxy, as Python's do through
// HTTP_PROXY. runner.js loads this file only for a job with a proxy.
//
// Node 18 and 20 (the images' and the local executor's) ignore HTTP_PROXY,
// and read NODE_EXTRA_CA_CERTS only when the process starts, before a
// pooled sandbox had its job. So, when the job has a proxy:
// - fetch(): node's bundled undici is given an Agent whose connector opens
//   the connection through the proxy (the global dispatcher, the symbol
//   undici itself reads; its class is the one undici made at load).
// - https (its global agent): a CONNECT tunnel, then TLS over it.
// - http (its global agent): the request in absolute form, as the proxy
//   takes plain HTTP (a host with a secret is intercepted only over TLS, so
//   plain HTTP never goes through a CONNECT).
// - TLS trusts the bundle hutch gave (system roots and, with secrets, the
//   deployment's CA) unless the request names its own `ca`.
// What stays direct: an explicit `agent`, net and tls sockets, and
// libraries that bring their own undici; they reach 127.0.0.1:3128 only
// if they speak to the proxy themselves (HTTP_PROXY says where it is).
//
// A refusal keeps the proxy's one-line reason: fetch() rejects with
// `fetch failed`, its cause `hutch egress: … is not allowed …`; http and
// https answer the proxy's 403 as a response for plain HTTP, and an error
// with the reason for a tunnel.

const fs = require('fs');
const http = require('http');
const https = require('https');
const net = require('net');
const tls = require('tls');

const MAX_HEAD = 16 << 10; // the proxy's answer to CONNECT, head and reason

function hostPort(host, port) {
  return `${net.isIPv6(host) ? `[${host}]` : host}:${port}`;
}

function bare(host) {
  return host.startsWith('[') && host.endsWith(']') ? host.slice(1, -1) : host;
}

// A tunnel to host:port through the proxy: cb(null, socket) once it
// answered 200, else cb(err) with the proxy's reason.
function tunnel(proxy, host, port, cb) {
  const target = hostPort(bare(host), port);
  const sock = net.connect(proxy.port, proxy.host);
  let head = Buffer.alloc(0), done = false;
  const finish = (err) => {
    if (done) return;
    done = true;
    sock.removeListener('data', onData);
    sock.removeListener('end', refused);
    sock.removeListener('error', finish);
    if (err) {
      sock.destroy();
      return cb(err);
    }
    cb(null, sock);
  };
  const refused = () => {
    const text = head.toString('latin1');
    const end = text.indexOf('\r\n\r\n');
    const status = text.slice(0, text.indexOf('\r\n')).split(' ')[1] || '?';
    const reason = end >= 0 ? text.slice(end + 4).trim() : '';
    const err = new Error(reason || `the egress proxy refused the tunnel to ${target} (${status})`);
    err.code = 'EGRESS_REFUSED';
    finish(err);
  };
  const onData = (chunk) => {
    head = Buffer.concat([head, chunk]);
    const text = head.toString('latin1');
    const end = text.indexOf('\r\n\r\n');
    if (end < 0 || !/^HTTP\/1\.[01] 200[ \r]/.test(text)) {
      // Not a whole head yet, or a refusal, whose reason is the body the
      // proxy sends before it closes (then 'end').
      if (head.length > MAX_HEAD) refused();
      return;
    }
    const rest = head.subarray(end + 4); // latin1: a byte a character
    if (rest.length) sock.unshift(rest);
    finish(null);
  };
  sock.on('data', onData);
  sock.on('end', refused);
  sock.on('error', finish);
  sock.write(`CONNECT ${target} HTTP/1.1\r\nHost: ${target}\r\n\r\n`);
}

// TLS to host over a tunnel: cb(null, tlsSocket) once the handshake is done.
function overTls(sock, host, opts, cb) {
  const name = bare(host);
  const t = tls.connect(Object.assign({}, opts, {
    socket: sock,
    servername: opts.servername || (net.isIP(name) ? undefined : name),
  }));
  const fail = (err) => cb(err);
  t.once('error', fail);
  t.once('secureConnect', () => {
    t.removeListener('error', fail);
    cb(null, t);
  });
}

// The first line of a plain HTTP request in origin form, in absolute form.
function absolute(first, origin) {
  const m = /^([A-Z]+) (\/[^ \r\n]*) HTTP\//.exec(first);
  return m ? `${m[1]} ${origin}${m[2]}${first.slice(m[1].length + 1 + m[2].length)}` : first;
}

function install(env) {
  const url = env.HTTP_PROXY || env.http_proxy;
  if (!url) return;
  const u = new URL(url);
  const proxy = { host: u.hostname, port: Number(u.port) || 80 };
  let ca;
  const bundle = env.NODE_EXTRA_CA_CERTS || env.SSL_CERT_FILE;
  if (bundle) {
    try {
      ca = fs.readFileSync(bundle, 'latin1');
    } catch (e) {
      ca = undefined; // node's own roots, as before
    }
  }

  // https: a tunnel, then TLS with the request's own options.
  class ProxyHttpsAgent extends https.Agent {
    createConnection(options, oncreate) {
      const host = options.host || options.hostname || 'localhost';
      const port = options.port || 443;
      tunnel(proxy, host, port, (err, sock) => {
        if (err) return oncreate(err);
        const opts = Object.assign({}, options);
        if (!opts.ca && ca) opts.ca = ca;
        delete opts.host;
        delete opts.port;
        delete opts.path;
        overTls(sock, host, opts, oncreate);
      });
      return undefined;
    }
  }

  // http: to the proxy, the request line in absolute form; one request a
  // connection (the proxy closes it after the answer).
  class ProxyHttpAgent extends http.Agent {
    addRequest(req, options) {
      const host = options.host || options.hostname || 'localhost';
      const port = options.port || 80;
      if (!/^[a-z][a-z0-9+.-]*:\/\//i.test(req.path)) {
        req.path = `http://${hostPort(bare(host), port)}${req.path}`;
      }
      return super.addRequest(req, Object.assign({}, options, {
        host: proxy.host, hostname: proxy.host, port: proxy.port, localAddress: undefined,
      }));
    }
  }

  const httpsAgent = new ProxyHttpsAgent({ keepAlive: false });
  const httpAgent = new ProxyHttpAgent({ keepAlive: false });
  https.globalAgent = httpsAgent;
  http.globalAgent = httpAgent;
  // Node 18 takes the default from _http_agent's export, not http's.
  try {
    require('_http_agent').globalAgent = httpAgent;
  } catch (e) {
    // not there: http.globalAgent is what counts
  }

  // fetch(): node's undici, loaded by touching one of its classes, made its
  // global dispatcher from its own Agent; one of those, with a connector of
  // ours, replaces it.
  const DISPATCHER = Symbol.for('undici.globalDispatcher.1');
  void globalThis.Response;
  const made = globalThis[DISPATCHER];
  if (made && typeof made.constructor === 'function') {
    const connect = (opts, cb) => {
      const https_ = opts.protocol === 'https:';
      const host = opts.hostname || opts.host;
      const port = Number(opts.port) || (https_ ? 443 : 80);
      if (https_) {
        tunnel(proxy, host, port, (err, sock) => {
          if (err) return cb(err);
          const o = { ALPNProtocols: ['http/1.1'] };
          if (ca) o.ca = ca;
          if (opts.servername) o.servername = opts.servername;
          overTls(sock, host, o, cb);
        });
        return;
      }
      // Plain HTTP: undici writes the head as one string; its first line
      // goes in absolute form.
      const sock = net.connect(proxy.port, proxy.host);
      const write = sock.write;
      const origin = `http://${hostPort(bare(host), port)}`;
      sock.write = function (chunk, ...rest) {
        sock.write = write;
        if (typeof chunk === 'string') chunk = absolute(chunk, origin);
        return write.call(this, chunk, ...rest);
      };
      const fail = (err) => cb(err);
      sock.once('error', fail);
      sock.once('connect', () => {
        sock.removeListener('error', fail);
        cb(null, sock);
      });
    };
    globalThis[DISPATCHER] = new made.constructor({ connect, pipelining: 0 });
  }
}

module.exports = { install };
