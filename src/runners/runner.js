'use strict';
// hutch runner for JavaScript: runs one untrusted program inside a fresh sandbox.
//
// The core starts this file before any job exists (warm start) as
// `node runner.js`, with the protocol channel on fd 3. It says `ready`, waits
// for the one `run` message, runs the code as the body of an async function
// (so `return x` and top-level `await` work; TypeScript, and ESM import
// statements, go through transpile.js first), turns
// `await tools.<server>.<tool>({...})` into `tool_call` messages, and ends
// with `done` and an exit status. The wire protocol is PROTOCOL.md, next to
// this file.
//
// fd 3 is not handed to the program's children: node marks inherited
// descriptors close-on-exec at start-up (checked on Node 20), and
// child_process passes only the stdio it is asked to.

const fs = require('fs');
const net = require('net');
const path = require('path');
const vm = require('vm');
const { createRequire } = require('module');

const CHANNEL = 3;
const MAX_LINE = 8 << 20; // one message, newline included
const MAX_DEPTH = 64; // JSON nesting of a message; the message object is level 1
const EX_PROTOCOL = 70;
// The program's first line shares line 1 with this, so line numbers match.
const PREFIX = '(async function (tools, require, module, exports, __filename, __dirname) {';
// A line that starts an ESM import or export statement: such a program
// goes through transpile.js (loaded only then), as TypeScript always does.
const ESM_STATEMENT = /^[ \t]*(?:import(?:[ \t]+[\w$*{'"]|[ \t]*[*{'"])|export(?:[ \t]+[\w$*{]|[ \t]*[*{]))/m;
// import() needs node's default loader for vm scripts (Node 20); on Node
// 18 (the images') transpile.js turns it into require(), so such a
// program goes through it too.
const NATIVE_IMPORT = Boolean(vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER);
const DYNAMIC_IMPORT = /\bimport[ \t]*\(/;
let script = 'main.js'; // the program's name in tracebacks: main.ts for TypeScript

const realExit = process.exit.bind(process);
const pending = new Map(); // tool call id -> {resolve, reject, tool, site}
let lastId = 0;
let started = false;
let finished = false;

function protocolError(why) {
  process.stderr.write(`hutch runner: protocol error: ${why}\n`);
  realExit(EX_PROTOCOL);
}

// --- the channel -------------------------------------------------------------

// Messages are written synchronously, so process.exit() can send `done` and
// exit without returning to the program, and lines never interleave. libuv
// made the socket non-blocking: wait out EAGAIN.
const nap = new Int32Array(new SharedArrayBuffer(4));
function send(line) {
  const data = Buffer.from(line + '\n');
  for (let off = 0; off < data.length;) {
    try {
      off += fs.writeSync(CHANNEL, data, off);
    } catch (e) {
      if (e.code !== 'EAGAIN') protocolError(`cannot write to the channel: ${e.code}`);
      Atomics.wait(nap, 0, 0, 1);
    }
  }
}

function nesting(json) {
  let depth = 0, max = 0, inString = false;
  for (let i = 0; i < json.length; i++) {
    const c = json.charCodeAt(i);
    if (inString) {
      if (c === 92) i++; // backslash
      else if (c === 34) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 || c === 91) max = Math.max(max, ++depth);
    else if (c === 125 || c === 93) depth--;
  }
  return max;
}

let chan;
try {
  chan = new net.Socket({ fd: CHANNEL, readable: true, writable: true });
} catch (e) {
  protocolError(`fd 3 (the channel to the core) is not usable: ${e.message}`);
}
let partial = [], partialBytes = 0;
chan.on('data', feed);
function feed(data) {
  let start = 0, nl;
  while ((nl = data.indexOf(10, start)) !== -1) {
    const tail = data.subarray(start, nl);
    const line = partialBytes ? Buffer.concat([...partial, tail]) : tail;
    partial = [];
    partialBytes = 0;
    if (line.length >= MAX_LINE) protocolError('message longer than 8 MiB');
    receive(line);
    start = nl + 1;
  }
  if (start < data.length) {
    partial.push(data.subarray(start));
    partialBytes += data.length - start;
    if (partialBytes >= MAX_LINE) protocolError('message longer than 8 MiB');
  }
}
chan.on('end', () => protocolError('the core closed the channel'));
chan.on('error', (e) => protocolError(`channel error: ${e.message}`));

function receive(line) {
  let m;
  try {
    m = JSON.parse(line.toString('utf8'));
  } catch (e) {
    protocolError(`malformed JSON: ${JSON.stringify(line.subarray(0, 80).toString())}`);
  }
  if (m === null || typeof m !== 'object' || Array.isArray(m) || typeof m.t !== 'string') {
    protocolError('message is not an object with a string "t"');
  }
  if (m.t === 'run' && !started) start(m);
  else if (m.t === 'tool_result') deliver(m);
  else protocolError(`unexpected "${m.t}" message`);
}

// --- tools -------------------------------------------------------------------

function invoke(tool, args, above, kind = 'tool_call') {
  // The stack of a failed call is the program's, taken where it called.
  const site = {};
  Error.captureStackTrace(site, above);
  try {
    if (typeof tool !== 'string') throw new TypeError('tool name must be a string');
    if (args === undefined) args = {};
    const argsJson = args !== null && typeof args === 'object' ? JSON.stringify(args) : undefined;
    if (argsJson === undefined || argsJson[0] !== '{') {
      throw new TypeError('tool arguments must be an object');
    }
    if (nesting(argsJson) > MAX_DEPTH - 2) {
      throw new RangeError(`tool arguments nested deeper than ${MAX_DEPTH - 2} levels`);
    }
    const id = ++lastId;
    const line = kind === 'tool_call'
      ? `{"t":"tool_call","id":${id},"tool":${JSON.stringify(tool)},"args":${argsJson}}`
      : `{"t":"${kind}","id":${id},"args":${argsJson}}`;
    if (Buffer.byteLength(line) >= MAX_LINE) throw new RangeError('tool call over the 8 MiB limit');
    return new Promise((resolve, reject) => {
      if (pending.size === 0) chan.ref();
      pending.set(id, { resolve, reject, tool, site });
      send(line);
    });
  } catch (err) {
    Error.captureStackTrace(err, above);
    return Promise.reject(err);
  }
}

function deliver(m) {
  if (asking !== 0 && m.id === asking) {
    answer = m;
    return;
  }
  const call = Number.isSafeInteger(m.id) ? pending.get(m.id) : undefined;
  if (!call) protocolError(`tool_result for unknown id ${JSON.stringify(m.id)}`);
  if (typeof m.ok !== 'boolean') protocolError('tool_result needs a boolean "ok"');
  pending.delete(m.id);
  if (pending.size === 0) chan.unref();
  if (m.ok) return call.resolve(m.result === undefined ? null : m.result);
  const e = m.error !== null && typeof m.error === 'object' ? m.error : {};
  const err = new Error(typeof e.message === 'string' ? e.message : 'tool call failed');
  err.name = 'ToolError';
  err.code = typeof e.code === 'string' ? e.code : 'internal';
  err.tool = call.tool;
  const frames = call.site.stack.indexOf('\n');
  err.stack = `ToolError: ${err.message}${frames < 0 ? '' : call.site.stack.slice(frames)}`;
  call.reject(err);
}

// --- questions asked synchronously ---------------------------------------------
//
// Object.keys(tools.fs) and tools.fs.read_file.signature must answer at
// once, so their `describe` message is answered by reading the channel
// here, synchronously: lines for other ids (the tool calls the program
// has out) are handed on as the 'data' handler would, the one awaited is
// kept.  Node reads a socket only from its event loop, which cannot run
// meanwhile, so nothing is read twice.
let asking = 0, answer;
const chunk = Buffer.allocUnsafe(1 << 16);
function askSync(kind, args) {
  const id = ++lastId;
  send(`{"t":"${kind}","id":${id},"args":${JSON.stringify(args)}}`);
  asking = id;
  answer = undefined;
  try {
    if (chan.readableLength > 0) chan.read(); // what the stream holds: 'data' first
    for (let idle = 0; answer === undefined;) {
      let n;
      try {
        n = fs.readSync(CHANNEL, chunk, 0, chunk.length, null);
      } catch (e) {
        if (e.code !== 'EAGAIN') protocolError(`cannot read the channel: ${e.code}`);
        Atomics.wait(nap, 0, 0, idle++ < 20 ? 0 : 1);
        continue;
      }
      if (n === 0) protocolError('the core closed the channel');
      feed(Buffer.from(chunk.subarray(0, n)));
    }
  } finally {
    asking = 0;
  }
  return answer;
}

const TOOL = Symbol('hutch tool name');
const INSPECT = Symbol.for('nodejs.util.inspect.custom');

// The core's describe: {} lists the servers' tools, {server} gives one
// server's tools with their signatures, {tool} one tool's.
function describeTools(args) {
  const m = askSync('describe', args);
  if (typeof m.ok !== 'boolean') protocolError('tool_result needs a boolean "ok"');
  if (m.ok) return m.result;
  const e = m.error !== null && typeof m.error === 'object' ? m.error : {};
  const err = new Error(typeof e.message === 'string' ? e.message : 'describe failed');
  err.name = 'ToolError';
  err.code = typeof e.code === 'string' ? e.code : 'internal';
  throw err;
}

// What the core offers this program, or nothing (keys must not throw).
function directory() {
  try {
    const d = describeTools({});
    return d && typeof d === 'object' ? d : {};
  } catch (e) {
    return {};
  }
}

function toolText(info) {
  const desc = String(info.description || '').trim();
  return [info.call || info.name, info.typescript || '', ...(desc ? desc.split('\n').map((l) => `    ${l}`) : [])].join('\n');
}

// Every tools.<server>.<tool> is a function with this prototype: .signature
// (the TypeScript declaration), .description, and toString() / inspection
// showing both.  Asked of the core when read, never when called.
const toolProto = Object.create(Function.prototype, {
  signature: { get() { return describeTools({ tool: this[TOOL] }).typescript; } },
  description: { get() { return describeTools({ tool: this[TOOL] }).description; } },
  toString: {
    value() {
      try {
        return toolText(describeTools({ tool: this[TOOL] }));
      } catch (e) {
        return `tools.${this[TOOL]}: ${e.message}`;
      }
    },
  },
  [INSPECT]: { value() { return this.toString(); } },
});

function serverText(server) {
  let found;
  try {
    found = describeTools({ server }).tools || [];
  } catch (e) {
    return `tools.${server}: ${e.message}`;
  }
  if (!found.length) return `server ${JSON.stringify(server)} offers no tools to this program`;
  return [`tools of server ${server}: await tools.${server}.<tool>({...})`, ...found.map(toolText)].join('\n\n');
}

function toolsText() {
  const d = directory();
  const servers = d.tools && typeof d.tools === 'object' ? d.tools : {};
  const lines = [
    'tools: the upstream tools this program may call',
    '  await tools.<server>.<tool>({...})          call one (a failure rejects with a ToolError)',
    "  await tools.call('server.tool-name', {...})  any tool by its name",
    '  await tools.search(query, limit, detail)     search them',
    '  Object.keys(tools.<server>), tools.<server>.<tool>.signature, console.log(tools.<server>)',
    '',
    ...Object.keys(servers).map((s) => `tools.${s}: ${servers[s].join(', ')}`),
    ...(d.calls || []).map((n) => `tools.call(${JSON.stringify(n)})`),
    ...(d.servers || []).map((x) => `not ready: ${x.server} (${x.state}${x.error ? `: ${x.error}` : ''})`),
  ];
  if (!Object.keys(servers).length && !(d.calls || []).length) lines.push('(no tools this program may call)');
  return lines.join('\n');
}

const notTools = new Set(['then', 'toJSON', 'constructor']); // probed by await, JSON, inspect
// Keys listed by Object.keys(): enumerable, their value what get() gives.
const listed = (handler) => ({
  ...handler,
  getOwnPropertyDescriptor(target, key) {
    if (typeof key !== 'string' || notTools.has(key)) return Reflect.getOwnPropertyDescriptor(target, key);
    return { value: handler.get(target, key), writable: false, enumerable: true, configurable: true };
  },
});

function callTool(tool, args) {
  return invoke(tool, args, callTool);
}

// tools.search(query, limit, detail): search_tools' search, over the tools
// the policy lets this program call.
function searchTools(query = '', limit, detail) {
  if (typeof query !== 'string') return Promise.reject(new TypeError('query must be a string'));
  const args = { query };
  if (limit !== undefined && limit !== null) args.limit = limit;
  if (detail !== undefined && detail !== null) args.detail = detail;
  return invoke('search_tools', args, searchTools, 'search');
}

const tools = new Proxy({ [INSPECT]: toolsText }, listed({
  get(target, server) {
    if (server === 'call') return callTool;
    if (server === 'search') return searchTools;
    if (typeof server !== 'string' || notTools.has(server)) return target[server];
    return new Proxy({ [INSPECT]: () => serverText(server) }, listed({
      get(target, tool) {
        if (typeof tool !== 'string' || notTools.has(tool)) return target[tool];
        const name = `${server}.${tool}`;
        const fn = (args) => invoke(name, args, fn);
        fn[TOOL] = name;
        Object.setPrototypeOf(fn, toolProto);
        return fn;
      },
      ownKeys() {
        const list = (directory().tools || {})[server];
        return Array.isArray(list) ? list.filter((k) => typeof k === 'string') : [];
      },
    }));
  },
  ownKeys() {
    const servers = directory().tools;
    return servers && typeof servers === 'object' ? Object.keys(servers) : [];
  },
}));

// --- running the program -----------------------------------------------------

function cleanStack(stack, keepFrames) {
  const lines = stack.split('\n');
  // A syntax error on line 1 shows the wrapper in front of the program's text.
  if (lines[0] === `${script}:1` && lines[1] && lines[1].startsWith(PREFIX)) {
    lines[1] = lines[1].slice(PREFIX.length);
    lines[2] = (lines[2] || '').slice(PREFIX.length);
  }
  const isFrame = (l) => /^\s+at /.test(l);
  let out = lines.filter((l) => !isFrame(l) || (keepFrames && !l.includes(__filename)));
  // What lies below the program's outermost frame is the runner's machinery.
  let last = -1;
  out.forEach((l, i) => { if (isFrame(l) && l.includes(`${script}:`)) last = i; });
  if (last >= 0) out = out.filter((l, i) => i <= last || !isFrame(l));
  return out.join('\n').replace(new RegExp(`${script.replace('.', '\\.')}:1:(\\d+)`, 'g'),
    (all, col) => (col > PREFIX.length ? `${script}:1:${col - PREFIX.length}` : all));
}

function describe(err, keepFrames) {
  try {
    if (err instanceof Error || (err && typeof err.stack === 'string')) {
      return { type: String(err.name || 'Error'), message: String(err.message),
        traceback: cleanStack(String(err.stack), keepFrames) };
    }
  } catch (e) { /* an exotic error object: fall through to inspect() */ }
  const text = require('util').inspect(err);
  return { type: typeof err, message: text, traceback: `Uncaught ${text}` };
}

function cut(text, limit = 1 << 16) {
  return text.length <= limit ? text : `${text.slice(0, limit)}\n[... truncated]`;
}

// The program's output ends before `done`: closing stdout and stderr lets
// the core see both end (unless a process the program started holds them)
// and answer at `done` without waiting for this process to exit.
function closeOutput() {
  for (const fd of [1, 2]) {
    try {
      fs.closeSync(fd);
    } catch (e) { /* already closed */ }
  }
}

// Whether /work/out holds anything: when it does not, the core need not
// fetch it (a hint; the core's own checks decide what comes back).
function outFiles() {
  try {
    return fs.readdirSync(path.join(process.cwd(), 'out')).length > 0;
  } catch (e) {
    return false;
  }
}

function finish(status, done) {
  finished = true;
  closeOutput();
  send(JSON.stringify({ t: 'done', status, files: outFiles(), ...done }));
  realExit(status); // stdout and stderr are blocking (see start)
}

function fail(err, keepFrames = true) {
  if (finished) return;
  const { type, message, traceback } = describe(err, keepFrames);
  process.stderr.write(`${traceback}\n`);
  finish(1, { ok: false, error: { type, message: cut(message), traceback: cut(traceback) } });
}

function exitStatus(code) {
  if (code === undefined || code === null) return 0;
  const n = Number(code);
  return Number.isInteger(n) ? n & 0xff : 1;
}

function exited(status) {
  finish(status, status === 0 ? { ok: true, result: null } : { ok: false,
    error: { type: 'ProcessExit', message: `exit status ${status}`, traceback: '' } });
}

function succeed(value) {
  if (finished) return;
  const status = exitStatus(process.exitCode);
  if (status !== 0) return exited(status);
  let json;
  try {
    json = value === undefined ? 'null' : JSON.stringify(value);
  } catch (e) { /* BigInt, cycles: shown as text below */ }
  if (json === undefined || nesting(json) > MAX_DEPTH - 1) {
    const text = typeof value === 'object' && value !== null ? require('util').inspect(value) : String(value);
    json = JSON.stringify(text);
  }
  const line = `{"t":"done","ok":true,"status":0,"files":${outFiles()},"result":${json}}`;
  if (Buffer.byteLength(line) >= MAX_LINE) {
    return finish(1, { ok: false, error: { type: 'RangeError', message: 'result over the 8 MiB limit', traceback: '' } });
  }
  finished = true;
  closeOutput();
  send(line);
  realExit(0);
}

let options;
function scriptOptions() {
  if (options) return Object.assign(options, { filename: script });
  options = { filename: script };
  if (vm.constants && vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER) {
    // import() in the program; node flags the option as experimental on
    // first use, a warning that would only puzzle the program's author.
    options.importModuleDynamically = vm.constants.USE_MAIN_CONTEXT_DEFAULT_LOADER;
    const emitWarning = process.emitWarning;
    process.emitWarning = function (warning, ...rest) {
      if (String(warning).includes('USE_MAIN_CONTEXT_DEFAULT_LOADER')) return;
      return emitWarning.call(this, warning, ...rest);
    };
  }
  return options;
}

function start(job) {
  started = true;
  const typescript = job.lang === 'typescript';
  if (typeof job.code !== 'string' || (job.lang !== undefined && job.lang !== 'javascript' && !typescript)) {
    protocolError('"run" needs a string "code" and lang "javascript" or "typescript"');
  }
  if (typescript) script = 'main.ts';
  if (job.env !== undefined) {
    // The job's variables (the egress proxy's, PROTOCOL.md).
    if (job.env === null || typeof job.env !== 'object' || Array.isArray(job.env) ||
        !Object.entries(job.env).every(([k, v]) => typeof v === 'string' && k && !k.includes('=') &&
                                                    !k.includes('\0') && !v.includes('\0'))) {
      protocolError('"env" must be an object of strings');
    }
    for (const [k, v] of Object.entries(job.env)) process.env[k] = v;
    // Node ignores HTTP_PROXY: egress.js routes fetch, http and https.
    if (job.env.HTTP_PROXY || job.env.http_proxy) require('./egress.js').install(job.env);
  }
  if (job.cwd !== undefined) {
    try {
      process.chdir(String(job.cwd));
    } catch (e) {
      protocolError(`cannot enter ${job.cwd}: ${e.code}`);
    }
  }
  // libuv writes to a full pipe asynchronously, and exiting drops what is
  // queued: blocking stdio keeps the output complete, also on process.exit().
  for (const stream of [process.stdout, process.stderr]) {
    if (stream._handle && typeof stream._handle.setBlocking === 'function') stream._handle.setBlocking(true);
  }
  const filename = path.join(process.cwd(), script);
  const module = { id: '.', filename, exports: {}, require: createRequire(filename) };
  process.exit = (code) => {
    const status = exitStatus(code === undefined ? process.exitCode : code);
    if (!finished) exited(status);
    realExit(status);
  };
  process.on('uncaughtException', (err) => fail(err));
  process.on('unhandledRejection', (err) => fail(err));
  // The channel alone must not keep the process alive (it is ref'd while a
  // tool call is out), so a program that waits for nothing ends here.
  process.on('beforeExit', () => fail(new Error('the program never finished: it awaits a promise that nothing will settle'), false));
  chan.unref();

  let body, code = job.code;
  try {
    const imports = ESM_STATEMENT.test(code) || (!NATIVE_IMPORT && DYNAMIC_IMPORT.test(code));
    if (typescript || imports) {
      code = require('./transpile.js').transpile(code, { typescript, imports, dynamicImport: NATIVE_IMPORT, filename: script });
    }
    body = new vm.Script(`${PREFIX}${code}\n})`, scriptOptions()).runInThisContext();
  } catch (err) {
    return fail(err, false);
  }
  body.call(module.exports, tools, module.require, module, module.exports, filename, path.dirname(filename))
    .then(succeed, (err) => fail(err));
}

send(JSON.stringify({ t: 'ready', lang: 'javascript', version: process.versions.node }));
// What every job needs, done while the core has no job for us yet (a warm
// pool's sandbox waits here; a cold one has its job queued already, so this
// costs it nothing it would not pay in start()): the stdio streams, which
// node builds on first use, the module loader and the compiler.
for (const stream of [process.stdout, process.stderr]) {
  if (stream._handle && typeof stream._handle.setBlocking === 'function') stream._handle.setBlocking(true);
}
createRequire(path.join(process.cwd(), 'main.js'));
new vm.Script('(async function () {})', scriptOptions()).runInThisContext();
void console.log;
