/* main.c — the hutch binary: global options and subcommand dispatch. */
#include <malloc.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "caps.h"
#include "cli.h"
#include "log.h"
#include "plugin.h"

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

int main(int argc, char **argv)
{
    /* An executor's helper process (hutch-executor.h, "Processes"):
     * before anything of hutch's starts. */
    if (argc >= 2 && !strcmp(argv[1], HUTCH_HELPER_VERB))
        return hutch_plugin_helper_main(argc, argv);
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
    /* Every command's diagnostics; `serve --log-format` overrides it. */
    if (hutch_log_set_format_name(getenv("HUTCH_LOG_FORMAT")) < 0)
        fprintf(stderr, "hutch: HUTCH_LOG_FORMAT wants text or json; using text\n");
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
    if (!strcmp(argv[1], "run"))
        return hutch_cmd_run(argc - 1, argv + 1);
    if (!strcmp(argv[1], "serve"))
        return hutch_cmd_serve(argc - 1, argv + 1);
    if (!strcmp(argv[1], "policy"))
        return hutch_cmd_policy(argc - 1, argv + 1);
    if (!strcmp(argv[1], "tools"))
        return hutch_cmd_tools(argc - 1, argv + 1);
    if (!strcmp(argv[1], "plugins"))
        return hutch_cmd_plugins(argc - 1, argv + 1);
    if (!strcmp(argv[1], "workspace"))
        return hutch_cmd_workspace(argc - 1, argv + 1);
    if (!strcmp(argv[1], "doctor"))
        return hutch_cmd_doctor(argc - 1, argv + 1);
    fprintf(stderr, "hutch: unknown command \"%s\" (see hutch --help)\n", argv[1]);
    return 2;
}
