// Hostile input (issue 31): the built binary fed pictures, lists, labels, .data files, cfgs,
// weights and output paths that are wrong in every way we could think of. Each case must
// end with an exit status below 128 (2: a tt::Error), a message naming what is wrong and
// where (file, line, layer), never "internal error", and no file that existed before the
// run lost or changed (every file of the test's folder is compared byte for byte).
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "cli_runner.hpp"
#include "data/image.hpp"
#include "detect/detection_picture.hpp"
#include "model/net_spec.hpp"
#include "model/params.hpp"
#include "test_util.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;
using cli::Result;
using cli::slurp;

// A detector small enough that every run here takes a fraction of a second: 32x32x3 input,
// one strided convolution, a 1x1 convolution into a [region] of 2 anchors and 2 classes.
const char* kTinyDetector =
    "[net]\nbatch=2\nwidth=32\nheight=32\nchannels=3\n"                                           // lines 1-5
    "[convolutional]\nbatch_normalize=1\nfilters=4\nsize=3\nstride=2\npad=1\nactivation=leaky\n"  // 6-12
    "[convolutional]\nfilters=14\nsize=1\nactivation=linear\n"                                    // 13-16
    "[region]\nanchors=1,1, 2,2\nclasses=2\nnum=2\ncoords=4\nsoftmax=1\n";                        // 17-22

// CRC-32 of PNG chunks (stb does not check it; a real PNG has it right all the same).
uint32_t crc32_of(const std::string& bytes) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}

std::string be32(uint32_t v) { return {char(v >> 24), char((v >> 16) & 0xff), char((v >> 8) & 0xff), char(v & 0xff)}; }

std::string png_chunk(const std::string& type, const std::string& data) {
  return be32(uint32_t(data.size())) + type + data + be32(crc32_of(type + data));
}

// The first bytes of a w x h RGB PNG: signature, header and the start of its data, as a
// 250 KB PNG of a flat 16000 x 16000 picture begins. Decoding it would need gigabytes;
// reading its header, a few bytes.
std::string png_header_only(uint32_t w, uint32_t h) {
  const std::string ihdr = be32(w) + be32(h) + std::string{8, 2, 0, 0, 0};
  return std::string("\x89PNG\r\n\x1a\n", 8) + png_chunk("IHDR", ihdr) + png_chunk("IDAT", std::string(64, '\0'));
}

class Hostile : public cli::Cli {
 protected:
  // Writes `text` at `name` (folders made as needed).
  std::string put(const std::string& name, const std::string& text) const {
    fs::create_directories(fs::path(path(name)).parent_path());
    return write(name, text);
  }

  // A w x h PNG of noise at `name` (whatever its extension: stb reads by content).
  std::string picture(const std::string& name, int w, int h, uint64_t seed = 1) const {
    fs::create_directories(fs::path(path(name)).parent_path());
    Image im(w, h, 3);
    for (auto& v : im.data) {
      seed = seed * 6364136223846793005ULL + 1442695040888963407ULL;
      v = float(seed >> 56) / 255.f;
    }
    save_png(im, path(name));
    return path(name);
  }

  // images/SUB/NAME.png and its label labels/SUB/NAME.txt (Darknet's path rule).
  std::string labelled(const std::string& sub, const std::string& name, int w = 40, int h = 30,
                       const std::string& label = "0 0.5 0.5 0.4 0.3\n1 0.3 0.6 0.2 0.2\n") const {
    put("labels/" + sub + "/" + name + ".txt", label);
    return picture("images/" + sub + "/" + name + ".png", w, h, std::hash<std::string>{}(name));
  }

  std::string cfg() const { return write("tiny.cfg", kTinyDetector); }

  // A .data file over list files of the given pictures (train= always, valid= if any).
  std::string data_file(const std::vector<std::string>& train, const std::vector<std::string>& valid = {},
                        const std::string& name = "set.data") const {
    std::string t, v;
    for (const auto& p : train) t += p + "\n";
    for (const auto& p : valid) v += p + "\n";
    put("train.txt", t);
    put("names.txt", "first\nsecond\n");
    std::string data = "classes=2\ntrain=train.txt\nnames=names.txt\n";
    if (!valid.empty()) {
      put("valid.txt", v);
      data += "valid=valid.txt\n";
    }
    return put(name, data);
  }

  // Darknet .weights for `cfg`, freshly initialised (no training run needed).
  std::string weights(const std::string& cfg_path, const std::string& name) const {
    const NetSpec net = load_net(cfg_path);
    Params p(net);
    init_params(p, net, 7);
    save_weights(p, net, path(name));
    return path(name);
  }

