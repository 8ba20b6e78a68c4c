"""hutch runner for Python (the body; runner.py is the entry point): runs one untrusted program inside a fresh sandbox.

The core starts this file before any job exists (warm start) as
`python3 -I -S runner.py`, with the protocol channel on fd 3. It takes the
channel, says `ready`, waits for the one `run` message, executes the code as
`__main__`, turns `tools.<server>.<tool>(...)` into `tool_call` messages, and
ends with `done` and an exit status. The wire protocol is PROTOCOL.md, next to
this file.

Start-up time is what a warm pool is for, so only built-in modules are
imported up front: `import json` alone would double the interpreter's start-up
(it compiles regular expressions), so messages go through the `_json`
accelerator that `json` itself uses, and `traceback`/`linecache` are imported
only when an error has to be shown.
"""
import _json
import _thread
import builtins
import posix
import sys

MAX_LINE = 8 << 20  # one message, newline included
MAX_DEPTH = 64      # JSON nesting of a message; the message object is level 1
EX_PROTOCOL = 70

_fd = -1                        # the channel, once taken over from fd 3
_inbuf = bytearray()
_wlock = _thread.allocate_lock()  # one message at a time on the channel
_lock = _thread.allocate_lock()   # guards _pending, _last_id, _reading
_pending = {}                   # tool call id -> _Call
_last_id = 0
_reading = False                # some thread is reading the channel for all
_pid = None                     # the process the tools belong to
_out = '/work/out'              # what comes back (cwd/out)


# --- JSON without the json package -----------------------------------------

class _Scan:
    strict = True
    object_hook = object_pairs_hook = None
    parse_float = float
    parse_int = int

    def parse_constant(name):  # NaN and Infinity are not JSON
        raise ValueError(name)


_scan = _json.make_scanner(_Scan)


def _loads(data):
    text = data.decode('utf-8').strip(' \t\r')
    value, end = _scan(text, 0)
    if end != len(text):
        raise ValueError('trailing data')
    return value


def _not_json(value):
    raise TypeError('Object of type %s is not JSON serializable'
                    % type(value).__name__)


def _dumps(value):
    """UTF-8 JSON of value; raises TypeError/ValueError as json.dumps does."""
    for quote in (_json.encode_basestring, _json.encode_basestring_ascii):
        encode = _json.make_encoder({}, _not_json, quote, None, ':', ',',
                                    False, False, False)
        try:
            return ''.join(encode(value, 0)).encode('utf-8')
        except UnicodeEncodeError:  # lone surrogates: \u escapes are valid
            continue


def _too_deep(value, limit):
    todo = [(value, 1)]
    while todo:
        value, depth = todo.pop()
        if depth > limit:
            return True
        for item in value.values() if isinstance(value, dict) else value:
            if isinstance(item, (dict, list, tuple)):
                todo.append((item, depth + 1))
    return False


def _line(message, payload):
    """The wire form of message, checked against what the core accepts."""
    data = _dumps(message)
    if isinstance(payload, (dict, list, tuple)) and _too_deep(payload, MAX_DEPTH - 1):
        raise ValueError('value nested deeper than %d levels' % (MAX_DEPTH - 1))
    if len(data) >= MAX_LINE:
        raise ValueError('message of %d bytes is over the 8 MiB limit' % len(data))
    return data + b'\n'


# --- the channel ------------------------------------------------------------

def _flush():
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        try:
            stream.flush()
        except Exception:
            pass


def _protocol_error(why):
    _flush()
    posix.write(2, ('hutch runner: protocol error: %s\n' % why).encode('utf-8', 'replace'))
    posix._exit(EX_PROTOCOL)


def _send(data):
    with _wlock:
        view = memoryview(data)
        try:
            while view:
                view = view[posix.write(_fd, view):]
        except OSError as e:
            _protocol_error('cannot write to the channel: %s' % e.strerror)


def _set_env(env):
    """The job's variables (the egress proxy's, PROTOCOL.md): into os.environ
    when a preloaded package imported os already, else into the process's
    environment and posix.environ, which os.environ copies when imported."""
    if type(env) is not dict or not all(type(k) is str and type(v) is str and k
                                        and '=' not in k and '\0' not in k + v
                                        for k, v in env.items()):
        _protocol_error('"env" must be an object of strings')
    osmod = sys.modules.get('os')
    for k, v in env.items():
        if osmod is not None:
            osmod.environ[k] = v
        else:
            posix.putenv(k, v)
            posix.environ[k.encode()] = v.encode()


