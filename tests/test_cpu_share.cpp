// How a rank learns its CPU quota (util/sys.hpp cgroup_cpu_quota_cores) and what it does
// with that when it waits (comm/mpi_comm.hpp busy_poll_window_s), on cgroup
// trees written here: v1 with cpu and cpuacct mounted together, v2, a hybrid, and none.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "comm/mpi_comm.hpp"
#include "util/sys.hpp"

namespace tt {
namespace {

namespace fs = std::filesystem;

class CgroupTree : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() /
            ("tt-cgroup-" + std::to_string(::getpid()) + "-" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void put(const std::string& rel, const std::string& text) {
    const fs::path p = root_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  double quota(const std::string& self) {
    put("self_cgroup", self);
    return cgroup_cpu_quota_cores((root_ / "self_cgroup").string(), (root_ / "fs").string());
  }
  fs::path root_;
};

TEST_F(CgroupTree, CgroupV1WithCpuAndCpuacctTogether) {
  put("fs/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  put("fs/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  put("fs/cpu,cpuacct/edge/dev0/cpu.cfs_quota_us", "1125\n");
  put("fs/cpu,cpuacct/edge/dev0/cpu.cfs_period_us", "2500\n");
  EXPECT_DOUBLE_EQ(quota("4:memory:/edge/dev0\n3:cpu,cpuacct:/edge/dev0\n0::/\n"), 0.45);
  EXPECT_TRUE(std::isinf(quota("3:cpu,cpuacct:/\n")));  // the root sets none
}

TEST_F(CgroupTree, TheTightestQuotaOnThePathHolds) {
  put("fs/cpu/cpu.cfs_quota_us", "-1\n");
  put("fs/cpu/cpu.cfs_period_us", "100000\n");
  put("fs/cpu/slice/cpu.cfs_quota_us", "50000\n");  // half a core for the slice
  put("fs/cpu/slice/cpu.cfs_period_us", "100000\n");
  put("fs/cpu/slice/job/cpu.cfs_quota_us", "300000\n");  // the job asks for 3
  put("fs/cpu/slice/job/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(quota("2:cpu:/slice/job\n"), 0.5);
}

TEST_F(CgroupTree, CgroupV2AndHybrid) {
  put("fs/cgroup.controllers", "cpu memory\n");
  put("fs/cpu.max", "max 100000\n");
  put("fs/edge/dev1/cpu.max", "150000 100000\n");
  EXPECT_DOUBLE_EQ(quota("0::/edge/dev1\n"), 1.5);
  EXPECT_TRUE(std::isinf(quota("0::/\n")));
  fs::remove_all(root_ / "fs");
  put("fs/unified/cgroup.controllers", "\n");  // hybrid: v2 below "unified", no quota there
  put("fs/cpu/a/cpu.cfs_quota_us", "25000\n");
  put("fs/cpu/a/cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(quota("1:cpu:/a\n0::/a\n"), 0.25);
}

TEST_F(CgroupTree, NothingReadableMeansNoQuota) {
  EXPECT_TRUE(std::isinf(quota("")));
  EXPECT_TRUE(std::isinf(quota("garbage line\n1:cpu:/missing\n")));
  EXPECT_TRUE(std::isinf(cgroup_cpu_quota_cores((root_ / "absent").string(), (root_ / "fs").string())));
}

TEST(BusyPoll, NapsAtOnceOnlyUnderATightQuota) {
  EXPECT_EQ(busy_poll_window_s(INFINITY, 1, 1), 0.002);  // no quota
  EXPECT_EQ(busy_poll_window_s(INFINITY, 4, 2), 0.002);  // no quota, oversubscribed: the scheduler shares
  EXPECT_EQ(busy_poll_window_s(2, 2, 1), 0.002);         // a quota of two cores for two ranks
  EXPECT_EQ(busy_poll_window_s(2, 1, 2), 0.002);
  EXPECT_EQ(busy_poll_window_s(2, 2, 2), 0.);     // threads count too
  EXPECT_EQ(busy_poll_window_s(0.45, 1, 1), 0.);  // an emulated device at 0.45 of a core
  EXPECT_EQ(busy_poll_window_s(4, 1, 0), 0.002);  // a thread count of 0 is read as 1
}

}  // namespace
}  // namespace tt