  // Every file of the test's folder (but the captured output) and its bytes.
  std::map<std::string, std::string> snapshot() const {
    std::map<std::string, std::string> s;
    for (const auto& e : fs::recursive_directory_iterator(dir_)) {
      const std::string name = e.path().filename().string();
      if (e.is_regular_file() && name != "stdout" && name != "stderr") s[e.path().string()] = slurp(e.path());
    }
    return s;
  }

  // Every file of `before` is still there with the same bytes (but those in `changed`,
  // which must still exist), and no temporary file is left behind.
  void expect_kept(const std::map<std::string, std::string>& before, std::initializer_list<std::string> changed = {}) {
    for (const auto& [p, bytes] : before) {
      bool may_change = false;
      for (const auto& c : changed) may_change |= p == path(c);
      ASSERT_TRUE(fs::exists(p)) << p << " was deleted";
      if (!may_change) {
        EXPECT_TRUE(slurp(p) == bytes) << p << " was changed";
      }
    }
    for (const auto& e : fs::recursive_directory_iterator(dir_))
      EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << "left behind: " << e.path();
  }

  // A PNG whose header and chunks read but whose image data does not decode (the zlib
  // header of its compressed data names no known method): it fails only when decoded.
  static std::string undecodable(std::string png) {
    const size_t idat = png.find("IDAT");
    EXPECT_NE(idat, std::string::npos);
    png[idat + 4] = png[idat + 5] = '\xff';
    return png;
  }

  // A refusal: exit status 2 (a tt::Error, not a signal, not an internal error) and a
  // message holding every one of `words`.
  static void expect_refused(const Result& r, std::initializer_list<std::string> words) {
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_CONTAINS(r.err, "tiletrain: error:");
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
    for (const auto& w : words) EXPECT_CONTAINS(r.err, w);
  }
};

// Case 1: a 200x3 picture letterboxes to a 1-pixel-high image (Darknet's resize divides by
// h - 1): detect died with SIGSEGV; listed in valid= it killed train after training, with
// --save-weights never written. Now every shape of picture works, 1 x 1 included.
TEST_F(Hostile, OnePixelSidesLetterboxAndValidate) {
  const std::string net = cfg(), w = weights(net, "w.weights");
  for (const auto& [name, wh] : std::vector<std::pair<std::string, std::pair<int, int>>>{
           {"wide.png", {200, 3}}, {"tall.png", {3, 200}}, {"line.png", {200, 1}}, {"dot.png", {1, 1}}})
    picture(name, wh.first, wh.second);
  const Result d =
      run("detect --cfg tiny.cfg --weights w.weights --thresh 0.0001 --out pics wide.png tall.png "
          "line.png dot.png");
  ASSERT_EQ(d.code, 0) << d.err;
  EXPECT_CONTAINS(d.out, "wide.png: 200x3");
  EXPECT_CONTAINS(d.out, "line.png: 200x1");
  EXPECT_CONTAINS(d.out, "dot.png: 1x1");
  for (const char* p : {"pics/wide.png", "pics/tall.png", "pics/line.png", "pics/dot.png"})
    EXPECT_EQ(slurp(path(p)).substr(1, 3), "PNG") << p;

  // The same pictures in valid=: training ends, the weights are saved, the mAP is printed.
  const std::string data =
      data_file({labelled("train", "a"), labelled("train", "b")},
                {labelled("valid", "wide", 200, 3), labelled("valid", "line", 200, 1), labelled("valid", "dot", 1, 1)});
  const Result t = run("train --cfg tiny.cfg --data set.data --steps 1 --save-weights s.weights");
  ASSERT_EQ(t.code, 0) << t.err;
  EXPECT_CONTAINS(t.out, "saved s.weights");
  EXPECT_CONTAINS(t.out, "VOC mAP@0.5 on 3 pictures");
  EXPECT_EQ(fs::file_size(path("s.weights")), fs::file_size(w));
  EXPECT_EQ(run("map --cfg tiny.cfg --weights s.weights --data set.data").code, 0);
}

// Case 1, the other half: whatever happens in the evaluation after training, the trained
// weights are on disk first. A valid= picture whose header reads (checked before training)
// but whose data does not decode fails only when decoded: the run then stops naming it, with the
// weights saved; under --skip-bad-images it is left out of the mAP with a warning.
TEST_F(Hostile, EvaluationAfterTrainingCannotLoseTheWeights) {
  cfg();
  const std::string good = labelled("valid", "good");
  const std::string cut = labelled("valid", "cut", 64, 64);
  const std::string png = slurp(cut);
  write("images/valid/cut.png", undecodable(png));
  data_file({labelled("train", "a"), labelled("train", "b")}, {good, cut});
  write("s.weights", "an older file, to be replaced by the trained weights");
  const auto before = snapshot();
  const Result r = run("train --cfg tiny.cfg --data set.data --steps 1 --save-weights s.weights");
  expect_refused(r, {"cut.png"});
  EXPECT_CONTAINS(r.out, "saved s.weights");
  expect_kept(before, {"s.weights"});
  EXPECT_EQ(fs::file_size(path("s.weights")), fs::file_size(weights(path("tiny.cfg"), "expected.weights")));
  EXPECT_EQ(run("map --cfg tiny.cfg --weights s.weights --data set.data").code, 2);  // the same picture

  const Result skip = run("train --cfg tiny.cfg --data set.data --steps 1 --save-weights s2.weights --skip-bad-images");
  EXPECT_EQ(skip.code, 0) << skip.err;
  EXPECT_CONTAINS(skip.err, "warning");
  EXPECT_CONTAINS(skip.err, "cut.png");
  EXPECT_CONTAINS(skip.out, "VOC mAP@0.5 on 1 pictures");
  EXPECT_TRUE(fs::exists(path("s2.weights")));
}

