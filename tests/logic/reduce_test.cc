// ReduceInto / ScaleCopy / ScaleBuffer (common/reduce.h) for every dtype and
// op, and CheckReduceSupported (common/types.h).
#include "tfmpi/common/reduce.h"

#include <gtest/gtest.h>

#include <vector>

#include "tfmpi/common/enforce.h"
#include "tfmpi/common/half.h"
#include "typed_values.h"
#include "contains.h"

namespace tfmpi {
namespace {

using testing::Contains;
using testing::LoadAs;
using testing::StoreAs;

std::vector<unsigned char> Buffer(DataType dtype, const std::vector<double>& values) {
  std::vector<unsigned char> b(values.size() * DataTypeSize(dtype));
  for (std::size_t i = 0; i < values.size(); ++i) StoreAs(dtype, b.data(), i, values[i]);
  return b;
}

std::vector<double> Values(DataType dtype, const std::vector<unsigned char>& b) {
  std::vector<double> v(b.size() / DataTypeSize(dtype));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = LoadAs(dtype, b.data(), i);
  return v;
}

bool Signed(DataType d) { return d != DataType::kUInt8 && d != DataType::kBool; }

// Inputs and expected outputs, exactly representable in every dtype.
struct Case {
  std::vector<double> a, b, expected;
};

Case CaseFor(DataType dtype, ReduceOp op) {
  if (dtype == DataType::kBool) {
    const std::vector<double> a = {0, 1, 0, 1}, b = {0, 0, 1, 1};
    if (op == ReduceOp::kMin) return {a, b, {0, 0, 0, 1}};  // logical and
    return {a, b, {0, 1, 1, 1}};                            // max: logical or
  }
  const double neg = Signed(dtype) ? -3 : 3;
  const std::vector<double> a = {3, 1, 4, 2, neg, 0}, b = {2, 5, 1, 2, 7, 9};
  switch (op) {
    case ReduceOp::kSum:
    case ReduceOp::kAverage:  // a plain sum here: the engine divides afterwards
      return {a, b, {5, 6, 5, 4, neg + 7, 9}};
    case ReduceOp::kMin: return {a, b, {2, 1, 1, 2, neg, 0}};
    case ReduceOp::kMax: return {a, b, {3, 5, 4, 2, 7, 9}};
    case ReduceOp::kProduct: return {a, b, {6, 5, 4, 4, neg * 7, 0}};
  }
  return {};
}

TEST(ReduceInto, EveryDtypeAndOp) {
  int checked = 0;
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllReduceOps) {
      if (dtype == DataType::kBool && op != ReduceOp::kMin && op != ReduceOp::kMax) continue;
      SCOPED_TRACE(std::string(DataTypeName(dtype)) + " " + ReduceOpName(op));
      const Case c = CaseFor(dtype, op);
      auto inout = Buffer(dtype, c.a);
      const auto in = Buffer(dtype, c.b);
      ReduceInto(inout.data(), in.data(), c.a.size(), dtype, op);
      EXPECT_EQ(Values(dtype, inout), c.expected);
      EXPECT_EQ(Values(dtype, in), c.b) << "the input is not modified";
      ++checked;
    }
  }
  EXPECT_EQ(checked, 7 * 5 + 2);  // bool: min and max only
}

