// tiletrain launch (src/app/launch.cpp): the mpirun command it works out (--dry-run), its
// refusals of what cannot run, and real runs through mpirun on this machine.
#include <string>

#include "cli_runner.hpp"

namespace tt::cli {
namespace {

class Launch : public Cli {
 protected:
  std::string cfg() const { return test::source_dir() + "/cfgs/fashion-mnist.cfg"; }
  // The error of a launch that must be refused before mpirun runs: exit status 2.
  std::string refused(const std::string& args) const {
    const Result r = run("launch " + args);
    EXPECT_EQ(r.code, 2) << r.out << r.err;
    EXPECT_EQ(r.out, "") << "printed a command for a launch that cannot run";
    return r.err;
  }
};

TEST_F(Launch, LocalProcessesGetTheTilesSplitAndMpirunsLocalOptions) {
  const Result r = run("launch --local 2 --dry-run -- train --cfg c.cfg --grid 2x2 --steps 1");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("mpirun "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" -np 2 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--mca btl self,vader --mca oob_tcp_if_include lo"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--bind-to none"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(" train --cfg c.cfg --grid 2x2 --steps 1 --tiles-per-rank 2"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("--oversubscribe"), std::string::npos) << "2 processes fit on 2 cores: " << r.out;
  EXPECT_NE(r.err.find("2 process(es) on this machine"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("2 tile(s) each"), std::string::npos) << r.err;
  // more processes than any test machine's cores: oversubscribed
  const Result many = run("launch --local 1024 --dry-run -- bench --cfg c.cfg --grid 32x32");
  ASSERT_EQ(many.code, 0) << many.err;
  EXPECT_NE(many.out.find("--oversubscribe"), std::string::npos) << many.out;
  EXPECT_EQ(many.out.find("--tiles-per-rank"), std::string::npos) << "one tile each needs no option: " << many.out;
}

TEST_F(Launch, HostsFileSlotsPlaceConsecutiveTilesOnEachHost) {
  write("hosts", "# the shelf\npi1 slots=2\npi2   # one process\n\npi3 slots=1\n");
  const Result r = run("launch --hosts hosts --iface eth0 --dry-run -- bench --cfg c.cfg --grid=2x4");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(" -np 4 --host pi1:2,pi2:1,pi3:1 --map-by slot --mca btl self,vader,tcp"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--mca btl_tcp_if_include eth0 --mca oob_tcp_if_include eth0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--grid=2x4 --tiles-per-rank 2"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("pi1: 2 process(es), tiles 0-3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pi2: 1 process(es), tiles 4-5"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("pi3: 1 process(es), tiles 6-7"), std::string::npos) << r.err;
  // --ranks-per-host overrides slots=; --binary names the path on the hosts
  const Result two =
      run("launch --hosts hosts --ranks-per-host 2 --binary /opt/tt --dry-run -- verify --cfg c --grid 3x2");
  ASSERT_EQ(two.code, 0) << two.err;
  EXPECT_NE(two.out.find(" -np 6 --host pi1:2,pi2:2,pi3:2 "), std::string::npos) << two.out;
  EXPECT_NE(two.out.find(" /opt/tt verify "), std::string::npos) << two.out;
  // data parallel: one whole copy per process, its grid inside it (no --tiles-per-rank)
  const Result dp = run("launch --hosts hosts --dry-run -- train --cfg c --replicas 4 --grid 2x2 --steps 1");
  ASSERT_EQ(dp.code, 0) << dp.err;
  EXPECT_NE(dp.out.find(" -np 4 "), std::string::npos) << dp.out;
  EXPECT_EQ(dp.out.find("--tiles-per-rank"), std::string::npos) << dp.out;
  EXPECT_NE(dp.err.find("a whole copy of the net each (data parallel)"), std::string::npos) << dp.err;
  // calibrate places no tiles: one process per slot, whatever the grid
  const Result cal = run("launch --hosts hosts --dry-run -- calibrate --cfg c --out cluster.json");
  ASSERT_EQ(cal.code, 0) << cal.err;
  EXPECT_NE(cal.out.find(" -np 4 "), std::string::npos) << cal.out;
}

TEST_F(Launch, WhatCannotRunIsRefusedNamingWhy) {
  std::string e = refused("--local 3 -- train --cfg c --grid 2x2 --steps 1");
  EXPECT_NE(e.find("grid 2x2 has 4 tile(s), which do not split evenly over 3 processes"), std::string::npos) << e;
  e = refused("--local 2 -- train --cfg c --steps 1");
  EXPECT_NE(e.find("(--grid RxC)"), std::string::npos) << "no grid: 1 tile for 2 processes: " << e;
  e = refused("--local 4 -- bench --cfg c --grid 2x4 --tiles-per-rank 4");
  EXPECT_NE(e.find("that needs 2 processes, but 4 are asked for"), std::string::npos) << e;
  e = refused("--local 2 -- plan --cfg c --grid 2x1");
  EXPECT_NE(e.find("run tiletrain plan directly"), std::string::npos) << e;
  e = refused("--local 2 -- trian --cfg c");
  EXPECT_NE(e.find("did you mean 'train'"), std::string::npos) << e;
  e = refused("--local 2 -- train --cfg c --gird 2x1");
  EXPECT_NE(e.find("did you mean '--grid'"), std::string::npos) << e;
  e = refused("-- train --cfg c --grid 2x1");
  EXPECT_NE(e.find("--local N"), std::string::npos) << e;
  e = refused("--local 2 --hosts h -- train --cfg c --grid 2x1");
  EXPECT_NE(e.find("not both"), std::string::npos) << e;
  e = refused("--local 3 -- train --cfg c --replicas 2 --steps 1");
  EXPECT_NE(e.find("--replicas 2 runs one whole copy of the net per process, but 3 process(es) are asked for"),
            std::string::npos)
      << e;
  e = refused("--local 2 -- train --cfg c --grid 0x1");
  EXPECT_NE(e.find("--grid"), std::string::npos) << e;
}

TEST_F(Launch, BadHostsFilesAreRefusedNamingFileAndLine) {
  std::string e = refused("--hosts missing -- train --cfg c --grid 2x1");
  EXPECT_NE(e.find("cannot read hosts file 'missing'"), std::string::npos) << e;
  write("empty", "# nothing\n\n");
  e = refused("--hosts empty -- train --cfg c --grid 2x1");
  EXPECT_NE(e.find("lists no host"), std::string::npos) << e;
  write("slots", "pi1\npi2 slots=0\n");
  e = refused("--hosts slots -- train --cfg c --grid 2x1");
  EXPECT_NE(e.find("slots:2: slots='0'"), std::string::npos) << e;
  write("twice", "pi1\npi2\npi1 slots=2\n");
  e = refused("--hosts twice -- train --cfg c --grid 2x1");
  EXPECT_NE(e.find("twice:3: host 'pi1' is listed again (first on line 1)"), std::string::npos) << e;
  write("word", "pi1 max_slots=4\n");
  e = refused("--hosts word -- train --cfg c --grid 2x1");
  EXPECT_NE(e.find("word:1: 'max_slots=4' is not understood"), std::string::npos) << e;
  write("name", "pi1,pi2\n");
  e = refused("--hosts name -- train --cfg c --grid 2x1");
  EXPECT_NE(e.find("name:1: 'pi1,pi2' is not a host name"), std::string::npos) << e;
}

// Real runs through mpirun: verify must say OK on both ways of naming this machine.
TEST_F(Launch, RunsVerifyThroughMpirunLocallyAndFromAHostsFile) {
  Result r = run("launch --local 2 -- verify --cfg " + cfg() + " --grid 2x2 --batch 2 --steps 1");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("OK: tiled training matches untiled"), std::string::npos) << r.out << r.err;
  write("hosts", "localhost slots=2\n");
  r = run("launch --hosts hosts -- verify --cfg " + cfg() + " --grid 2x1 --batch 2 --steps 1");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("OK: tiled training matches untiled"), std::string::npos) << r.out << r.err;
  // a command that fails on the processes: launch's status is not 0 and the error is shown
  r = run("launch --local 2 -- verify --cfg missing.cfg --grid 2x1 --steps 1");
  EXPECT_NE(r.code, 0);
  EXPECT_NE((r.out + r.err).find("missing.cfg"), std::string::npos) << r.out << r.err;
}

}  // namespace
}  // namespace tt::cli