// Case 2: a [route] with an empty layers= was a SIGSEGV. Every list-valued key, empty or
// garbage, is named with its file and line.
TEST_F(Hostile, ListValuedKeysEmptyOrGarbage) {
  const std::string net = "[net]\nbatch=1\nwidth=16\nheight=16\nchannels=3\n";                      // lines 1-5
  const std::string conv = "[convolutional]\nfilters=14\nsize=1\nactivation=linear\n";              // 6-9
  const std::string steps_net = "[net]\nbatch=1\nwidth=16\nheight=16\nchannels=3\npolicy=steps\n";  // 1-6
  struct Case {
    std::string cfg, words;
    int line;
  };
  const std::vector<Case> cases = {
      {net + conv + "[route]\nlayers =\n[cost]\n", "'layers' has no value", 11},
      {net + conv + "[route]\nlayers=,\n[cost]\n", "'layers' has an empty entry", 11},
      {net + conv + "[route]\nlayers=-1,,0\n[cost]\n", "empty entry (number 2)", 11},
      {net + conv + "[route]\nlayers=abc\n[cost]\n", "not a number", 11},
      {net + conv + "[route]\nlayers=1e300\n[cost]\n", "out of range", 11},
      {net + conv + "[route]\nlayers=99999999999\n[cost]\n", "not an earlier layer", 11},
      {net + conv + "[route]\nlayers=-99999999999\n[cost]\n", "not an earlier layer", 11},
      {net + conv + "[region]\nnum=2\nclasses=2\nanchors=\n", "'anchors' has no value", 13},
      {net + conv + "[region]\nnum=2\nclasses=2\nanchors=1,1,x,1\n", "not a number", 13},
      {net + conv + "[region]\nnum=2\nclasses=2\nanchors=1,1,nan,1\n", "not a number", 13},
      {net + conv + "[yolo]\nnum=2\nclasses=2\nmask=\n", "'mask' has no value", 13},
      {net + conv + "[yolo]\nnum=2\nclasses=2\nmask=0,,1\n", "empty entry", 13},
      {net + conv + "[yolo]\nnum=2\nclasses=2\nmask=1e10\n", "mask entry 1e+10", 13},
      {steps_net + "steps=\nscales=.1\n" + conv + "[cost]\n", "'steps' has no value", 7},
      {steps_net + "steps=1e12\nscales=.1\n" + conv + "[cost]\n", "steps entry 1e+12", 7},
      {steps_net + "steps=1.5\nscales=.1\n" + conv + "[cost]\n", "steps entry 1.5", 7},
      {steps_net + "steps=100\nscales=\n" + conv + "[cost]\n", "'scales' has no value", 8},
      {steps_net + "steps=100\nscales=x\n" + conv + "[cost]\n", "not a number", 8},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.cfg);
    write("bad.cfg", c.cfg);
    expect_refused(run("info --cfg bad.cfg"), {"bad.cfg:" + std::to_string(c.line) + ":", c.words});
  }
  // train with such a cfg writes nothing, and an existing output is left alone
  write("bad.cfg", cases[0].cfg);
  write("out.weights", "keep");
  const auto before = snapshot();
  expect_refused(run("train --cfg bad.cfg --steps 1 --save-weights out.weights"), {"bad.cfg:11:"});
  expect_kept(before);
}

