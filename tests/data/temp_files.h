// A temporary directory per test, removed with its files afterwards, and
// helpers to write test files into it and to check errors.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "tfmpi/common/status.h"

namespace tfmpi::data::testing {

class TempDir {
 public:
  TempDir() {
    std::string pattern = (std::filesystem::temp_directory_path() / "tfmpi-data-XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) ADD_FAILURE() << "mkdtemp failed";
    dir_ = pattern;
  }
  ~TempDir() { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  std::string Write(const std::string& name, const std::string& bytes) const {
    std::ofstream(Path(name), std::ios::binary) << bytes;
    return Path(name);
  }
  // The first half of file `path`, as file `name`: a truncated copy.
  std::string WriteTruncatedCopy(const std::string& path, const std::string& name) const {
    std::ifstream in(path, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return Write(name, bytes.substr(0, bytes.size() / 2));
  }

 private:
  std::filesystem::path dir_;
};

// `s` has `code` and a message that names `path` and contains `text`.
inline void ExpectError(const Status& s, StatusCode code, const std::string& path,
                        const std::string& text) {
  EXPECT_EQ(s.code(), code) << s.ToString();
  EXPECT_NE(s.message().find(path), std::string::npos) << s.message();
  EXPECT_NE(s.message().find(text), std::string::npos) << s.message();
}

}  // namespace tfmpi::data::testing
