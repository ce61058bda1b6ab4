/*
 * darknet_detections -- detection oracle built on Debian's libdarknet (pjreddie darknet,
 * git 61c9d02e; /usr/lib/darknet/libdarknet.so). Three modes:
 *
 *   darknet_detections head CFG INPUT.bin OUTPUT.bin NMS NET_W NET_H {IMG_W IMG_H THRESH RELATIVE}...
 *     parse_network_cfg(CFG) (batch 1, last layer [region], [yolo] or [detection]: YOLOv1's,
 *     whose boxes get_network_boxes scales by IMG_W x IMG_H whatever RELATIVE), network_predict() on the
 *     first tensor of INPUT.bin (any shape with [net] inputs elements), then for each setting s
 *     (a group of four arguments) get_network_boxes(net, IMG_W, IMG_H, THRESH, hier .5, map 0,
 *     RELATIVE) and do_nms_sort(dets, n, classes, NMS). Writes
 *       "activated"    [C,H,W]          the head layer's output (after its logistic/softmax)
 *       "raw/s"        [N, 5+classes]   x y w h objectness prob[classes], get_network_boxes order
 *       "nms/s"        [N, 5+classes]   the same after do_nms_sort
 *       "sort_class/s" [N]              sort_class after do_nms_sort
 *     With NET_W NET_H not 0, net->w/net->h are set to them after the forward pass:
 *     get_network_boxes reads the network input size only from there ([yolo] anchors are in
 *     input pixels, and both heads undo the letterbox with it), so a cfg holding nothing but the
 *     head can stand for a network whose backbone maps NET_W x NET_H to the head's grid. (Several
 *     settings per run because loading libdarknet and its ~260 shared libraries takes 0.3 s.)
 *   darknet_detections nms DETS.bin OUTPUT.bin CLASSES NMS
 *     do_nms_sort on the detections of the first tensor ([N, 5+CLASSES] as above); writes
 *     "nms" and "sort_class".
 *   darknet_detections iou BOXES.bin OUTPUT.bin
 *     box_iou of each row ([N, 8]: x y w h of a, x y w h of b); writes "iou" [N].
 *
 * Tensor files: TTDUMP1 (src/util/dump.hpp): 8-byte magic "TTDUMP1\n", u32 count, per tensor
 * u32 name length, name, u32 ndim, u32 dims, float32 data; little endian.
 * Exit status: 0 ok, 1 usage/validation error, 3 libdarknet called exit(), 128+signal crash.
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

#define PROG "darknet_detections"

static volatile sig_atomic_t g_in_darknet = 0;

static void die(const char *fmt, ...) {
  va_list ap;
  g_in_darknet = 0;
  fprintf(stderr, PROG ": error: ");
  va_start(ap, fmt);
  vfprintf(stderr, fmt, ap);
  va_end(ap);
  fputc('\n', stderr);
  exit(1);
}

static void on_exit_handler(void) {
  if (g_in_darknet) {
    fprintf(stderr, "\n" PROG ": error: libdarknet called exit()\n");
    _exit(3);
  }
}

static void on_fatal_signal(int sig) {
  static const char msg[] = "\n" PROG ": error: fatal signal (crash or abort)\n";
  if (write(STDERR_FILENO, msg, sizeof msg - 1) < 0) _exit(128 + sig);
  _exit(128 + sig);
}

static void install_handlers(void) {
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

#define DARKNET_CALL(stmt) \
  do {                     \
    g_in_darknet = 1;      \
    stmt;                  \
    g_in_darknet = 0;      \
  } while (0)

/* ------------------------------------------------------------ tensor i/o */

#define TT_MAGIC "TTDUMP1\n"
#define MAX_NDIM 8

typedef struct {
  uint32_t ndim;
  uint32_t dims[MAX_NDIM];
  size_t numel;
  float *data;
} tensor;

static void read_exact(FILE *f, void *p, size_t n, const char *path, const char *what) {
  if (n && fread(p, 1, n, f) != n) die("'%s' truncated while reading %s", path, what);
}

static uint32_t read_u32(FILE *f, const char *path, const char *what) {
  unsigned char b[4];
  read_exact(f, b, 4, path, what);
  return (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) | ((uint32_t)b[3] << 24);
}