// Case 5 (cfg side): numbers out of what a device can hold are refused with file and line
// before anything is allocated.
TEST_F(Hostile, CfgNumbersOutOfRange) {
  auto net = [](const std::string& batch, const std::string& width, const std::string& channels) {
    return "[net]\nbatch=" + batch + "\nwidth=" + width + "\nheight=16\nchannels=" + channels + "\n";  // 1-5
  };
  const std::string ok = net("1", "16", "3");
  struct Case {
    std::string cfg, words;
    int line;
  };
  const std::vector<Case> cases = {
      {ok + "[convolutional]\nfilters=99999999999\nsize=3\n[cost]\n", "'filters' is out of range", 7},
      {ok + "[convolutional]\nfilters=4\nsize=-3\n[cost]\n", "'size' must be > 0", 8},
      {ok + "[convolutional]\nfilters=2000000\nsize=1\n[cost]\n", "larger than 1048576", 7},
      {ok + "[convolutional]\nfilters=4\nsize=100000\n[cost]\n", "larger than 65536", 8},
      {net("0", "16", "3") + "[convolutional]\nfilters=4\n[cost]\n", "'batch' must be > 0", 2},
      {net("100000", "16", "3") + "[convolutional]\nfilters=4\n[cost]\n", "'batch' = 100000 is larger", 2},
      {net("1", "1e9", "3") + "[convolutional]\nfilters=4\n[cost]\n", "'width' = 1000000000 is larger than 65536", 3},
      {net("1", "16", "2000000") + "[convolutional]\nfilters=4\n[cost]\n", "'channels' = 2000000", 5},
      {net("1", "16", "1e30") + "[convolutional]\nfilters=4\n[cost]\n", "out of range", 5},
      {ok + "[convolutional]\nfilters=4\nsize=1\n[upsample]\nstride=60000\n[cost]\n", "[upsample] (layer 1)", 9},
      {ok + "[convolutional]\nfilters=1048576\nsize=1\n[upsample]\nstride=64\n[cost]\n", "values per picture", 9},
      {ok + "[connected]\noutput=1000000\n[connected]\noutput=1000000\n[cost]\n", "weights, more than", 8},
      {ok + "[convolutional]\nfilters=4\nsize=1\n[region]\nclasses=2000000\n", "'classes' = 2000000", 10},
      {ok + "[convolutional]\nfilters=4\nsize=1\n[region]\nnum=100000\n", "'num' = 100000", 10},
      {ok + "[convolutional]\nfilters=4\nsize=1\n[yolo]\nmax=1e9\n", "'max' = 1000000000", 10},
      {net("1", "16", "3") + "learning_rate=1e39\n[convolutional]\nfilters=4\n[cost]\n", "out of range", 6},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.cfg);
    write("big.cfg", c.cfg);
    expect_refused(run("info --cfg big.cfg"), {"big.cfg:" + std::to_string(c.line) + ":", c.words});
  }
  expect_refused(run("info --cfg '" + test::source_dir() + "/cfgs/small-classifier.cfg' --size 100000x100000"),
                 {"100000x100000", "larger than a device can hold"});
  fs::create_directories(path("folder.cfg"));
  expect_refused(run("info --cfg folder.cfg"), {"folder.cfg", "folder"});
}

// Case 3: a Fashion-MNIST folder with fewer pictures than the batch ended in SIGFPE (no
// step per epoch). The IDX reader also refuses headers that promise more than the file holds.
TEST_F(Hostile, FashionMnistFolderSmallerThanTheBatch) {
  auto idx = [&](const std::string& folder, int n, int rows, int cols, int test_rows) {
    auto images = [&](int count, int r) {
      return be32(0x803) + be32(uint32_t(count)) + be32(uint32_t(r)) + be32(uint32_t(cols)) +
             std::string(size_t(count) * r * cols, '\x40');
    };
    const std::string labels = be32(0x801) + be32(uint32_t(n)) + std::string(size_t(n), '\x03');
    // plain IDX under the .gz names: the reader (zlib) reads plain files too
    put(folder + "/train-images-idx3-ubyte.gz", images(n, rows));
    put(folder + "/train-labels-idx1-ubyte.gz", labels);
    put(folder + "/t10k-images-idx3-ubyte.gz", images(n, test_rows));
    put(folder + "/t10k-labels-idx1-ubyte.gz", labels);
  };
  const std::string net = test::source_dir() + "/cfgs/fashion-mnist.cfg";  // batch=64
  idx("few", 3, 28, 28, 28);
  write("out.weights", "keep");
  auto before = snapshot();
  expect_refused(run("train --cfg '" + net + "' --data few --save-weights out.weights"),
                 {"few/train-images-idx3-ubyte.gz", "3 training pictures", "batch of 64"});
  expect_kept(before);
  const Result small = run("train --cfg '" + net + "' --data few --batch 2 --steps 1 --save-weights small.weights");
  EXPECT_EQ(small.code, 0) << small.err;

  idx("other", 3, 28, 28, 20);  // test pictures of another size than the training ones
  expect_refused(run("train --cfg '" + net + "' --data other --batch 2"), {"t10k-images-idx3-ubyte.gz", "20x28"});
  // a header promising a billion pictures in a file of a few bytes
  put("liar/train-images-idx3-ubyte.gz", be32(0x803) + be32(1u << 30) + be32(28) + be32(28) + std::string(100, 'x'));
  put("liar/train-labels-idx1-ubyte.gz", be32(0x801) + be32(1u << 30));
  expect_refused(run("train --cfg '" + net + "' --data liar --batch 2"), {"liar/train-images-idx3-ubyte.gz", "bytes"});
  put("huge/train-images-idx3-ubyte.gz", be32(0x803) + be32(5) + be32(70000) + be32(70000));
  expect_refused(run("train --cfg '" + net + "' --data huge --batch 2"), {"huge/train-images-idx3-ubyte.gz", "70000"});
  fs::create_directories(path("dir/train-images-idx3-ubyte.gz"));
  expect_refused(run("train --cfg '" + net + "' --data dir --batch 2"), {"dir/train-images-idx3-ubyte.gz", "folder"});
  expect_refused(run("train --cfg '" + net + "' --data nowhere --batch 2"), {"nowhere/train-images-idx3-ubyte.gz"});
}