TEST(ReduceInto, CountLimitsTheElementsTouched) {
  auto inout = Buffer(DataType::kInt32, {1, 1, 1, 1});
  const auto in = Buffer(DataType::kInt32, {5, 5, 5, 5});
  ReduceInto(inout.data(), in.data(), 2, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(Values(DataType::kInt32, inout), (std::vector<double>{6, 6, 1, 1}));
  ReduceInto(inout.data(), in.data(), 0, DataType::kInt32, ReduceOp::kSum);
  EXPECT_EQ(Values(DataType::kInt32, inout), (std::vector<double>{6, 6, 1, 1}));
}

TEST(ReduceInto, IntegersWrapLikeTheirType) {
  auto u8 = Buffer(DataType::kUInt8, {250, 200});
  ReduceInto(u8.data(), Buffer(DataType::kUInt8, {10, 2}).data(), 2, DataType::kUInt8,
             ReduceOp::kSum);
  EXPECT_EQ(Values(DataType::kUInt8, u8), (std::vector<double>{4, 202}));
  std::vector<std::int64_t> big = {std::int64_t{1} << 40}, factor = {1 << 20};
  ReduceInto(big.data(), factor.data(), 1, DataType::kInt64, ReduceOp::kProduct);
  EXPECT_EQ(big[0], std::int64_t{1} << 60) << "int64 products are not done in a narrower type";
}

TEST(ReduceInto, HalfTypesComputeInFloatAndRoundOncePerElement) {
  // float16: 2048 + 1 = 2049 rounds to even 2048; 2048 + 3 = 2051 rounds to 2052.
  auto h = Buffer(DataType::kFloat16, {2048, 2048});
  ReduceInto(h.data(), Buffer(DataType::kFloat16, {1, 3}).data(), 2, DataType::kFloat16,
             ReduceOp::kSum);
  EXPECT_EQ(Values(DataType::kFloat16, h), (std::vector<double>{2048, 2052}));
  // bfloat16: 256 + 1 ties to 256, 256 + 3 ties to 260.
  auto b = Buffer(DataType::kBFloat16, {256, 256});
  ReduceInto(b.data(), Buffer(DataType::kBFloat16, {1, 3}).data(), 2, DataType::kBFloat16,
             ReduceOp::kSum);
  EXPECT_EQ(Values(DataType::kBFloat16, b), (std::vector<double>{256, 260}));
  // 0.1 * 0.1 in float32, rounded once, equals the float16 of the float product.
  const std::uint16_t tenth = FloatToFloat16(0.1f);
  std::uint16_t x = tenth;
  ReduceInto(&x, &tenth, 1, DataType::kFloat16, ReduceOp::kProduct);
  const float t = Float16ToFloat(tenth);
  EXPECT_EQ(x, FloatToFloat16(t * t));
}

TEST(ScaleCopy, EveryFloatingDtype) {
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                         DataType::kFloat64}) {
    SCOPED_TRACE(DataTypeName(dtype));
    const auto src = Buffer(dtype, {2, 4, -6, 0, 1});
    std::vector<unsigned char> dst(src.size(), 0xAB);
    ScaleCopy(dst.data(), src.data(), 5, dtype, 0.5);
    EXPECT_EQ(Values(dtype, dst), (std::vector<double>{1, 2, -3, 0, 0.5}));
    EXPECT_EQ(Values(dtype, src), (std::vector<double>{2, 4, -6, 0, 1})) << "source untouched";
    auto buf = src;
    ScaleBuffer(buf.data(), 5, dtype, 0.25);
    EXPECT_EQ(Values(dtype, buf), (std::vector<double>{0.5, 1, -1.5, 0, 0.25}));
  }
}

TEST(ScaleCopy, AverageOfThreeIsCloseForEveryFloatingDtype) {
  for (DataType dtype : {DataType::kFloat16, DataType::kBFloat16, DataType::kFloat32,
                         DataType::kFloat64}) {
    const auto src = Buffer(dtype, {9, 30});
    std::vector<unsigned char> dst(src.size());
    ScaleCopy(dst.data(), src.data(), 2, dtype, 1.0 / 3);
    EXPECT_NEAR(LoadAs(dtype, dst.data(), 0), 3, 3 * testing::Epsilon(dtype))
        << DataTypeName(dtype);
    EXPECT_NEAR(LoadAs(dtype, dst.data(), 1), 10, 10 * testing::Epsilon(dtype))
        << DataTypeName(dtype);
  }
}

TEST(ScaleCopy, NonFloatingDtypeIsAnEnforceError) {
  for (DataType dtype : {DataType::kInt32, DataType::kInt64, DataType::kUInt8, DataType::kBool}) {
    std::vector<unsigned char> buf(16);
    EXPECT_THROW(ScaleBuffer(buf.data(), 2, dtype, 0.5), EnforceError) << DataTypeName(dtype);
  }
}

TEST(CheckReduceSupported, AverageNeedsAFloatingDtype) {
  for (DataType dtype : kAllDataTypes) {
    const Status s = CheckReduceSupported(dtype, ReduceOp::kAverage);
    EXPECT_EQ(s.ok(), IsFloatingPoint(dtype)) << DataTypeName(dtype);
    if (!s.ok()) {
      EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
      EXPECT_TRUE(Contains(s.message(), {DataTypeName(dtype)}));
      EXPECT_TRUE(Contains(s.message(), {"average"}));
    }
  }
}

TEST(CheckReduceSupported, BoolSupportsOnlyMinAndMax) {
  for (ReduceOp op : kAllReduceOps) {
    const Status s = CheckReduceSupported(DataType::kBool, op);
    EXPECT_EQ(s.ok(), op == ReduceOp::kMin || op == ReduceOp::kMax) << ReduceOpName(op);
  }
  for (ReduceOp op : {ReduceOp::kSum, ReduceOp::kMin, ReduceOp::kMax, ReduceOp::kProduct})
    for (DataType dtype : kAllDataTypes) {
      if (dtype != DataType::kBool) {
        EXPECT_TRUE(CheckReduceSupported(dtype, op).ok());
      }
    }
}

TEST(Types, NamesParseBack) {
  for (DataType dtype : kAllDataTypes) EXPECT_EQ(ParseDataType(DataTypeName(dtype)), dtype);
  for (ReduceOp op : kAllReduceOps) EXPECT_EQ(ParseReduceOp(ReduceOpName(op)), op);
  EXPECT_FALSE(ParseDataType("float128").has_value());
  EXPECT_FALSE(ParseReduceOp("mean").has_value());
  EXPECT_EQ(NumElements({}), 1);
  EXPECT_EQ(NumElements({3, 0, 2}), 0);
  EXPECT_EQ(ShapeToString({3, 4}), "[3, 4]");
}

}  // namespace
}  // namespace tfmpi
