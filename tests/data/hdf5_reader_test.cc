#include <gtest/gtest.h>
#include <hdf5.h>

#include <numeric>
#include <vector>

#include "tfmpi/data/bytes_read.h"
#include "tfmpi/data/hdf5/hdf5_reader.h"
#include "temp_files.h"

namespace tfmpi::data {
namespace {

using testing::TempDir;

// Writes datasets into a new HDF5 file with the HDF5 C API.
class Hdf5Writer {
 public:
  explicit Hdf5Writer(const std::string& path)
      : file_(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT)) {}
  ~Hdf5Writer() { H5Fclose(file_); }

  template <typename T>
  // `type` in the file; `memory` is the type of `data` (default: the same).
  void Write(const std::string& name, hid_t type, const std::vector<hsize_t>& dims,
             const std::vector<T>& data, hid_t memory = -1) {
    hid_t space = dims.empty() ? H5Screate(H5S_SCALAR)
                               : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    hid_t links = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(links, 1);
    hid_t ds = H5Dcreate2(file_, name.c_str(), type, space, links, H5P_DEFAULT, H5P_DEFAULT);
    if (!data.empty()) H5Dwrite(ds, memory >= 0 ? memory : type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data());
    H5Dclose(ds);
    H5Pclose(links);
    H5Sclose(space);
  }

 private:
  hid_t file_;
};

template <typename T>
std::vector<T> Iota(std::size_t n) {
  std::vector<T> v(n);
  std::iota(v.begin(), v.end(), T(0));
  return v;
}

std::unique_ptr<RowReader> OpenOk(const std::string& path, const std::vector<std::string>& names) {
  std::unique_ptr<RowReader> reader;
  Status s = Hdf5Reader::Open(path, names, &reader);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return reader;
}

TEST(Hdf5Reader, SeveralDatasetsInAnyRowOrder) {
  TempDir dir;
  std::string path = dir.Path("a.h5");
  {
    Hdf5Writer w(path);
    w.Write("x", H5T_NATIVE_FLOAT, {10, 2, 3}, Iota<float>(60));
    w.Write("group/y", H5T_STD_I64BE, {10}, Iota<std::int64_t>(10), H5T_NATIVE_INT64);
    w.Write("u", H5T_NATIVE_UINT8, {10, 1}, Iota<std::uint8_t>(10));
  }
  auto reader = OpenOk(path, {"x", "group/y", "u"});
  ASSERT_TRUE(reader);
  EXPECT_EQ(reader->rows(), 10);
  const auto& cols = reader->columns();
  EXPECT_EQ(cols[0].type, ElementType::kFloat32);
  EXPECT_EQ(cols[0].row_shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(cols[1].type, ElementType::kInt64);
  EXPECT_TRUE(cols[1].row_shape.empty());
  EXPECT_EQ(cols[2].type, ElementType::kUInt8);

  std::vector<std::int64_t> indices = {7, 8, 9, 2, 2, 0};
  std::vector<float> x(indices.size() * 6);
  std::vector<std::int64_t> y(indices.size());
  std::vector<std::uint8_t> u(indices.size());
  std::int64_t before = BytesRead();
  ASSERT_TRUE(reader->Read(indices.data(), indices.size(), {x.data(), y.data(), u.data()}).ok());
  EXPECT_EQ(BytesRead() - before, static_cast<std::int64_t>(indices.size() * (24 + 8 + 1)));
  for (std::size_t j = 0; j < indices.size(); ++j) {
    EXPECT_EQ(y[j], indices[j]);
    EXPECT_EQ(u[j], indices[j]);
    for (int k = 0; k < 6; ++k) EXPECT_EQ(x[j * 6 + k], indices[j] * 6 + k);
  }
}

TEST(Hdf5Reader, ZeroRowsOneRowAndLargeRows) {
  TempDir dir;
  std::string path = dir.Path("b.h5");
  const std::size_t big = 1 << 20;  // 8 MiB rows of float64
  {
    Hdf5Writer w(path);
    w.Write("empty", H5T_NATIVE_INT32, {0, 4}, std::vector<std::int32_t>{});
    w.Write("one", H5T_NATIVE_DOUBLE, {1, 2}, std::vector<double>{1.5, 2.5});
    w.Write("big", H5T_NATIVE_DOUBLE, {2, big}, Iota<double>(2 * big));
  }
  auto empty = OpenOk(path, {"empty"});
  ASSERT_TRUE(empty);
  EXPECT_EQ(empty->rows(), 0);
  EXPECT_TRUE(empty->Read(nullptr, 0, {nullptr}).ok());

  auto one = OpenOk(path, {"one"});
  ASSERT_TRUE(one);
  std::vector<double> out(2);
  std::int64_t row = 0;
  ASSERT_TRUE(one->Read(&row, 1, {out.data()}).ok());
  EXPECT_EQ(out, (std::vector<double>{1.5, 2.5}));

  auto large = OpenOk(path, {"big"});
  ASSERT_TRUE(large);
  std::vector<std::int64_t> indices = {1, 0};
  std::vector<double> rows(2 * big);
  ASSERT_TRUE(large->Read(indices.data(), 2, {rows.data()}).ok());
  EXPECT_EQ(rows[0], big);
  EXPECT_EQ(rows[2 * big - 1], big - 1);
}

void ExpectError(const std::string& path, const std::vector<std::string>& names,
                 StatusCode code, const std::string& text) {
  std::unique_ptr<RowReader> reader;
  testing::ExpectError(Hdf5Reader::Open(path, names, &reader), code, path, text);
}

TEST(Hdf5Reader, BadInputsAreClearErrors) {
  TempDir dir;
  std::string path = dir.Path("c.h5");
  {
    Hdf5Writer w(path);
    w.Write("x", H5T_NATIVE_FLOAT, {1000, 4}, Iota<float>(4000));
    w.Write("short", H5T_NATIVE_FLOAT, {9}, Iota<float>(9));
    w.Write("scalar", H5T_NATIVE_FLOAT, {}, std::vector<float>{1});
    hid_t str = H5Tcopy(H5T_C_S1);
    H5Tset_size(str, 4);
    w.Write("text", str, {2}, std::vector<char>(8, 'a'));
    H5Tclose(str);
  }
  ExpectError(dir.Path("missing.h5"), {"x"}, StatusCode::kNotFound, "cannot open");
  ExpectError(dir.Write("text.h5", "this is not HDF5"), {"x"}, StatusCode::kDataLoss,
              "not an HDF5 file");
  ExpectError(path, {"x", "nope"}, StatusCode::kNotFound, "no dataset 'nope' in the file");
  ExpectError(path, {"x", "short"}, StatusCode::kInvalidArgument,
              "dataset 'short': has 9 rows but dataset 'x' has 1000");
  ExpectError(path, {"scalar"}, StatusCode::kInvalidArgument, "dataset 'scalar': is a scalar");
  ExpectError(path, {"text"}, StatusCode::kInvalidArgument,
              "dataset 'text': unsupported element type (string of 4 bytes)");
  ExpectError(path, {}, StatusCode::kInvalidArgument, "name at least one HDF5 dataset");

  std::string truncated = dir.WriteTruncatedCopy(path, "trunc");
  ExpectError(truncated, {"x"}, StatusCode::kDataLoss, "truncated or corrupt");
}

}  // namespace
}  // namespace tfmpi::data
