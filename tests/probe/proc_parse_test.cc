#include "tfmpi/probe/proc_parse.h"

#include <gtest/gtest.h>

namespace tfmpi::probe {
namespace {

TEST(CpuList, CountsRangesAndSingles) {
  EXPECT_EQ(CountCpuList("0-3,8,10-11\n"), 7);
  EXPECT_EQ(CountCpuList("0"), 1);
  EXPECT_EQ(CountCpuList(""), std::nullopt);
  EXPECT_EQ(CountCpuList("3-1"), std::nullopt);
  EXPECT_EQ(CountCpuList("a-b"), std::nullopt);
}

TEST(LoadAverage, TakesTheFirstField) {
  EXPECT_DOUBLE_EQ(*ParseLoad1("1.52 0.80 0.40 2/345 6789\n"), 1.52);
  EXPECT_EQ(ParseLoad1("garbage"), std::nullopt);
}

TEST(MemInfo, PrefersMemAvailable) {
  const auto m = ParseMemInfo("MemTotal:  16000 kB\nMemFree: 1000 kB\nMemAvailable: 8000 kB\nCached: 5 kB\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->total_bytes, 16000u * 1024);
  EXPECT_EQ(m->available_bytes, 8000u * 1024);
}

TEST(MemInfo, OldKernelsAddCachedToFree) {
  const auto m = ParseMemInfo("MemTotal: 100 kB\nMemFree: 10 kB\nCached: 20 kB\n");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->available_bytes, 30u * 1024);
  EXPECT_EQ(ParseMemInfo("nothing here\n"), std::nullopt);
}

TEST(SelfCgroup, V2UnifiedLine) {
  const auto c = ParseSelfCgroup("0::/user.slice/job-1\n");
  ASSERT_TRUE(c);
  EXPECT_TRUE(c->v2);
  EXPECT_EQ(c->path, "/user.slice/job-1");
}

TEST(SelfCgroup, V1CpuControllerWinsOverTheUnifiedLine) {
  const auto c = ParseSelfCgroup("12:memory:/m\n4:cpu,cpuacct:/tfmc/h2\n0::/\n");
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->v2);
  EXPECT_EQ(c->path, "/tfmc/h2");
  EXPECT_EQ(ParseSelfCgroup("5:memory:/x\n"), std::nullopt);
}

constexpr const char* kMountInfo =
    "22 1 0:21 / /sys rw,nosuid - sysfs sysfs rw\n"
    "30 22 0:26 / /sys/fs/cgroup/cpu,cpuacct rw,nosuid shared:12 - cgroup cgroup rw,cpu,cpuacct\n"
    "31 22 0:27 /docker/abc /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";

TEST(CgroupMount, FindsV1CpuAndV2) {
  const auto v1 = FindCgroupMount(kMountInfo, false);
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->mount_point, "/sys/fs/cgroup/cpu,cpuacct");
  EXPECT_EQ(v1->root, "/");
  const auto v2 = FindCgroupMount(kMountInfo, true);
  ASSERT_TRUE(v2);
  EXPECT_EQ(v2->root, "/docker/abc");
  // A remounted /sys (ip netns exec) has no cgroup file systems.
  EXPECT_EQ(FindCgroupMount("22 1 0:21 / /sys rw - sysfs sysfs rw\n", true), std::nullopt);
}

TEST(CgroupDirs, WalkUpToTheMountPoint) {
  EXPECT_EQ(CgroupDirsUpward({"/", "/cg"}, "/a/b"),
            (std::vector<std::string>{"/cg/a/b", "/cg/a", "/cg"}));
  EXPECT_EQ(CgroupDirsUpward({"/", "/cg"}, "/"), (std::vector<std::string>{"/cg"}));
  // A container's mount shows only its subtree.
  EXPECT_EQ(CgroupDirsUpward({"/docker/abc", "/cg"}, "/docker/abc/job"),
            (std::vector<std::string>{"/cg/job", "/cg"}));
  EXPECT_TRUE(CgroupDirsUpward({"/docker/abc", "/cg"}, "/other").empty());
}

TEST(Quota, V2CpuMax) {
  EXPECT_DOUBLE_EQ(*ParseCpuMax("25000 100000\n"), 0.25);
  EXPECT_DOUBLE_EQ(*ParseCpuMax("200000 100000"), 2.0);
  EXPECT_EQ(ParseCpuMax("max 100000\n"), std::nullopt);
  EXPECT_EQ(ParseCpuMax(""), std::nullopt);
}

TEST(Quota, V1CfsQuota) {
  EXPECT_DOUBLE_EQ(*ParseCfsQuota("25000\n", "100000\n"), 0.25);
  EXPECT_EQ(ParseCfsQuota("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(ParseCfsQuota("x", "100000"), std::nullopt);
}

}  // namespace
}  // namespace tfmpi::probe
