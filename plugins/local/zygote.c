/* zygote.c — the local executor's Python zygote: a sandbox factory
 * (factory.c) that holds an initialised interpreter, with the runner
 * loaded, so that a Python sandbox's runner is a fork of it instead of a
 * new interpreter (about 6 ms of CPU saved per sandbox on this machine's
 * class of hardware, most of a cold start).
 *
 *   hutch ── posix_spawn ──> zygote (hutch __plugin-helper local.so
 *                            factory 3 python INTERP RUNNER_DIR), started
 *                            with the sandbox's own environment (env.h)
 *   zygote: dlopen(libpython3.X), initialise it as `INTERP -I -S`, load
 *           hutch_runner.py as /run/hutch/hutch_runner.py and let it
 *           import what every job needs (_zygote in hutch_runner.py)
 *   zygote ── fork ──> C1 ── fork ──> init ── fork ──> runner: set up as
 *           for an exec'd runner (sandbox.c), then lsb_zygote_run()
 *           instead of execve()
 *
 * What is made per sandbox is what an exec'd runner gets: its namespaces,
 * cgroup, root file system, /work and /tmp, uid, limits, Landlock and
 * seccomp filter, all before any Python runs in it.
 *
 * What siblings (the sandboxes forked from one zygote) share, and why that
 * is acceptable:
 *   - Memory is copy-on-write: a write of one is never seen by another.
 *     The zygote itself never runs a program nor receives one's data (it
 *     gets sandbox parameters only), so what a sandbox inherits is the
 *     same interpreter state every sibling starts from.
 *   - The str hash secret (hash randomisation) is fixed when the
 *     interpreter starts and cannot change under live dicts: siblings
 *     share it.  It is a defence against hash flooding, and a program can
 *     only use it against a sibling whose input it controls; each zygote
 *     forks at most HUTCH_ZYGOTE_FORKS sandboxes, then retires, and the
 *     next one draws a new secret.
 *   - The address layout (ASLR) of the zygote: likewise shared, likewise
 *     renewed.  It is not hutch's own (the zygote is a fresh exec), and a
 *     sandbox has no way to reach a sibling's memory (separate pid, IPC and
 *     network namespaces, seccomp).
 *   - Random state: `random` reseeds itself in the child (an at-fork hook,
 *     run by PyOS_AfterFork_Child); the runner imports nothing else that
 *     seeds at import; os.urandom and secrets read the kernel each call.
 *   - Descriptors: the runner's process keeps 0-3 only (close_range in
 *     sandbox.c), as an exec'd one.
 * What differs from an exec'd runner: /proc/self/exe is hutch's binary and
 * /proc/self/maps lists hutch's libraries (their paths, not their data);
 * sys.executable is still the interpreter.
 *
 * Built only with Python's headers (python3-dev); the library is loaded
 * at run time, so hutch runs without it, and a zygote whose library is
 * missing or of another version than the headers says why and is not
 * used. */
#ifdef HAVE_PYEMBED
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#endif

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

#include "zygote.h"

#ifdef HAVE_PYEMBED

static struct {
    void (*init_python)(PyConfig *);
    PyStatus (*set_list)(PyConfig *, PyWideStringList *, Py_ssize_t, wchar_t **);
    PyStatus (*set_bytes_string)(PyConfig *, wchar_t **, const char *);
    PyStatus (*set_bytes_argv)(PyConfig *, Py_ssize_t, char *const *);
    PyStatus (*initialize)(const PyConfig *);
    int (*exception)(PyStatus);
    void (*clear)(PyConfig *);
    int (*run)(const char *, PyCompilerFlags *);
    void (*before_fork)(void);
    void (*after_parent)(void);
    void (*after_child)(void);
} py;

/* Run in __main__ of the zygote: the runner, compiled under the name it
 * has in the sandbox (tracebacks, __file__), then its preparation. */
static const char zygote_src[] =
    "import sys\n"
    "def _load(d):\n"
    "    import _io\n"
    "    with _io.open(d + '/hutch_runner.py', 'rb') as f:\n"
    "        src = f.read()\n"
    "    m = type(sys)('hutch_runner')\n"
    "    m.__file__ = '/run/hutch/hutch_runner.py'\n"
    "    sys.modules['hutch_runner'] = m\n"
    "    exec(compile(src, m.__file__, 'exec', dont_inherit=True), m.__dict__)\n"
    "    m._zygote()\n"
    "_load(sys.argv[0])\n"
    "sys.argv[:] = ['/run/hutch/runner.py']\n"
    "del _load\n";

static int sym(void *lib, const char *name, void *out, char *why, size_t len)
{
    void *s = dlsym(lib, name);
    if (!s) {
        snprintf(why, len, "%s has no %s", "the Python library", name);
        return -ENOENT;
    }
    memcpy(out, &s, sizeof(s));
    return 0;
}