# A read's size: a bytes object this large comes from the heap, where a
# larger one is an mmap, shrunk with mremap and unmapped again: three
# system calls for every message (a tool call's answer, mostly).
_READ = 1 << 16


def _recv():
    """The next message from the core; blocks."""
    global _inbuf
    seen = 0
    while True:
        nl = _inbuf.find(b'\n', seen)
        if nl >= 0:
            break
        if len(_inbuf) >= MAX_LINE:
            _protocol_error('message longer than 8 MiB')
        seen = len(_inbuf)
        try:
            chunk = posix.read(_fd, _READ)
        except OSError as e:
            _protocol_error('cannot read the channel: %s' % e.strerror)
        if not chunk:
            _protocol_error('the core closed the channel')
        _inbuf += chunk
    if nl >= MAX_LINE:
        _protocol_error('message longer than 8 MiB')
    data = bytes(_inbuf[:nl])
    del _inbuf[:nl + 1]
    try:
        message = _loads(data)
    except Exception:
        _protocol_error('malformed JSON: %r' % data[:80])
    if type(message) is not dict or type(message.get('t')) is not str:
        _protocol_error('message is not an object with a string "t": %r' % data[:80])
    return message


# --- tools ------------------------------------------------------------------

class ToolError(Exception):
    """A tool call failed. `.code` says why (unknown_tool, denied,
    invalid_args, upstream, timeout, internal); `.tool` names the tool."""

    def __init__(self, message='', code='internal', tool=None):
        super().__init__(message)
        self.code = code
        self.tool = tool


class ToolDenied(ToolError, PermissionError):
    """The policy refused the tool call (code "denied")."""


# Tracebacks print "ToolError: …" as for a builtin, not "hutch_runner.ToolError".
ToolError.__module__ = ToolDenied.__module__ = 'builtins'


class _Call:
    __slots__ = ('wake', 'woken', 'reply')

    def __init__(self):
        self.wake = _thread.allocate_lock()
        self.wake.acquire()
        self.woken = False  # True exactly while `wake` is released
        self.reply = None


def _wake(call):  # with _lock held
    if not call.woken:
        call.woken = True
        call.wake.release()


def _deliver(message):
    if message['t'] != 'tool_result':
        _protocol_error('unexpected "%s" message while the program runs' % message['t'])
    cid = message.get('id')
    if type(cid) is not int or type(message.get('ok')) is not bool:
        _protocol_error('tool_result needs an integer "id" and a boolean "ok"')
    with _lock:
        call = _pending.pop(cid, None)
        if call is None:
            _protocol_error('tool_result for unknown id %d' % cid)
        call.reply = message
        _wake(call)


def _await(call):
    # No reader thread: whichever waiting thread finds the channel free reads
    # it for everybody until its own answer comes, then wakes another waiter
    # to take over. A program that never calls a tool starts no thread.
    global _reading
    while True:
        with _lock:
            if call.reply is not None:
                return call.reply
            lead = not _reading
            _reading = True
        if not lead:
            call.wake.acquire()
            with _lock:
                call.woken = False
            continue
        try:
            while call.reply is None:
                _deliver(_recv())
        finally:
            with _lock:
                _reading = False
                for other in _pending.values():
                    _wake(other)
                    break


def _call(tool, args, kwargs, kind='tool_call'):
    global _last_id
    if kind != 'tool_call':
        pass
    elif not isinstance(tool, str):
        raise TypeError('tool name must be a str, not %s' % type(tool).__name__)
    if args is None:
        args = {}
    elif not isinstance(args, dict):
        raise TypeError('tool arguments must be a dict, not %s' % type(args).__name__)
    if kwargs:
        args = {**args, **kwargs}
    if posix.getpid() != _pid:  # a forked child would reuse the parent's ids
        raise RuntimeError('tools can only be called from the process running the program')
    with _lock:
        _last_id += 1
        cid = _last_id
    if kind == 'tool_call':
        data = _line({'t': 'tool_call', 'id': cid, 'tool': tool, 'args': args}, args)
    else:
        data = _line({'t': kind, 'id': cid, 'args': args}, args)
    call = _Call()
    with _lock:
        _pending[cid] = call
    _send(data)
    reply = _await(call)
    if reply['ok']:
        return reply.get('result')
    error = reply.get('error')
    error = error if type(error) is dict else {}
    code = error.get('code') if type(error.get('code')) is str else 'internal'
    message = error.get('message') if type(error.get('message')) is str else 'tool call failed'
    raise (ToolDenied if code == 'denied' else ToolError)(message, code, tool)


