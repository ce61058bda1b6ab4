/*
 * darknet_forward -- independent inference oracle built on Debian's libdarknet
 * (pjreddie darknet, git 61c9d02e, 2018-09-14; /usr/lib/darknet/libdarknet.so).
 *
 *   usage: darknet_forward CFG WEIGHTS INPUT.bin OUTPUT.bin [RESAVED.weights]
 *   (with RESAVED.weights, Darknet also writes the loaded weights back with its own
 *   save_weights, for the other direction of the interoperability test)
 *
 * Loads CFG with Darknet's own parse_network_cfg(), loads WEIGHTS with Darknet's
 * own load_weights(), reads the first tensor of INPUT.bin ([B,C,H,W], NCHW,
 * must match the [net] channels/height/width), runs network_predict() (test
 * mode: net->train = 0, so batchnorm uses rolling_mean / rolling_variance and
 * dropout is the identity) and writes the output of the last non-[cost] layer
 * to OUTPUT.bin as a single tensor named "output":
 *   [B, C, H, W]  for spatial outputs,
 *   [B, N]        if the output is 1x1 or the layer is [connected]/[softmax]
 *                 (or has no spatial shape).
 * A trailing [cost] layer is skipped: its *input* is written (this is exactly
 * what Darknet's get_network_output_layer()/net->output do).
 *
 * Tensor dump format (little endian): 8-byte magic "TTDUMP1\n"; u32 count;
 * per tensor: u32 name_len, name bytes, u32 ndim, u32 dims[ndim],
 * float32 data (row-major).
 *
 * Darknet itself is very lenient (unknown sections become empty layers that
 * crash later, short weight files are silently accepted, missing files make it
 * exit(0)).  This driver therefore checks everything it can up front and turns
 * every failure, including exit() calls and crashes inside libdarknet, into a
 * clear message on stderr and a non-zero exit status:
 *   1  usage / validation error detected by this program
 *   3  libdarknet called exit() (Darknet's file_error() exits with status 0!)
 *   128+signal  libdarknet crashed or aborted (assert in Darknet's error())
 *
 * Notes on numerics of this libdarknet build (see tests/oracle/README.md):
 * it is compiled with -Ofast and links crtfastmath.o, so loading it sets
 * FTZ/DAZ in MXCSR for the whole process (denormals are flushed to zero).
 */
#define _POSIX_C_SOURCE 200809L

#include <darknet.h>

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROG "darknet_forward"
#define MAX_SECTIONS 100000

static const char *volatile g_stage = "startup";
static volatile sig_atomic_t g_in_darknet = 0;

/* ------------------------------------------------------------------ errors */

static void die(const char *fmt, ...)
{
    va_list ap;
    g_in_darknet = 0;
    fflush(stdout);
    fprintf(stderr, PROG ": error: ");
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

static void write_str(const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(STDERR_FILENO, s, n);
        if (w <= 0) return;
        s += w;
        n -= (size_t)w;
    }
}

static void on_exit_handler(void)
{
    if (g_in_darknet) {
        fflush(stdout);
        fprintf(stderr,
                "\n" PROG ": error: libdarknet called exit() during %s "
                "(Darknet's file_error()/malloc_error()/error() paths; file_error() "
                "exits with status 0) -- treating as failure\n",
                g_stage);
        fflush(stderr);
        _exit(3);
    }
}

static void on_fatal_signal(int sig)
{
    const char *name = sig == SIGSEGV ? "SIGSEGV"
                     : sig == SIGABRT ? "SIGABRT (assert/abort, e.g. Darknet's error())"
                     : sig == SIGFPE  ? "SIGFPE"
                     : sig == SIGBUS  ? "SIGBUS"
                     : sig == SIGILL  ? "SIGILL" : "fatal signal";
    write_str("\n" PROG ": error: ");
    write_str(name);
    write_str(g_in_darknet ? " inside libdarknet during " : " during ");
    write_str(g_stage);
    write_str("\n");
    _exit(128 + sig);
}

static void install_handlers(void)
{
    static const int sigs[] = {SIGSEGV, SIGABRT, SIGFPE, SIGBUS, SIGILL};
    struct sigaction sa;
    size_t i;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_fatal_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESETHAND;
    for (i = 0; i < sizeof sigs / sizeof sigs[0]; ++i) sigaction(sigs[i], &sa, NULL);
    atexit(on_exit_handler);
}

#define DARKNET_CALL(stage, stmt) \
    do {                          \
        g_stage = (stage);        \
        g_in_darknet = 1;         \
        stmt;                     \
        g_in_darknet = 0;         \
    } while (0)

/* --------------------------------------------------------------- file i/o */

typedef struct {
    unsigned char *data;
    size_t size;
} blob;