// Case 4: a 250 KB PNG of 16000 x 16000 pixels took 3.8 GB to decode. Now its header is
// read first and the picture refused (named) above --max-pixels, or skipped with a warning
// under --skip-bad-images.
TEST_F(Hostile, HugePictureRefusedFromItsHeader) {
  const std::string net = cfg();
  weights(net, "w.weights");
  put("images/train/huge.png", png_header_only(16000, 16000));
  put("labels/train/huge.txt", "0 0.5 0.5 0.2 0.2\n");
  const std::string small = picture("small.png", 20, 20);
  Result r = run("detect --cfg tiny.cfg --weights w.weights images/train/huge.png");
  expect_refused(r, {"images/train/huge.png", "16000x16000", "--max-pixels", "16777216"});
  EXPECT_EQ(r.out.find("huge.png:"), std::string::npos) << r.out;
  // the flag sets the limit
  expect_refused(run("detect --cfg tiny.cfg --weights w.weights --max-pixels 399 small.png"),
                 {"small.png", "20x20 = 400 pixels", "399"});
  EXPECT_EQ(run("detect --cfg tiny.cfg --weights w.weights --max-pixels 400 small.png").code, 0);
  // in a training list: named with the list's line, before any training; or skipped
  data_file({labelled("train", "a"), path("images/train/huge.png"), labelled("train", "b")});
  write("out.weights", "keep");
  const auto before = snapshot();
  r = run("train --cfg tiny.cfg --data set.data --steps 1 --save-weights out.weights");
  expect_refused(r, {"train.txt:2:", "huge.png", "16000x16000", "--skip-bad-images"});
  EXPECT_EQ(r.out.find("training "), std::string::npos) << r.out;
  expect_kept(before);
  r = run("train --cfg tiny.cfg --data set.data --steps 1 --skip-bad-images --save-weights s.weights");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.err, "warning: skipping");
  EXPECT_CONTAINS(r.err, "huge.png");
  EXPECT_CONTAINS(r.err, "skipped 1 of 3 pictures");
  // the limit is every data command's
  data_file({labelled("train", "a")}, {path("images/train/huge.png")}, "v.data");
  expect_refused(run("map --cfg tiny.cfg --weights w.weights --data v.data"), {"valid.txt:1:", "huge.png"});
  for (const char* cmd : {"train", "detect", "map"})
    EXPECT_CONTAINS(run(std::string(cmd) + " --help").out, "--max-pixels");
}