def _lookup(args):
    """The core's answer to a describe message (dir(), help(), signatures)."""
    return _call('describe', args, None, 'describe')


def _directory():
    """{server identifier: [tool identifiers]} of the tools the program may
    call; {} when the core cannot say (dir() must not raise)."""
    try:
        found = _lookup({}).get('tools')
    except Exception:
        return {}
    return found if type(found) is dict else {}


def _tool_text(info):
    """A search result as help() shows it: how to call it, the signature,
    the description."""
    text = '%s\n%s\n' % (info.get('call', '?'), info.get('python', ''))
    desc = (info.get('description') or '').strip()
    return text + ''.join('    ' + line + '\n' for line in desc.splitlines())


class _Tool:
    # A tool of an upstream server: call it with keyword arguments (or one
    # dict); help() and __doc__ show its signature and description.
    __slots__ = ('name',)

    def __init__(self, name):
        self.name = name

    def __call__(self, args=None, /, **kwargs):
        return _call(self.name, args, kwargs)

    def _info(self):
        return _lookup({'tool': self.name})

    @property
    def signature(self):
        """The Python signature, e.g. 'def read_file(*, path: str) -> Any'
        (raises ToolError for an unknown tool)."""
        return self._info().get('python')

    @property
    def __doc__(self):
        try:
            return _tool_text(self._info())
        except ToolError as e:
            return str(e) + '\n'

    def __repr__(self):
        return '<tool %s>' % self.name


class _Server:
    __slots__ = ('_server',)

    def __init__(self, name):
        self._server = name

    def __getattr__(self, tool):
        if tool.startswith('__'):
            raise AttributeError(tool)
        return _Tool(self._server + '.' + tool)

    def __dir__(self):
        return sorted(_directory().get(self._server) or [])

    @property
    def __doc__(self):
        try:
            found = _lookup({'server': self._server}).get('tools') or []
        except ToolError as e:
            return str(e)
        if not found:
            return 'server %r offers no tools to this program' % self._server
        head = 'tools.%s: call a tool as tools.%s.<tool>(**args)\n\n' % (
            self._server, self._server)
        return head + '\n'.join(_tool_text(t) for t in found)

    def __repr__(self):
        return '<tools of server %r: tools.%s.<tool>(**args)>' % (self._server, self._server)


class _Tools:
    """Upstream tools: `tools.<server>.<tool>(**args)` returns the tool's
    result; `tools.call("server.tool-name", {...})` for names that are not
    identifiers. A failed call raises ToolError (ToolDenied when refused).
    dir(tools) lists the servers, dir(tools.<server>) their tools, and
    help(tools.<server>.<tool>) shows a tool's signature."""
    __slots__ = ()

    def __getattr__(self, server):
        if server.startswith('__'):
            raise AttributeError(server)
        return _Server(server)

    def call(self, tool, args=None, /, **kwargs):
        """Call tool "server.tool" with args (a dict) and/or keyword arguments."""
        return _call(tool, args, kwargs)

    def search(self, query='', limit=None, detail=None):
        """Search the tools the policy lets this program call, as search_tools
        does: {"tools": [{name, call, description, python, typescript}, ...],
        "total", "matches"}, and "servers": [{server, state, error?}] naming
        the servers whose tools are missing (starting, restarting, failed);
        detail "names", "signatures" (default) or "full"."""
        if not isinstance(query, str):
            raise TypeError('query must be a str, not %s' % type(query).__name__)
        args = {'query': query}
        if limit is not None:
            args['limit'] = limit
        if detail is not None:
            args['detail'] = detail
        return _call('search_tools', args, None, 'search')

    def __dir__(self):
        return ['call', 'search'] + sorted(_directory())

    def _help(self):
        try:
            found = _lookup({})
        except ToolError as e:
            found = {'error': str(e)}
        lines = ['tools: the upstream tools this program may call',
                 '  tools.<server>.<tool>(**args)          call one (a failure raises '
                 'ToolError)',
                 '  tools.call("server.tool-name", {...})  any tool by its name',
                 '  tools.search(query, limit=None, detail=None)  search them',
                 '  dir(tools.<server>), help(tools.<server>.<tool>)  their tools, '
                 'a signature',
                 '']
        servers = found.get('tools') if type(found.get('tools')) is dict else {}
        for name in sorted(servers):
            lines.append('tools.%s: %s' % (name, ', '.join(servers[name])))
        for name in found.get('calls') or []:
            lines.append('tools.call(%r)' % name)
        for down in found.get('servers') or []:
            lines.append('not ready: %s (%s%s)' % (
                down.get('server'), down.get('state'),
                ': ' + down['error'] if down.get('error') else ''))
        if found.get('error'):
            lines.append(found['error'])
        if not servers and not found.get('calls'):
            lines.append('(no tools this program may call)')
        return '\n'.join(lines) + '\n'

    def __repr__(self):
        return ("<tools: tools.<server>.<tool>(**args) or "
                "tools.call('server.tool', {...}); dir(tools), help(tools)>")


