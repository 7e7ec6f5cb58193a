#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "tfmpi/data/bytes_read.h"
#include "tfmpi/data/npy/npy_reader.h"
#include "temp_files.h"

namespace tfmpi::data {
namespace {

using testing::TempDir;

// An npy file as numpy writes it: magic, version, little-endian header length,
// the dictionary padded with spaces and a newline to a multiple of 64 bytes.
std::string NpyBytes(const std::string& descr, const std::string& shape, const std::string& data,
                     int major = 1, const std::string& fortran = "False") {
  std::string dict = "{'descr': " + descr + ", 'fortran_order': " + fortran +
                     ", 'shape': " + shape + ", }";
  std::size_t preamble = major == 1 ? 10 : 12;
  std::size_t total = preamble + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict.push_back('\n');
  std::string out = "\x93NUMPY";
  out.push_back(static_cast<char>(major));
  out.push_back(0);
  std::size_t n = dict.size();
  for (std::size_t i = 0; i < preamble - 8; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return out + dict + data;
}

template <typename T>
std::string Bytes(const std::vector<T>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

Status Open(const std::string& path, std::unique_ptr<RowReader>* out) {
  return NpyReader::Open(path, out);
}

std::vector<float> Iota(std::size_t n) {
  std::vector<float> v(n);
  std::iota(v.begin(), v.end(), 0.0f);
  return v;
}

TEST(NpyReader, ReadsRowsInAnyOrderWithOneReadPerRun) {
  TempDir dir;
  std::string path = dir.Write("a.npy", NpyBytes("'<f4'", "(10, 3)", Bytes(Iota(30))));
  std::unique_ptr<RowReader> reader;
  ASSERT_TRUE(Open(path, &reader).ok());
  EXPECT_EQ(reader->rows(), 10);
  ASSERT_EQ(reader->columns().size(), 1u);
  EXPECT_EQ(reader->columns()[0].type, ElementType::kFloat32);
  EXPECT_EQ(reader->columns()[0].row_shape, (std::vector<std::int64_t>{3}));

  std::vector<std::int64_t> indices = {4, 5, 6, 0, 9, 9};
  std::vector<float> out(indices.size() * 3);
  std::int64_t before = BytesRead();
  ASSERT_TRUE(reader->Read(indices.data(), indices.size(), {out.data()}).ok());
  EXPECT_EQ(BytesRead() - before, static_cast<std::int64_t>(out.size() * sizeof(float)));
  for (std::size_t j = 0; j < indices.size(); ++j) {
    for (int k = 0; k < 3; ++k) EXPECT_EQ(out[j * 3 + k], indices[j] * 3 + k);
  }
}

TEST(NpyReader, ElementTypesAndVersion2Header) {
  TempDir dir;
  struct Case {
    std::string descr;
    ElementType type;
  } cases[] = {{"'|b1'", ElementType::kBool},    {"'|i1'", ElementType::kInt8},
               {"'<i2'", ElementType::kInt16},   {"'<u4'", ElementType::kUInt32},
               {"'<u8'", ElementType::kUInt64},  {"'<f2'", ElementType::kFloat16},
               {"'<f8'", ElementType::kFloat64}, {"'<i8'", ElementType::kInt64}};
  for (const Case& c : cases) {
    std::size_t size = ElementSize(c.type);
    std::string data(4 * size, '\1');
    std::string path = dir.Write("t.npy", NpyBytes(c.descr, "(4,)", data, 2));
    std::unique_ptr<RowReader> reader;
    ASSERT_TRUE(Open(path, &reader).ok()) << c.descr;
    EXPECT_EQ(reader->columns()[0].type, c.type) << c.descr;
    EXPECT_TRUE(reader->columns()[0].row_shape.empty());
    std::vector<char> out(size);
    std::int64_t row = 3;
    ASSERT_TRUE(reader->Read(&row, 1, {out.data()}).ok());
    EXPECT_EQ(std::string(out.data(), size), std::string(size, '\1'));
  }
}

TEST(NpyReader, ZeroRowsAndOneRow) {
  TempDir dir;
  std::unique_ptr<RowReader> reader;
  ASSERT_TRUE(Open(dir.Write("z.npy", NpyBytes("'<f4'", "(0, 5)", "")), &reader).ok());
  EXPECT_EQ(reader->rows(), 0);
  EXPECT_TRUE(reader->Read(nullptr, 0, {nullptr}).ok());

  ASSERT_TRUE(Open(dir.Write("o.npy", NpyBytes("'<i4'", "(1, 2)", Bytes<int>({7, 8}))), &reader).ok());
  std::vector<int> out(2);
  std::int64_t row = 0;
  ASSERT_TRUE(reader->Read(&row, 1, {out.data()}).ok());
  EXPECT_EQ(out, (std::vector<int>{7, 8}));
}

TEST(NpyReader, RowsOfSeveralMegabytes) {
  TempDir dir;
  const std::size_t per_row = 3 << 19;  // 1.5 Mi floats = 6 MiB a row
  std::string path = dir.Write("big.npy", NpyBytes("'<f4'", "(2, 1536, 1024)", Bytes(Iota(2 * per_row))));
  std::unique_ptr<RowReader> reader;
  ASSERT_TRUE(Open(path, &reader).ok());
  std::vector<std::int64_t> indices = {1, 0};
  std::vector<float> out(2 * per_row);
  ASSERT_TRUE(reader->Read(indices.data(), 2, {out.data()}).ok());
  EXPECT_EQ(out[0], per_row);
  EXPECT_EQ(out[2 * per_row - 1], per_row - 1);
}

void ExpectError(const std::string& path, StatusCode code, const std::string& text) {
  std::unique_ptr<RowReader> reader;
  testing::ExpectError(Open(path, &reader), code, path, text);
}

TEST(NpyReader, BadInputsAreClearErrors) {
  TempDir dir;
  ExpectError(dir.Path("missing.npy"), StatusCode::kNotFound, "cannot open");
  ExpectError(dir.Write("trunc.npy", NpyBytes("'<f4'", "(10, 3)", Bytes(Iota(29)))),
              StatusCode::kDataLoss, "truncated");
  ExpectError(dir.Write("header.npy", NpyBytes("'<f4'", "(10, 3)", "").substr(0, 30)),
              StatusCode::kDataLoss, "truncated");
  ExpectError(dir.Write("magic.npy", "PK\3\4 this is a zip file"), StatusCode::kDataLoss,
              "not an npy file");
  ExpectError(dir.Write("empty.npy", ""), StatusCode::kDataLoss, "not an npy file");
  ExpectError(dir.Write("be.npy", NpyBytes("'>f4'", "(1,)", "abcd")),
              StatusCode::kInvalidArgument, "big-endian");
  ExpectError(dir.Write("c.npy", NpyBytes("'<c8'", "(1,)", "abcdefgh")),
              StatusCode::kInvalidArgument, "unsupported npy dtype '<c8'");
  ExpectError(dir.Write("s.npy", NpyBytes("[('a', '<f4')]", "(1,)", "abcd")),
              StatusCode::kInvalidArgument, "structured");
  ExpectError(dir.Write("f.npy", NpyBytes("'<f4'", "(2, 2)", Bytes(Iota(4)), 1, "True")),
              StatusCode::kInvalidArgument, "Fortran");
  ExpectError(dir.Write("0d.npy", NpyBytes("'<f4'", "()", "abcd")),
              StatusCode::kInvalidArgument, "0-d");
}

TEST(NpyReader, IndexOutOfRangeNamesTheFileAndIndex) {
  TempDir dir;
  std::string path = dir.Write("a.npy", NpyBytes("'<f4'", "(3,)", Bytes(Iota(3))));
  std::unique_ptr<RowReader> reader;
  ASSERT_TRUE(Open(path, &reader).ok());
  std::vector<std::int64_t> indices = {0, 3};
  std::vector<float> out(2);
  Status s = reader->Read(indices.data(), 2, {out.data()});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find(path + ": row index 3 is out of range (the file has 3 rows)"),
            std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace tfmpi::data
