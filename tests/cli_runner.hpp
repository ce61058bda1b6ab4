// Runs the built tiletrain binary (TILETRAIN_BINARY) as a user does, for the command-line
// tests (test_cli.cpp, test_hostile_input.cpp): each test gets a temp folder of its own to
// run in, stdout and stderr captured, the exit status (128 + signal when killed).
#pragma once
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "test_util.hpp"

namespace tt::cli {

namespace fs = std::filesystem;

struct Result {
  int code = -1;  // exit status; 128+signal if killed
  std::string out, err;
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

class Cli : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string suite = info->test_suite_name();
    dir_ = fs::temp_directory_path() / ((suite == "Cli" ? std::string("tt_cli") : "tt_" + suite) + "_" +
                                        std::to_string(getpid()) + "_" + info->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& n) const { return (dir_ / n).string(); }

  // Runs `tiletrain ARGS` in the temp dir (ARGS is passed through the shell as is), with
  // the environment variables `env` ("A=1 B=2") added.
  Result run(const std::string& args, const std::string& env = "") const {
    const std::string cmd = "cd '" + dir_.string() + "' && env " + env + " '" + TILETRAIN_BINARY + "' " + args + " >'" +
                            path("stdout") + "' 2>'" + path("stderr") + "' </dev/null";
    const int status = std::system(cmd.c_str());
    Result r;
    r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    r.out = slurp(path("stdout"));
    r.err = slurp(path("stderr"));
    return r;
  }

  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(path(name), std::ios::binary) << text;
    return path(name);
  }

  static std::string fixture(const std::string& net) {
    return test::source_dir() + "/tests/fixtures/" + net + "/net.cfg";
  }

  fs::path dir_;
};

#define EXPECT_CONTAINS(haystack, needle) \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) << "no '" << (needle) << "' in:\n" << (haystack)

}  // namespace tt::cli