// Case 5: the .data file and its lists are checked before any training: each bad one named
// with file and line, no training line printed, the existing --save-weights file untouched.
TEST_F(Hostile, DataFileCheckedBeforeTraining) {
  cfg();
  const std::string a = labelled("train", "a"), b = labelled("train", "b");
  data_file({a, b});
  put("names3.txt", "x\ny\nz\n");
  write("out.weights", "keep");
  struct Case {
    std::string data;
    std::vector<std::string> words;
  };
  const std::vector<Case> cases = {
      {"classes=2\ntrain train.txt\nnames=names.txt\n", {"d.data:2:", "key=value"}},
      {"classes=0\ntrain=train.txt\nnames=names.txt\n", {"d.data:1:", "classes must be"}},
      {"classes=abc\ntrain=train.txt\nnames=names.txt\n", {"d.data:1:", "'abc'"}},
      {"classes=99999999999999999999\ntrain=train.txt\nnames=names.txt\n", {"d.data:1:", "99999999999999999999"}},
      {"classes=3\ntrain=train.txt\nnames=names3.txt\n", {"tiny.cfg:17:", "classes=2", "d.data:1", "classes=3"}},
      {"classes=2\ntrain=train.txt\n", {"d.data", "no names="}},
      {"classes=2\nnames=names.txt\n", {"d.data", "no train="}},
      {"classes=2\ntrain=train.txt\nnames=nowhere.names\n", {"d.data:3:", "nowhere.names", "no such file"}},
      {"classes=2\ntrain=nowhere.txt\nnames=names.txt\n", {"d.data:2:", "nowhere.txt", "no such file"}},
      {"classes=2\ntrain=images\nnames=names.txt\n", {"d.data:2:", "images", "folder"}},
      {"classes=2\ntrain=train.txt\nnames=names.txt\nvalid=gone.txt\n", {"d.data:4:", "gone.txt"}},
      {"classes=2\ntrain=train.txt\ntrain=train.txt\nnames=names.txt\n", {"d.data:3:", "given twice"}},
      {"classes=2\ntrain=\nnames=names.txt\n", {"d.data:2:", "no value"}},
      {"classes=2\ntrain=train.txt\nnames=names3.txt\n", {"names3.txt", "3 class names", "d.data:1"}},
  };
  const auto before = snapshot();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.data);
    write("d.data", c.data);
    const Result r = run("train --cfg tiny.cfg --data d.data --steps 1 --save-weights out.weights --checkpoint ck");
    expect_refused(r, {});
    for (const auto& w : c.words) EXPECT_CONTAINS(r.err, w);
    EXPECT_EQ(r.out.find("training "), std::string::npos) << r.out;
    EXPECT_FALSE(fs::exists(path("ck"))) << "a checkpoint folder made before the data was checked";
  }
  fs::remove(path("d.data"));
  expect_kept(before);
  expect_refused(run("train --cfg tiny.cfg --data missing.data --steps 1"), {"missing.data", "no such file"});
  fs::create_directories(path("folder.data"));
  expect_refused(run("train --cfg tiny.cfg --data folder.data --steps 1"), {"folder.data", "folder"});
  expect_refused(run("map --cfg tiny.cfg --weights " + weights(path("tiny.cfg"), "w.weights") + " --data set.data"),
                 {"set.data", "no valid="});
}

// Case 5: every listed picture and its label are checked before any training, the valid=
// ones too: a missing picture, a picture that is not one, an empty one, a folder, a missing
// or bad label (class, NaN, field count), an extension without a label rule, an empty list.
TEST_F(Hostile, ListedPicturesAndLabelsCheckedBeforeTraining) {
  cfg();
  const std::string a = labelled("train", "a"), b = labelled("train", "b");
  write("out.weights", "keep");
  struct Case {
    std::string name;
    std::vector<std::string> words;
    bool valid = false;  // in valid= rather than train=
  };
  // Each case: a third picture images/train/NAME (made below) after a and b.
  const std::vector<Case> cases = {
      {"missing.png", {"train.txt:3:", "missing.png", "No such file"}},
      {"text.png", {"train.txt:3:", "text.png", "cannot read image"}},
      {"empty.png", {"train.txt:3:", "empty.png", "empty"}},
      {"folder.png", {"train.txt:3:", "folder.png", "folder"}},
      {"nolabel.png", {"missing label file", "labels/train/nolabel.txt"}},
      {"badclass.png", {"labels/train/badclass.txt:2:", "class 5"}},
      {"nan.png", {"labels/train/nan.txt:1:", "'nan' is not a number"}},
      {"inf.png", {"labels/train/inf.txt:1:", "is not a number"}},
      {"fields.png", {"labels/train/fields.txt:1:", "3 fields"}},
      {"outside.png", {"labels/train/outside.txt:1:", "outside [0, 1]"}},
      {"labeldir.png", {"labels/train/labeldir.txt", "folder"}},
      {"pic.bmp", {"train.txt:3:", "no label file", "pic.bmp"}},
      {"missing.png", {"valid.txt:2:", "missing.png"}, true},
      {"nan.png", {"labels/train/nan.txt:1:", "'nan'"}, true},
  };
  put("images/train/text.png", "this is not a picture\n");
  put("labels/train/text.txt", "0 0.5 0.5 0.2 0.2\n");
  put("images/train/empty.png", "");
  put("labels/train/empty.txt", "0 0.5 0.5 0.2 0.2\n");
  fs::create_directories(path("images/train/folder.png"));
  picture("images/train/nolabel.png", 20, 20);
  labelled("train", "badclass", 20, 20, "0 0.5 0.5 0.2 0.2\n5 0.5 0.5 0.2 0.2\n");
  labelled("train", "nan", 20, 20, "0 nan 0.5 0.2 0.2\n");
  labelled("train", "inf", 20, 20, "0 0.5 inf 0.2 0.2\n");
  labelled("train", "fields", 20, 20, "0 0.5 0.5\n");
  labelled("train", "outside", 20, 20, "1 0.5 0.5 1.5 0.2\n");
  picture("images/train/labeldir.png", 20, 20);
  fs::create_directories(path("labels/train/labeldir.txt"));
  picture("images/train/pic.bmp", 20, 20);
  const auto before = snapshot();
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name + (c.valid ? " in valid=" : ""));
    const std::string p = path("images/train/" + c.name);
    if (c.valid)
      data_file({a, b}, {a, p});
    else
      data_file({a, b, p});
    const Result r = run("train --cfg tiny.cfg --data set.data --steps 1 --save-weights out.weights");
    expect_refused(r, {});
    for (const auto& w : c.words) EXPECT_CONTAINS(r.err, w);
    EXPECT_EQ(r.out.find("training "), std::string::npos) << r.out;
  }
  expect_kept(before, {"train.txt", "valid.txt", "set.data", "names.txt"});
  // a picture that cannot be read is left out under --skip-bad-images; a bad label is not
  data_file({a, path("images/train/text.png"), path("images/train/empty.png"), b});
  Result r = run("train --cfg tiny.cfg --data set.data --steps 1 --skip-bad-images");
  EXPECT_EQ(r.code, 0) << r.err;
  EXPECT_CONTAINS(r.err, "train.txt:2:");
  EXPECT_CONTAINS(r.err, "train.txt:3:");
  EXPECT_CONTAINS(r.err, "skipped 2 of 4 pictures");
  data_file({a, path("images/train/nan.png")});
  expect_refused(run("train --cfg tiny.cfg --data set.data --steps 1 --skip-bad-images"), {"nan.txt:1:"});
  data_file({path("images/train/text.png")});
  expect_refused(run("train --cfg tiny.cfg --data set.data --steps 1 --skip-bad-images"),
                 {"train.txt", "none of its 1 pictures"});
  put("train.txt", "\n  \n");
  expect_refused(run("train --cfg tiny.cfg --data set.data --steps 1"), {"train.txt", "is empty"});
}

