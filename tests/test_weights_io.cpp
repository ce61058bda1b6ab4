// Darknet .weights reading and writing: bit-exact round trip, the file layout of
// tests/oracle/README.md section (a), size checks with clear messages, the old 16-byte
// header, and atomic saving.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "model/op_kind.hpp"
#include "model/params.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;

// conv+bn, maxpool, conv without bn, connected, cost: every array kind of the format.
const char* kCfg =
    "[net]\nbatch=2\nwidth=9\nheight=7\nchannels=3\n"
    "[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\npad=1\nactivation=leaky\n"
    "[maxpool]\nsize=2\nstride=2\n"
    "[convolutional]\nfilters=5\nsize=1\nactivation=linear\n"
    "[connected]\noutput=6\nactivation=relu\n"
    "[cost]\n";

// Byte counts of kCfg's arrays, by hand from the layout:
//   conv0: biases 4, scales 4, rolling_mean 4, rolling_variance 4, weights 4*3*3*3 = 108 -> 124 floats
//   conv2 (input 4x4x5): biases 5, weights 5*4*1*1 = 20                              ->  25 floats
//   connected (input 5*4*5 = 100): biases 6, weights 6*100                           -> 606 floats
constexpr int64_t kArrayBytes = 4 * (124 + 25 + 606);

class WeightsIO : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tt_weights_io_" + std::to_string(getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // Params with every value random and distinct, including rolling statistics and seen.
  static Params random_params(const NetSpec& net, uint64_t seed) {
    Params p(net);
    init_params(p, net, seed);
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-2.f, 2.f);
    for (auto& v : p.values) v = u(rng);
    for (auto& m : p.rolling_mean)
      for (auto& v : m) v = u(rng);
    for (auto& m : p.rolling_var)
      for (auto& v : m) v = 1.f + std::fabs(u(rng));
    p.seen = (int64_t(1) << 33) + 12345;  // needs the 64-bit field
    return p;
  }

  static void expect_identical(const Params& a, const Params& b) {
    ASSERT_EQ(a.values.size(), b.values.size());
    EXPECT_EQ(0, std::memcmp(a.values.data(), b.values.data(), a.values.size() * 4));
    ASSERT_EQ(a.rolling_mean.size(), b.rolling_mean.size());
    for (size_t l = 0; l < a.rolling_mean.size(); ++l) {
      ASSERT_EQ(a.rolling_mean[l].size(), b.rolling_mean[l].size());
      ASSERT_EQ(a.rolling_var[l].size(), b.rolling_var[l].size());
      if (a.rolling_mean[l].empty() && a.rolling_var[l].empty()) continue;  // memcmp of null pointers is undefined
      EXPECT_EQ(0, std::memcmp(a.rolling_mean[l].data(), b.rolling_mean[l].data(), a.rolling_mean[l].size() * 4));
      EXPECT_EQ(0, std::memcmp(a.rolling_var[l].data(), b.rolling_var[l].data(), a.rolling_var[l].size() * 4));
    }
    EXPECT_EQ(a.seen, b.seen);
  }

  static std::string read_all(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  static void write_all(const std::string& p, const std::string& bytes) {
    std::ofstream out(p, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), std::streamsize(bytes.size()));
  }

  // Loads and returns the error message; fails the test if nothing was thrown.
  std::string load_error(const NetSpec& net, const std::string& file) {
    Params p(net);
    try {
      load_weights(p, net, file);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "loading " << file << " did not throw";
    return "";
  }

  std::vector<std::string> leftovers() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(dir_))
      if (e.path().filename().string().find(".tmp.") != std::string::npos) out.push_back(e.path().string());
    return out;
  }

  NetSpec net_ = parse_net(kCfg, "weights_io.cfg");
  fs::path dir_;
};

TEST_F(WeightsIO, RoundTripIsBitIdentical) {
  const Params a = random_params(net_, 7);
  save_weights(a, net_, path("a.weights"));
  Params b(net_);
  init_params(b, net_, 99);
  load_weights(b, net_, path("a.weights"));
  expect_identical(a, b);
  // Saving what was loaded gives the same bytes.
  save_weights(b, net_, path("b.weights"));
  EXPECT_EQ(read_all(path("a.weights")), read_all(path("b.weights")));
}

