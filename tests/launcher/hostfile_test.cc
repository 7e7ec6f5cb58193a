// Host pools: Open MPI and MPICH hostfile syntax, -H lists, and the messages
// for bad input (Note [Hostfile syntax]).
#include "tfmpi/launcher/hostfile.h"

#include <gtest/gtest.h>

namespace tfmpi::launcher {
namespace {

HostPool Ok(const std::string& text) {
  LaunchError error;
  auto pool = ParseHostfile(text, "hosts", &error);
  EXPECT_TRUE(pool) << error.message;
  return pool.value_or(HostPool{});
}

std::string Bad(const std::string& text) {
  LaunchError error;
  EXPECT_FALSE(ParseHostfile(text, "hosts", &error));
  EXPECT_EQ(error.exit_code, kExitUsage);
  return error.message;
}

TEST(Hostfile, OpenMpiSyntaxWithCommentsAndBlankLines) {
  const HostPool pool = Ok("# cluster\n\nnode1 slots=4 max_slots=8\n  node2 slots=2   # busy\nnode3\n");
  ASSERT_EQ(pool.hosts.size(), 3u);
  EXPECT_EQ(pool.hosts[0].name, "node1");
  EXPECT_EQ(pool.hosts[0].slots, 4);
  EXPECT_EQ(pool.hosts[0].line, 3);
  EXPECT_EQ(pool.hosts[1].slots, 2);
  EXPECT_EQ(pool.hosts[2].slots, std::nullopt);
  EXPECT_EQ(pool.TotalSlots(), std::nullopt);  // node3's slots are its cores
}

TEST(Hostfile, MpichSyntax) {
  const HostPool pool = Ok("node1:4\nnode2:2\r\n");
  ASSERT_EQ(pool.hosts.size(), 2u);
  EXPECT_EQ(pool.hosts[1].name, "node2");
  EXPECT_EQ(pool.TotalSlots(), 6);
}

TEST(Hostfile, MalformedLinesNamedWithFileAndLine) {
  const std::string m = Bad("node1 slots=2\nnode2 slots=two\nnode3 cores=4\nnode4:x\n");
  EXPECT_NE(m.find("hosts:2: 'slots=two'"), std::string::npos) << m;
  EXPECT_NE(m.find("hosts:3: 'cores=4'"), std::string::npos) << m;
  EXPECT_NE(m.find("hosts:4: 'node4:x'"), std::string::npos) << m;
  EXPECT_EQ(m.find("hosts:1"), std::string::npos) << m;
}

TEST(Hostfile, SlotsMustBePositiveAndFitMaxSlots) {
  EXPECT_NE(Bad("node1 slots=0\n").find("hosts:1: host node1: slots must be at least 1 (got 0)"),
            std::string::npos);
  EXPECT_NE(Bad("node1:-2\n").find("slots must be at least 1 (got -2)"), std::string::npos);
  EXPECT_NE(Bad("node1 slots=4 max_slots=2\n").find("max_slots=2 is less than its slots (4)"),
            std::string::npos);
}

TEST(Hostfile, DuplicateHostsNamed) {
  const std::string m = Bad("node1 slots=1\nnode2 slots=1\nnode1 slots=2\n");
  EXPECT_NE(m.find("hosts:3: host node1 is already listed on line 1"), std::string::npos) << m;
}

TEST(Hostfile, EmptyFileIsAnError) {
  EXPECT_NE(Bad("# nothing\n\n").find("hosts: no hosts"), std::string::npos);
}

HostPool OkList(const std::string& list) {
  LaunchError error;
  auto pool = ParseHostList(list, &error);
  EXPECT_TRUE(pool) << error.message;
  return pool.value_or(HostPool{});
}

TEST(HostList, DashH) {
  const HostPool pool = OkList("a:2,b,c:1");
  ASSERT_EQ(pool.hosts.size(), 3u);
  EXPECT_EQ(pool.hosts[0].slots, 2);
  EXPECT_EQ(pool.hosts[1].slots, 1);  // a bare host on -H is one slot
  LaunchError error;
  EXPECT_FALSE(ParseHostList("a:0", &error));
  EXPECT_FALSE(ParseHostList("a slots=2", &error));
}

TEST(HostList, RepeatedHostAddsSlotsAsInOpenMpi) {
  const HostPool pool = OkList("a,b:2,a,a:3");
  ASSERT_EQ(pool.hosts.size(), 2u);
  EXPECT_EQ(pool.hosts[0].slots, 5);
  EXPECT_EQ(pool.TotalSlots(), 7);
}

TEST(PoolSize, NumProcAgainstSlots) {
  const HostPool pool = Ok("a slots=2\nb slots=1\n");
  EXPECT_FALSE(CheckPoolSize(pool, 3, false, "hosts"));
  const auto e = CheckPoolSize(pool, 4, false, "hosts");
  ASSERT_TRUE(e);
  EXPECT_NE(e->message.find("-np 4 is more than the 3 slots of hosts (2 hosts)"), std::string::npos);
  EXPECT_FALSE(CheckPoolSize(pool, 4, true, "hosts"));  // --oversubscribe asked for
  EXPECT_FALSE(CheckPoolSize(Ok("a\n"), 64, false, "hosts"));  // slots unknown: MPI decides
}

}  // namespace
}  // namespace tfmpi::launcher
