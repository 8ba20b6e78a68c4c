#!/usr/bin/python3
"""Tests of the language runners, src/runners/runner.py and runner.js.

The test plays the core's side of src/runners/PROTOCOL.md: it starts a runner
the way the local executor does (clean environment, stdin /dev/null, stdout
and stderr pipes, one end of a socketpair as fd 3), waits for `ready`, sends
`run`, answers `tool_call`s, and checks `done`, the exit status and the output.

Run it with the real interpreter, not a pyenv shim:
    /usr/bin/python3 tests/unit/test_runners.py
It prints TAP and exits non-zero when a test fails.
"""
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNERS = os.environ.get('HUTCH_RUNNER_DIR') or os.path.normpath(
    os.path.join(HERE, '..', '..', 'src', 'runners'))
PYTHON = '/usr/bin/python3'
NODE = '/usr/bin/node'
COMMANDS = {
    'python': [PYTHON, '-I', '-S', os.path.join(RUNNERS, 'runner.py')],
    'javascript': [NODE, os.path.join(RUNNERS, 'runner.js')],
}
ENV = {'PATH': '/usr/local/bin:/usr/bin:/bin', 'HOME': '/tmp', 'LANG': 'C.UTF-8',
       'TMPDIR': '/tmp', 'PYTHONDONTWRITEBYTECODE': '1'}
TIMEOUT = 30


class Outcome:
    def __init__(self):
        self.ready = None
        self.done = None
        self.messages = []     # everything the runner sent, in order
        self.calls = []        # tool_call messages
        self.asks = []         # describe and search messages
        self.max_outstanding = 0
        self.status = None
        self.stdout = self.stderr = ''
        self.channel_inode = None


def spawn(lang, cwd):
    """Start a runner with one end of a socketpair as its fd 3."""
    ours, theirs = socket.socketpair()
    if theirs.fileno() == 3:  # dup2(3, 3) would leave it close-on-exec
        moved = theirs.dup()
        theirs.close()
        theirs = moved
    fd = theirs.fileno()
    proc = subprocess.Popen(
        COMMANDS[lang], cwd=cwd, env=ENV, stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        close_fds=False, preexec_fn=lambda: os.dup2(fd, 3))
    inode = os.fstat(fd).st_ino
    theirs.close()
    return proc, ours, inode


class Channel:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b''

    def send(self, message):
        self.sock.sendall(json.dumps(message).encode() + b'\n')

    def recv(self, timeout):
        """The next message, or None when nothing came within timeout."""
        deadline = time.monotonic() + timeout
        while b'\n' not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(1 << 16)
            except socket.timeout:
                return None
            if not chunk:
                raise EOFError('runner closed the channel')
            self.buf += chunk
        line, self.buf = self.buf.split(b'\n', 1)
        return json.loads(line)


