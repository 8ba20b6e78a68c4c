/* options.c — the docker executor's options, one row each: what a policy's
 * executor_options.docker may set and the environment variables the
 * plugin reads (hutch-executor.h, struct hutch_option).  Alone in its file
 * so that docker.c, doctor.c and engines.c all read it from below. */
#include "box.h"
#include "docker.h"
#include "opts.h"

const struct hutch_option dk_options[] = {
    OPT_ROW("runtime", HUTCH_OPTION_STRING, NULL, 0,
            "The OCI runtime of the sandboxes' containers, one the daemon has "
            "('hutch doctor' lists them; default the daemon's default)."),
    OPT_ROW("flavour", HUTCH_OPTION_STRING, NULL, 0,
            "The image flavour: base (the default) or data (Python with numpy, "
            "pandas and matplotlib)."),
    OPT_ROW("endpoints", HUTCH_OPTION_STRING, "HUTCH_DOCKER_ENDPOINTS", 0,
            "The Docker engines the sandboxes are placed on, whitespace "
            "separated, each [NAME=]URL[,tls=/DIR] (unix:// or tcp://; DIR holds "
            "ca.pem, cert.pem and key.pem); default DOCKER_HOST's one."),
    OPT_ROW("image_python", HUTCH_OPTION_STRING, "HUTCH_DOCKER_IMAGE_PYTHON",
            HUTCH_OPTION_ENV_ONLY,
            "The Python image (default hutch-python:VERSION, this hutch's)."),
    OPT_ROW("image_python_data", HUTCH_OPTION_STRING, "HUTCH_DOCKER_IMAGE_PYTHON_DATA",
            HUTCH_OPTION_ENV_ONLY,
            "The Python image of the data flavour (default "
            "hutch-python-data:VERSION)."),
    OPT_ROW("image_javascript", HUTCH_OPTION_STRING, "HUTCH_DOCKER_IMAGE_JAVASCRIPT",
            HUTCH_OPTION_ENV_ONLY,
            "The JavaScript image (default hutch-node:VERSION)."),
    OPT_ROW("cgroup_parent", HUTCH_OPTION_STRING, "HUTCH_CGROUP_PARENT",
            HUTCH_OPTION_ENV_ONLY,
            "The cgroup parent of the sandboxes' containers (default the "
            "daemon's; /hutch-docker with sandboxes_cpu_weight)."),
    OPT_ROW("sandboxes_cpu_weight", HUTCH_OPTION_INT, "HUTCH_SANDBOXES_CPU_WEIGHT",
            HUTCH_OPTION_ENV_ONLY,
            "The CPU weight of the containers' cgroup parent, all sandboxes of "
            "an engine together, on cgroup v2's scale (1-10000; unset: the "
            "daemon's parent, as it is).  Applied on an engine of this host "
            "with the cgroupfs driver, where hutch makes the parent; elsewhere "
            "the log says why not.  As for gvisor: 12 puts hutch's own "
            "threads and the Docker daemon first while sandboxes use the CPU, "
            "for a host that runs nothing else CPU-bound."),
    BOX_OPTION_INIT,
    OPT_END,
};