def _help(*args, **kwargs):
    """help(thing): for tools, their servers and their signatures; for
    anything else, Python's own help (pydoc)."""
    if len(args) == 1 and not kwargs:
        thing = args[0]
        if isinstance(thing, _Tools):
            sys.stdout.write(thing._help())
            return
        if isinstance(thing, _Tool):
            sys.stdout.write('Help on tool %s:\n\n%s' % (thing.name, thing.__doc__))
            return
        if isinstance(thing, _Server):
            sys.stdout.write(thing.__doc__ + '\n')
            return
    import pydoc  # only when asked: it imports much of the standard library
    return pydoc.help(*args, **kwargs)


tools = _Tools()


# --- running the program ----------------------------------------------------

class _Source:
    """__loader__ of the program, so linecache (warnings, inspect) finds its
    text without a main.py on disk."""

    def __init__(self, code):
        self.code = code

    def get_source(self, name):
        return self.code


def _without_runner_frames(exc):
    mine = _run.__code__.co_filename  # not __file__: also right when run from a .pyc
    seen = set()
    todo = [exc]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        seen.add(id(exc))
        kept = []
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename != mine:
                kept.append(tb)
            tb = tb.tb_next
        for tb, below in zip(kept, kept[1:] + [None]):
            tb.tb_next = below
        exc.__traceback__ = kept[0] if kept else None
        todo += (exc.__cause__, exc.__context__)


def _cut(text, limit=1 << 16):
    return text if len(text) <= limit else text[:limit] + '\n[... truncated]'


def _describe(exc, code):
    """Print exc as Python would and return the `error` member of `done`."""
    import linecache
    import traceback
    lines = code.splitlines(True)
    linecache.cache['main.py'] = (len(code), None, lines, 'main.py')
    if (isinstance(exc, SyntaxError) and exc.filename == 'main.py' and exc.text is None
            and 0 < (exc.lineno or 0) <= len(lines)):
        exc.text = lines[exc.lineno - 1]  # errors found compiling the AST carry no text
    _without_runner_frames(exc)
    text = ''.join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    try:
        sys.stderr.write(text)
    except Exception:  # the program closed or replaced it
        posix.write(2, text.encode('utf-8', 'replace'))
    try:
        message = str(exc)
    except Exception:
        message = '<unprintable %s>' % type(exc).__name__
    return {'type': type(exc).__qualname__, 'message': _cut(message), 'traceback': _cut(text)}


