#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tfmpi/data/bytes_read.h"
#include "tfmpi/data/csv/csv_fields.h"
#include "tfmpi/data/csv/csv_index.h"
#include "tfmpi/data/csv/csv_reader.h"
#include "temp_files.h"

namespace tfmpi::data {
namespace {

using testing::TempDir;

std::unique_ptr<RowReader> OpenOk(const std::string& path, const CsvOptions& options) {
  std::unique_ptr<RowReader> reader;
  Status s = CsvReader::Open(path, options, &reader);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return reader;
}

CsvOptions Typed(std::vector<std::string> columns, std::vector<ElementType> types) {
  CsvOptions o;
  o.columns = std::move(columns);
  o.types = std::move(types);
  return o;
}

TEST(CsvFields, QuotesDelimitersAndLineEnds) {
  std::vector<std::string> f;
  CsvSplitError e;
  ASSERT_TRUE(SplitCsvRecord("a,\"b,\"\"c\"\"\nd\",,e\r\nnext", ',', &f, &e));
  EXPECT_EQ(f, (std::vector<std::string>{"a", "b,\"c\"\nd", "", "e"}));
  ASSERT_TRUE(SplitCsvRecord("x;\"\"", ';', &f, &e));
  EXPECT_EQ(f, (std::vector<std::string>{"x", ""}));
  EXPECT_FALSE(SplitCsvRecord("a,\"b\"c", ',', &f, &e));
  EXPECT_EQ(e.offset, 5u);
  EXPECT_FALSE(SplitCsvRecord("a,b\"c", ',', &f, &e));
  EXPECT_FALSE(SplitCsvRecord("a,\"bc", ',', &f, &e));
}

TEST(CsvFields, TypedValues) {
  std::int8_t i8;
  EXPECT_TRUE(ParseCsvValue(" -128 ", ElementType::kInt8, &i8));
  EXPECT_EQ(i8, -128);
  EXPECT_FALSE(ParseCsvValue("128", ElementType::kInt8, &i8));
  std::uint32_t u32;
  EXPECT_FALSE(ParseCsvValue("-1", ElementType::kUInt32, &u32));
  double d;
  EXPECT_TRUE(ParseCsvValue("+1.5e3", ElementType::kFloat64, &d));
  EXPECT_EQ(d, 1500.0);
  EXPECT_FALSE(ParseCsvValue("1.5x", ElementType::kFloat64, &d));
  EXPECT_FALSE(ParseCsvValue("", ElementType::kFloat64, &d));
  bool b;
  EXPECT_TRUE(ParseCsvValue("TRUE", ElementType::kBool, &b));
  EXPECT_TRUE(b);
  EXPECT_TRUE(ParseCsvValue("0", ElementType::kBool, &b));
  EXPECT_FALSE(b);
  EXPECT_FALSE(ParseCsvValue("yes", ElementType::kBool, &b));
}

// Quoted fields with delimiters, doubled quotes and line breaks; CRLF; blank
// lines; no final newline.
const char kTricky[] =
    "id,text,score\r\n"
    "0,\"plain\",1.5\r\n"
    "1,\"a, b\",2.5\r\n"
    "\r\n"
    "2,\"say \"\"hi\"\"\",3.5\r\n"
    "3,\"two\r\nlines\",\"4.5\"\r\n"
    "4,,5.5";

TEST(CsvReader, QuotedFieldsCrlfAndBlankLines) {
  TempDir dir;
  std::string path = dir.Write("t.csv", kTricky);
  auto reader = OpenOk(path, Typed({"score", "id"}, {ElementType::kFloat32, ElementType::kInt64}));
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->rows(), 5);
  EXPECT_EQ(reader->columns()[0].name, "score");
  std::vector<std::int64_t> indices = {4, 3, 2, 1, 0, 2};
  std::vector<float> score(indices.size());
  std::vector<std::int64_t> id(indices.size());
  ASSERT_TRUE(reader->Read(indices.data(), indices.size(), {score.data(), id.data()}).ok());
  for (std::size_t j = 0; j < indices.size(); ++j) {
    EXPECT_EQ(id[j], indices[j]);
    EXPECT_EQ(score[j], indices[j] + 1.5f);
  }
}

TEST(CsvReader, IndexDoesNotDependOnTheBufferSize) {
  TempDir dir;
  std::string path = dir.Write("t.csv", kTricky);
  PosixFile file;
  ASSERT_TRUE(PosixFile::Open(path, &file).ok());
  std::vector<std::int64_t> reference, small;
  ASSERT_TRUE(BuildCsvIndex(file, 1 << 20, &reference).ok());
  EXPECT_EQ(reference.size(), 7u);  // header, 5 rows, end
  for (std::size_t buffer : {1, 2, 3, 7, 16}) {
    ASSERT_TRUE(BuildCsvIndex(file, buffer, &small).ok());
    EXPECT_EQ(small, reference) << "buffer " << buffer;
  }
}

TEST(CsvReader, IndexIsSharedUntilTheFileChanges) {
  TempDir dir;
  std::string path = dir.Write("s.csv", "a\n1\n2\n3\n");
  auto first = OpenOk(path, Typed({}, {ElementType::kInt32}));
  std::int64_t before = BytesRead();
  auto second = OpenOk(path, Typed({"a"}, {ElementType::kInt64}));
  ASSERT_TRUE(first && second);
  EXPECT_EQ(BytesRead() - before, 2) << "only the header is read again";
  EXPECT_EQ(second->rows(), 3);

  dir.Write("s.csv", "a\n1\n2\n3\n4\n5\n");  // rewritten in place: new size, new mtime
  auto third = OpenOk(path, Typed({}, {ElementType::kInt32}));
  ASSERT_TRUE(third);
  EXPECT_EQ(third->rows(), 5);
}

TEST(CsvReader, RowsLargerThanTheReadBuffer) {
  TempDir dir;
  std::string big(3 << 20, 'x');  // a 3 MiB quoted field, larger than the 1 MiB buffer
  std::string text = "a,b\n1,\"" + big + "\"\n2,\"" + big + "\n" + big + "\"\n3,x\n";
  std::string path = dir.Write("big.csv", text);
  auto reader = OpenOk(path, Typed({"a"}, {ElementType::kInt32}));
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->rows(), 3);
  std::vector<std::int64_t> indices = {0, 1, 2};
  std::vector<std::int32_t> a(3);
  ASSERT_TRUE(reader->Read(indices.data(), 3, {a.data()}).ok());
  EXPECT_EQ(a, (std::vector<std::int32_t>{1, 2, 3}));
}