/* The first tensor of a TTDUMP1 file (host byte order is little endian here). */
static tensor read_first_tensor(const char *path) {
  tensor t;
  char magic[8];
  uint32_t len, i;
  FILE *f = fopen(path, "rb");
  memset(&t, 0, sizeof t);
  if (!f) die("cannot open '%s': %s", path, strerror(errno));
  read_exact(f, magic, 8, path, "magic");
  if (memcmp(magic, TT_MAGIC, 8) != 0) die("'%s' is not a TTDUMP1 file", path);
  if (read_u32(f, path, "count") < 1) die("'%s' holds no tensor", path);
  len = read_u32(f, path, "name length");
  if (len > 4096) die("'%s': bad name length %u", path, len);
  if (fseek(f, (long)len, SEEK_CUR) != 0) die("'%s' truncated in a name", path);
  t.ndim = read_u32(f, path, "ndim");
  if (t.ndim < 1 || t.ndim > MAX_NDIM) die("'%s': unsupported ndim %u", path, t.ndim);
  t.numel = 1;
  for (i = 0; i < t.ndim; ++i) {
    t.dims[i] = read_u32(f, path, "dims");
    t.numel *= t.dims[i];
    if (t.numel > ((size_t)1 << 32)) die("'%s': tensor too large", path);
  }
  t.data = malloc(t.numel ? t.numel * sizeof(float) : sizeof(float));
  if (!t.data) die("out of memory (%zu floats)", t.numel);
  read_exact(f, t.data, t.numel * sizeof(float), path, "data");
  fclose(f);
  return t;
}

typedef struct {
  const char *name;
  uint32_t ndim;
  uint32_t dims[MAX_NDIM];
  const float *data;
} out_tensor;

static void write_u32(FILE *f, uint32_t v, const char *path) {
  if (fwrite(&v, 4, 1, f) != 1) die("write error on '%s': %s", path, strerror(errno));
}

static void write_tensors(const char *path, const out_tensor *ts, uint32_t count) {
  uint32_t k, i;
  FILE *f = fopen(path, "wb");
  if (!f) die("cannot open '%s' for writing: %s", path, strerror(errno));
  if (fwrite(TT_MAGIC, 1, 8, f) != 8) die("write error on '%s'", path);
  write_u32(f, count, path);
  for (k = 0; k < count; ++k) {
    size_t numel = 1;
    write_u32(f, (uint32_t)strlen(ts[k].name), path);
    if (fwrite(ts[k].name, 1, strlen(ts[k].name), f) != strlen(ts[k].name)) die("write error on '%s'", path);
    write_u32(f, ts[k].ndim, path);
    for (i = 0; i < ts[k].ndim; ++i) {
      write_u32(f, ts[k].dims[i], path);
      numel *= ts[k].dims[i];
    }
    if (numel && fwrite(ts[k].data, sizeof(float), numel, f) != numel) die("write error on '%s'", path);
  }
  if (fclose(f) != 0) die("write error on '%s': %s", path, strerror(errno));
}

/* ------------------------------------------------------------ arguments */

static int parse_int(const char *s, const char *what) {
  char *end;
  long v = strtol(s, &end, 10);
  if (*s == '\0' || *end != '\0' || v < -1000000000L || v > 1000000000L) die("%s: '%s' is not an integer", what, s);
  return (int)v;
}

static float parse_float(const char *s, const char *what) {
  char *end;
  float v = strtof(s, &end);
  if (*s == '\0' || *end != '\0') die("%s: '%s' is not a number", what, s);
  return v;
}

/* Rows of x y w h objectness prob[classes]. */
static float *dets_to_rows(const detection *dets, int n, int classes) {
  int i, j;
  const int k = 5 + classes;
  float *rows = malloc((size_t)(n ? n : 1) * k * sizeof(float));
  if (!rows) die("out of memory");
  for (i = 0; i < n; ++i) {
    float *r = rows + (size_t)i * k;
    r[0] = dets[i].bbox.x;
    r[1] = dets[i].bbox.y;
    r[2] = dets[i].bbox.w;
    r[3] = dets[i].bbox.h;
    r[4] = dets[i].objectness;
    for (j = 0; j < classes; ++j) r[5 + j] = dets[i].prob[j];
  }
  return rows;
}

static float *sort_classes(const detection *dets, int n) {
  int i;
  float *s = malloc((size_t)(n ? n : 1) * sizeof(float));
  if (!s) die("out of memory");
  for (i = 0; i < n; ++i) s[i] = (float)dets[i].sort_class;
  return s;
}

/* ---------------------------------------------------------------- modes */

#define MAX_SETTINGS 64

