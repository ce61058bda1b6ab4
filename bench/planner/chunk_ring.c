// How --low-memory's weight chunks move on a cluster, timed with plain MPI (the same calls
// the engine makes: MpiComm::all_gather_v and MpiComm::reduce_scatter, waiting by polling
// with 100 us naps as a rank under a CPU quota does). Run by chunk_ring.sh.
//
//   chunk_ring W1            W1's chunks on 4 ranks (Segment::plan_chunks with a channel
//                            block of 16; shards as make_shard_plan cuts them)
//   chunk_ring K             K chunks of 1 MB, all owned by rank 0
//
// For each: one pass of all-gathers and one pass of ring reduce-scatters over the chunks
// back to back, each timed from the first rank's start to the last rank's end (the ranks
// share this machine's clock), and each chunk alone (a barrier before it), summed.
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kMaxRanks = 16, kMaxChunks = 256 };
typedef struct {
  int n, counts[kMaxRanks], displs[kMaxRanks];
} Chunk;

static int P, me;
static float *data, *tmp;

static void wait_all(int n, MPI_Request* r) {
  for (;;) {
    int done = 0;
    MPI_Testall(n, r, &done, MPI_STATUSES_IGNORE);
    if (done) return;
    usleep(100);
  }
}

static void gather(const Chunk* c) {
  MPI_Request r;
  MPI_Iallgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, c->counts, c->displs, MPI_FLOAT, MPI_COMM_WORLD, &r);
  wait_all(1, &r);
}

// Step s: rank r passes its running sum of part r-s-1 to rank r+1 (MpiComm::reduce_scatter).
static void reduce_scatter(const Chunk* c) {
  const int next = (me + 1) % P, prev = (me + P - 1) % P;
  for (int s = 0; s + 1 < P; ++s) {
    const int out = ((me - s - 1) % P + P) % P, in = ((me - s - 2) % P + P) % P;
    MPI_Request r[2];
    MPI_Isend(data + c->displs[out], c->counts[out], MPI_FLOAT, next, 7, MPI_COMM_WORLD, &r[0]);
    MPI_Irecv(tmp, c->counts[in], MPI_FLOAT, prev, 7, MPI_COMM_WORLD, &r[1]);
    wait_all(2, r);
    for (int k = 0; k < c->counts[in]; ++k) data[c->displs[in] + k] += tmp[k];
  }
}

// W1's convolutions (cfgs/yolov2-16.cfg): output and input channels, kernel size. Written
// out, with Segment::plan_chunks' and make_shard_plan's arithmetic below, so that this stays
// plain MPI: when either changes, this must follow.
static const int kOut[] = {32, 64, 128, 64, 128, 256, 128, 256, 512, 256, 512, 256};
static const int kIn[] = {3, 32, 64, 128, 64, 128, 256, 128, 256, 512, 256, 512};
static const int kSize[] = {3, 3, 3, 1, 3, 3, 1, 3, 3, 1, 3, 1};

static int w1_chunks(Chunk* ch) {
  long total = 0, v = 0;
  int n = 0;
  for (int l = 0; l < 12; ++l) total += (long)kOut[l] * kIn[l] * kSize[l] * kSize[l];
  for (int l = 0; l < 12; ++l) {
    const long row = (long)kIn[l] * kSize[l] * kSize[l];
    long step = kOut[l] % 16 ? kOut[l] : (1L << 18) / row / 16 * 16;
    if (step < 16) step = 16;
    if (step > kOut[l]) step = kOut[l];
    for (long o0 = 0; o0 < kOut[l]; o0 += step) {
      Chunk* c = &ch[n++];
      const long b = v + o0 * row, e = v + (o0 + step < kOut[l] ? o0 + step : kOut[l]) * row;
      c->n = (int)(e - b);
      for (int r = 0; r < P; ++r) {
        // rank r's shard [total r / P, total (r + 1) / P) within the chunk [b, e)
        long lo = total * r / P, hi = total * (r + 1) / P;
        if (lo < b) lo = b;
        if (lo > e) lo = e;
        if (hi > e) hi = e;
        if (hi < lo) hi = lo;
        c->counts[r] = (int)(hi - lo);
        c->displs[r] = (int)(lo - b);
      }
    }
    v += (long)kOut[l] * row;
  }
  for (int i = 0; i < n; ++i) {  // the shards cover each chunk exactly once
    long sum = 0;
    for (int r = 0; r < P; ++r) sum += ch[i].counts[r];
    if (sum != ch[i].n) {
      fprintf(stderr, "chunk_ring: internal: chunk %d split into %ld of %d floats\n", i, sum, ch[i].n);
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
  }
  return n;
}

static double wall(double t0, double t1) {
  double first, last;
  MPI_Reduce(&t0, &first, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
  MPI_Reduce(&t1, &last, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
  return last - first;
}

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_size(MPI_COMM_WORLD, &P);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  if (argc != 2 || P > kMaxRanks) {
    if (me == 0) fprintf(stderr, "usage: mpirun -np N (N <= %d) chunk_ring W1|K\n", kMaxRanks);
    MPI_Finalize();
    return 2;
  }
  static Chunk ch[kMaxChunks];
  int n = 0;
  if (strcmp(argv[1], "W1") == 0) {
    n = w1_chunks(ch);
  } else {
    n = atoi(argv[1]);
    if (n < 1 || n > kMaxChunks) {
      if (me == 0) fprintf(stderr, "chunk_ring: K must be 1-%d, got '%s'\n", kMaxChunks, argv[1]);
      MPI_Finalize();
      return 2;
    }
    for (int i = 0; i < n; ++i) {
      ch[i].n = 1 << 18;
      for (int r = 0; r < P; ++r) {
        ch[i].counts[r] = r == 0 ? 1 << 18 : 0;
        ch[i].displs[r] = r == 0 ? 0 : 1 << 18;
      }
    }
  }
  data = calloc(1 << 22, sizeof(float));
  tmp = calloc(1 << 22, sizeof(float));
  for (int round = 0; round < 2; ++round) {
    double t0, t1, g, rs, g1 = 0, rs1 = 0;
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = 0; i < n; ++i) gather(&ch[i]);
    g = wall(t0, MPI_Wtime());
    MPI_Barrier(MPI_COMM_WORLD);
    t0 = MPI_Wtime();
    for (int i = n - 1; i >= 0; --i) reduce_scatter(&ch[i]);  // backward goes the other way
    rs = wall(t0, MPI_Wtime());
    for (int i = 0; i < n; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      gather(&ch[i]);
      t1 = MPI_Wtime();
      g1 += wall(t0, t1);
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = MPI_Wtime();
      reduce_scatter(&ch[i]);
      t1 = MPI_Wtime();
      rs1 += wall(t0, t1);
    }
    if (me == 0)
      printf("round %d, %d chunks on %d ranks: all-gather back to back %.4f s, one at a time %.4f s; "
             "reduce-scatter back to back %.4f s, one at a time %.4f s\n",
             round, n, P, g, g1, rs, rs1);
  }
  free(data);
  free(tmp);
  MPI_Finalize();
  return 0;
}