TEST(CsvReader, EmptyHeaderOnlyOneRowAndNoHeader) {
  TempDir dir;
  CsvOptions no_header;
  no_header.header = false;
  auto empty = OpenOk(dir.Write("e.csv", ""), no_header);
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->rows(), 0);

  auto header_only = OpenOk(dir.Write("h.csv", "a,b\r\n"), CsvOptions{});
  ASSERT_TRUE(header_only);
  EXPECT_EQ(header_only->rows(), 0);
  EXPECT_EQ(header_only->columns().size(), 2u);

  auto one = OpenOk(dir.Write("o.csv", "7;8\n"), [] {
    CsvOptions o = Typed({"1"}, {ElementType::kUInt16});
    o.header = false;
    o.delimiter = ';';
    return o;
  }());
  ASSERT_TRUE(one);
  EXPECT_EQ(one->rows(), 1);
  EXPECT_EQ(one->columns()[0].name, "1");
  std::uint16_t v = 0;
  std::int64_t row = 0;
  ASSERT_TRUE(one->Read(&row, 1, {&v}).ok());
  EXPECT_EQ(v, 8);
}

Status ReadRow(const std::string& path, const CsvOptions& options, std::int64_t row) {
  std::unique_ptr<RowReader> reader;
  TFMPI_RETURN_IF_ERROR(CsvReader::Open(path, options, &reader));
  std::vector<std::vector<char>> buffers;
  std::vector<void*> outputs;
  for (const ColumnSchema& c : reader->columns()) {
    buffers.emplace_back(c.RowBytes());
    outputs.push_back(buffers.back().data());
  }
  return reader->Read(&row, 1, outputs);
}

void ExpectError(const Status& s, StatusCode code, const std::string& text) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
}

TEST(CsvReader, BadInputsNameFileRowColumnAndOffset) {
  TempDir dir;
  std::string missing = dir.Path("missing.csv");
  ExpectError(ReadRow(missing, {}, 0), StatusCode::kNotFound, missing + ": cannot open");

  std::string fields = dir.Write("fields.csv", "a,b\n1,2\n3\n");
  ExpectError(ReadRow(fields, {}, 1), StatusCode::kInvalidArgument,
              fields + ": row 1 (byte offset 8) has 1 fields; the header has 2");
  EXPECT_TRUE(ReadRow(fields, {}, 0).ok());  // only requested rows are parsed

  std::string value = dir.Write("value.csv", "a,b\n1,2\n3,x4\n");
  ExpectError(ReadRow(value, Typed({}, {ElementType::kInt64}), 1),
              StatusCode::kInvalidArgument,
              value + ": row 1 (byte offset 8), column 'b': 'x4' does not parse as int64");
  ExpectError(ReadRow(dir.Write("range.csv", "a\n300\n"), Typed({}, {ElementType::kInt8}), 0),
              StatusCode::kInvalidArgument, "'300' does not parse as int8");

  ExpectError(ReadRow(fields, Typed({"c"}, {}), 0), StatusCode::kNotFound,
              fields + ": no column 'c' (the columns are: a, b)");
  ExpectError(ReadRow(fields, Typed({"a", "b"}, {ElementType::kInt32, ElementType::kInt32,
                                                 ElementType::kInt32}), 0),
              StatusCode::kInvalidArgument, "3 types given for 2 columns");

  std::string open_quote = dir.Write("quote.csv", "a,b\n1,2\n3,\"4\n");
  ExpectError(ReadRow(open_quote, {}, 0), StatusCode::kDataLoss,
              open_quote + ": the record at byte offset 8 has a quoted field that is never closed");

  std::string stray = dir.Write("stray.csv", "a,b\n1,\"2\"x\n");
  ExpectError(ReadRow(stray, {}, 0), StatusCode::kDataLoss,
              stray + ": row 0 (byte offset 9): text after the closing quote");

  ExpectError(ReadRow(dir.Write("empty.csv", ""), {}, 0), StatusCode::kInvalidArgument,
              "the file is empty but a header row was expected");
  ExpectError(ReadRow(fields, Typed({}, {ElementType::kFloat16}), 0),
              StatusCode::kInvalidArgument, "float16 is not supported for CSV");
}

}  // namespace
}  // namespace tfmpi::data