TEST_F(WeightsIO, FileLayoutIsDarknets) {
  const Params a = random_params(net_, 3);
  save_weights(a, net_, path("a.weights"));
  const std::string bytes = read_all(path("a.weights"));
  ASSERT_EQ(int64_t(bytes.size()), 20 + kArrayBytes);
  int32_t ver[3];
  uint64_t seen;
  std::memcpy(ver, bytes.data(), 12);
  std::memcpy(&seen, bytes.data() + 12, 8);
  EXPECT_EQ(ver[0], 0);
  EXPECT_EQ(ver[1], 2);
  EXPECT_EQ(ver[2], 0);
  EXPECT_EQ(seen, uint64_t(a.seen));
  // Per layer: conv = biases, scales, rolling_mean, rolling_variance, weights; connected = biases, weights.
  std::vector<float> expect;
  auto add = [&](const float* p, int64_t n) { expect.insert(expect.end(), p, p + n); };
  const ParamSlice& c0 = a.slices[0];
  add(a.values.data() + c0.biases, 4);
  add(a.values.data() + c0.scales, 4);
  add(a.rolling_mean[0].data(), 4);
  add(a.rolling_var[0].data(), 4);
  add(a.values.data() + c0.weights, 108);
  const ParamSlice& c2 = a.slices[2];
  EXPECT_EQ(c2.scales, -1);
  add(a.values.data() + c2.biases, 5);
  add(a.values.data() + c2.weights, 20);
  const ParamSlice& fc = a.slices[3];
  add(a.values.data() + fc.biases, 6);
  add(a.values.data() + fc.weights, 600);
  ASSERT_EQ(int64_t(expect.size()) * 4, kArrayBytes);
  EXPECT_EQ(0, std::memcmp(bytes.data() + 20, expect.data(), size_t(kArrayBytes)));
}

TEST_F(WeightsIO, TruncatedFileNamesExpectedAndActualBytes) {
  const Params a = random_params(net_, 5);
  save_weights(a, net_, path("full.weights"));
  const std::string bytes = read_all(path("full.weights"));
  const int64_t full = int64_t(bytes.size());
  for (int64_t cut : {int64_t(0), int64_t(4), int64_t(12), int64_t(16), int64_t(19), int64_t(20), int64_t(21), full / 2,
                      full - 4, full - 1}) {
    SCOPED_TRACE("cut at " + std::to_string(cut));
    const std::string file = path("cut" + std::to_string(cut) + ".weights");
    write_all(file, bytes.substr(0, size_t(cut)));
    const std::string msg = load_error(net_, file);
    EXPECT_NE(msg.find(file), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(full)), std::string::npos) << "expected size missing: " << msg;
    EXPECT_NE(msg.find(std::to_string(cut)), std::string::npos) << "actual size missing: " << msg;
    EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
  }
}

TEST_F(WeightsIO, OversizedFileNamesExpectedAndActualBytes) {
  const Params a = random_params(net_, 5);
  save_weights(a, net_, path("full.weights"));
  const std::string bytes = read_all(path("full.weights"));
  const int64_t full = int64_t(bytes.size());
  for (size_t extra : {1u, 4u, 400u}) {
    const std::string file = path("big" + std::to_string(extra) + ".weights");
    write_all(file, bytes + std::string(extra, '\0'));
    const std::string msg = load_error(net_, file);
    EXPECT_NE(msg.find(file), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(full)), std::string::npos) << msg;
    EXPECT_NE(msg.find(std::to_string(full + int64_t(extra))), std::string::npos) << msg;
    EXPECT_NE(msg.find("oversized"), std::string::npos) << msg;
  }
}

TEST_F(WeightsIO, WeightsOfAnotherCfgAreRefused) {
  const Params a = random_params(net_, 5);
  save_weights(a, net_, path("a.weights"));
  NetSpec other =
      parse_net(std::string(kCfg).replace(std::string(kCfg).find("filters=4"), 9, "filters=6"), "other.cfg");
  const std::string msg = load_error(other, path("a.weights"));
  EXPECT_NE(msg.find("other.cfg"), std::string::npos) << msg;
  EXPECT_NE(msg.find(std::to_string(20 + kArrayBytes)), std::string::npos) << msg;
}

TEST_F(WeightsIO, OldSixteenByteHeaderLoads) {
  const Params a = random_params(net_, 11);
  save_weights(a, net_, path("new.weights"));
  const std::string bytes = read_all(path("new.weights"));
  // major=0 minor=1 revision=0, int32 seen, same arrays.
  const int32_t hdr[4] = {0, 1, 0, 4242};
  std::string old(reinterpret_cast<const char*>(hdr), 16);
  old += bytes.substr(20);
  write_all(path("old.weights"), old);
  Params b(net_);
  load_weights(b, net_, path("old.weights"));
  EXPECT_EQ(b.seen, 4242);
  Params expect = a;
  expect.seen = 4242;
  expect_identical(expect, b);
  // A version-0.1 file with the 20-byte layout is 4 bytes too long for its header.
  const int32_t v01[3] = {0, 1, 0};
  std::string wrong = bytes;
  std::memcpy(wrong.data(), v01, 12);
  write_all(path("wrong.weights"), wrong);
  const std::string msg = load_error(net_, path("wrong.weights"));
  EXPECT_NE(msg.find(std::to_string(16 + kArrayBytes)), std::string::npos) << msg;
}

