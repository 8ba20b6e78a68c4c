/* main.c — the hutch binary: global options and subcommand dispatch. */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "cli.h"
#include "janitor.h"
#include "knobs.h"
#include "log.h"
#include "plugin.h"
#include "util.h"

/* Sanitizer builds: LeakSanitizer's check at exit can die in its tracer
 * ("Tracer caught signal 11", a CI run's sdk2_http.sh 80 on SIGTERM).
 * Up to GCC 13 and LLVM 16 (Debian 12 has GCC 12) the runtime's
 * __tls_get_addr interceptor takes a dynamic TLS block that happens to
 * start at a certain offset in its page for one with a pre-2.25 glibc
 * header, and reads a bogus address and length before it.  hutch keeps
 * no pointer only in a dlopen'ed module's TLS, so it does without that
 * interception; ASAN_OPTIONS from the environment still add to this. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HUTCH_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(HUTCH_ASAN)
__attribute__((visibility("default"), used)) const char *__asan_default_options(void);
const char *__asan_default_options(void)
{
    return "intercept_tls_get_addr=0";
}
#endif

static void usage(FILE *f)
{
    fprintf(f, "Usage: hutch COMMAND [OPTIONS]\n"
               "\n"
               "Code mode for AI agents: run Python or JavaScript in a fresh sandbox.\n"
               "\n"
               "Commands:\n"
               "  serve     serve MCP (search_tools, execute_code) over stdio or HTTP\n"
               "  run       run a program in a sandbox (hutch run --help)\n"
               "  tools     list or search the tools of upstream MCP servers\n"
               "  policy    check or test a Lua policy file\n"
               "  workspace list, show or delete the files kept between runs\n"
               "  plugins   list the executor plugins found, usable or not, and why\n"
               "  doctor    check this machine for what the executors need\n"
               "\n"
               "Options:\n"
               "  --version  print the version\n"
               "  --help     this text; COMMAND --help for a command's options\n");
}

/* The commands; own_knobs: it checks the environment's settings itself. */
static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
    int own_knobs;
} commands[] = {
    {"run", hutch_cmd_run, 1},         {"serve", hutch_cmd_serve, 1},
    {"policy", hutch_cmd_policy, 0},   {"tools", hutch_cmd_tools, 0},
    {"plugins", hutch_cmd_plugins, 0}, {"workspace", hutch_cmd_workspace, 0},
    {"doctor", hutch_cmd_doctor, 0},
};

static int wants_help(int argc, char **argv)
{
    for (int i = 2; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return 1;
    return 0;
}

/* `hutch __knobs man|list`, for the build and the tests (not in --help):
 * hutch(1)'s ENVIRONMENT entries (`make man-knobs` puts them in the page,
 * tests/run/knobs.sh compares), or the table, one knob a line. */
#define KNOBS_VERB "__knobs"
static int knobs_verb(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "man")) {
        hutch_knobs_man(stdout);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "list")) {
        hutch_knobs_list(stdout);
        return 0;
    }
    fprintf(stderr, "usage: hutch %s man|list\n", KNOBS_VERB);
    return 2;
}

int main(int argc, char **argv)
{
    /* An executor's helper process (hutch-executor.h, "Processes"):
     * before anything of hutch's starts. */
    if (argc >= 2 && !strcmp(argv[1], HUTCH_HELPER_VERB))
        return hutch_plugin_helper_main(argc, argv);
    /* The janitor of a hutch (janitor.h), as fresh as a helper. */
    if (argc >= 2 && !strcmp(argv[1], HUTCH_JANITOR_VERB))
        return hutch_janitor_main(argc, argv);
    /* A runner that goes away mid-write must not take hutch with it. */
    signal(SIGPIPE, SIG_IGN);
    /* Large buffers (messages, results, tars) are mapped and unmapped
     * whole: a fixed threshold keeps glibc from raising it after the first
     * free, which would keep every later one in the heap after it is
     * freed (budget.c trims the heap after a burst). */
    mallopt(M_MMAP_THRESHOLD, HUTCH_MALLOC_MMAP_THRESHOLD);
    /* No fastbins: a freed small chunk (a JSON tree's nodes) is merged with
     * its free neighbours at once, so a tree freed in a thread's arena
     * shrinks that arena's heap as it goes (glibc's heap_trim).  Left in
     * fastbins, malloc_trim would merge them into the top of the arena,
     * which it gives back only for the main one: a 600,000-value call
     * stayed resident (46 MiB) after a burst, or not, depending on what the
     * arena freed next.  Per-thread tcache still makes small frees cheap. */
    mallopt(M_MXFAST, 0);
    /* Few arenas (caps.h): hutch's threads mostly wait, and tcache keeps
     * small allocations off the arenas' locks. */
    mallopt(M_ARENA_MAX, (int)(HUTCH_MALLOC_ARENAS_PER_CPU * hutch_cpus()));
    /* Every command's diagnostics; `serve --log-format` overrides it.  A
     * bad value is refused below, or by serve and run themselves. */
    (void)hutch_log_set_format_name(hutch_knob_str(HUTCH_KNOB_LOG_FORMAT));
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
        printf("hutch %s (executor ABI %d)\n", PACKAGE_VERSION, HUTCH_EXECUTOR_ABI);
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
        !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], KNOBS_VERB))
        return knobs_verb(argc - 1, argv + 1);
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++) {
        struct hutch_err err = {0};
        if (strcmp(argv[1], commands[i].name))
            continue;
        /* The environment's settings every command reads (knobs.def):
         * serve and run check them with their own (and exit as for their
         * other settings); a bad one is a usage error here. */
        if (!commands[i].own_knobs && !wants_help(argc, argv) &&
            hutch_knobs_check(HUTCH_CMD_ALL, &err) < 0) {
            fprintf(stderr, "hutch %s: %s\n", argv[1], err.msg);
            return 2;
        }
        return commands[i].fn(argc - 1, argv + 1);
    }
    fprintf(stderr, "hutch: unknown command \"%s\" (see hutch --help)\n", argv[1]);
    return 2;
}
