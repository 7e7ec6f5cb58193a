#include "tfmpi/probe/node_report.h"

#include <gtest/gtest.h>

namespace tfmpi::probe {
namespace {

NodeReport Sample() {
  NodeReport r;
  r.hostname = "node7";
  r.online_cpus = 8;
  r.affinity_cpus = 4;
  r.cpu_quota = 2.5;
  r.quota_source = "cgroup v2";
  r.load1 = 0.75;
  r.mem_total_bytes = 1ull << 34;
  r.mem_available_bytes = 1ull << 33;
  r.gpus.push_back({"GPU A", 80ull << 30, 70ull << 30, 12});
  r.bench_gflops = 3.5;
  r.bench_seconds = 0.5;
  return r;
}

TEST(NodeReport, UsableCoresAreAffinityCappedByQuota) {
  NodeReport r = Sample();
  EXPECT_DOUBLE_EQ(r.UsableCores(), 2.5);
  r.cpu_quota.reset();
  EXPECT_DOUBLE_EQ(r.UsableCores(), 4);
  r.affinity_cpus = 0;
  EXPECT_DOUBLE_EQ(r.UsableCores(), 8);
}

TEST(NodeReport, JsonRoundTrip) {
  std::string error;
  const auto back = NodeReportFromJson(ToJson(Sample()), &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->hostname, "node7");
  EXPECT_EQ(back->affinity_cpus, 4);
  EXPECT_DOUBLE_EQ(*back->cpu_quota, 2.5);
  ASSERT_EQ(back->gpus.size(), 1u);
  EXPECT_EQ(back->gpus[0].memory_free_bytes, 70ull << 30);
  EXPECT_DOUBLE_EQ(back->bench_gflops, 3.5);
}

TEST(NodeReport, UnknownQuotaStaysUnknown) {
  NodeReport r = Sample();
  r.cpu_quota.reset();
  std::string error;
  EXPECT_FALSE(NodeReportFromJson(ToJson(r), &error)->cpu_quota);
}

TEST(NodeReport, MalformedJsonIsAnErrorNotAThrow) {
  std::string error;
  EXPECT_FALSE(NodeReportFromJson("{\"hostname\": 3}", &error));
  EXPECT_NE(error.find("malformed node probe result"), std::string::npos);
  EXPECT_FALSE(LinksFromJson("[{]", &error));
}

TEST(Links, JsonRoundTrip) {
  std::string error;
  const auto back = LinksFromJson(ToJson(std::vector<LinkReport>{{"a", "b", 42.5, 1100}}), &error);
  ASSERT_TRUE(back) << error;
  ASSERT_EQ(back->size(), 1u);
  EXPECT_EQ((*back)[0].to, "b");
  EXPECT_DOUBLE_EQ((*back)[0].latency_us, 42.5);
}

TEST(ResultLine, LastMatchingLineEvenWithAnMpiTag) {
  const std::string out = "Warning: something\nTFMPI_PROBE_NODE {\"a\":1}\n[1,0]<stdout>:TFMPI_PROBE_NODE {\"a\":2}\n";
  EXPECT_EQ(FindResultLine(out, kNodeLinePrefix), "{\"a\":2}");
  EXPECT_EQ(FindResultLine("nothing\n", kNodeLinePrefix), std::nullopt);
}

}  // namespace
}  // namespace tfmpi::probe