TEST_F(WeightsIO, MajorOrMinorAbove1000MeansNarrowSeen) {
  // Darknet reads a 32-bit seen whenever major or minor >= 1000.
  const Params a = random_params(net_, 13);
  save_weights(a, net_, path("new.weights"));
  const std::string bytes = read_all(path("new.weights"));
  const int32_t hdr[4] = {0, 1001, 0, 77};
  std::string f(reinterpret_cast<const char*>(hdr), 16);
  f += bytes.substr(20);
  write_all(path("t.weights"), f);
  Params b(net_);
  // Such files also hold connected weights as [in][out]; Darknet transposes them on load.
  load_weights(b, net_, path("t.weights"));
  EXPECT_EQ(b.seen, 77);
  bool saw_connected = false;
  for (const auto& l : net_.layers) {
    if (!l.has_params()) continue;
    const ParamSlice& s = a.slices[l.index];
    for (int64_t k = 0; k < s.n_out; ++k) EXPECT_EQ(b.values[size_t(s.biases + k)], a.values[size_t(s.biases + k)]);
    if (!l.is(kConnectedKind)) {
      for (int64_t k = 0; k < s.n_weights; ++k)
        EXPECT_EQ(b.values[size_t(s.weights + k)], a.values[size_t(s.weights + k)]);
      continue;
    }
    saw_connected = true;
    const int64_t outs = l.connected().outputs, ins = l.in.size();
    for (int64_t o = 0; o < outs; ++o)
      for (int64_t i = 0; i < ins; ++i)
        ASSERT_EQ(b.values[size_t(s.weights + o * ins + i)], a.values[size_t(s.weights + i * outs + o)]);
  }
  EXPECT_TRUE(saw_connected) << "the test net needs a [connected] layer";
}

// Found by fuzz_weights: major * 10 + minor overflowed int for a header of arbitrary bytes
// (undefined behaviour; scripts/sanitize.sh runs this under UBSan). Such a header is narrow
// (major >= 1000) and the file is then judged by its size like any other.
TEST_F(WeightsIO, HugeVersionNumbersAreRefusedBySize) {
  const Params a = random_params(net_, 17);
  save_weights(a, net_, path("new.weights"));
  const std::string bytes = read_all(path("new.weights"));
  const int32_t hdr[3] = {2147483647, 2147483647, 0};
  std::string f = bytes;
  std::memcpy(f.data(), hdr, 12);
  write_all(path("huge.weights"), f);
  const std::string msg = load_error(net_, path("huge.weights"));
  EXPECT_NE(msg.find(std::to_string(16 + kArrayBytes)), std::string::npos) << msg;
}

TEST_F(WeightsIO, MissingFileNamesIt) {
  const std::string msg = load_error(net_, path("nope.weights"));
  EXPECT_NE(msg.find(path("nope.weights")), std::string::npos) << msg;
}

TEST_F(WeightsIO, SaveIntoMissingDirectoryThrowsAndLeavesNoFile) {
  const Params a = random_params(net_, 1);
  const std::string file = path("no/such/dir/a.weights");
  try {
    save_weights(a, net_, file);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path("no/such/dir/a.weights")), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(file));
  EXPECT_FALSE(fs::exists(path("no")));
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(WeightsIO, SaveOverExistingFileReplacesItAtomically) {
  const std::string file = path("a.weights");
  write_all(file, "old contents that are not a weights file");
  // A second hard link to the old file: an in-place rewrite would change what it shows,
  // a rename into place leaves it alone.
  ASSERT_EQ(0, ::link(file.c_str(), path("old_link").c_str()));
  struct stat before {};
  ASSERT_EQ(0, ::stat(file.c_str(), &before));

  const Params a = random_params(net_, 2);
  save_weights(a, net_, file);
  struct stat after {};
  ASSERT_EQ(0, ::stat(file.c_str(), &after));
  EXPECT_NE(before.st_ino, after.st_ino) << "file was rewritten in place, not renamed into place";
  EXPECT_EQ(read_all(path("old_link")), "old contents that are not a weights file");
  EXPECT_EQ(int64_t(fs::file_size(file)), 20 + kArrayBytes);
  Params b(net_);
  load_weights(b, net_, file);
  expect_identical(a, b);
  EXPECT_TRUE(leftovers().empty());

  // Saving again over our own file works the same way.
  Params c = random_params(net_, 3);
  save_weights(c, net_, file);
  load_weights(b, net_, file);
  expect_identical(c, b);
  EXPECT_TRUE(leftovers().empty());
}