def execute(lang, code, answer=None, batch=1, total=None, run=None, slow_reader=False):
    """Run code in a fresh runner. Tool calls are answered by answer(call),
    which returns the tool_result's fields; they are held until `batch` are
    waiting (or `total` have come, or none came for a second) and then
    answered in random order. A slow reader starts reading the program's
    output only after a while, so its writes fill the pipes first."""
    out = Outcome()
    with tempfile.TemporaryDirectory() as cwd:
        proc, sock, out.channel_inode = spawn(lang, cwd)
        pipes = {}

        def read(name, f):
            if slow_reader:
                time.sleep(0.5)
            pipes[name] = f.read()
        readers = [threading.Thread(target=read, args=(name, f)) for name, f in
                   (('stdout', proc.stdout), ('stderr', proc.stderr))]
        for t in readers:
            t.start()
        chan = Channel(sock)
        deadline = time.monotonic() + TIMEOUT
        held, answered = [], 0
        try:
            out.ready = chan.recv(TIMEOUT)
            if isinstance(run, bytes):
                sock.sendall(run)
            else:
                chan.send(run or {'t': 'run', 'lang': lang, 'code': code, 'cwd': cwd})
            while time.monotonic() < deadline:
                message = chan.recv(1.0 if held else deadline - time.monotonic())
                if message is not None:
                    out.messages.append(message)
                    if message.get('t') == 'done':
                        out.done = message
                        break
                    if message.get('t') == 'tool_call':
                        out.calls.append(message)
                        held.append(message)
                        out.max_outstanding = max(out.max_outstanding, len(held))
                    elif message.get('t') in ('describe', 'search'):
                        # Answered at once, after the calls held: a runner
                        # waiting for it gets their results first.
                        out.asks.append(message)
                        for call in held:
                            chan.send(dict(answer(call), t='tool_result', id=call['id']))
                        answered += len(held)
                        held = []
                        chan.send(dict(answer(message), t='tool_result', id=message['id']))
                        continue
                if held and (message is None or len(held) >= batch
                             or (total and answered + len(held) >= total)):
                    random.shuffle(held)
                    for call in held:
                        chan.send(dict(answer(call), t='tool_result', id=call['id']))
                    answered += len(held)
                    held = []
        except (EOFError, OSError):
            pass
        try:
            out.status = proc.wait(max(1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            out.status = proc.wait()
        for t in readers:
            t.join()
        sock.close()
    out.stdout = pipes['stdout'].decode('utf-8', 'replace')
    out.stderr = pipes['stderr'].decode('utf-8', 'replace')
    return out


def check(condition, what, out=None):
    if not condition:
        if out is not None:
            what += '\n  status: %r\n  done: %r\n  stdout: %r\n  stderr: %r' % (
                out.status, out.done, out.stdout[-2000:], out.stderr[-2000:])
        raise AssertionError(what)


def expect_ok(out, result, stdout=None, files=False):
    check(out.done == {'t': 'done', 'ok': True, 'status': 0, 'files': files,
                       'result': result},
          'expected done ok, status 0, files %r, with result %r' % (files, result), out)
    check(out.status == 0, 'expected exit status 0', out)
    if stdout is not None:
        check(out.stdout == stdout, 'expected stdout %r' % stdout, out)


def expect_error(out, type_, status=1):
    check(out.done is not None and out.done.get('ok') is False,
          'expected done ok:false', out)
    check(out.done['error']['type'] == type_, 'expected error type %s' % type_, out)
    check(out.status == status, 'expected exit status %d' % status, out)
    check(out.done.get('status') == status, 'expected done.status %d' % status, out)


# --- tool answers ---------------------------------------------------------

def fixed_tools(call):
    tool, args = call.get('tool', call['t']), call.get('args')
    if tool == 'fs.read_file':
        return {'ok': True, 'result': {'text': 'hello from ' + args['path']}}
    if tool == 'my-server.do-it':
        return {'ok': True, 'result': args['n'] + args.get('m', 0)}
    if tool == 'math.double':
        return {'ok': True, 'result': args['n'] * 2}
    if tool.startswith('fs.delete'):
        return {'ok': False, 'error': {'code': 'denied', 'message': 'deletes are not allowed'}}
    return {'ok': False, 'error': {'code': 'unknown_tool', 'message': 'no tool ' + tool}}


DIRECTORY = {'tools': {'fs': ['read_file', 'write_file'], 'mem': ['create_entities']},
             'calls': ['x.y-z'], 'servers': [{'server': 'slow', 'state': 'starting'}]}
READ_FILE = {'name': 'fs.read_file', 'call': 'tools.fs.read_file',
             'description': 'Read a file.\nAll of it.',
             'python': 'def read_file(*, path: str) -> Any',
             'typescript': 'read_file(args: { path: string }): Promise<any>'}


def catalog_tools(call):
    """fixed_tools, and a core that answers describe with a small catalog."""
    if call['t'] != 'describe':
        return fixed_tools(call)
    args = call.get('args') or {}
    if not args:
        return {'ok': True, 'result': DIRECTORY}
    if args.get('server') == 'fs':
        return {'ok': True, 'result': {'tools': [READ_FILE]}}
    if args.get('tool') == 'fs.read_file':
        return {'ok': True, 'result': READ_FILE}
    return {'ok': False, 'error': {'code': 'unknown_tool', 'message': 'no tool %r' % args}}


def expect_calls(out, n):
    ids = [c['id'] for c in out.calls]
    check(len(ids) == n, 'expected %d tool calls, got %d' % (n, len(ids)), out)
    check(all(type(i) is int and i > 0 for i in ids) and len(set(ids)) == n,
          'tool call ids must be distinct positive integers: %r' % ids, out)


def fd_listing_ok(out):
    listing = out.done and out.done.get('result')
    check(isinstance(listing, str) and '/proc/' in listing, 'no fd listing', out)
    check('socket:[%d]' % out.channel_inode not in listing,
          'the channel reached a child process:\n' + listing, out)


# --- Python -----------------------------------------------------------------

def py_result_value():
    out = execute('python', "print('hello')\n1 + 1")
    check(out.ready and out.ready.get('t') == 'ready' and out.ready.get('lang') == 'python'
          and isinstance(out.ready.get('version'), str), 'bad ready: %r' % out.ready, out)
    expect_ok(out, 2, stdout='hello\n')
    check(out.stderr == '', 'stderr should be empty', out)
    check(len(out.messages) == 1, 'only `done` after `ready`', out)


def py_result_variable():
    expect_ok(execute('python', "result = {'a': [1, 2], 'b': None}\nx = 5\n"),
              {'a': [1, 2], 'b': None})


def py_repr_result():
    out = execute('python', "class P:\n    def __repr__(self):\n        return 'P(1)'\n\nP()")
    expect_ok(out, 'P(1)')
    expect_ok(execute('python', "float('nan')"), 'nan')


def py_syntax_error():
    out = execute('python', 'x = 1\ny = 2\nz = 1 +* 2\nw = 4\n')
    expect_error(out, 'SyntaxError')
    check('File "main.py", line 3' in out.stderr and 'z = 1 +* 2' in out.stderr,
          'stderr should point at main.py line 3', out)
    check('runner' not in out.stderr, 'runner frames in the traceback', out)


def py_exception():
    out = execute('python', 'a = 1\nb = 0\nprint(a / b)\n')
    expect_error(out, 'ZeroDivisionError')
    check('File "main.py", line 3, in <module>' in out.stderr
          and 'print(a / b)' in out.stderr
          and out.stderr.rstrip().endswith('ZeroDivisionError: division by zero'),
          'expected a Python traceback at main.py line 3', out)
    check('runner' not in out.stderr, 'runner frames in the traceback', out)
    check(out.done['error']['traceback'] == out.stderr
          and out.done['error']['message'] == 'division by zero', 'done.error', out)


def py_exit():
    out = execute('python', "import sys\nprint('bye')\nsys.exit(3)\nprint('not reached')\n")
    expect_error(out, 'SystemExit', status=3)
    check(out.stdout == 'bye\n', 'output before sys.exit', out)
    expect_ok(execute('python', 'import sys\nsys.exit(0)\n'), None)
    out = execute('python', "exit('stopped')\n")
    expect_error(out, 'SystemExit', status=1)
    check(out.stderr == 'stopped\n', 'sys.exit(text) prints the text', out)


def py_tool_ok():
    out = execute('python', "r = tools.fs.read_file(path='/data/a.txt')\n"
                            "r2 = tools.call('my-server.do-it', {'n': 1}, m=2)\n"
                            "[r, r2]", fixed_tools)
    expect_ok(out, [{'text': 'hello from /data/a.txt'}, 3])
    expect_calls(out, 2)
    check(out.calls[0]['tool'] == 'fs.read_file' and out.calls[0]['args'] == {'path': '/data/a.txt'}
          and out.calls[1]['tool'] == 'my-server.do-it' and out.calls[1]['args'] == {'n': 1, 'm': 2},
          'tool_call messages: %r' % out.calls, out)


def py_tool_error():
    out = execute('python', "try:\n    tools.nope.missing(x=1)\nexcept ToolError as e:\n"
                            "    result = [type(e).__name__, e.code, e.tool, str(e)]\n", fixed_tools)
    expect_ok(out, ['ToolError', 'unknown_tool', 'nope.missing', 'no tool nope.missing'])
    out = execute('python', "x = 1\ntools.nope.missing()\n", fixed_tools)
    expect_error(out, 'ToolError')
    check('File "main.py", line 2' in out.stderr and 'runner' not in out.stderr,
          'an uncaught ToolError shows only the program\'s frames', out)


def py_tool_denied():
    out = execute('python', "try:\n    tools.fs.delete_file(path='/')\nexcept PermissionError as e:\n"
                            "    result = [type(e).__name__, e.code, isinstance(e, ToolError), str(e)]\n",
                  fixed_tools)
    expect_ok(out, ['ToolDenied', 'denied', True, 'deletes are not allowed'])


def py_concurrent():
    code = '''import threading
out = {}
def work(k):
    for n in range(k, 100, 8):
        out[n] = tools.math.double(n=n)
threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
[out[n] for n in range(100)]
'''
    out = execute('python', code, fixed_tools, batch=8, total=100)
    expect_ok(out, [2 * n for n in range(100)])
    expect_calls(out, 100)
    check(out.max_outstanding == 8, '8 threads should have 8 calls out at once, saw %d'
          % out.max_outstanding, out)


def py_dir():
    out = execute('python', '[dir(tools), dir(tools.fs), dir(tools.mem), dir(tools.nope)]',
                  catalog_tools)
    expect_ok(out, [['call', 'fs', 'mem', 'search'], ['read_file', 'write_file'],
                    ['create_entities'], []])
    check(all(a['t'] == 'describe' and a['args'] == {} for a in out.asks),
          'dir() sends describe {}: %r' % out.asks, out)
    check(not out.calls, 'dir() is no tool call', out)
    # A core that cannot answer: dir() still works.
    out = execute('python', 'dir(tools)', fixed_tools)
    expect_ok(out, ['call', 'search'])


def py_help():
    out = execute('python', "help(tools.fs.read_file)\nhelp(tools.fs)\nhelp(tools.fs.nope)\n"
                            "help(tools)\nhelp(len)\n"
                            "[tools.fs.read_file.signature, tools.fs.read_file.__doc__]",
                  catalog_tools)
    expect_ok(out, ['def read_file(*, path: str) -> Any',
                    'tools.fs.read_file\ndef read_file(*, path: str) -> Any\n'
                    '    Read a file.\n    All of it.\n'])
    check('Help on tool fs.read_file:\n\ntools.fs.read_file\n'
          'def read_file(*, path: str) -> Any\n    Read a file.\n' in out.stdout,
          'help(tools.fs.read_file) prints the signature and the description', out)
    check('tools.fs: call a tool as tools.fs.<tool>(**args)' in out.stdout,
          'help(tools.fs) prints its tools', out)
    check("no tool {'tool': 'fs.nope'}" in out.stdout, 'help() of an unknown tool says so', out)
    check('tools.fs: read_file, write_file\ntools.mem: create_entities\n'
          "tools.call('x.y-z')\nnot ready: slow (starting)" in out.stdout,
          'help(tools) lists the servers, their tools and those not ready', out)
    check('len(obj, /)' in out.stdout, 'help() of anything else is pydoc\'s', out)
    check({json.dumps(a['args'], sort_keys=True) for a in out.asks} ==
          {'{}', '{"server": "fs"}', '{"tool": "fs.read_file"}', '{"tool": "fs.nope"}'},
          'describe messages: %r' % out.asks, out)
    out = execute('python', "try:\n    tools.fs.nope.signature\nexcept ToolError as e:\n"
                            "    result = [e.code, str(e)]\n", catalog_tools)
    expect_ok(out, ['unknown_tool', "no tool {'tool': 'fs.nope'}"])


def py_fake_message():
    out = execute('python', 'print(\'{"t":"done","ok":true,"result":42}\')\n7')
    expect_ok(out, 7, stdout='{"t":"done","ok":true,"result":42}\n')
    check(len(out.messages) == 1, 'the program\'s output reached the channel', out)


def big_output(lang, code):
    out = execute(lang, code, slow_reader=True)
    lines = ['line %d %s' % (i, 'x' * 100) for i in range(50000)]
    expect_ok(out, 1)
    check(out.stdout == '\n'.join(lines) + '\n' and out.stderr == 'end\n',
          'expected 5.6 MB of stdout, got %d bytes' % len(out.stdout))


def py_big_output():
    big_output('python', "import sys\nfor i in range(50000):\n    print('line', i, 'x' * 100)\n"
                         "print('end', file=sys.stderr)\n1")


def py_fd3_not_inherited():
    out = execute('python', "import os, subprocess\n"
                            "try:\n    mine = os.readlink('/proc/self/fd/3')\n"
                            "except OSError:\n    mine = ''\n"
                            "listing = subprocess.run(['ls', '-l', '/proc/self/fd'], capture_output=True,"
                            " text=True).stdout\nmine + '\\n' + listing")
    fd_listing_ok(out)


def py_protocol_error():
    out = execute('python', None, run=b'this is not JSON\n')
    check(out.status == 70 and 'protocol error' in out.stderr and out.done is None,
          'malformed JSON should end the runner with status 70', out)


# --- JavaScript -------------------------------------------------------------

def js_result_value():
    out = execute('javascript', "console.log('hello');\nreturn 1 + 1;")
    check(out.ready and out.ready.get('t') == 'ready' and out.ready.get('lang') == 'javascript'
          and isinstance(out.ready.get('version'), str), 'bad ready: %r' % out.ready, out)
    expect_ok(out, 2, stdout='hello\n')
    check(out.stderr == '', 'stderr should be empty', out)


def js_object_result():
    expect_ok(execute('javascript', 'const x = 5;\nreturn {a: [1, 2], b: null};'),
              {'a': [1, 2], 'b': None})
    expect_ok(execute('javascript', 'const x = 5;'), None)


def js_string_result():
    expect_ok(execute('javascript', 'return 12345678901234567890n;'), '12345678901234567890')


def js_syntax_error():
    out = execute('javascript', 'let a = 1;\nlet b = 2;\nlet c = (;\nlet d = 4;\n')
    expect_error(out, 'SyntaxError')
    check('main.js:3' in out.stderr and 'let c = (;' in out.stderr,
          'stderr should point at main.js:3', out)
    check('runner' not in out.stderr and 'node:' not in out.stderr, 'runner frames in the stack', out)


def js_exception():
    out = execute('javascript', 'const a = 1;\nconst b = null;\nconsole.log(b.x);\n')
    expect_error(out, 'TypeError')
    check('main.js:3:' in out.stderr and out.stderr.startswith('TypeError: Cannot read'),
          'expected a stack at main.js:3', out)
    check('runner' not in out.stderr, 'runner frames in the stack', out)
    check(out.done['error']['traceback'] == out.stderr.rstrip('\n'), 'done.error.traceback', out)


def js_exit():
    out = execute('javascript', "console.log('bye');\nprocess.exit(3);\nconsole.log('not reached');\n")
    expect_error(out, 'ProcessExit', status=3)
    check(out.stdout == 'bye\n', 'output before process.exit', out)
    expect_ok(execute('javascript', 'process.exit(0);'), None)


def js_tool_ok():
    out = execute('javascript', "const r = await tools.fs.read_file({path: '/data/a.txt'});\n"
                                "const r2 = await tools.call('my-server.do-it', {n: 1});\n"
                                "return [r, r2];", fixed_tools)
    expect_ok(out, [{'text': 'hello from /data/a.txt'}, 1])
    expect_calls(out, 2)
    check(out.calls[0]['tool'] == 'fs.read_file' and out.calls[0]['args'] == {'path': '/data/a.txt'}
          and out.calls[1]['tool'] == 'my-server.do-it' and out.calls[1]['args'] == {'n': 1},
          'tool_call messages: %r' % out.calls, out)


def js_keys():
    out = execute('javascript', 'return [Object.keys(tools), Object.keys(tools.fs), '
                                'Object.keys(tools.nope), "read_file" in tools.fs ? 1 : 0];',
                  catalog_tools)
    expect_ok(out, [['fs', 'mem'], ['read_file', 'write_file'], [], 0])
    check(not out.calls and all(a['t'] == 'describe' for a in out.asks),
          'Object.keys sends describe, no tool call', out)


def js_signature():
    code = ("const util = require('util');\n"
            "const pending = tools.fs.read_file({path: '/a'});\n"
            "const sig = tools.fs.read_file.signature;\n"
            "console.log(String(tools.fs.read_file));\n"
            "console.log(util.inspect(tools));\n"
            "console.log(tools.fs);\n"
            "let bad;\n"
            "try { tools.fs.nope.signature; } catch (e) { bad = [e.name, e.code, e.message]; }\n"
            "return [sig, tools.fs.read_file.description, await pending, bad, `${tools.fs.nope}`];")
    out = execute('javascript', code, catalog_tools)
    expect_ok(out, ['read_file(args: { path: string }): Promise<any>', 'Read a file.\nAll of it.',
                    {'text': 'hello from /a'},
                    ['ToolError', 'unknown_tool', "no tool {'tool': 'fs.nope'}"],
                    "tools.fs.nope: no tool {'tool': 'fs.nope'}"])
    check(out.stdout.startswith('tools.fs.read_file\nread_file(args: { path: string }): '
                                'Promise<any>\n    Read a file.\n    All of it.\n'),
          'String(tool): the call, the signature, the description', out)
    check('tools.fs: read_file, write_file\ntools.mem: create_entities\n' in out.stdout
          and 'not ready: slow (starting)' in out.stdout,
          'inspecting tools lists the servers and those not ready', out)
    check('tools of server fs: await tools.fs.<tool>({...})' in out.stdout,
          'inspecting a server lists its tools', out)
    expect_calls(out, 1)


def js_tool_error():
    out = execute('javascript', "try {\n  await tools.nope.missing({x: 1});\n} catch (e) {\n"
                                "  return [e instanceof Error, e.code, e.tool, e.message];\n}",
                  fixed_tools)
    expect_ok(out, [True, 'unknown_tool', 'nope.missing', 'no tool nope.missing'])
    out = execute('javascript', 'const x = 1;\nawait tools.nope.missing();\n', fixed_tools)
    expect_error(out, 'ToolError')
    check('main.js:2' in out.stderr and 'runner' not in out.stderr,
          'an uncaught tool error shows only the program\'s frames', out)


def js_tool_denied():
    out = execute('javascript', "try {\n  await tools.fs.delete_file({path: '/'});\n} catch (e) {\n"
                                "  if (e.code === 'denied') return [e.code, e.message];\n}", fixed_tools)
    expect_ok(out, ['denied', 'deletes are not allowed'])


def js_concurrent():
    code = ('const ns = Array.from({length: 100}, (_, n) => n);\n'
            'return await Promise.all(ns.map((n) => tools.math.double({n})));')
    out = execute('javascript', code, fixed_tools, batch=100)
    expect_ok(out, [2 * n for n in range(100)])
    expect_calls(out, 100)
    check(out.max_outstanding == 100, 'all 100 calls should be out at once', out)


def js_fake_message():
    out = execute('javascript', "console.log(JSON.stringify({t: 'done', ok: true, result: 42}));\nreturn 7;")
    expect_ok(out, 7, stdout='{"t":"done","ok":true,"result":42}\n')
    check(len(out.messages) == 1, 'the program\'s output reached the channel', out)


def js_big_output():
    big_output('javascript', "for (let i = 0; i < 50000; i++) console.log('line ' + i + ' ' + 'x'.repeat(100));\n"
                             "console.error('end');\nreturn 1;")
    out = execute('javascript', "for (let i = 0; i < 50000; i++) console.log('x'.repeat(100));\n"
                                "process.exit(0);", slow_reader=True)
    check(out.status == 0 and len(out.stdout) == 50000 * 101,
          'output before process.exit() is lost: %d bytes' % len(out.stdout))


def js_fd3_not_inherited():
    out = execute('javascript', "const cp = require('child_process');\n"
                                "return cp.execSync('ls -l /proc/self/fd').toString();")
    fd_listing_ok(out)


def js_unsettled():
    out = execute('javascript', 'await new Promise(() => {});')
    expect_error(out, 'Error')
    check('never finished' in out.stderr, 'a program that waits for nothing is reported', out)


def ts_run(code):
    return execute('javascript', None, run={'t': 'run', 'lang': 'typescript', 'code': code})


def ts_types_stripped():
    out = ts_run('interface P { x: number }\nenum E { A = 2 }\n'
                 'function f<T>(v: T): T { return v; }\n'
                 'return f<number>(({ x: 40 } as P).x) + E.A;')
    expect_ok(out, 42)


def ts_error_line():
    out = ts_run('const a: number = 1;\nlet b: string | null = null;\nconsole.log(b!.length);\n')
    expect_error(out, 'TypeError')
    check('main.ts:3:' in out.stderr and 'runner' not in out.stderr and 'sucrase' not in out.stderr,
          'expected a stack at main.ts:3 and nothing of the runner', out)


def ts_syntax_error():
    out = ts_run('const a: number = 1;\nlet b: = 2;\n')
    expect_error(out, 'SyntaxError')
    check(out.stderr.startswith('main.ts:2:8\nlet b: = 2;\n       ^\n') and '(2:8)' in out.stderr,
          'a TypeScript syntax error names main.ts:2:8, shows the line and a caret', out)


def js_esm_imports():
    out = execute('javascript', 'import fs from "node:fs";\nimport { join } from "path";\n'
                  'return [typeof fs.readFileSync, join("a", "b")];')
    expect_ok(out, ['function', 'a/b'])


def js_protocol_error():
    out = execute('javascript', None, run=b'this is not JSON\n')
    check(out.status == 70 and 'protocol error' in out.stderr and out.done is None,
          'malformed JSON should end the runner with status 70', out)


TESTS = [
    ('python: print, and the last expression is the result', py_result_value),
    ('python: an assigned `result` is the result', py_result_variable),
    ('python: a result that is not JSON is sent as its repr', py_repr_result),
    ('python: syntax error reports main.py line 3', py_syntax_error),
    ('python: uncaught exception shows main.py line 3, no runner frames', py_exception),
    ('python: sys.exit(3) exits 3 after done', py_exit),
    ('python: tool calls answered ok', py_tool_ok),
    ('python: unknown_tool raises a catchable ToolError', py_tool_error),
    ('python: denied raises PermissionError', py_tool_denied),
    ('python: 100 calls from 8 threads, answered out of order', py_concurrent),
    ('python: dir(tools) and dir(tools.fs) list servers and tools', py_dir),
    ('python: help() and __doc__ show a tool\'s signature', py_help),
    ('python: a protocol-looking line on stdout stays on stdout', py_fake_message),
    ('python: 5 MB of output is complete at exit, slow reader', py_big_output),
    ('python: fd 3 is not inherited by a subprocess', py_fd3_not_inherited),
    ('python: malformed JSON from the core exits 70', py_protocol_error),
    ('javascript: console.log, and return is the result', js_result_value),
    ('javascript: an object result', js_object_result),
    ('javascript: a result that is not JSON is sent as a string', js_string_result),
    ('javascript: syntax error reports main.js:3', js_syntax_error),
    ('javascript: uncaught exception shows main.js:3, no runner frames', js_exception),
    ('javascript: process.exit(3) exits 3 after done', js_exit),
    ('javascript: tool calls answered ok', js_tool_ok),
    ('javascript: Object.keys(tools), Object.keys(tools.fs)', js_keys),
    ('javascript: .signature, String() and inspection, a call out meanwhile', js_signature),
    ('javascript: unknown_tool rejects with e.code', js_tool_error),
    ('javascript: denied rejects with e.code "denied"', js_tool_denied),
    ('javascript: Promise.all of 100 calls, answered out of order', js_concurrent),
    ('javascript: a protocol-looking line on stdout stays on stdout', js_fake_message),
    ('javascript: 5 MB of output is complete at exit, slow reader', js_big_output),
    ('javascript: fd 3 is not inherited by a child process', js_fd3_not_inherited),
    ('javascript: a promise nothing settles ends the program', js_unsettled),
    ('javascript: malformed JSON from the core exits 70', js_protocol_error),
    ('javascript: TypeScript types stripped, enum and generics run', ts_types_stripped),
    ('javascript: a TypeScript runtime error names main.ts:3', ts_error_line),
    ('javascript: a TypeScript syntax error names main.ts:2:8 with the line and a caret', ts_syntax_error),
    ('javascript: ESM imports of built-ins become require()', js_esm_imports),
]


def main():
    print('1..%d' % len(TESTS))
    failed = 0
    for n, (description, test) in enumerate(TESTS, 1):
        lang = description.split(':')[0]
        if not os.access(COMMANDS[lang][0], os.X_OK):
            print('ok %d - %s # SKIP %s not found' % (n, description, COMMANDS[lang][0]))
            continue
        try:
            test()
        except Exception as e:
            failed += 1
            print('not ok %d - %s' % (n, description))
            for line in ('%s: %s' % (type(e).__name__, e)).splitlines():
                print('#   ' + line)
        else:
            print('ok %d - %s' % (n, description))
        sys.stdout.flush()
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
