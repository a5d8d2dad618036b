/* What the NVML stand-in's C library records about its callers; see trace.h. */
#include "trace.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "node.h"

static int tracing, strict;
static pthread_once_t configured = PTHREAD_ONCE_INIT;
static pthread_mutex_t noted_lock = PTHREAD_MUTEX_INITIALIZER;

static int exists(const char *name) {
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", sim_driver_root(), name);
    return access(path, F_OK) == 0;
}

static void configure(void) {
    tracing = exists("nvml-trace");
    strict = exists("nvml-strict");
}

/* One line, appended whole (O_APPEND), so processes sharing the log do not interleave lines. */
static void append(const char *log, const char *name) {
    char path[PATH_MAX + 32], line[256];
    snprintf(path, sizeof path, "%s/%s", sim_driver_root(), log);
    int n = snprintf(line, sizeof line, "%d %s\n", (int)getpid(), name);
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return;
    if (write(fd, line, (size_t)n) < 0) { /* a lost log line must not fail the NVML call */
    }
    close(fd);
}

void sim_trace(const char *name) {
    pthread_once(&configured, configure);
    if (tracing) append("nvml-calls.log", name);
}

int sim_unimplemented(const char *name) {
    static const char *noted[512];
    static int noted_count;
    sim_trace(name);
    pthread_mutex_lock(&noted_lock);
    int seen = 0;
    for (int i = 0; i < noted_count && !seen; i++) seen = noted[i] == name;
    if (!seen && noted_count < 512) noted[noted_count++] = name;
    pthread_mutex_unlock(&noted_lock);
    if (!seen) append("nvml-unimplemented.log", name);
    if (strict) {
        fprintf(stderr,
                "libnvidia-ml.so.1 (simulated node, strict mode): %s is not implemented; "
                "see docs/simulated-nvml.md\n",
                name);
        abort();
    }
    return 3; /* NVML_ERROR_NOT_SUPPORTED */
}