TEST_F(WeightsIO, SaveOntoADirectoryFailsAndCleansUp) {
  fs::create_directories(path("adir/inner"));
  const Params a = random_params(net_, 2);
  EXPECT_THROW(save_weights(a, net_, path("adir")), Error);
  EXPECT_TRUE(fs::is_directory(path("adir/inner")));
  EXPECT_TRUE(leftovers().empty());
}

// Params::unfilled (the parameters another process keeps): loading and initialising leave
// them zero and give every other value exactly what a whole load or initialisation gives.
// Ranges inside an array, across arrays of two layers, and at the very end.
std::vector<std::pair<int64_t, int64_t>> some_unfilled(const Params& p) {
  const ParamSlice& conv0 = p.slices[0];
  const ParamSlice& conv2 = p.slices[2];
  return {{conv0.weights + 10, conv0.weights + 50}, {conv2.biases + 2, p.slices[3].weights + 7},
          {p.size() - 100, p.size()}};
}

void expect_filled_but(const ZeroPageFloats& got, const ZeroPageFloats& whole,
                       const std::vector<std::pair<int64_t, int64_t>>& unfilled) {
  ASSERT_EQ(got.size(), whole.size());
  size_t r = 0;
  int64_t zeros = 0;
  for (int64_t i = 0; i < int64_t(got.size()); ++i) {
    while (r < unfilled.size() && unfilled[r].second <= i) ++r;
    const bool left = r < unfilled.size() && i >= unfilled[r].first;
    zeros += left;
    ASSERT_EQ(got[size_t(i)], left ? 0.f : whole[size_t(i)]) << "value " << i;
  }
  EXPECT_GT(zeros, 100);
}

TEST_F(WeightsIO, UnfilledRangesStayZeroAndTheRestLoadsAsAWholeLoad) {
  const Params a = random_params(net_, 21);
  save_weights(a, net_, path("a.weights"));
  Params b(net_);
  b.unfilled = some_unfilled(b);
  load_weights(b, net_, path("a.weights"));
  expect_filled_but(b.values, a.values, b.unfilled);
  EXPECT_EQ(b.seen, a.seen);

  // A file with [in][out] connected weights (major above 1000), the range inside them.
  const std::string bytes = read_all(path("a.weights"));
  const int32_t hdr[4] = {0, 1001, 0, 77};
  write_all(path("t.weights"), std::string(reinterpret_cast<const char*>(hdr), 16) + bytes.substr(20));
  Params whole(net_), part(net_);
  load_weights(whole, net_, path("t.weights"));
  part.unfilled = some_unfilled(part);
  load_weights(part, net_, path("t.weights"));
  expect_filled_but(part.values, whole.values, part.unfilled);
}

TEST_F(WeightsIO, UnfilledRangesStayZeroAndTheRestInitialisesAsAWhole) {
  Params whole(net_), part(net_);
  init_params(whole, net_, 5);
  part.unfilled = some_unfilled(part);
  init_params(part, net_, 5);
  expect_filled_but(part.values, whole.values, part.unfilled);
}

// What the ranges are for: their pages are never written, so they hold no memory. (Loading
// reads them, to check that every value is finite: that maps the kernel's zero page, which
// the resident set does not count, so mincore() would say resident; the resident set is
// what counts.) 9 MB of weights left unfilled, all but 8 KB.
int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0, resident = 0;
  statm >> size >> resident;
  return resident * int64_t(sysconf(_SC_PAGESIZE));
}

TEST_F(WeightsIO, UnfilledPagesAreNeverResident) {
  const NetSpec big = parse_net(
      "[net]\nbatch=1\nwidth=8\nheight=8\nchannels=512\n"
      "[convolutional]\nfilters=512\nsize=3\npad=1\nactivation=linear\n[cost]\n",
      "big.cfg");
  {
    Params all(big);
    init_params(all, big, 3);
    save_weights(all, big, path("big.weights"));
  }
  for (const bool from_file : {false, true}) {
    Params p(big);
    const int64_t w = p.slices[0].weights;
    p.unfilled = {{w + 1000, p.size() - 1000}};
    const int64_t before = resident_bytes();
    if (from_file)
      load_weights(p, big, path("big.weights"));
    else
      init_params(p, big, 3);
    const int64_t grew = resident_bytes() - before, whole = p.size() * 4;
    EXPECT_LT(grew, whole / 4) << "resident set grew by " << grew << " bytes for " << whole
                               << " bytes of parameters, all but 8 KB left unfilled"
                               << (from_file ? " (loaded)" : " (drawn)");
    EXPECT_NE(p.values[size_t(w + 999)], 0.f);
    EXPECT_NE(p.values[size_t(p.size() - 1)], 0.f);
  }
}

}  // namespace
}  // namespace tt