static int mode_head(int argc, char **argv) {
  const char *cfg, *in_path, *out_path;
  int net_w, net_h, settings, s, classes;
  float *activated;
  float nms;
  network *net = NULL;
  layer l;
  tensor in;
  out_tensor ts[1 + 3 * MAX_SETTINGS];
  char names[3 * MAX_SETTINGS][32];
  float *bufs[3 * MAX_SETTINGS];
  uint32_t count = 0, k;

  if (argc < 10 || (argc - 6) % 4 != 0)
    die("head: expected CFG INPUT.bin OUTPUT.bin NMS NET_W NET_H followed by one or more groups of "
        "IMG_W IMG_H THRESH RELATIVE");
  cfg = argv[0];
  in_path = argv[1];
  out_path = argv[2];
  nms = parse_float(argv[3], "NMS");
  net_w = parse_int(argv[4], "NET_W");
  net_h = parse_int(argv[5], "NET_H");
  if (net_w < 0 || net_h < 0 || (net_w == 0) != (net_h == 0)) die("NET_W/NET_H: both positive, or both 0");
  settings = (argc - 6) / 4;
  if (settings > MAX_SETTINGS) die("at most %d settings per run", MAX_SETTINGS);

  in = read_first_tensor(in_path);
  {
    FILE *f = fopen(cfg, "r");
    if (!f) die("cannot open cfg '%s': %s", cfg, strerror(errno));
    fclose(f);
  }
  DARKNET_CALL(net = parse_network_cfg((char *)cfg));
  if (!net || net->n < 1) die("'%s' gives no layers", cfg);
  l = net->layers[net->n - 1];
  if (l.type != REGION && l.type != YOLO && l.type != DETECTION)
    die("the last layer of '%s' is not [region], [yolo] or [detection]", cfg);
  if (l.map) die("class maps are not supported");
  /* A [region] over a class tree: its temperature is never parsed (0), so the CPU forward's
     tree softmax gives NaN; with it set to 1, one box per cell on a 1x1 grid reads the right
     planes (Darknet's GPU forward). get_network_boxes then multiplies the classes along the
     tree in place (hierarchy_predictions), so only one setting per run. */
  if (l.softmax_tree) {
    if (l.n != 1 || l.w != 1 || l.h != 1) die("a [region] over a class tree needs num=1 on a 1x1 grid here");
    if (settings != 1) die("a [region] over a class tree takes exactly one setting");
    net->layers[net->n - 1].temperature = 1;
  }
  /* get_region_detections / get_yolo_detections average with a flipped copy when the layer's
     batch is 2: keep batch 1. */
  if (net->batch != 1) die("'%s' has batch %d after subdivisions; use batch=1", cfg, net->batch);
  if (in.numel != (size_t)net->inputs) die("input has %zu values but [net] expects %d", in.numel, net->inputs);
  classes = l.classes;

  DARKNET_CALL(network_predict(net, in.data));
  if (net_w) {
    net->w = net_w;
    net->h = net_h;
  }
  ts[count].name = "activated";
  ts[count].ndim = 3;
  /* [detection]'s output is a flat vector (its out_c/out_h/out_w are not set) */
  ts[count].dims[0] = (uint32_t)(l.type == DETECTION ? l.outputs : l.out_c);
  ts[count].dims[1] = (uint32_t)(l.type == DETECTION ? 1 : l.out_h);
  ts[count].dims[2] = (uint32_t)(l.type == DETECTION ? 1 : l.out_w);
  /* a copy: get_network_boxes changes the output of a tree head in place */
  activated = malloc((size_t)l.outputs * sizeof(float));
  if (!activated) die("out of memory");
  memcpy(activated, l.output, (size_t)l.outputs * sizeof(float));
  ts[count].data = activated;
  ++count;

  /* get_network_boxes reads the head's output without changing it (batch 1, no tree), so
     every setting sees the same activated output. */
  for (s = 0; s < settings; ++s) {
    const char *const *a = (const char *const *)argv + 6 + 4 * s;
    const int img_w = parse_int(a[0], "IMG_W"), img_h = parse_int(a[1], "IMG_H");
    const float thresh = parse_float(a[2], "THRESH");
    const int relative = parse_int(a[3], "RELATIVE");
    int nboxes = 0, t;
    detection *dets = NULL;
    if (img_w < 1 || img_h < 1) die("IMG_W/IMG_H must be positive");
    DARKNET_CALL(dets = get_network_boxes(net, img_w, img_h, thresh, .5, 0, relative, &nboxes));
    for (t = 0; t < 3; ++t) {
      static const char *const kinds[3] = {"raw", "nms", "sort_class"};
      if (t == 1) DARKNET_CALL(do_nms_sort(dets, nboxes, classes, nms));
      snprintf(names[count - 1], sizeof names[0], "%s/%d", kinds[t], s);
      bufs[count - 1] = t < 2 ? dets_to_rows(dets, nboxes, classes) : sort_classes(dets, nboxes);
      ts[count].name = names[count - 1];
      ts[count].ndim = t < 2 ? 2 : 1;
      ts[count].dims[0] = (uint32_t)nboxes;
      ts[count].dims[1] = (uint32_t)(5 + classes);
      ts[count].data = bufs[count - 1];
      ++count;
    }
    fprintf(stderr, PROG ": setting %d: %d boxes (%s, %dx%d grid, net %dx%d, image %dx%d)\n", s, nboxes,
            l.type == YOLO ? "yolo" : l.type == REGION ? "region" : "detection", l.w, l.h, net->w, net->h, img_w, img_h);
    DARKNET_CALL(free_detections(dets, nboxes));
  }
  write_tensors(out_path, ts, count);
  for (k = 0; k + 1 < count; ++k) free(bufs[k]);
  free(activated);
  free(in.data);
  return 0;
}

