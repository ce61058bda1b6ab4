/*
 * darknet_augment -- Darknet's classifier-augmentation image operations, from Debian's
 * libdarknet (image.c: rotate_crop_image, resize_min, crop_image), as an oracle for
 * tiletrain's (src/data/image.cpp).
 *
 *   usage: darknet_augment rotate_crop IN OUT RAD S W H DX DY ASPECT
 *          darknet_augment resize_min  IN OUT MIN
 *          darknet_augment crop        IN OUT DX DY W H
 *          darknet_augment --list FILE
 *
 * --list runs one job per line of FILE (the words above, separated by tabs): libdarknet
 * brings in OpenCV and Qt, about 260 libraries and 0.3 s to load, so the tests load it once.
 *
 * IN and OUT are pictures as Darknet holds them: int32 w, h, c, then w*h*c float32, planar
 * (data[c*h*w + y*w + x]), in the machine's byte order. Float parameters are read with
 * strtof (so "%.9g" gives back the same float), int parameters with strtol. Exits non-zero
 * with a message on a bad argument or file.
 *
 * Loading libdarknet (built with -Ofast) sets FTZ/DAZ for the whole process (crtfastmath).
 */
#define _POSIX_C_SOURCE 200809L

#include <darknet.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Exported by libdarknet.so but not declared in darknet.h. */
image rotate_crop_image(image im, float rad, float s, int w, int h, float dx, float dy, float aspect);

_Noreturn static void die(const char *what, const char *arg) {
  fprintf(stderr, "darknet_augment: error: %s%s%s\n", what, arg ? ": " : "", arg ? arg : "");
  exit(1);
}

static float arg_float(const char *s) {
  char *end = NULL;
  errno = 0;
  float v = strtof(s, &end);
  if (errno == ERANGE && v != 0 && v != HUGE_VALF && v != -HUGE_VALF) errno = 0; /* a subnormal */
  if (end == s || *end || errno) die("not a number", s);
  return v;
}

static int arg_int(const char *s) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < INT_MIN || v > INT_MAX) die("not an int", s);
  return (int)v;
}

static image read_image(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) die("cannot open", path);
  int32_t dims[3];
  if (fread(dims, sizeof(int32_t), 3, f) != 3) die("no w h c header in", path);
  if (dims[0] < 1 || dims[1] < 1 || dims[2] < 1 || (int64_t)dims[0] * dims[1] * dims[2] > (1 << 28))
    die("bad w h c in", path);
  image im = make_image(dims[0], dims[1], dims[2]);
  size_t n = (size_t)im.w * im.h * im.c;
  if (!im.data) die("out of memory reading", path);
  if (fread(im.data, sizeof(float), n, f) != n) die("fewer floats than w*h*c in", path);
  char extra;
  if (fread(&extra, 1, 1, f) != 0) die("more than w*h*c floats in", path);
  fclose(f);
  return im;
}

static void write_image(const char *path, image im) {
  FILE *f = fopen(path, "wb");
  if (!f) die("cannot write", path);
  int32_t dims[3] = {im.w, im.h, im.c};
  size_t n = (size_t)im.w * im.h * im.c;
  if (fwrite(dims, sizeof(int32_t), 3, f) != 3 || fwrite(im.data, sizeof(float), n, f) != n || fclose(f) != 0)
    die("cannot write", path);
}

/* One operation: args = OP IN OUT PARAMS... */
static void run_job(int n, char **args) {
  const char *op = args[0];
  image out;
  if (n < 3) die("a job is OP IN OUT PARAMS...", op);
  image in = read_image(args[1]);
  if (strcmp(op, "rotate_crop") == 0) {
    if (n != 10) die("rotate_crop takes IN OUT RAD S W H DX DY ASPECT", NULL);
    int w = arg_int(args[5]), h = arg_int(args[6]);
    if (w < 1 || h < 1) die("the output must be at least 1x1", NULL);
    out = rotate_crop_image(in, arg_float(args[3]), arg_float(args[4]), w, h, arg_float(args[7]), arg_float(args[8]),
                            arg_float(args[9]));
  } else if (strcmp(op, "resize_min") == 0) {
    if (n != 4) die("resize_min takes IN OUT MIN", NULL);
    int min = arg_int(args[3]);
    if (min < 1) die("MIN must be at least 1", NULL);
    out = resize_min(in, min); /* `in` itself when already that size */
  } else if (strcmp(op, "crop") == 0) {
    if (n != 7) die("crop takes IN OUT DX DY W H", NULL);
    int w = arg_int(args[5]), h = arg_int(args[6]);
    if (w < 1 || h < 1) die("the crop must be at least 1x1", NULL);
    out = crop_image(in, arg_int(args[3]), arg_int(args[4]), w, h);
  } else {
    die("unknown operation (rotate_crop, resize_min, crop)", op);
  }
  write_image(args[2], out);
  if (out.data != in.data) free_image(out);
  free_image(in);
}

/* --list FILE: one job per line, its words separated by tabs. */
static void run_list(const char *path) {
  FILE *f = fopen(path, "r");
  if (!f) die("cannot open", path);
  char *line = NULL;
  size_t cap = 0;
  ssize_t len;
  while ((len = getline(&line, &cap, f)) >= 0) {
    if (len > 0 && line[len - 1] == '\n') line[--len] = '\0';
    if (len == 0) continue;
    char *args[16];
    int n = 0;
    for (char *save = NULL, *w = strtok_r(line, "\t", &save); w; w = strtok_r(NULL, "\t", &save)) {
      if (n == 16) die("too many words in a line of", path);
      args[n++] = w;
    }
    run_job(n, args);
  }
  free(line);
  fclose(f);
}

int main(int argc, char **argv) {
  if (argc == 3 && strcmp(argv[1], "--list") == 0) {
    run_list(argv[2]);
    return 0;
  }
  if (argc < 4) {
    fprintf(stderr,
            "usage: darknet_augment rotate_crop IN OUT RAD S W H DX DY ASPECT\n"
            "       darknet_augment resize_min IN OUT MIN\n"
            "       darknet_augment crop IN OUT DX DY W H\n"
            "       darknet_augment --list FILE   (one job per line: the words above, tab-separated)\n");
    return 1;
  }
  run_job(argc - 1, argv + 1);
  return 0;
}
