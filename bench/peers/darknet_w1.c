/*
 * darknet_w1.c - time Darknet (Debian package libdarknet.so) training steps on W1.
 *
 * Builds the network from a cfg with parse_network_cfg(), fills net->input and
 * net->truth with uniform random values, and runs training steps exactly the
 * way train_network_datum() does them (seen += batch; train = 1; forward;
 * backward; update when seen/batch is a multiple of subdivisions), but with a
 * clock around each phase so forward / backward / update can be reported
 * separately. Only the API exported by darknet.h is used.
 *
 * Usage: darknet_w1 [--cfg FILE] [--steps S] [--warmup W] [--seed N] [--whole]
 *   defaults: --steps 2 --warmup 1 (the first step also pays first-touch page
 *   faults on every calloc'ed buffer, ~20% extra, so it is not timed by default)
 *   --whole   call train_network_datum() itself for each step (no phase split;
 *             fwd_s/bwd_s/update_s are then null)
 *
 * stdout: one JSON object on the last line. Darknet's layer table goes to stderr.
 * Darknet (this build) is single-threaded: there is no thread knob.
 */
#include <darknet.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* current resident set size in MB, from /proc/self/statm */
static double rss_now_mb(void)
{
    long pages_total = 0, pages_res = 0;
    FILE *f = fopen("/proc/self/statm", "r");
    if (!f) return -1.0;
    if (fscanf(f, "%ld %ld", &pages_total, &pages_res) != 2) pages_res = -1;
    fclose(f);
    if (pages_res < 0) return -1.0;
    return (double)pages_res * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

/* peak resident set size in MB (ru_maxrss is in KiB on Linux) */
static double rss_peak_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_maxrss / 1024.0;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static float rng_uniform(void) /* xorshift64*, uniform [0,1) */
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (float)((rng_state * 2685821657736338717ull) >> 40) / 16777216.0f;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    if (n <= 0) return -1.0;
    double *t = malloc(sizeof(double) * (size_t)n);
    memcpy(t, v, sizeof(double) * (size_t)n);
    qsort(t, (size_t)n, sizeof(double), cmp_double);
    double m = (n % 2) ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
    free(t);
    return m;
}

static void print_list(const char *key, const double *v, int n)
{
    printf("\"%s\":[", key);
    for (int i = 0; i < n; ++i) printf("%s%.4f", i ? "," : "", v[i]);
    printf("]");
}

static void print_num_or_null(const char *key, double x, int valid)
{
    if (valid) printf("\"%s\":%.4f", key, x);
    else printf("\"%s\":null", key);
}

static void usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [--cfg FILE] [--steps S] [--warmup W] [--seed N] [--whole]\n", argv0);
}

