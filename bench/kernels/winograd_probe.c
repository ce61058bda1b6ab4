// Would Winograd F(2x2,3x3) pay after YOLOv2's cut at batch 1? Times only its 16 matrix
// products per layer (M[ξ] = V[ξ] · U[ξ]ᵀ: T = 49 blocks of a 13x13 map, K input channels,
// N output channels), the part that must beat the direct convolution for it to pay:
//   openblas  cblas_sgemm per ξ (it packs U again at each call)
//   packed    U pre-packed in panels of 32 output channels (as a weight transform at the
//             update could leave it), a plain micro-kernel in GCC vector extensions
// Compare with the direct layer's time from `tiletrain bench --layers` in the same sitting.
// Build and run: bench/kernels/winograd_probe.sh
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef float v16 __attribute__((vector_size(64), aligned(4)));

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// C[7][32] = A[7][K] · B (one packed panel [K][32]).
static void micro7(const float* A, long lda, const float* B, int K, float* C, long ldc) {
  v16 acc[7][2];
  memset(acc, 0, sizeof acc);
  for (int k = 0; k < K; ++k) {
    const v16 b0 = *(const v16*)(B + (long)k * 32), b1 = *(const v16*)(B + (long)k * 32 + 16);
    for (int r = 0; r < 7; ++r) {
      const float a = A[r * lda + k];
      acc[r][0] += a * b0;
      acc[r][1] += a * b1;
    }
  }
  for (int r = 0; r < 7; ++r) {
    *(v16*)(C + r * ldc) = acc[r][0];
    *(v16*)(C + r * ldc + 16) = acc[r][1];
  }
}

int main(int argc, char** argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: %s N K REPS   (N output channels, K input channels, multiples of 32)\n", argv[0]);
    return 2;
  }
  const int N = atoi(argv[1]), K = atoi(argv[2]), reps = atoi(argv[3]), T = 49;
  if (N <= 0 || K <= 0 || N % 32 || reps <= 0) {
    fprintf(stderr, "N and K must be positive, N a multiple of 32, REPS positive\n");
    return 2;
  }
  float* U = malloc(sizeof(float) * 16L * N * K);
  float* V = malloc(sizeof(float) * 16L * T * K);
  float* M = malloc(sizeof(float) * 16L * T * N);
  if (!U || !V || !M) return 1;
  for (long i = 0; i < 16L * N * K; ++i) U[i] = (float)(i % 7) * 0.01f;
  for (long i = 0; i < 16L * T * K; ++i) V[i] = (float)(i % 5) * 0.1f;
  double best_blas = 1e30, best_packed = 1e30;
  for (int rep = 0; rep < reps; ++rep) {
    const double t0 = now();
    for (int x = 0; x < 16; ++x)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, N, K, 1.f, V + (long)x * T * K, K, U + (long)x * N * K,
                  K, 0.f, M + (long)x * T * N, N);
    const double t1 = now();
    for (int x = 0; x < 16; ++x)
      for (int p = 0; p < N / 32; ++p)
        for (int t = 0; t < T; t += 7)
          micro7(V + ((long)x * T + t) * K, K, U + ((long)x * N + p * 32L) * K, K, M + ((long)x * T + t) * N + p * 32,
                 N);
    const double t2 = now();
    if (t1 - t0 < best_blas) best_blas = t1 - t0;
    if (t2 - t1 < best_packed) best_packed = t2 - t1;
  }
  const double flop = 2.0 * 16 * T * (double)N * K;
  printf("winograd products N %d K %d T %d: openblas %.2f ms (%.1f GFLOP/s), packed micro-kernel %.2f ms (%.1f GFLOP/s)\n",
         N, K, T, best_blas * 1e3, flop / best_blas * 1e-9, best_packed * 1e3, flop / best_packed * 1e-9);
  free(U);
  free(V);
  free(M);
  return 0;
}