def _finish(status, result=None, error=None):
    try:
        import atexit  # what the program registered still runs, as in python
        atexit._run_exitfuncs()
    except BaseException:
        pass
    _flush()  # the output is complete before `done` says so
    # The program's output ends here: closing stdout and stderr lets the
    # core see both end (unless a process the program started holds them)
    # and answer at `done` without waiting for this process to exit.
    for fd in (1, 2):
        try:
            posix.close(fd)
        except OSError:
            pass
    # Whether /work/out holds anything: when it does not, the core need not
    # fetch it (a hint; the core's own checks decide what comes back).
    try:
        files = bool(posix.listdir(_out))
    except OSError:
        files = False
    if error is not None:
        data = _line({'t': 'done', 'ok': False, 'status': status, 'files': files,
                      'error': error}, None)
    else:
        try:
            data = _line({'t': 'done', 'ok': True, 'status': status, 'files': files,
                          'result': result}, result)
        except Exception:
            try:
                text = repr(result)
            except Exception:
                text = object.__repr__(result)
            try:
                data = _line({'t': 'done', 'ok': True, 'status': status, 'files': files,
                              'result': text}, text)
            except ValueError as e:
                status = 1
                data = _line({'t': 'done', 'ok': False, 'status': 1, 'files': files,
                              'error': {'type': 'ValueError',
                                        'message': 'result too large: %s' % e,
                                        'traceback': ''}}, None)
    _send(data)
    posix._exit(status)  # do not wait for threads the program left running


def _split(code):
    """The program's statements compiled, and its last statement apart when
    it is an expression (its value is the result), for _value."""
    import _ast
    tree = compile(code, 'main.py', 'exec', _ast.PyCF_ONLY_AST, True)
    last = None
    if tree.body and isinstance(tree.body[-1], _ast.Expr):
        last = _ast.Expression(tree.body.pop().value)
    return compile(tree, 'main.py', 'exec', 0, True), last


def _value(last, scope):
    """The last expression's value, compiled once the statements ran (as
    Python reports its errors: after what the statements printed)."""
    return eval(compile(last, 'main.py', 'eval', 0, True), scope) if last else None


def _run(code, cwd):
    main = type(sys)('__main__')
    scope = main.__dict__
    scope.update(__file__=cwd.rstrip('/') + '/main.py', __loader__=_Source(code),
                 __builtins__=builtins, tools=tools,
                 ToolError=ToolError, ToolDenied=ToolDenied)
    sys.modules['__main__'] = main
    sys.argv[:] = [scope['__file__']]
    try:
        body, last = _split(code)
        exec(body, scope)
        value = _value(last, scope)
        if value is None:
            value = scope.get('result')
    except SystemExit as e:
        status = e.code
        if status is None:
            status = 0
        elif not isinstance(status, int):
            print(status, file=sys.stderr)  # as python does for sys.exit("text")
            status = 1
        status &= 0xFF
        error = {'type': 'SystemExit', 'message': _cut(str(e.code)), 'traceback': ''}
        _finish(status, error=error if status else None)
    except BaseException as e:
        _finish(1, error=_describe(e, code))
    _finish(0, value)


def _dist_packages():
    """The system's package directories (-I -S leaves them out)."""
    version = 'python%d.%d' % sys.version_info[:2]
    return ['/usr/local/lib/%s/dist-packages' % version,
            '/usr/lib/python3/dist-packages',
            '/usr/lib/%s/dist-packages' % version]


def _preload():
    """The data flavour's packages, imported before `ready` in a sandbox
    started for a pool (the plugin passes --preload then, never for a cold
    start, whose job waits): the program's `import pandas` finds them
    loaded.  Each sandbox is its own process, so nothing here is shared
    with another execution; what an import seeds (numpy's global random
    state, hash seeds) is seeded from this process's own entropy.  A
    package that fails to import is left out: the program's own import
    then says why.  matplotlib writes its font cache under $HOME (/work),
    as a program's own first import would."""
    added = _dist_packages()
    sys.path += added
    try:
        import io
        import numpy  # noqa: F401
        import pandas
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
        # A first chart loads what a chart needs (pandas' plotting module,
        # the fonts, the PNG writer); closed, so the program starts with
        # no figure.
        pandas.DataFrame({'x': [0, 1]}).plot()
        plt.savefig(io.BytesIO(), format='png')
        plt.close('all')
    except Exception:
        pass
    for d in added:
        sys.path.remove(d)


def _warm():
    """What every job needs, done while no job is there yet: the AST types
    and the compiler's first use."""
    import atexit  # noqa: F401
    _split('x')


def _job_waiting():
    """Whether the core sent the job already (a cold start), without
    blocking; what came stays for _recv."""
    global _inbuf
    try:
        posix.set_blocking(_fd, False)
        try:
            chunk = posix.read(_fd, _READ)
        finally:
            posix.set_blocking(_fd, True)
    except BlockingIOError:
        return False
    except OSError:
        return True  # _recv says what is wrong
    _inbuf += chunk
    return True  # a job, or the end of the channel: _recv says which