// Case 6: detect --out never writes over an input picture or one of its own outputs: a.jpg
// and a.png (both DIR/a.png), sub1/x.png and sub2/x.png, DIR the pictures' own folder, a
// hard link to an input, a folder where an output would go. Names are worked out first.
TEST_F(Hostile, DetectOutputsNeverOverwriteInputsOrEachOther) {
  const std::string net = cfg();
  weights(net, "w.weights");
  picture("a.jpg", 30, 20, 1);  // a PNG under a .jpg name: stb reads by content
  picture("a.png", 20, 30, 2);
  picture("sub1/x.png", 25, 25, 3);
  picture("sub2/x.png", 26, 26, 4);
  fs::create_directories(path("out/folder.png"));  // a folder where folder.png's output would go
  picture("folder.png", 10, 10, 5);
  auto before = snapshot();
  Result r = run("detect --cfg tiny.cfg --weights w.weights --out out a.jpg a.png sub1/x.png sub2/x.png folder.png");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_kept(before);
  EXPECT_TRUE(fs::is_directory(path("out/folder.png")));
  for (const char* p : {"out/a.png", "out/a-2.png", "out/x.png", "out/x-2.png", "out/folder-2.png"}) {
    EXPECT_EQ(slurp(path(p)).substr(1, 3), "PNG") << p;
    EXPECT_CONTAINS(r.out, std::string("wrote out/") + fs::path(p).filename().string());
  }
  // each output is its own picture's size, scaled up (720, 480, 500, 494 pixels wide: no
  // output overwrote another)
  EXPECT_EQ(load_image(path("out/a.png")).w, 30 * picture_scale(30, 20));
  EXPECT_EQ(load_image(path("out/a-2.png")).w, 20 * picture_scale(20, 30));
  EXPECT_EQ(load_image(path("out/x.png")).w, 25 * picture_scale(25, 25));
  EXPECT_EQ(load_image(path("out/x-2.png")).w, 26 * picture_scale(26, 26));
  // run again: the same names, the earlier outputs replaced
  EXPECT_EQ(run("detect --cfg tiny.cfg --weights w.weights --out out a.jpg a.png").code, 0);
  EXPECT_FALSE(fs::exists(path("out/a-3.png")));

  // --out is the pictures' own folder, with PNG inputs, one of them a hard link in it
  picture("pics/p.png", 12, 12, 6);
  picture("elsewhere/h.png", 13, 13, 7);
  fs::create_hard_link(path("elsewhere/h.png"), path("pics/h.png"));
  before = snapshot();
  r = run("detect --cfg tiny.cfg --weights w.weights --out pics pics/p.png elsewhere/h.png");
  ASSERT_EQ(r.code, 0) << r.err;
  expect_kept(before);
  EXPECT_CONTAINS(r.out, "wrote pics/p-2.png");
  EXPECT_CONTAINS(r.out, "wrote pics/h-2.png");
  // --out that is a file
  write("file.txt", "x");
  expect_refused(run("detect --cfg tiny.cfg --weights w.weights --out file.txt a.png"), {"--out", "file.txt"});
  EXPECT_EQ(slurp(path("file.txt")), "x");
}

