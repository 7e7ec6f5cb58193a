// wire: encoding of negotiation messages. Round trips are exact; truncated,
// padded, oversized or garbage input is reported as an error, never a crash.
#include "tfmpi/engine/wire.h"

#include <gtest/gtest.h>

#include <limits>
#include <random>
#include "contains.h"

namespace tfmpi::wire {
namespace {

using testing::Contains;


std::vector<TensorMeta> SampleMetas() {
  std::vector<TensorMeta> metas;
  TensorMeta m;
  m.name = "layer0/kernel:0";
  m.kind = CollectiveKind::kAllreduce;
  m.dtype = DataType::kBFloat16;
  m.op = ReduceOp::kProduct;
  m.shape = {3, 4, 5};
  metas.push_back(m);
  m.name = std::string("bin\0ary\xff", 8);  // names are bytes, not C strings
  m.kind = CollectiveKind::kBroadcast;
  m.dtype = DataType::kBool;
  m.root = 15;
  m.shape = {};
  metas.push_back(m);
  m.name = "";
  m.kind = CollectiveKind::kAllgather;
  m.dtype = DataType::kInt64;
  m.root = -1;
  m.shape = {0, std::numeric_limits<std::int64_t>::max()};
  metas.push_back(m);
  m.name = "barrier";
  m.kind = CollectiveKind::kBarrier;
  m.shape = {};
  metas.push_back(m);
  m.name = "owned/grad";
  m.kind = CollectiveKind::kReduce;
  m.dtype = DataType::kFloat32;
  m.op = ReduceOp::kAverage;
  m.root = 3;
  m.shape = {7, 2};
  metas.push_back(m);
  return metas;
}

std::vector<Response> SampleResponses() {
  std::vector<Response> out;
  for (const TensorMeta& m : SampleMetas()) {
    Response r;
    r.meta = m;
    out.push_back(r);
  }
  out[2].first_dims = {0, 7, 2};
  out[0].error = "tensor 'layer0/kernel:0': ranks disagree on the shape: rank 1 has [2]";
  return out;
}

void ExpectSame(const std::vector<Response>& a, const std::vector<Response>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].meta, b[i].meta) << i;
    EXPECT_EQ(a[i].first_dims, b[i].first_dims) << i;
    EXPECT_EQ(a[i].error, b[i].error) << i;
  }
}

TEST(Wire, MetasRoundTrip) {
  const auto metas = SampleMetas();
  std::vector<TensorMeta> back = {TensorMeta{}};  // decoding replaces old contents
  ASSERT_TRUE(DecodeMetas(EncodeMetas(metas), &back).ok());
  EXPECT_EQ(back, metas);
}

TEST(Wire, EmptyListsRoundTrip) {
  std::vector<TensorMeta> metas = SampleMetas();
  ASSERT_TRUE(DecodeMetas(EncodeMetas({}), &metas).ok());
  EXPECT_TRUE(metas.empty());
  std::vector<Response> responses = SampleResponses();
  ASSERT_TRUE(DecodeResponses(EncodeResponses({}), &responses).ok());
  EXPECT_TRUE(responses.empty());
}

TEST(Wire, ResponsesRoundTrip) {
  std::vector<Response> back;
  ASSERT_TRUE(DecodeResponses(EncodeResponses(SampleResponses()), &back).ok());
  ExpectSame(back, SampleResponses());
}

TEST(Wire, EveryTruncationIsAnError) {
  const std::string metas = EncodeMetas(SampleMetas());
  const std::string responses = EncodeResponses(SampleResponses());
  for (std::size_t n = 0; n < metas.size(); ++n) {
    std::vector<TensorMeta> out;
    const Status s = DecodeMetas(metas.substr(0, n), &out);
    EXPECT_EQ(s.code(), StatusCode::kInternal) << "metas cut at " << n;
  }
  for (std::size_t n = 0; n < responses.size(); ++n) {
    std::vector<Response> out;
    const Status s = DecodeResponses(responses.substr(0, n), &out);
    EXPECT_EQ(s.code(), StatusCode::kInternal) << "responses cut at " << n;
  }
}

TEST(Wire, TrailingBytesAreAnError) {
  std::vector<TensorMeta> out;
  const Status s = DecodeMetas(EncodeMetas(SampleMetas()) + "x", &out);
  EXPECT_EQ(s.code(), StatusCode::kInternal);
  EXPECT_TRUE(Contains(s.message(), {"corrupt negotiation message"}));
  std::vector<Response> rs;
  EXPECT_FALSE(DecodeResponses(EncodeResponses(SampleResponses()) + '\0', &rs).ok());
}

TEST(Wire, HugeLengthFieldsAreAnErrorNotAnAllocation) {
  const std::uint64_t huge = std::numeric_limits<std::uint64_t>::max();
  std::string bytes(reinterpret_cast<const char*>(&huge), sizeof huge);  // list count
  std::vector<TensorMeta> out;
  EXPECT_FALSE(DecodeMetas(bytes, &out).ok());

  const std::uint64_t one = 1;
  std::string name_len(reinterpret_cast<const char*>(&one), sizeof one);
  name_len.append(reinterpret_cast<const char*>(&huge), sizeof huge);  // name length
  EXPECT_FALSE(DecodeMetas(name_len, &out).ok());

  // A valid meta whose shape claims 2^61 dimensions.
  std::string shape = EncodeMetas({TensorMeta{}});
  const std::uint64_t dims = std::uint64_t{1} << 61;
  shape.replace(shape.size() - sizeof dims, sizeof dims,
                reinterpret_cast<const char*>(&dims), sizeof dims);
  EXPECT_FALSE(DecodeMetas(shape, &out).ok());
}

