/*
 * mpich-pmi-progress: keeps an MPICH rank answering its peers while it waits in MPI_Finalize.
 *
 * Debian bookworm's MPICH 4.0.2 (device ch4:ucx) finalizes by closing every UCX endpoint with a
 * flush, progressing until all closes complete, and then waiting in a PMI barrier, where it no
 * longer progresses UCX. UCX 1.13's TCP transport flushes an endpoint that has sent anything by
 * sending the peer a zero-length PUT and waiting for the peer's acknowledgement. A rank whose
 * peer finished its own closes first (and so sits in the barrier) waits for that
 * acknowledgement forever, and the whole job with it: every rank spins in MPI_Finalize or
 * blocks in the barrier. Ranks on two or more hosts (pods) meet it at random; the more data
 * they exchanged the likelier. (MPICH 4.2 reordered its finalize: barrier first, then close,
 * then destroy the worker.)
 *
 * Loaded with LD_PRELOAD, this library notes the UCX worker the process creates and, while a
 * worker exists, turns a blocking read of the PMI socket (PMI_FD, Hydra's PMI connection) into
 * a wait that progresses the worker, so a rank in the barrier still acknowledges its peers'
 * flushes. It changes nothing else: reads of other descriptors, and processes without PMI_FD
 * (Open MPI, sshd, shells) or without a UCX worker, go straight to the C library.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

typedef void *ucp_worker_h;
typedef int ucs_status_t;

static ucp_worker_h worker;              /* the first worker the process created, if alive */
static unsigned (*worker_progress)(ucp_worker_h);

/* name in UCX's libucp, which the caller of ucp_worker_create has loaded (whatever its scope). */
static void *ucp_sym(const char *name)
{
    void *ucp = dlopen("libucp.so.0", RTLD_LAZY | RTLD_NOLOAD);
    return ucp != NULL ? dlsym(ucp, name) : NULL;
}

/* The PMI socket Hydra gave this rank, or -1. */
static int pmi_fd(void)
{
    static int fd = -2;
    if (fd == -2) {
        const char *s = getenv("PMI_FD");
        fd = s != NULL && *s != '\0' ? atoi(s) : -1;
    }
    return fd;
}

ucs_status_t ucp_worker_create(void *context, const void *params, ucp_worker_h *worker_p)
{
    static ucs_status_t (*real)(void *, const void *, ucp_worker_h *);
    if (real == NULL) {
        real = (ucs_status_t (*)(void *, const void *, ucp_worker_h *))ucp_sym("ucp_worker_create");
    }
    ucs_status_t status = real(context, params, worker_p);
    if (status == 0 && worker == NULL) {
        worker_progress = (unsigned (*)(ucp_worker_h))ucp_sym("ucp_worker_progress");
        if (worker_progress != NULL) {
            worker = *worker_p;
        }
    }
    return status;
}

void ucp_worker_destroy(ucp_worker_h w)
{
    static void (*real)(ucp_worker_h);
    if (real == NULL) {
        real = (void (*)(ucp_worker_h))ucp_sym("ucp_worker_destroy");
    }
    if (w == worker) {
        worker = NULL;
    }
    real(w);
}

ssize_t read(int fd, void *buf, size_t count)
{
    static ssize_t (*real)(int, void *, size_t);
    if (real == NULL) {
        real = (ssize_t (*)(int, void *, size_t))dlsym(RTLD_NEXT, "read");
    }
    if (worker != NULL && fd >= 0 && fd == pmi_fd()) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        /* Progress until the PMI answer is there (or the socket errs: read reports it). */
        while (worker != NULL && poll(&p, 1, 1) == 0) {
            worker_progress(worker);
        }
    }
    return real(fd, buf, count);
}