static int mode_nms(int argc, char **argv) {
  tensor in;
  int classes, n, i, j;
  float nms;
  detection *dets;
  float *after, *sc;
  out_tensor ts[2];

  if (argc != 4) die("nms: expected DETS.bin OUTPUT.bin CLASSES NMS");
  in = read_first_tensor(argv[0]);
  classes = parse_int(argv[2], "CLASSES");
  nms = parse_float(argv[3], "NMS");
  if (classes < 1) die("CLASSES must be positive");
  if (in.ndim != 2 || in.dims[1] != (uint32_t)(5 + classes))
    die("detections must be [N, %d] (x y w h objectness prob[%d])", 5 + classes, classes);
  if (in.dims[0] > (1u << 24)) die("at most %u detections", 1u << 24);
  n = (int)in.dims[0];
  dets = calloc((size_t)(n ? n : 1), sizeof(detection));
  if (!dets) die("out of memory");
  for (i = 0; i < n; ++i) {
    const float *r = in.data + (size_t)i * (5 + classes);
    dets[i].bbox.x = r[0];
    dets[i].bbox.y = r[1];
    dets[i].bbox.w = r[2];
    dets[i].bbox.h = r[3];
    dets[i].objectness = r[4];
    dets[i].classes = classes;
    dets[i].prob = calloc((size_t)classes, sizeof(float));
    if (!dets[i].prob) die("out of memory");
    for (j = 0; j < classes; ++j) dets[i].prob[j] = r[5 + j];
  }
  DARKNET_CALL(do_nms_sort(dets, n, classes, nms));
  after = dets_to_rows(dets, n, classes);
  sc = sort_classes(dets, n);
  ts[0].name = "nms";
  ts[0].ndim = 2;
  ts[0].dims[0] = (uint32_t)n;
  ts[0].dims[1] = (uint32_t)(5 + classes);
  ts[0].data = after;
  ts[1].name = "sort_class";
  ts[1].ndim = 1;
  ts[1].dims[0] = (uint32_t)n;
  ts[1].data = sc;
  write_tensors(argv[1], ts, 2);
  DARKNET_CALL(free_detections(dets, n));
  free(after);
  free(sc);
  free(in.data);
  return 0;
}

static int mode_iou(int argc, char **argv) {
  tensor in;
  size_t n, i;
  float *iou;
  out_tensor t;

  if (argc != 2) die("iou: expected BOXES.bin OUTPUT.bin");
  in = read_first_tensor(argv[0]);
  if (in.ndim != 2 || in.dims[1] != 8) die("boxes must be [N, 8] (x y w h of a, x y w h of b)");
  n = in.dims[0];
  iou = malloc((n ? n : 1) * sizeof(float));
  if (!iou) die("out of memory");
  for (i = 0; i < n; ++i) {
    const float *r = in.data + i * 8;
    box a, b;
    a.x = r[0];
    a.y = r[1];
    a.w = r[2];
    a.h = r[3];
    b.x = r[4];
    b.y = r[5];
    b.w = r[6];
    b.h = r[7];
    iou[i] = box_iou(a, b);
  }
  t.name = "iou";
  t.ndim = 1;
  t.dims[0] = (uint32_t)n;
  t.data = iou;
  write_tensors(argv[1], &t, 1);
  free(iou);
  free(in.data);
  return 0;
}

int main(int argc, char **argv) {
  install_handlers();
  gpu_index = -1;
  if (argc >= 2 && strcmp(argv[1], "head") == 0) return mode_head(argc - 2, argv + 2);
  if (argc >= 2 && strcmp(argv[1], "nms") == 0) return mode_nms(argc - 2, argv + 2);
  if (argc >= 2 && strcmp(argv[1], "iou") == 0) return mode_iou(argc - 2, argv + 2);
  fprintf(stderr,
          "usage: %s head CFG INPUT.bin OUTPUT.bin NMS NET_W NET_H {IMG_W IMG_H THRESH RELATIVE}...\n"
          "       %s nms DETS.bin OUTPUT.bin CLASSES NMS\n"
          "       %s iou BOXES.bin OUTPUT.bin\n",
          PROG, PROG, PROG);
  return 1;
}
