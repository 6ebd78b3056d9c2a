/*
 * The wake-up floor of a normal (SCHED_OTHER) thread on this machine: a thread
 * that sleeps to absolute deadlines INTERVAL µs apart (clock_nanosleep,
 * TIMER_ABSTIME) with its timer slack set to SLACK ns, for SECONDS, prints the
 * p50 / p90 / p99 / p999 of how late it woke. Run it alone for the idle floor,
 * or beside a harness run for the floor under that load, e.g.
 *
 *   cc -O2 -o /tmp/wake benches/probes/wake.c
 *   /tmp/wake 1 500 5                 # idle, no slack
 *   cargo build --release -p delayq-bench --example compare
 *   target/release/examples/compare --child pl-heap 16 1200000 1000000 100000 & /tmp/wake 25000 500 10
 *
 * cyclictest (Debian's rt-tests) measures the same for a real-time thread
 * (`-p 50`); its normal-priority threads keep the kernel's 50 µs slack.
 * docs/bench/README.md, twenty-sixth round, has the figures.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <time.h>

static int by_value(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s SLACK_NS INTERVAL_US SECONDS\n", argv[0]);
        return 2;
    }
    long slack = atol(argv[1]), interval = atol(argv[2]) * 1000;
    double secs = atof(argv[3]);
    if (slack < 1 || interval < 1000 || secs <= 0) {
        fprintf(stderr, "SLACK_NS >= 1, INTERVAL_US >= 1, SECONDS > 0\n");
        return 2;
    }
    if (prctl(PR_SET_TIMERSLACK, slack, 0, 0, 0) != 0) {
        perror("prctl(PR_SET_TIMERSLACK)");
        return 1;
    }
    long n = (long)(secs * 1e9 / interval);
    if (n < 1) {
        fprintf(stderr, "SECONDS must cover at least one INTERVAL\n");
        return 2;
    }
    long *late = malloc(n * sizeof *late);
    if (!late) {
        perror("malloc");
        return 1;
    }
    struct timespec at, now;
    clock_gettime(CLOCK_MONOTONIC, &at);
    for (long i = 0; i < n; i++) {
        at.tv_nsec += interval;
        while (at.tv_nsec >= 1000000000L) {
            at.tv_nsec -= 1000000000L;
            at.tv_sec++;
        }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL);
        clock_gettime(CLOCK_MONOTONIC, &now);
        late[i] = (now.tv_sec - at.tv_sec) * 1000000000L + (now.tv_nsec - at.tv_nsec);
        if (late[i] > interval) at = now; /* fell a whole interval behind: start again from now */
    }
    qsort(late, n, sizeof *late, by_value);
    printf("slack %ld ns, %ld wakes: p50 %.1f p90 %.1f p99 %.1f p999 %.1f us\n", slack, n,
           late[n / 2] / 1e3, late[n * 9 / 10] / 1e3, late[n * 99 / 100] / 1e3, late[n * 999 / 1000] / 1e3);
    free(late);
    return 0;
}
