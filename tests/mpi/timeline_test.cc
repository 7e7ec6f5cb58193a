// The Chrome-trace timeline, through the global engine the Python API uses:
// TFMPI_TIMELINE (given to InitGlobalEngine's lookup) makes rank 0 write a
// JSON file that parses, with a named row per tensor (names escaped) and
// complete ("X") events for its NEGOTIATE and COLLECTIVE phases, plus FUSE
// and COPY_OUT for fused tensors.
//
// Usage: mpi_timeline_test <timeline.json>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <nlohmann/json.hpp>

#include "mpi_test_util.h"
#include "patterns.h"
#include "tfmpi/runtime/global_engine.h"

namespace tfmpi::mpitest {
namespace {

const std::string kAllreduce = "timeline.allreduce";
const std::string kQuoted = "timeline/\"quoted\"\\name";  // must be escaped in JSON
const std::string kBroadcast = "timeline.broadcast";
const std::string kAllgather = "timeline.allgather";
const std::string kBarrier = "timeline.barrier";
const std::string kFusedPrefix = "timeline.fused.";

void RunCollectives(MpiTest& t) {
  const int K = t.size(), r = t.rank();
  for (const std::string& name : {kAllreduce, kQuoted}) {
    Tensor x(DataType::kFloat32, {8});
    x.Fill([&](std::int64_t i) { return ReduceInput(DataType::kFloat32, ReduceOp::kSum, r, i, K); });
    if (t.ExpectOk(t.Run(AllreduceRequest(name, ReduceOp::kSum, x, &x)), name))
      t.ExpectTensor(x, [&](std::int64_t i) {
        return ReduceExpected(DataType::kFloat32, ReduceOp::kSum, i, K);
      }, name);
  }
  Tensor b(DataType::kInt32, {4});
  b.Fill([&](std::int64_t i) { return BroadcastValue(DataType::kInt32, 0, i); });
  t.ExpectOk(t.Run(BroadcastRequest(kBroadcast, 0, &b, &b)), kBroadcast);
  Tensor g(DataType::kUInt8, {r + 1, 2}), gathered;
  t.ExpectOk(t.Run(AllgatherRequest(kAllgather, g, &gathered)), kAllgather);
  t.ExpectOk(t.Run(BarrierRequest(kBarrier)), kBarrier);
  Batch fused;  // several small tensors at once: some share a fusion buffer
  for (int i = 0; i < 8; ++i) {
    Tensor& x = fused.NewTensor(DataType::kFloat64, {16});
    x.Fill([](std::int64_t) { return 1; });
    const std::string name = kFusedPrefix + std::to_string(i);
    fused.Add(AllreduceRequest(name, ReduceOp::kAverage, x, &x),
              [&t, name](const Status& s) { t.ExpectOk(s, name); });
  }
  fused.Run(t, /*all_at_once=*/true);
}

// Rank 0, after shutdown has closed the file.
void CheckTimeline(MpiTest& t, const std::string& path) {
  std::ifstream in(path);
  if (!t.Expect(in.good(), "timeline: rank 0 wrote no file at {}", path)) return;
  nlohmann::json trace;
  try {
    trace = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    t.Fail(fmt::format("timeline: {} is not valid JSON: {}", path, e.what()));
    return;
  }
  if (!t.Expect(trace.is_array(), "timeline: the top level should be an array of events")) return;

  std::map<int, std::string> rows;                     // tid -> tensor name
  std::map<std::string, std::multiset<std::string>> phases;  // tensor -> its X events
  std::vector<std::pair<int, std::string>> spans;
  for (const nlohmann::json& e : trace) {
    if (!t.Expect(e.is_object() && e.contains("ph") && e.contains("name"),
                  "timeline: event without ph/name: {}", e.dump()))
      continue;
    const std::string ph = e["ph"].get<std::string>();
    if (ph == "M" && e["name"] == "thread_name") {
      rows[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
    } else if (ph == "X") {
      // ts counts from when the file was opened, before any request existed.
      t.Expect(e.contains("ts") && e["ts"].is_number() && e["ts"].get<double>() >= 0 &&
                   e.contains("dur") && e["dur"].is_number() && e["dur"].get<double>() >= 0 &&
                   e.contains("pid") && e.contains("tid"),
               "timeline: X event needs ts >= 0, dur >= 0, pid and tid: {}", e.dump());
      if (e.contains("tid")) spans.emplace_back(e["tid"].get<int>(), e["name"].get<std::string>());
    }
  }
  for (const auto& [tid, phase] : spans) {
    auto row = rows.find(tid);
    if (t.Expect(row != rows.end(), "timeline: X event {} on row {} that has no thread_name", phase,
                 tid))
      phases[row->second].insert(phase);
  }

  for (const std::string& name : {kAllreduce, kQuoted, kBroadcast, kAllgather, kBarrier}) {
    const auto& p = phases[name];
    t.Expect(p.count("NEGOTIATE") == 1 && p.count("COLLECTIVE") == 1,
             "timeline: tensor '{}' should have one NEGOTIATE and one COLLECTIVE event, has {}",
             name, fmt::join(p, ", "));
  }
  int fused_rows = 0;
  for (int i = 0; i < 8; ++i) {
    const auto& p = phases[kFusedPrefix + std::to_string(i)];
    t.Expect(p.count("NEGOTIATE") == 1 && p.count("COLLECTIVE") == 1,
             "timeline: tensor '{}{}' should have NEGOTIATE and COLLECTIVE events, has {}",
             kFusedPrefix, i, fmt::join(p, ", "));
    fused_rows += p.count("FUSE") == 1 && p.count("COPY_OUT") == 1;
  }
  t.Expect(fused_rows >= 2, "timeline: expected FUSE and COPY_OUT events for fused tensors, "
           "found them for {} of 8", fused_rows);
  t.Expect(rows.size() >= 13, "timeline: expected a row per tensor (13 or more), found {}",
           rows.size());
}

}  // namespace
}  // namespace tfmpi::mpitest

int main(int argc, char** argv) {
  using namespace tfmpi::mpitest;
  if (argc != 2) {
    fmt::print(stderr, "usage: {} <timeline.json>\n", argv[0]);
    return 2;
  }
  const std::string path = argv[1];
  tfmpi::Status s = tfmpi::InitGlobalEngine(
      [&path](const std::string& var) -> std::optional<std::string> {
        if (var == "TFMPI_TIMELINE") return path;  // only rank 0 writes it
        if (var == "TFMPI_CYCLE_TIME_MS") return "5";  // the fused batch lands in one cycle
        return std::nullopt;
      });
  if (!s.ok()) MpiTest::AbortJob("timeline_test: InitGlobalEngine failed: " + s.ToString());
  tfmpi::Engine* engine = tfmpi::GlobalEngine(&s);
  if (!engine) MpiTest::AbortJob("timeline_test: no global engine: " + s.ToString());
  MpiTest t("timeline_test", engine, [] { tfmpi::ShutdownGlobalEngine(); });
  RunCollectives(t);
  t.AgreeAndShutdown();  // closes the file
  if (t.rank() == 0) CheckTimeline(t, path);
  return t.Finish();
}
