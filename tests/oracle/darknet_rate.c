/*
 * darknet_rate -- Darknet's learning rate per batch, from Debian's libdarknet
 * (get_current_rate in network.c), as an oracle for tiletrain's policies.
 *
 *   usage: darknet_rate CFG BATCH_NUM...
 *
 * Loads CFG with Darknet's parse_network_cfg() and prints, one per line, the rate
 * Darknet uses for each update number BATCH_NUM (0-based; Darknet counts
 * *net->seen / (batch * subdivisions)), as "%.9g". Exits non-zero with a message on a
 * bad argument or a cfg libdarknet cannot open.
 */
#define _POSIX_C_SOURCE 200809L

#include <darknet.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: darknet_rate CFG BATCH_NUM...\n");
        return 1;
    }
    if (access(argv[1], R_OK) != 0) {
        fprintf(stderr, "darknet_rate: error: cannot read %s\n", argv[1]);
        return 1;
    }
    network *net = parse_network_cfg(argv[1]);
    if (!net) {
        fprintf(stderr, "darknet_rate: error: libdarknet could not parse %s\n", argv[1]);
        return 1;
    }
    for (int i = 2; i < argc; ++i) {
        char *end = NULL;
        errno = 0;
        long long b = strtoll(argv[i], &end, 10);
        if (errno || *end || b < 0) {
            fprintf(stderr, "darknet_rate: error: '%s' is not a batch number\n", argv[i]);
            return 1;
        }
        *net->seen = (size_t)b * (size_t)net->batch * (size_t)net->subdivisions;
        printf("%.9g\n", get_current_rate(net));
    }
    free_network(net);
    return 0;
}