// The enum bytes sit after the list count and the name ("x": 8 + 8 + 1 bytes).
TEST(Wire, OutOfRangeEnumValuesAreAnError) {
  TensorMeta m;
  m.name = "x";
  m.shape = {2};
  const std::string good = EncodeMetas({m});
  std::vector<TensorMeta> out;
  ASSERT_TRUE(DecodeMetas(good, &out).ok());
  for (std::size_t offset : {17u, 18u, 19u}) {  // kind, dtype, op
    std::string bad = good;
    bad[offset] = static_cast<char>(0x7f);
    EXPECT_EQ(DecodeMetas(bad, &out).code(), StatusCode::kInternal) << "offset " << offset;
  }
}

TEST(Wire, RandomBytesNeverCrash) {
  std::mt19937 rng(3);
  const std::string valid = EncodeResponses(SampleResponses());
  int decoded = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string bytes;
    if (trial % 2 == 0) {  // pure noise
      bytes.resize(rng() % 96);
      for (char& c : bytes) c = static_cast<char>(rng());
    } else {  // a valid message with a few bytes flipped
      bytes = valid;
      for (int k = 0; k < 3; ++k) bytes[rng() % bytes.size()] ^= static_cast<char>(1 + rng() % 255);
    }
    std::vector<TensorMeta> metas;
    std::vector<Response> responses;
    const Status a = DecodeMetas(bytes, &metas);
    const Status b = DecodeResponses(bytes, &responses);
    for (const Status* s : {&a, &b}) {
      if (!s->ok()) {
        EXPECT_EQ(s->code(), StatusCode::kInternal);
      }
    }
    decoded += b.ok();
  }
  EXPECT_LT(decoded, 3000) << "corruption must be noticed at least sometimes";
}


// Full-round messages: a rank's report (with its leave notice) and rank 0's
// decisions (with the leave notices it passes on).
TEST(Wire, ReportsAndDecisionsRoundTrip) {
  RankReport report;
  report.metas = SampleMetas();
  report.leaving = true;
  report.exit_reason = "ValueError: bad batch\n(traceback in rank 1's output)";
  RankReport back;
  ASSERT_TRUE(DecodeReport(EncodeReport(report), &back).ok());
  EXPECT_EQ(back.metas, report.metas);
  EXPECT_TRUE(back.leaving);
  EXPECT_EQ(back.exit_reason, report.exit_reason);
  ASSERT_TRUE(DecodeReport(EncodeReport(RankReport{}), &back).ok());
  EXPECT_TRUE(back.metas.empty());
  EXPECT_FALSE(back.leaving);
  EXPECT_EQ(back.exit_reason, "");

  Decisions decisions;
  decisions.responses = SampleResponses();
  decisions.leaving = {{3, ""}, {1, "RuntimeError: out of data"}};
  Decisions got;
  ASSERT_TRUE(DecodeDecisions(EncodeDecisions(decisions), &got).ok());
  ExpectSame(got.responses, decisions.responses);
  ASSERT_EQ(got.leaving.size(), 2u);
  EXPECT_EQ(got.leaving[0].rank, 3);
  EXPECT_EQ(got.leaving[0].exit_reason, "");
  EXPECT_EQ(got.leaving[1].rank, 1);
  EXPECT_EQ(got.leaving[1].exit_reason, "RuntimeError: out of data");
}

TEST(Wire, CorruptReportsAndDecisionsAreErrors) {
  RankReport report;
  report.metas = SampleMetas();
  report.exit_reason = "why";
  const std::string r = EncodeReport(report);
  Decisions decisions;
  decisions.responses = SampleResponses();
  decisions.leaving = {{2, "why"}};
  const std::string d = EncodeDecisions(decisions);
  RankReport rout;
  Decisions dout;
  for (std::size_t n = 0; n < r.size(); ++n)
    EXPECT_EQ(DecodeReport(r.substr(0, n), &rout).code(), StatusCode::kInternal) << n;
  for (std::size_t n = 0; n < d.size(); ++n)
    EXPECT_EQ(DecodeDecisions(d.substr(0, n), &dout).code(), StatusCode::kInternal) << n;
  EXPECT_FALSE(DecodeReport(r + "x", &rout).ok());
  EXPECT_FALSE(DecodeDecisions(d + "x", &dout).ok());
  // The leave flag is one byte after the metas: only 0 and 1 are valid.
  std::string bad = EncodeReport(RankReport{});
  bad[sizeof(std::uint64_t)] = 2;
  EXPECT_FALSE(DecodeReport(bad, &rout).ok());
  // A negative rank in a leave notice.
  decisions.responses.clear();
  decisions.leaving = {{-1, ""}};
  EXPECT_FALSE(DecodeDecisions(EncodeDecisions(decisions), &dout).ok());
}

}  // namespace
}  // namespace tfmpi::wire
