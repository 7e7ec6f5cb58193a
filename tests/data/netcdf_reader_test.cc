#include <gtest/gtest.h>
#include <netcdf.h>

#include <numeric>
#include <vector>

#include "tfmpi/data/bytes_read.h"
#include "tfmpi/data/netcdf/netcdf_reader.h"
#include "temp_files.h"

namespace tfmpi::data {
namespace {

using testing::TempDir;

#define NC_OK(expr) ASSERT_EQ((expr), NC_NOERR) << #expr

template <typename T>
std::vector<T> Iota(std::size_t n) {
  std::vector<T> v(n);
  std::iota(v.begin(), v.end(), T(0));
  return v;
}

// A NetCDF-4 file with `records` records along the unlimited dimension "time":
// temp(time, x=3) float, count(time) int64, g/u(time) ubyte, name(time, 4) char,
// scalar() double; and "other"(y=5) float.
void WriteFile(const std::string& path, std::size_t records) {
  int nc, time, x, y, len4, temp, count, u, name, scalar, other, g;
  NC_OK(nc_create(path.c_str(), NC_NETCDF4 | NC_CLOBBER, &nc));
  NC_OK(nc_def_dim(nc, "time", NC_UNLIMITED, &time));
  NC_OK(nc_def_dim(nc, "x", 3, &x));
  NC_OK(nc_def_dim(nc, "y", 5, &y));
  NC_OK(nc_def_dim(nc, "len4", 4, &len4));
  int temp_dims[] = {time, x}, name_dims[] = {time, len4};
  NC_OK(nc_def_var(nc, "temp", NC_FLOAT, 2, temp_dims, &temp));
  NC_OK(nc_def_var(nc, "count", NC_INT64, 1, &time, &count));
  NC_OK(nc_def_var(nc, "name", NC_CHAR, 2, name_dims, &name));
  NC_OK(nc_def_var(nc, "scalar", NC_DOUBLE, 0, nullptr, &scalar));
  NC_OK(nc_def_var(nc, "other", NC_FLOAT, 1, &y, &other));
  NC_OK(nc_def_grp(nc, "g", &g));
  NC_OK(nc_def_var(g, "u", NC_UBYTE, 1, &time, &u));
  NC_OK(nc_enddef(nc));
  if (records > 0) {
    std::size_t start[] = {0, 0}, temp_count[] = {records, 3};
    NC_OK(nc_put_vara_float(nc, temp, start, temp_count, Iota<float>(3 * records).data()));
    std::vector<long long> counts(records);
    std::iota(counts.begin(), counts.end(), 100LL);
    NC_OK(nc_put_vara_longlong(nc, count, start, &records, counts.data()));
    NC_OK(nc_put_vara_uchar(g, u, start, &records, Iota<unsigned char>(records).data()));
  }
  NC_OK(nc_close(nc));
}

std::unique_ptr<RowReader> OpenOk(const std::string& path, const std::vector<std::string>& names) {
  std::unique_ptr<RowReader> reader;
  Status s = NetcdfReader::Open(path, names, &reader);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return reader;
}

TEST(NetcdfReader, RecordsOfSeveralVariablesInAnyOrder) {
  TempDir dir;
  std::string path = dir.Path("a.nc");
  WriteFile(path, 12);
  auto reader = OpenOk(path, {"temp", "count", "g/u"});
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->rows(), 12);
  const auto& cols = reader->columns();
  EXPECT_EQ(cols[0].type, ElementType::kFloat32);
  EXPECT_EQ(cols[0].row_shape, (std::vector<std::int64_t>{3}));
  EXPECT_EQ(cols[1].type, ElementType::kInt64);
  EXPECT_EQ(cols[2].type, ElementType::kUInt8);

  std::vector<std::int64_t> indices = {11, 3, 4, 5, 0, 0};
  std::vector<float> temp(indices.size() * 3);
  std::vector<std::int64_t> count(indices.size());
  std::vector<std::uint8_t> u(indices.size());
  std::int64_t before = BytesRead();
  ASSERT_TRUE(reader->Read(indices.data(), indices.size(), {temp.data(), count.data(), u.data()}).ok());
  EXPECT_EQ(BytesRead() - before, static_cast<std::int64_t>(indices.size() * (12 + 8 + 1)));
  for (std::size_t j = 0; j < indices.size(); ++j) {
    EXPECT_EQ(count[j], 100 + indices[j]);
    EXPECT_EQ(u[j], indices[j]);
    for (int k = 0; k < 3; ++k) EXPECT_EQ(temp[j * 3 + k], indices[j] * 3 + k);
  }
}

TEST(NetcdfReader, ZeroAndOneRecord) {
  TempDir dir;
  WriteFile(dir.Path("z.nc"), 0);
  auto empty = OpenOk(dir.Path("z.nc"), {"temp"});
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->rows(), 0);
  EXPECT_TRUE(empty->Read(nullptr, 0, {nullptr}).ok());

  WriteFile(dir.Path("o.nc"), 1);
  auto one = OpenOk(dir.Path("o.nc"), {"count"});
  ASSERT_TRUE(one);
  std::int64_t row = 0, value = 0;
  ASSERT_TRUE(one->Read(&row, 1, {&value}).ok());
  EXPECT_EQ(value, 100);
}

void ExpectError(const std::string& path, const std::vector<std::string>& names,
                 StatusCode code, const std::string& text) {
  std::unique_ptr<RowReader> reader;
  testing::ExpectError(NetcdfReader::Open(path, names, &reader), code, path, text);
}

TEST(NetcdfReader, BadInputsAreClearErrors) {
  TempDir dir;
  std::string path = dir.Path("c.nc");
  WriteFile(path, 2000);
  ExpectError(dir.Path("missing.nc"), {"temp"}, StatusCode::kNotFound, "cannot open");
  ExpectError(dir.Write("text.nc", "this is not NetCDF"), {"temp"}, StatusCode::kDataLoss,
              "NetCDF cannot open the file");
  ExpectError(path, {"temp", "nope"}, StatusCode::kNotFound, "no variable 'nope' in the file");
  ExpectError(path, {"h/u"}, StatusCode::kNotFound, "no group '/h' in the file");
  ExpectError(path, {"temp", "other"}, StatusCode::kInvalidArgument,
              "variable 'other': has 5 rows but variable 'temp' has 2000");
  ExpectError(path, {"scalar"}, StatusCode::kInvalidArgument, "variable 'scalar': is a scalar");
  ExpectError(path, {"name"}, StatusCode::kInvalidArgument,
              "variable 'name': unsupported NetCDF type");
  ExpectError(path, {}, StatusCode::kInvalidArgument, "name at least one NetCDF variable");

  std::string truncated = dir.WriteTruncatedCopy(path, "trunc");
  ExpectError(truncated, {"temp"}, StatusCode::kDataLoss, "truncated or corrupt");
}

}  // namespace
}  // namespace tfmpi::data
