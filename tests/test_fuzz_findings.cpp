// Regression tests for what the fuzz targets (fuzz/) found in readers whose own test files
// cover other ground; each names its target. The reproducers are also in fuzz/corpus/.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "data/darknet_data.hpp"
#include "data/image.hpp"
#include "test_util.hpp"
#include "util/error.hpp"

namespace tt {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class FuzzFindings : public testing::Test {
 protected:
  void SetUp() override {
    dir = (std::filesystem::temp_directory_path() / ("tt-fuzz-findings-" + std::to_string(getpid()))).string();
    std::filesystem::create_directories(dir);
  }
  void TearDown() override { std::filesystem::remove_all(dir); }
  std::string write(const std::string& name, const std::string& bytes) {
    const std::string p = dir + "/" + name;
    std::ofstream(p, std::ios::binary) << bytes;
    return p;
  }
  std::string load_error(const std::string& path) {
    try {
      load_image(path, 3);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error for " << path;
    return "";
  }
  std::string dir;
};

// fuzz_image: Debian's stb wrote past its Huffman tables for a DHT segment whose 16 code
// counts add up to more than 256 (CVE-2021-37789); load_image refuses such a JPEG before
// stb reads it, whether the segment comes before the frame header or between scans.
TEST_F(FuzzFindings, JpegHuffmanTableWithMoreThan256CodesIsRefused) {
  std::string dht = "\xff\xc4";
  dht += std::string("\x00\x13\x00", 3) + std::string(16, '\xff');  // one table: 16 x 255 codes
  const std::string header_only = "\xff\xd8" + dht + "\xff\xd9";
  std::string msg = load_error(write("header.jpg", header_only));
  EXPECT_NE(msg.find("Huffman"), std::string::npos) << msg;
  EXPECT_NE(msg.find("header.jpg"), std::string::npos) << msg;
  EXPECT_THROW(image_info(dir + "/header.jpg"), Error);

  // A real progressive JPEG (several scans, a DHT before each) with its last DHT's counts
  // raised: found only by walking the scans' entropy-coded data.
  std::string jpeg = read_file(test::source_dir() + "/fuzz/corpus/fuzz_image/progressive.jpg");
  ASSERT_GT(jpeg.size(), 100u);
  const Image good = load_image(write("good.jpg", jpeg), 3);
  EXPECT_EQ(good.w, 9);
  EXPECT_EQ(good.h, 16);
  const size_t last_dht = jpeg.rfind("\xff\xc4");
  const size_t first_sos = jpeg.find("\xff\xda");
  ASSERT_NE(last_dht, std::string::npos);
  ASSERT_GT(last_dht, first_sos) << "the seed should have a DHT between scans";
  for (size_t k = 0; k < 16; ++k) jpeg[last_dht + 5 + k] = '\xff';
  msg = load_error(write("scans.jpg", jpeg));
  EXPECT_NE(msg.find("Huffman"), std::string::npos) << msg;
}

// The reproducer fuzz_image found, as it was found.
TEST_F(FuzzFindings, JpegHuffmanReproducerIsRefused) {
  const std::string msg = load_error(test::source_dir() + "/fuzz/corpus/fuzz_image/crash-jpeg-dht-over-256-codes");
  EXPECT_NE(msg.find("Huffman"), std::string::npos) << msg;
}

// fuzz_image: Debian's stb decoded a scan with a Huffman table no DHT segment had defined,
// reading whatever an earlier picture left in its (unzeroed) decoder state: an index of 7948
// into a table's values[256]. Such JPEGs, and scans with an undefined quantisation table, are
// refused; every real JPEG of the seeds still loads.
TEST_F(FuzzFindings, JpegScanWithUndefinedTablesIsRefused) {
  std::string msg = load_error(test::source_dir() + "/fuzz/corpus/fuzz_image/crash-jpeg-undefined-huffman-table");
  EXPECT_NE(msg.find("Huffman table that no DHT"), std::string::npos) << msg;

  // A real baseline JPEG with one DHT segment (table class/id byte) renamed to an id no scan
  // uses, and then with one DQT segment's id renamed likewise.
  const std::string jpeg = read_file(test::source_dir() + "/fuzz/corpus/fuzz_image/rgb.jpg");
  ASSERT_NO_THROW(load_image(write("good.jpg", jpeg), 3));
  const size_t dht = jpeg.find("\xff\xc4"), dqt = jpeg.find("\xff\xdb");
  ASSERT_NE(dht, std::string::npos);
  ASSERT_NE(dqt, std::string::npos);
  std::string no_dht = jpeg;
  no_dht[dht + 4] = static_cast<char>((no_dht[dht + 4] & 0xF0) | 3);  // the table becomes id 3
  msg = load_error(write("no-dht.jpg", no_dht));
  EXPECT_NE(msg.find("Huffman table that no DHT"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no-dht.jpg"), std::string::npos) << msg;
  std::string no_dqt = jpeg;
  no_dqt[dqt + 4] = static_cast<char>((no_dqt[dqt + 4] & 0xF0) | 3);
  msg = load_error(write("no-dqt.jpg", no_dqt));
  EXPECT_NE(msg.find("quantisation table that no DQT"), std::string::npos) << msg;

  for (const auto& e : std::filesystem::directory_iterator(test::source_dir() + "/fuzz/corpus/fuzz_image")) {
    const std::string name = e.path().filename().string();
    if (e.path().extension() == ".jpg") {
      EXPECT_NO_THROW(load_image(e.path().string(), 3)) << name;
    }
  }
}

// fuzz_image: Debian's stb grew its PNG image-data buffer to what a chunk's length field
// said (1.3 GB in a 116-byte file: 2 GB allocated) before reading it. A chunk longer than the
// rest of the file is refused before stb sees it; a real PNG, also cut short, still is not
// (a cut inside the last chunk is refused the same way).
TEST_F(FuzzFindings, PngChunkLongerThanTheFileIsRefused) {
  std::string msg = load_error(test::source_dir() + "/fuzz/corpus/fuzz_image/crash-png-chunk-longer-than-file");
  EXPECT_NE(msg.find("a chunk (IDAT) says 1307645468 bytes, but the file has 31 left"), std::string::npos) << msg;
  const std::string png = read_file(test::source_dir() + "/fuzz/corpus/fuzz_image/rgb.png");
  ASSERT_NO_THROW(load_image(write("good.png", png), 3));
  const size_t idat = png.find("IDAT");
  ASSERT_NE(idat, std::string::npos);
  msg = load_error(write("cut.png", png.substr(0, idat + 6)));
  EXPECT_NE(msg.find("a corrupt PNG: a chunk (IDAT) says"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cut.png"), std::string::npos) << msg;
}

// fuzz_image: Debian's stb read past its buffer converting a 16-bit PNM and overflowed int
// parsing a long PNM header number; PNM is not read at all now (STBI_NO_PNM in image.cpp).
TEST_F(FuzzFindings, PnmPicturesAreRefused) {
  for (const char* name : {"crash-pnm-16bit-overflow", "crash-pnm-header-overflow", "gray.pgm", "rgb.ppm"}) {
    const std::string msg = load_error(test::source_dir() + "/fuzz/corpus/fuzz_image/" + name);
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
}

// Pictures only stb's JPEG, PNG and BMP decoders read: the other formats are refused by name.
TEST_F(FuzzFindings, OnlyJpegPngAndBmpAreRead) {
  for (const char* name : {"rgb.gif", "rgb.tga", "rle.tga", "tiny.hdr"}) {
    const std::string msg = load_error(test::source_dir() + "/fuzz/corpus/fuzz_image/" + name);
    EXPECT_NE(msg.find(name), std::string::npos) << msg;
  }
  for (const char* name : {"rgb.jpg", "rgb.png", "rgb.bmp"})
    EXPECT_NO_THROW(load_image(test::source_dir() + "/fuzz/corpus/fuzz_image/" + name, 3)) << name;
}

// fuzz_data: a .data file naming a list whose name is longer than the system takes made the
// path lookup throw std::filesystem_error (ENAMETOOLONG); now the name is taken as given, and
// reading the list says it cannot be opened.
TEST_F(FuzzFindings, DataFileNamingATooLongPathIsAnError) {
  const std::string data = write("long.data", "classes=2\ntrain=" + std::string(5000, 'x') + "\nnames=n.txt\n");
  write("n.txt", "a\nb\n");
  DataConfig c;
  ASSERT_NO_THROW(c = load_data_config(data));
  EXPECT_EQ(c.train, std::string(5000, 'x'));
  EXPECT_THROW(read_list(c.train), Error);
}

}  // namespace
}  // namespace tt
