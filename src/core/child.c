/* Waiting for a forked child with a deadline, and ending it (internal.h): the lowest pieces of
 * the isolated runs (src/verify/isolate.c), the floor's child (check_floor.c) and the workers. */
#include "src/core/internal.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

/* Waiting for a child: before, the parent slept in steps growing to 20 ms and looked again, so it
 * saw a child's end about 10 ms late on average, each of the three children of a judged workload
 * (floor, judged run, rerun), on every workload. A pidfd wakes the poll at the child's end. */
int parity_child_fd(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

int parity_child_wait(pid_t pid, int fd, int *status, double max_s, long *sleep_us)
{
    double t0 = parity_now();
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) return 1;
        if (r < 0 && errno != EINTR) return -1;
        double left = max_s - (parity_now() - t0);
        if (left <= 0) return 0;
        if (fd >= 0) {
            struct pollfd p = {fd, POLLIN, 0};
            (void)poll(&p, 1, left > 1.0 ? 1000 : (int)(left * 1000.0) + 1);
        } else {
            long us = *sleep_us < 200 ? 200 : *sleep_us;
            usleep((useconds_t)(us < left * 1e6 ? us : left * 1e6 + 1));
            *sleep_us = us < 20000 ? 2 * us : 20000;
        }
    }
}

void parity_child_kill(pid_t pid, int *status)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, status, 0) < 0 && errno == EINTR) {}
}