int main(int argc, char **argv)
{
    const char *cfg = "cfgs/yolov2-16.cfg";
    int steps = 2, warmup = 1, whole = 0;
    unsigned long long seed = 1;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (!strcmp(a, "--whole")) { whole = 1; continue; }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) { usage(argv[0]); return 0; }
        if (i + 1 >= argc) { usage(argv[0]); return 2; }
        if (!strcmp(a, "--cfg")) cfg = argv[++i];
        else if (!strcmp(a, "--steps")) steps = atoi(argv[++i]);
        else if (!strcmp(a, "--warmup")) warmup = atoi(argv[++i]);
        else if (!strcmp(a, "--seed")) seed = strtoull(argv[++i], NULL, 10);
        else if (!strcmp(a, "--threads")) {
            if (atoi(argv[++i]) != 1) fprintf(stderr, "darknet_w1: Darknet is single-threaded; ignoring --threads\n");
        } else { usage(argv[0]); return 2; }
    }
    if (steps < 1 || warmup < 0) { usage(argv[0]); return 2; }
    rng_state ^= seed * 0xD1B54A32D192ED03ull;
    if (!rng_state) rng_state = 1;

    double rss_before_net = rss_now_mb(); /* process + libdarknet + its deps (OpenCV...) */
    network *net = parse_network_cfg((char *)cfg);
    if (!net) { fprintf(stderr, "darknet_w1: cannot parse %s\n", cfg); return 1; }
    if (!net->input || !net->truth) { fprintf(stderr, "darknet_w1: net has no input/truth buffers\n"); return 1; }
    double rss_after_net = rss_now_mb();

    /* forward FLOPs of the conv layers (2*MAC), for a GFLOP/s figure */
    double fwd_flop = 0.0;
    for (int i = 0; i < net->n; ++i) {
        layer *l = &net->layers[i];
        if (l->type == CONVOLUTIONAL) {
            int g = l->groups > 0 ? l->groups : 1;
            fwd_flop += 2.0 * l->batch * l->out_h * l->out_w * l->n * (double)(l->c / g) * l->size * l->size;
        }
    }

    size_t nin = (size_t)net->inputs * net->batch, ntruth = (size_t)net->truths * net->batch;
    for (size_t i = 0; i < nin; ++i) net->input[i] = rng_uniform();
    for (size_t i = 0; i < ntruth; ++i) net->truth[i] = rng_uniform();

    int total = warmup + steps;
    double *t_step = calloc((size_t)total, sizeof(double));
    double *t_fwd = calloc((size_t)total, sizeof(double));
    double *t_bwd = calloc((size_t)total, sizeof(double));
    double *t_upd = calloc((size_t)total, sizeof(double));
    double first_loss = 0, last_loss = 0;

    for (int s = 0; s < total; ++s) {
        float loss;
        double t0 = now_s();
        if (whole) {
            loss = train_network_datum(net);
            t_step[s] = now_s() - t0;
        } else {
            /* == train_network_datum(net), with phase timers */
            *net->seen += net->batch;
            net->train = 1;
            forward_network(net);
            double t1 = now_s();
            backward_network(net);
            double t2 = now_s();
            loss = *net->cost;
            if (((*net->seen) / net->batch) % net->subdivisions == 0) update_network(net);
            double t3 = now_s();
            t_fwd[s] = t1 - t0;
            t_bwd[s] = t2 - t1;
            t_upd[s] = t3 - t2;
            t_step[s] = t3 - t0;
        }
        if (s == 0) first_loss = loss;
        last_loss = loss;
        fprintf(stderr, "darknet_w1: step %d%s %.3f s loss %g\n", s, s < warmup ? " (warmup)" : "", t_step[s], loss);
    }

    double *ms = t_step + warmup;
    double step_s = median(ms, steps);
    printf("{\"system\":\"darknet\",\"threads\":1,\"steps\":%d,\"warmup\":%d,", steps, warmup);
    double min_s = ms[0];
    for (int i = 1; i < steps; ++i) if (ms[i] < min_s) min_s = ms[i];
    printf("\"step_s\":%.4f,\"min_step_s\":%.4f,", step_s, min_s);
    print_num_or_null("fwd_s", median(t_fwd + warmup, steps), !whole); printf(",");
    print_num_or_null("bwd_s", median(t_bwd + warmup, steps), !whole); printf(",");
    print_num_or_null("update_s", median(t_upd + warmup, steps), !whole); printf(",");
    printf("\"peak_rss_mb\":%.1f,\"rss_before_net_mb\":%.1f,\"rss_after_parse_mb\":%.1f,",
           rss_peak_mb(), rss_before_net, rss_after_net);
    printf("\"rss_above_baseline_mb\":%.1f,", rss_peak_mb() - rss_before_net);
    printf("\"fwd_gflop\":%.3f,\"step_gflops_per_s\":%.2f,", fwd_flop * 1e-9, 3.0 * fwd_flop * 1e-9 / step_s);
    print_list("all_step_s", t_step + warmup, steps); printf(",");
    print_list("warmup_step_s", t_step, warmup); printf(",");
    printf("\"first_loss\":%g,\"last_loss\":%g,\"mode\":\"%s\",\"cfg\":\"%s\"}\n",
           first_loss, last_loss, whole ? "train_network_datum" : "forward/backward/update", cfg);
    fflush(stdout);

    free(t_step); free(t_fwd); free(t_bwd); free(t_upd);
    free_network(net);
    return 0;
}