static blob read_whole_file(const char *path, const char *what)
{
    blob b = {NULL, 0};
    FILE *f = fopen(path, "rb");
    long sz;
    if (!f) die("cannot open %s '%s': %s", what, path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (sz = ftell(f)) < 0 || fseek(f, 0, SEEK_SET) != 0)
        die("cannot determine size of %s '%s': %s", what, path, strerror(errno));
    b.size = (size_t)sz;
    b.data = malloc(b.size ? b.size : 1);
    if (!b.data) die("out of memory reading %s '%s' (%zu bytes)", what, path, b.size);
    if (b.size && fread(b.data, 1, b.size, f) != b.size)
        die("short read on %s '%s'", what, path);
    fclose(f);
    return b;
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}

static int32_t get_i32(const unsigned char *p) { return (int32_t)get_u32(p); }

static float get_f32(const unsigned char *p)
{
    uint32_t u = get_u32(p);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static void put_u32(FILE *f, uint32_t v, const char *path)
{
    unsigned char b[4];
    b[0] = (unsigned char)(v & 0xff);
    b[1] = (unsigned char)((v >> 8) & 0xff);
    b[2] = (unsigned char)((v >> 16) & 0xff);
    b[3] = (unsigned char)((v >> 24) & 0xff);
    if (fwrite(b, 1, 4, f) != 4) die("write error on '%s': %s", path, strerror(errno));
}

/* ------------------------------------------------------------- TTDUMP in */

#define TT_MAGIC "TTDUMP1\n"
#define TT_MAX_NDIM 8

typedef struct {
    char name[256];
    uint32_t ndim;
    uint32_t dims[TT_MAX_NDIM];
    size_t numel;
    float *data;
} tensor;

static tensor read_first_tensor(const char *path)
{
    tensor t;
    blob b = read_whole_file(path, "input tensor file");
    size_t off = 0, i;
    uint32_t count, name_len;
    uint64_t numel = 1;
    memset(&t, 0, sizeof t);

#define NEED(nbytes, what)                                                              \
    do {                                                                                \
        if ((uint64_t)(nbytes) > (uint64_t)(b.size - off))                              \
            die("input '%s' truncated while reading %s (offset %zu, need %llu bytes, "  \
                "file has %zu)", path, what, off, (unsigned long long)(nbytes), b.size); \
    } while (0)

    NEED(8, "magic");
    if (memcmp(b.data, TT_MAGIC, 8) != 0)
        die("input '%s' is not a tensor dump: bad magic (expected \"TTDUMP1\\n\")", path);
    off = 8;
    NEED(4, "tensor count");
    count = get_u32(b.data + off);
    off += 4;
    if (count < 1) die("input '%s' contains no tensors (count = 0)", path);
    NEED(4, "name length");
    name_len = get_u32(b.data + off);
    off += 4;
    NEED(name_len, "tensor name");
    {
        size_t keep = name_len < sizeof t.name - 1 ? name_len : sizeof t.name - 1;
        memcpy(t.name, b.data + off, keep);
        t.name[keep] = '\0';
    }
    off += name_len;
    NEED(4, "ndim");
    t.ndim = get_u32(b.data + off);
    off += 4;
    if (t.ndim < 1 || t.ndim > TT_MAX_NDIM)
        die("input '%s': first tensor '%s' has unsupported ndim %u", path, t.name, t.ndim);
    NEED(4ull * t.ndim, "dims");
    for (i = 0; i < t.ndim; ++i) {
        t.dims[i] = get_u32(b.data + off);
        off += 4;
        numel *= t.dims[i];
        if (numel > ((uint64_t)1 << 34)) die("input '%s': tensor '%s' is absurdly large", path, t.name);
    }
    NEED(numel * 4, "tensor data");
    t.numel = (size_t)numel;
    t.data = malloc(t.numel ? t.numel * sizeof(float) : sizeof(float));
    if (!t.data) die("out of memory for input tensor (%zu floats)", t.numel);
    for (i = 0; i < t.numel; ++i) t.data[i] = get_f32(b.data + off + 4 * i);
#undef NEED
    free(b.data);
    return t;
}

static void write_output(const char *path, const uint32_t *dims, uint32_t ndim, const float *data,
                         size_t numel)
{
    static const char name[] = "output";
    FILE *f = fopen(path, "wb");
    size_t i;
    if (!f) die("cannot open output file '%s' for writing: %s", path, strerror(errno));
    if (fwrite(TT_MAGIC, 1, 8, f) != 8) die("write error on '%s': %s", path, strerror(errno));
    put_u32(f, 1, path);
    put_u32(f, (uint32_t)strlen(name), path);
    if (fwrite(name, 1, strlen(name), f) != strlen(name)) die("write error on '%s'", path);
    put_u32(f, ndim, path);
    for (i = 0; i < ndim; ++i) put_u32(f, dims[i], path);
    for (i = 0; i < numel; ++i) {
        uint32_t u;
        memcpy(&u, &data[i], sizeof u);
        put_u32(f, u, path);
    }
    if (fclose(f) != 0) die("error closing '%s': %s", path, strerror(errno));
}

/* ------------------------------------------------------ cfg pre-scan */

/* Section names understood by string_to_layer_type() in this libdarknet. */
static const char *const k_known_sections[] = {
    "[shortcut]", "[crop]", "[cost]", "[detection]", "[region]", "[yolo]", "[iseg]",
    "[local]", "[conv]", "[convolutional]", "[deconv]", "[deconvolutional]",
    "[activation]", "[logistic]", "[l2norm]", "[crnn]", "[gru]", "[lstm]", "[rnn]",
    "[conn]", "[connected]", "[max]", "[maxpool]", "[reorg]", "[avg]", "[avgpool]",
    "[dropout]", "[lrn]", "[normalization]", "[batchnorm]", "[soft]", "[softmax]",
    "[route]", "[upsample]", NULL};

typedef struct {
    int n;          /* number of sections including [net] */
    char **names;   /* names[i] of section i, stripped like Darknet does */
    int *lines;     /* 1-based line number */
} cfg_sections;

/* Darknet's strip(): removes every ' ', '\t', '\n' anywhere in the line. */
static void dn_strip(char *s)
{
    size_t i, o = 0, len = strlen(s);
    for (i = 0; i < len; ++i) {
        char c = s[i];
        if (c == ' ' || c == '\t' || c == '\n') continue;
        s[o++] = c;
    }
    s[o] = '\0';
}

static cfg_sections prescan_cfg(const char *path)
{
    cfg_sections cs = {0, NULL, NULL};
    blob b = read_whole_file(path, "cfg");
    size_t pos = 0;
    int lineno = 0, cap = 0;
    while (pos < b.size) {
        size_t end = pos;
        char *line;
        while (end < b.size && b.data[end] != '\n') ++end;
        ++lineno;
        line = malloc(end - pos + 1);
        if (!line) die("out of memory");
        memcpy(line, b.data + pos, end - pos);
        line[end - pos] = '\0';
        pos = end + 1;
        if (strchr(line, '\r'))
            die("cfg '%s' line %d contains '\\r' (CRLF line endings): Darknet's parser keeps the "
                "'\\r' (e.g. 'activation=leaky\\r' silently becomes ReLU); convert to LF",
                path, lineno);
        dn_strip(line);
        if (line[0] == '\0' || line[0] == '#' || line[0] == ';') {
            free(line);
            continue;
        }
        if (line[0] == '[') {
            if (cs.n == MAX_SECTIONS) die("cfg '%s' has too many sections", path);
            if (cs.n == cap) {
                cap = cap ? cap * 2 : 64;
                cs.names = realloc(cs.names, (size_t)cap * sizeof *cs.names);
                cs.lines = realloc(cs.lines, (size_t)cap * sizeof *cs.lines);
                if (!cs.names || !cs.lines) die("out of memory");
            }
            cs.names[cs.n] = line;
            cs.lines[cs.n] = lineno;
            ++cs.n;
            continue;
        }
        if (cs.n == 0)
            die("cfg '%s' line %d: option '%s' appears before the first section "
                "(Darknet would crash on this)", path, lineno, line);
        free(line);
    }
    free(b.data);
    if (cs.n == 0) die("cfg '%s' has no sections", path);
    if (strcmp(cs.names[0], "[net]") != 0 && strcmp(cs.names[0], "[network]") != 0)
        die("cfg '%s' line %d: first section must be [net] or [network], got %s", path,
            cs.lines[0], cs.names[0]);
    if (cs.n < 2) die("cfg '%s' has a [net] section but no layers", path);
    {
        int i, k;
        for (i = 1; i < cs.n; ++i) {
            int known = 0;
            for (k = 0; k_known_sections[k]; ++k)
                if (strcmp(cs.names[i], k_known_sections[k]) == 0) known = 1;
            if (strcmp(cs.names[i], "[net]") == 0 || strcmp(cs.names[i], "[network]") == 0)
                die("cfg '%s' line %d: %s may only be the first section", path, cs.lines[i],
                    cs.names[i]);
            if (!known)
                die("cfg '%s' line %d: section %s (layer %d) is not a layer type known to this "
                    "libdarknet (2018 pjreddie); Darknet would print 'Type not recognized' and "
                    "insert an empty layer", path, cs.lines[i], cs.names[i], i - 1);
        }
    }
    return cs;
}

/* -------------------------------------------------- weights size check */

static const char *layer_type_name(LAYER_TYPE t)
{
    switch (t) {
    case CONVOLUTIONAL: return "convolutional";
    case DECONVOLUTIONAL: return "deconvolutional";
    case CONNECTED: return "connected";
    case MAXPOOL: return "maxpool";
    case SOFTMAX: return "softmax";
    case DETECTION: return "detection";
    case DROPOUT: return "dropout";
    case CROP: return "crop";
    case ROUTE: return "route";
    case COST: return "cost";
    case NORMALIZATION: return "normalization";
    case AVGPOOL: return "avgpool";
    case LOCAL: return "local";
    case SHORTCUT: return "shortcut";
    case ACTIVE: return "activation";
    case RNN: return "rnn";
    case GRU: return "gru";
    case LSTM: return "lstm";
    case CRNN: return "crnn";
    case BATCHNORM: return "batchnorm";
    case NETWORK: return "network";
    case XNOR: return "xnor";
    case REGION: return "region";
    case YOLO: return "yolo";
    case ISEG: return "iseg";
    case REORG: return "reorg";
    case UPSAMPLE: return "upsample";
    case LOGXENT: return "logistic";
    case L2NORM: return "l2norm";
    case BLANK: return "blank";
    }
    return "?";
}

/* Mirrors load_convolutional_weights(): biases[n], (scales, rolling_mean,
 * rolling_variance)[n] if batch_normalize, weights[n][c/groups][size][size]. */
static uint64_t conv_floats(const layer *l, int layer_index)
{
    uint64_t n = (uint64_t)(l->numload ? l->numload : l->n);
    uint64_t cnt = n;
    if (l->groups <= 0)
        die("layer %d (%s): groups=%d; this libdarknet's load_convolutional_weights() divides by "
            "groups (deconvolutional layers are not loadable in this version)",
            layer_index, layer_type_name(l->type), l->groups);
    if (l->batch_normalize && !l->dontloadscales) cnt += 3 * n;
    cnt += (uint64_t)(l->c / l->groups) * n * (uint64_t)l->size * (uint64_t)l->size;
    return cnt;
}

/* Mirrors load_connected_weights(): biases[out], weights[out][in],
 * then (scales, rolling_mean, rolling_variance)[out] if batch_normalize. */
static uint64_t connected_floats(const layer *l)
{
    uint64_t cnt = (uint64_t)l->outputs + (uint64_t)l->outputs * (uint64_t)l->inputs;
    if (l->batch_normalize && !l->dontloadscales) cnt += 3 * (uint64_t)l->outputs;
    return cnt;
}

static uint64_t layer_weight_floats(const layer *l, int i)
{
    if (l->dontload) return 0;
    switch (l->type) {
    case CONVOLUTIONAL:
    case DECONVOLUTIONAL:
        return conv_floats(l, i);
    case CONNECTED:
        return connected_floats(l);
    case BATCHNORM:
        return 3 * (uint64_t)l->c;
    case CRNN:
        return conv_floats(l->input_layer, i) + conv_floats(l->self_layer, i) +
               conv_floats(l->output_layer, i);
    case RNN:
        return connected_floats(l->input_layer) + connected_floats(l->self_layer) +
               connected_floats(l->output_layer);
    case LSTM:
        return connected_floats(l->wi) + connected_floats(l->wf) + connected_floats(l->wo) +
               connected_floats(l->wg) + connected_floats(l->ui) + connected_floats(l->uf) +
               connected_floats(l->uo) + connected_floats(l->ug);
    case GRU:
        return connected_floats(l->wz) + connected_floats(l->wr) + connected_floats(l->wh) +
               connected_floats(l->uz) + connected_floats(l->ur) + connected_floats(l->uh);
    case LOCAL:
        return (uint64_t)l->outputs + (uint64_t)l->size * l->size * l->c * l->n * l->out_w *
                                          (uint64_t)l->out_h;
    default:
        return 0;
    }
}

static void check_weights_file(network *net, const cfg_sections *cs, const char *path)
{
    blob b = read_whole_file(path, "weights file");
    int32_t major, minor, revision;
    uint64_t seen, header, params = 0;
    int seen64, i;
    if (b.size < 16)
        die("weights '%s' is only %zu bytes: too short for a Darknet header", path, b.size);
    major = get_i32(b.data);
    minor = get_i32(b.data + 4);
    revision = get_i32(b.data + 8);
    /* load_weights_upto(): seen is size_t (8 bytes here) iff
       (major*10+minor) >= 2 && major < 1000 && minor < 1000, else a 4-byte int. */
    seen64 = (major * 10 + minor) >= 2 && major < 1000 && minor < 1000;
    header = 12 + (seen64 ? sizeof(size_t) : 4);
    if (b.size < header) die("weights '%s' is too short for its %llu-byte header", path,
                             (unsigned long long)header);
    seen = seen64 ? ((uint64_t)get_u32(b.data + 12) | ((uint64_t)get_u32(b.data + 16) << 32))
                  : (uint64_t)get_u32(b.data + 12);
    fprintf(stderr, PROG ": weights header: major=%d minor=%d revision=%d seen=%llu (%s)%s\n",
            major, minor, revision, (unsigned long long)seen, seen64 ? "64-bit" : "32-bit",
            (major > 1000 || minor > 1000) ? " [connected weights will be TRANSPOSED on load]" : "");
    for (i = 0; i < net->n; ++i) params += layer_weight_floats(&net->layers[i], i);
    if (header + 4 * params != b.size) {
        uint64_t off = header;
        fprintf(stderr, PROG ": expected weights layout (byte offsets):\n");
        fprintf(stderr, "  header: 0..%llu\n", (unsigned long long)header);
        for (i = 0; i < net->n; ++i) {
            uint64_t nf = layer_weight_floats(&net->layers[i], i);
            if (!nf) continue;
            fprintf(stderr, "  layer %3d %-16s %-15s floats=%-10llu bytes [%llu, %llu)%s\n", i,
                    i + 1 < cs->n ? cs->names[i + 1] : "?", layer_type_name(net->layers[i].type),
                    (unsigned long long)nf, (unsigned long long)off,
                    (unsigned long long)(off + 4 * nf),
                    off + 4 * nf > b.size ? "  <-- beyond end of file" : "");
            off += 4 * nf;
        }
        die("weights '%s' has %zu bytes but the network needs exactly %llu (header %llu + %llu "
            "floats); Darknet's load_weights() would silently %s",
            path, b.size, (unsigned long long)(header + 4 * params), (unsigned long long)header,
            (unsigned long long)params,
            b.size < header + 4 * params ? "leave the remaining parameters at their random init"
                                         : "ignore the trailing bytes");
    }
    free(b.data);
}

/* ------------------------------------------------------------ train mode */

static void write_layer_tensor(const char *dir, const char *what, int index, const float *data, size_t numel)
{
    char path[4096];
    uint32_t dims[1];
    if (index >= 0)
        snprintf(path, sizeof path, "%s/%s_%d.bin", dir, what, index);
    else
        snprintf(path, sizeof path, "%s/%s.bin", dir, what);
    dims[0] = (uint32_t)numel;
    write_output(path, dims, 1, data, numel);
}

/* darknet_forward --train CFG WEIGHTS INPUT.bin TRUTH.bin|- DELTA.bin|- SEEN OUTDIR
 *
 * One training forward and backward the way train_network_datum() runs them (without the
 * update): *net->seen = SEEN, net->train = 1, forward_network, then DELTA (if given) is
 * added to the last layer's delta, then backward_network. Writes to OUTDIR, each a tensor
 * "output" of one dimension: output_I.bin (layer I's output), loss_delta_I.bin (its delta
 * after forward: what a loss layer computed), delta_I.bin (after backward), cost_I.bin
 * (loss layers), input_delta.bin. The batch is INPUT's first dimension and must not exceed
 * the cfg's. */
static int run_train(int argc, char **argv)
{
    const char *cfg_path, *weights_path, *dir;
    cfg_sections cs;
    network *net = NULL;
    tensor in, truth, dout;
    int i, B;
    long seen;
    float *input_delta;
    if (argc != 9) {
        fprintf(stderr, "usage: %s --train CFG WEIGHTS INPUT.bin TRUTH.bin|- DELTA.bin|- SEEN OUTDIR\n", argv[0]);
        return 1;
    }
    cfg_path = argv[2];
    weights_path = argv[3];
    seen = strtol(argv[7], NULL, 10);
    dir = argv[8];
    install_handlers();
    gpu_index = -1;
    g_stage = "reading cfg";
    cs = prescan_cfg(cfg_path);
    g_stage = "reading input";
    in = read_first_tensor(argv[4]);
    memset(&truth, 0, sizeof truth);
    memset(&dout, 0, sizeof dout);
    if (strcmp(argv[5], "-") != 0) truth = read_first_tensor(argv[5]);
    if (strcmp(argv[6], "-") != 0) dout = read_first_tensor(argv[6]);
    DARKNET_CALL("parse_network_cfg", net = parse_network_cfg((char *)cfg_path));
    if (!net || net->n != cs.n - 1) die("parse_network_cfg did not parse '%s' as expected", cfg_path);
    /* A [region] over a class tree (YOLO9000): parse_region never sets l.temperature, so the
       CPU forward's tree softmax divides by 0 and every class comes out NaN (the GPU one passes
       1). Set to 1 here; with one box per cell on a 1x1 grid the CPU forward then is the GPU
       one (on larger maps its offsets and strides read other planes). */
    for (i = 0; i < net->n; ++i)
        if (net->layers[i].type == REGION && net->layers[i].softmax_tree && net->layers[i].temperature == 0) {
            if (net->layers[i].n != 1 || net->layers[i].w != 1 || net->layers[i].h != 1)
                die("layer %d: a [region] over a class tree is usable as an oracle only with num=1 on a 1x1 grid", i);
            net->layers[i].temperature = 1;
        }

    g_stage = "checking weights";
    check_weights_file(net, &cs, weights_path);
    DARKNET_CALL("load_weights", load_weights(net, (char *)weights_path));
    B = (int)in.dims[0];
    if (B < 1 || B > net->batch) die("input batch %d must be in [1, %d] (the cfg's)", B, net->batch);
    if (in.numel != (size_t)B * net->inputs)
        die("input has %zu values, the network needs %d x %d", in.numel, B, net->inputs);
    DARKNET_CALL("set_batch_network", set_batch_network(net, B));
    if (truth.data) {
        if (truth.numel != (size_t)B * net->truths)
            die("truth has %zu values, the network reads %d x %d", truth.numel, B, net->truths);
        net->truth = truth.data;
    } else {
        net->truth = calloc((size_t)B * net->truths + 1, sizeof(float));
    }
    input_delta = calloc((size_t)B * net->inputs, sizeof(float));
    if (!input_delta) die("out of memory");
    net->input = in.data;
    net->delta = input_delta;
    net->train = 1;
    *net->seen = (size_t)seen;
    DARKNET_CALL("forward_network", forward_network(net));
    g_stage = "writing forward results";
    for (i = 0; i < net->n; ++i) {
        layer l = net->layers[i];
        write_layer_tensor(dir, "output", i, l.output, (size_t)B * l.outputs);
        if (l.delta) write_layer_tensor(dir, "loss_delta", i, l.delta, (size_t)B * l.outputs);
        if (l.cost) write_layer_tensor(dir, "cost", i, l.cost, 1);
    }
    if (dout.data) {
        layer last = net->layers[net->n - 1];
        size_t k;
        if (dout.numel != (size_t)B * last.outputs)
            die("delta has %zu values, the last layer has %d x %d", dout.numel, B, last.outputs);
        for (k = 0; k < dout.numel; ++k) last.delta[k] += dout.data[k];
    }
    DARKNET_CALL("backward_network", backward_network(net));
    g_stage = "writing backward results";
    for (i = 0; i < net->n; ++i) {
        layer l = net->layers[i];
        if (l.delta) write_layer_tensor(dir, "delta", i, l.delta, (size_t)B * l.outputs);
    }
    write_layer_tensor(dir, "input_delta", -1, input_delta, (size_t)B * net->inputs);
    return 0;
}

/* ------------------------------------------------------------ image mode */

/* darknet_forward --image IMAGE W H OUTDIR
 * Darknet's own picture handling: OUTDIR/loaded.bin (load_image_color, planar [3,h,w]),
 * resized.bin (resize_image to W x H) and letterboxed.bin (letterbox_image into W x H). */
static int run_image(int argc, char **argv)
{
    char path[4096];
    image im, rs, lb;
    uint32_t dims[3];
    int w, h;
    if (argc != 6) {
        fprintf(stderr, "usage: %s --image IMAGE W H OUTDIR\n", argv[0]);
        return 1;
    }
    install_handlers();
    w = atoi(argv[3]);
    h = atoi(argv[4]);
    if (w < 1 || h < 1) die("bad size %s x %s", argv[3], argv[4]);
    DARKNET_CALL("load_image_color", im = load_image_color(argv[2], 0, 0));
    DARKNET_CALL("resize_image", rs = resize_image(im, w, h));
    DARKNET_CALL("letterbox_image", lb = letterbox_image(im, w, h));
    g_stage = "writing images";
    dims[0] = 3;
    dims[1] = (uint32_t)im.h;
    dims[2] = (uint32_t)im.w;
    snprintf(path, sizeof path, "%s/loaded.bin", argv[5]);
    write_output(path, dims, 3, im.data, (size_t)3 * im.w * im.h);
    dims[1] = (uint32_t)h;
    dims[2] = (uint32_t)w;
    snprintf(path, sizeof path, "%s/resized.bin", argv[5]);
    write_output(path, dims, 3, rs.data, (size_t)3 * w * h);
    snprintf(path, sizeof path, "%s/letterboxed.bin", argv[5]);
    write_output(path, dims, 3, lb.data, (size_t)3 * w * h);
    return 0;
}

/* ----------------------------------------------------------- detect mode */

/* darknet_forward --detect CFG WEIGHTS IMAGE THRESH OUT.bin
 * Darknet's test_detector on one picture: letterbox_image to the net's size,
 * network_predict, get_network_boxes (relative, hier .5), do_nms_sort at .45. Writes a
 * tensor [count, 5 + classes]: x, y, w, h (relative to the picture), objectness, and the
 * class probabilities, in Darknet's order after NMS (boxes with no probability left out). */
static int run_detect(int argc, char **argv)
{
    network *net = NULL;
    image im, sized;
    detection *dets = NULL;
    int nboxes = 0, classes, i, j, kept = 0;
    float thresh, *out;
    uint32_t dims[2];
    if (argc != 7) {
        fprintf(stderr, "usage: %s --detect CFG WEIGHTS IMAGE THRESH OUT.bin\n", argv[0]);
        return 1;
    }
    install_handlers();
    gpu_index = -1;
    thresh = (float)atof(argv[5]);
    DARKNET_CALL("load_network", net = load_network(argv[2], argv[3], 0));
    DARKNET_CALL("set_batch_network", set_batch_network(net, 1));
    DARKNET_CALL("load_image_color", im = load_image_color(argv[4], 0, 0));
    DARKNET_CALL("letterbox_image", sized = letterbox_image(im, net->w, net->h));
    DARKNET_CALL("network_predict", network_predict(net, sized.data));
    DARKNET_CALL("get_network_boxes", dets = get_network_boxes(net, im.w, im.h, thresh, .5f, 0, 1, &nboxes));
    classes = net->layers[net->n - 1].classes;
    DARKNET_CALL("do_nms_sort", do_nms_sort(dets, nboxes, classes, .45f));
    out = calloc((size_t)nboxes * (5 + classes) + 1, sizeof(float));
    if (!out) die("out of memory");
    for (i = 0; i < nboxes; ++i) {
        int any = 0;
        for (j = 0; j < classes; ++j) any |= dets[i].prob[j] > 0;
        if (!any) continue;
        out[kept * (5 + classes) + 0] = dets[i].bbox.x;
        out[kept * (5 + classes) + 1] = dets[i].bbox.y;
        out[kept * (5 + classes) + 2] = dets[i].bbox.w;
        out[kept * (5 + classes) + 3] = dets[i].bbox.h;
        out[kept * (5 + classes) + 4] = dets[i].objectness;
        for (j = 0; j < classes; ++j) out[kept * (5 + classes) + 5 + j] = dets[i].prob[j];
        ++kept;
    }
    g_stage = "writing detections";
    dims[0] = (uint32_t)kept;
    dims[1] = (uint32_t)(5 + classes);
    write_output(argv[6], dims, 2, out, (size_t)kept * (5 + classes));
    return 0;
}

/* ------------------------------------------------------------------ main */

int main(int argc, char **argv)
{
    const char *cfg_path, *weights_path, *in_path, *out_path;
    cfg_sections cs;
    network *net = NULL;
    tensor in;
    int i, out_idx, cap;
    uint32_t B;
    size_t per_in, per_out;
    float *out;
    layer ol;
    uint32_t odims[4];
    uint32_t ondim;

    if (argc > 1 && strcmp(argv[1], "--train") == 0) return run_train(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--image") == 0) return run_image(argc, argv);
    if (argc > 1 && strcmp(argv[1], "--detect") == 0) return run_detect(argc, argv);
    if (argc != 5 && argc != 6) {
        fprintf(stderr,
                "usage: %s CFG WEIGHTS INPUT.bin OUTPUT.bin [RESAVED.weights]\n"
                "  Runs libdarknet (test mode) on the first tensor of INPUT.bin ([B,C,H,W]) and\n"
                "  writes the last non-cost layer's output as tensor \"output\" to OUTPUT.bin.\n",
                argc > 0 ? argv[0] : PROG);
        return 1;
    }
    cfg_path = argv[1];
    weights_path = argv[2];
    in_path = argv[3];
    out_path = argv[4];
    install_handlers();
    gpu_index = -1;

    /* Validate everything Darknet would otherwise mishandle. */
    g_stage = "reading cfg";
    cs = prescan_cfg(cfg_path);
    g_stage = "reading input";
    in = read_first_tensor(in_path);
    {
        FILE *f = fopen(weights_path, "rb");
        if (!f) die("cannot open weights file '%s': %s", weights_path, strerror(errno));
        fclose(f);
    }

    DARKNET_CALL("parse_network_cfg", net = parse_network_cfg((char *)cfg_path));
    if (!net || net->n < 1) die("parse_network_cfg returned no layers for '%s'", cfg_path);
    if (net->n != cs.n - 1)
        die("internal: Darknet parsed %d layers but the cfg has %d layer sections", net->n,
            cs.n - 1);
    for (i = 0; i < net->n; ++i) {
        const layer *l = &net->layers[i];
        if (!l->forward)
            die("layer %d (%s at cfg line %d) has no forward function in this libdarknet", i,
                cs.names[i + 1], cs.lines[i + 1]);
        if (l->outputs <= 0 || l->outputs > (1 << 30))
            die("layer %d (%s at cfg line %d) has invalid output size %d (bad cfg, e.g. a "
                "[route] layers= index out of range?)", i, cs.names[i + 1], cs.lines[i + 1],
                l->outputs);
        /* forward_convolutional_layer(): `if (l.size == 1) b = im;` -- the input is used as
           the im2col matrix directly, ignoring stride and padding, so the result is not a
           convolution (and padding reads out of bounds). Refuse rather than mislead. */
        if (l->type == CONVOLUTIONAL && l->size == 1 && (l->stride != 1 || l->pad != 0))
            die("layer %d (%s at cfg line %d): size=1 with stride=%d padding=%d is computed "
                "incorrectly by this libdarknet (it ignores stride/padding for 1x1 kernels); "
                "not usable as an oracle", i, cs.names[i + 1], cs.lines[i + 1], l->stride,
                l->pad);
    }

    g_stage = "checking weights";
    check_weights_file(net, &cs, weights_path);
    DARKNET_CALL("load_weights", load_weights(net, (char *)weights_path));
    if (argc == 6) DARKNET_CALL("save_weights", save_weights(net, argv[5]));

    /* Input shape. */
    if (net->h > 0 && net->w > 0 && net->c > 0) {
        if ((size_t)net->inputs != (size_t)net->c * net->h * net->w)
            die("cfg [net] inputs=%d disagrees with channels*height*width=%d*%d*%d", net->inputs,
                net->c, net->h, net->w);
        if (in.ndim != 4 || in.dims[1] != (uint32_t)net->c || in.dims[2] != (uint32_t)net->h ||
            in.dims[3] != (uint32_t)net->w) {
            char got[128];
            size_t k, o = 0;
            for (k = 0; k < in.ndim && o < sizeof got - 16; ++k)
                o += (size_t)snprintf(got + o, sizeof got - o, "%s%u", k ? "," : "", in.dims[k]);
            die("input tensor '%s' has shape [%s] but the network expects [B,%d,%d,%d] "
                "(B,channels,height,width from cfg [net])", in.name, got, net->c, net->h, net->w);
        }
    } else {
        /* [net] given as inputs=N only (no image shape): accept [B,N] or any [B,...] with
           prod(rest) == N. */
        size_t rest = 1, k;
        for (k = 1; k < in.ndim; ++k) rest *= in.dims[k];
        if (in.ndim < 2 || rest != (size_t)net->inputs)
            die("input tensor '%s' must be [B,%d] (cfg [net] inputs=%d)", in.name, net->inputs,
                net->inputs);
    }
    B = in.dims[0];
    if (B < 1) die("input tensor '%s' has batch 0", in.name);
    per_in = (size_t)net->inputs;

    /* Output layer: last layer that is not [cost] (== get_network_output_layer()). */
    out_idx = net->n - 1;
    while (out_idx >= 0 && net->layers[out_idx].type == COST) --out_idx;
    if (out_idx < 0) die("network consists only of [cost] layers");
    ol = net->layers[out_idx];
    per_out = (size_t)ol.outputs;
    if (per_out == 0) die("output layer %d (%s) has 0 outputs", out_idx, cs.names[out_idx + 1]);
    if (ol.output != net->output)
        die("internal: net->output is not layer %d's output buffer", out_idx);

    /* Darknet allocated every layer buffer for the cfg batch (batch/subdivisions*time_steps);
       set_batch_network() does NOT reallocate, so never raise the batch above that. Larger
       inputs run in chunks (test-mode inference is per-sample independent). */
    cap = net->batch;
    if (cap < 1)
        die("cfg [net] batch/subdivisions gives batch %d; Darknet allocates no buffers", cap);

    out = malloc((size_t)B * per_out * sizeof(float));
    if (!out) die("out of memory for output (%zu floats)", (size_t)B * per_out);
    {
        uint32_t start = 0;
        while (start < B) {
            int nb = (B - start) < (uint32_t)cap ? (int)(B - start) : cap;
            float *res = NULL;
            DARKNET_CALL("set_batch_network", set_batch_network(net, nb));
            DARKNET_CALL("network_predict", res = network_predict(net, in.data + start * per_in));
            if (!res) die("network_predict returned NULL");
            memcpy(out + (size_t)start * per_out, res, (size_t)nb * per_out * sizeof(float));
            start += (uint32_t)nb;
        }
    }
    g_stage = "writing output";

    if (ol.type == CONNECTED || ol.type == SOFTMAX || (ol.out_h == 1 && ol.out_w == 1) ||
        ol.out_h <= 0 || ol.out_w <= 0 || ol.out_c <= 0 ||
        (size_t)ol.out_c * ol.out_h * ol.out_w != per_out) {
        ondim = 2;
        odims[0] = B;
        odims[1] = (uint32_t)per_out;
    } else {
        ondim = 4;
        odims[0] = B;
        odims[1] = (uint32_t)ol.out_c;
        odims[2] = (uint32_t)ol.out_h;
        odims[3] = (uint32_t)ol.out_w;
    }
    write_output(out_path, odims, ondim, out, (size_t)B * per_out);
    fprintf(stderr, PROG ": wrote '%s' from layer %d (%s): [", out_path, out_idx,
            cs.names[out_idx + 1]);
    for (i = 0; i < (int)ondim; ++i) fprintf(stderr, "%s%u", i ? "," : "", odims[i]);
    fprintf(stderr, "]\n");

    free(out);
    free(in.data);
    return 0;
}