// Case 6: pictures detect cannot read. Every header is checked before any work: a missing
// picture, a text file, an empty file or a folder stops it naming them all, nothing done.
// A picture whose data does not decode (its header reads) is reported, the others are done, and
// detect then exits with status 2 naming it.
TEST_F(Hostile, DetectOnPicturesThatCannotBeRead) {
  const std::string net = cfg();
  weights(net, "w.weights");
  picture("good.png", 20, 20);
  write("text.jpg", "not a picture");
  write("empty.png", "");
  fs::create_directories(path("folder.png"));
  Result r =
      run("detect --cfg tiny.cfg --weights w.weights --out out good.png missing.png text.jpg empty.png folder.png");
  expect_refused(r, {"4 of 5 pictures", "nothing done", "missing.png", "text.jpg", "empty.png", "folder.png"});
  EXPECT_EQ(r.out.find("good.png"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(path("out/good.png")));

  write("cut.png", undecodable(slurp(picture("cut.png", 64, 64))));
  picture("later.png", 21, 21);
  r = run("detect --cfg tiny.cfg --weights w.weights --out out good.png cut.png later.png");
  expect_refused(r, {"1 of 3 pictures could not be read", "cut.png"});
  EXPECT_TRUE(fs::exists(path("out/good.png")));
  EXPECT_TRUE(fs::exists(path("out/later.png")));
  EXPECT_FALSE(fs::exists(path("out/cut.png")));
  // names: a missing file, a .data file of another class count
  expect_refused(run("detect --cfg tiny.cfg --weights w.weights --names nowhere.names good.png"), {"nowhere.names"});
  put("n3.txt", "a\nb\nc\n");
  write("n3.data", "classes=3\ntrain=n3.txt\nnames=n3.txt\n");
  expect_refused(run("detect --cfg tiny.cfg --weights w.weights --names n3.data good.png"),
                 {"tiny.cfg:17:", "n3.data:1", "classes=3"});
}

// Weights that do not fit the net: cut short, made for another net, a folder. Refused with
// the file's name before any work; an existing --save-weights file is left as it was.
TEST_F(Hostile, WeightsThatDoNotFit) {
  const std::string net = cfg();
  const std::string full = slurp(weights(net, "w.weights"));
  write("short.weights", full.substr(0, full.size() / 2));
  weights(test::source_dir() + "/cfgs/small-classifier.cfg", "other.weights");
  fs::create_directories(path("dir.weights"));
  picture("p.png", 20, 20);
  data_file({labelled("train", "a"), labelled("train", "b")});
  write("out.weights", "keep");
  const auto before = snapshot();
  for (const char* w : {"short.weights", "other.weights", "dir.weights", "none.weights"}) {
    SCOPED_TRACE(w);
    expect_refused(run(std::string("detect --cfg tiny.cfg --weights ") + w + " p.png"), {w});
    const Result t = run(std::string("train --cfg tiny.cfg --data set.data --steps 1 --weights ") + w +
                         " --save-weights out.weights");
    expect_refused(t, {w});
    EXPECT_EQ(t.out.find("training "), std::string::npos) << t.out;
  }
  expect_kept(before);
}

// --save-weights somewhere that cannot be written: refused before training, not after it.
TEST_F(Hostile, SaveWeightsTargetCheckedBeforeTraining) {
  cfg();
  data_file({labelled("train", "a"), labelled("train", "b")});
  write("file.txt", "a file, not a folder");
  fs::create_directories(path("folder.weights"));
  const auto before = snapshot();
  for (const auto& [target, words] :
       std::vector<std::pair<std::string, std::string>>{{"file.txt/out.weights", "not a folder"},
                                                        {"folder.weights", "it is a folder"},
                                                        {"no/out.weights", "does not exist"}}) {
    SCOPED_TRACE(target);
    const Result r = run("train --cfg tiny.cfg --data set.data --steps 1 --save-weights " + target);
    expect_refused(r, {target, words});
    EXPECT_EQ(r.out.find("training "), std::string::npos) << r.out;
  }
  expect_kept(before);
  EXPECT_TRUE(fs::is_directory(path("folder.weights")));
  if (geteuid() != 0) {  // root writes into any folder
    fs::create_directories(path("locked"));
    fs::permissions(path("locked"), fs::perms::owner_read | fs::perms::owner_exec);
    expect_refused(run("train --cfg tiny.cfg --data set.data --steps 1 --save-weights locked/out.weights"),
                   {"locked", "not writable"});
    fs::permissions(path("locked"), fs::perms::owner_all);
  }
}

}  // namespace
}  // namespace tt