int lsb_zygote_init(const char *interp, const char *runner_dir, char *why, size_t len)
{
    char lib_name[64];
    const char *base = strrchr(interp, '/');
    const unsigned long *version;
    void *lib;
    PyConfig config;
    PyStatus st;
    char *argv[] = {(char *)runner_dir, NULL};
    static wchar_t winterp[PATH_MAX];
    wchar_t *orig[] = {winterp, L"-I", L"-S", L"/run/hutch/runner.py"};
    int r = 0;

    base = base ? base + 1 : interp;
    /* The library of the interpreter the sandboxes would exec, and the one
     * whose headers this was built with: PyConfig's layout is theirs. */
    if (snprintf(lib_name, sizeof(lib_name), "lib%s.so.1.0", base) >=
            (int)sizeof(lib_name) ||
        strncmp(base, "python3.", 8) != 0) {
        snprintf(why, len, "%s is not a python3.X binary", interp);
        return -EINVAL;
    }
    lib = dlopen(lib_name, RTLD_NOW | RTLD_GLOBAL);
    if (!lib) {
        snprintf(why, len, "cannot load %s (apt-get install -y lib%s): %s", lib_name,
                 base, dlerror());
        return -ENOENT;
    }
    version = dlsym(lib, "Py_Version");
    if (!version || (*version >> 16) != ((unsigned long)PY_VERSION_HEX >> 16)) {
        snprintf(why, len, "%s is Python %lu.%lu, hutch was built for %d.%d", lib_name,
                 version ? *version >> 24 : 0, version ? (*version >> 16) & 0xff : 0,
                 PY_MAJOR_VERSION, PY_MINOR_VERSION);
        return -ENOTSUP;
    }
    if ((r = sym(lib, "PyConfig_InitPythonConfig", &py.init_python, why, len)) < 0 ||
        (r = sym(lib, "PyConfig_SetWideStringList", &py.set_list, why, len)) < 0 ||
        (r = sym(lib, "PyConfig_SetBytesString", &py.set_bytes_string, why, len)) < 0 ||
        (r = sym(lib, "PyConfig_SetBytesArgv", &py.set_bytes_argv, why, len)) < 0 ||
        (r = sym(lib, "Py_InitializeFromConfig", &py.initialize, why, len)) < 0 ||
        (r = sym(lib, "PyStatus_Exception", &py.exception, why, len)) < 0 ||
        (r = sym(lib, "PyConfig_Clear", &py.clear, why, len)) < 0 ||
        (r = sym(lib, "PyRun_SimpleStringFlags", &py.run, why, len)) < 0 ||
        (r = sym(lib, "PyOS_BeforeFork", &py.before_fork, why, len)) < 0 ||
        (r = sym(lib, "PyOS_AfterFork_Parent", &py.after_parent, why, len)) < 0 ||
        (r = sym(lib, "PyOS_AfterFork_Child", &py.after_child, why, len)) < 0)
        return r;

    /* `interp -I -S` as the interpreter's own main() sets it up: the
     * locale from the environment (C.UTF-8, env.h), isolated (no PYTHON*
     * variables, no user site, no script directory on sys.path), no site
     * module, its signal handlers (SIGPIPE and SIGXFSZ ignored; SIGINT is
     * ignored in the factory, so the child sets its handler) and its
     * command line in sys.orig_argv. */
    if (mbstowcs(winterp, interp, PATH_MAX) >= PATH_MAX) {
        snprintf(why, len, "%s: not a name in this locale", interp);
        return -EINVAL;
    }
    py.init_python(&config);
    config.isolated = 1;
    config.site_import = 0;
    config.parse_argv = 0;
    st = py.set_bytes_string(&config, &config.program_name, interp);
    if (!py.exception(st))
        st = py.set_bytes_string(&config, &config.executable, interp);
    if (!py.exception(st))
        st = py.set_bytes_argv(&config, 1, argv);
    if (!py.exception(st))
        st = py.set_list(&config, &config.orig_argv, 4, orig);
    if (!py.exception(st))
        st = py.initialize(&config);
    py.clear(&config);
    if (py.exception(st)) {
        snprintf(why, len, "initialising Python: %s",
                 st.err_msg ? st.err_msg : "failed");
        return -EIO;
    }
    if (py.run(zygote_src, NULL) != 0) {
        snprintf(why, len, "loading the runner from %s failed", runner_dir);
        return -EIO;
    }
    return 0;
}

void lsb_zygote_before_fork(void)
{
    py.before_fork();
}

void lsb_zygote_after_fork_parent(void)
{
    py.after_parent();
}

void lsb_zygote_run(void)
{
    /* What `python3` sets up for itself at start, which an exec would
     * have redone: the ignored signals (SIGINT's handler is the runner's
     * to set, in _zygote_child). */
    signal(SIGPIPE, SIG_IGN);
    signal(SIGXFSZ, SIG_IGN);
    py.after_child();
    py.run("import hutch_runner\nhutch_runner._zygote_child()\n", NULL);
    /* main() ends the process itself; here only if it could not start. */
    _exit(70);
}

#else /* !HAVE_PYEMBED */

int lsb_zygote_init(const char *interp, const char *runner_dir, char *why, size_t len)
{
    (void)interp;
    (void)runner_dir;
    snprintf(why, len, "hutch was built without Python's headers (python3-dev)");
    return -ENOSYS;
}

void lsb_zygote_before_fork(void)
{
}

void lsb_zygote_after_fork_parent(void)
{
}

void lsb_zygote_run(void)
{
    _exit(70);
}

#endif