def _rehearse():
    """A pooled sandbox's rehearsal of a job while no job is there: what a
    job's first run of the runner's paths costs (the compiler, exec and
    eval, the JSON of a message, the standard streams; in a fork of the
    zygote, the copy of each page those write), paid before it.  It leaves
    nothing: no output, no file, no name anywhere the program can see."""
    body, last = _split('x = [1, "a", {"b": None}, 2.5]\nlen(x)')
    scope = {'__builtins__': builtins}
    exec(body, scope)
    _value(last, scope)
    _line({'t': 'done', 'ok': True, 'status': 0, 'files': False, 'result': scope['x']},
          scope['x'])
    _loads(b'{"t":"run","lang":"python","code":"print(1)","cwd":"/work"}')
    for stream in (sys.stdout, sys.stderr):
        stream.write('')


def _zygote():
    """The local executor's zygote (plugins/local/zygote.c) loads this
    module once and calls this before it forks any sandbox: what a job
    would import or warm up, done once for all its sandboxes.  `os` too: a
    program almost always imports it, and it costs a millisecond; its
    environ is the sandbox's (the zygote starts with it), and _set_env
    puts a job's variables into it.  Nothing imported here keeps state one
    sandbox could leave for another: each runs in its own copy."""
    _warm()
    import os  # noqa: F401


def _zygote_child():
    """The runner's start in a sandbox forked from the zygote, where an
    exec'd runner would start main().  The factory ignores SIGINT, SIGTERM
    and SIGHUP, and the interpreter took them as ignored when it started;
    its sandboxes get them back at their defaults, as an exec'd runner has
    them: SIGINT raises KeyboardInterrupt.  A handler the factory itself
    had (a sanitizer's) was reset at the fork, and the interpreter still
    takes it for one (getsignal says None): the default, as it is."""
    import _signal
    for sig in range(1, _signal.NSIG):
        try:
            if _signal.getsignal(sig) is None:
                _signal.signal(sig, _signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    _signal.signal(_signal.SIGINT, _signal.default_int_handler)
    _signal.signal(_signal.SIGTERM, _signal.SIG_DFL)
    _signal.signal(_signal.SIGHUP, _signal.SIG_DFL)
    main(warmed=True)


def main(warmed=False):
    """The runner; `warmed`: _warm ran already (in the zygote)."""
    global _fd, _pid
    try:
        _fd = posix.dup(3)  # dup() makes it close-on-exec (PEP 446)
        posix.close(3)
    except OSError:
        _protocol_error('fd 3 (the channel to the core) is not open')
    if sys.argv[1:] == ['--preload']:
        _preload()
    _send(b'{"t":"ready","lang":"python","version":"%d.%d.%d"}\n' % sys.version_info[:3])
    # While the core has no job for us yet (a warm pool's sandbox waits
    # here; a cold one has its job queued already, so this costs it nothing
    # it would not pay in _run).  A zygote's fork did it already.
    if not warmed:
        _warm()
    if not _job_waiting():
        _rehearse()

    job = _recv()
    if job['t'] != 'run':
        _protocol_error('expected "run", got "%s"' % job['t'])
    code, cwd = job.get('code'), job.get('cwd', '/work')
    if type(code) is not str or type(cwd) is not str or job.get('lang', 'python') != 'python':
        _protocol_error('"run" needs a string "code", a string "cwd" and lang "python"')
    _set_env(job.get('env', {}))
    try:
        posix.chdir(cwd)
    except OSError as e:
        _protocol_error('cannot enter %s: %s' % (cwd, e.strerror))
    global _out
    _out = cwd.rstrip('/') + '/out'
    _pid = posix.getpid()
    # -I -S drops what `python3 main.py` would have: the script's directory,
    # the host's packages, and the exit()/quit() builtins from site.
    sys.path[:0] = [cwd]
    sys.path += _dist_packages()
    sys.dont_write_bytecode = True  # -I ignores PYTHONDONTWRITEBYTECODE
    builtins.exit = builtins.quit = sys.exit
    builtins.help = _help  # site's, which -S drops, did not know the tools
    _run(code, cwd)


if __name__ == '__main__':
    main()
