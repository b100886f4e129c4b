// Runs the parser over the committed malformed corpus
// (tests/fixtures/safetensors/malformed, see make_malformed.py): every file
// must fail with its own distinctive message. Also checks the valid files and
// the fuzzer's regression inputs.
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/base/file_util.h"
#include "core/io/safetensors.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

// tests/fixtures: from the environment when set, else the source tree.
std::string FixturesDir() {
  const char* from_env = std::getenv("QUANT_FIXTURES_DIR");
  return from_env != nullptr && *from_env != '\0' ? std::string(from_env)
                                                  : QUANT_IO_TEST_FIXTURES_DIR;
}

std::string CorpusDir(const std::string& name) {
  return FixturesDir() + "/safetensors/" + name;
}

// file name -> expected error substring.
std::map<std::string, std::string> ReadExpectations() {
  std::map<std::string, std::string> expected;
  std::ifstream in(CorpusDir("malformed") + "/expected.tsv");
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t tab = line.find('\t');
    if (tab == std::string::npos) {
      ADD_FAILURE() << "expected.tsv line without a tab: " << line;
      continue;
    }
    expected[line.substr(0, tab)] = line.substr(tab + 1);
  }
  return expected;
}

std::vector<std::string> FilesIn(const std::string& dir,
                                 const std::string& extension) {
  std::vector<std::string> names;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    if (extension.empty() || entry.path().extension() == extension) {
      names.push_back(entry.path().filename().string());
    }
  }
  std::sort(names.begin(), names.end());
  return names;
}

TEST(SafetensorsMalformedTest, EveryFileFailsWithItsOwnMessage) {
  const std::map<std::string, std::string> expected = ReadExpectations();
  const std::vector<std::string> files =
      FilesIn(CorpusDir("malformed"), ".safetensors");
  ASSERT_GE(files.size(), 14u)
      << "corpus missing from " << CorpusDir("malformed");
  // The table and the folder list the same files.
  std::vector<std::string> listed;
  for (const auto& [name, message] : expected) listed.push_back(name);
  EXPECT_EQ(files, listed);

  for (const std::string& name : files) {
    SCOPED_TRACE(name);
    auto it = expected.find(name);
    if (it == expected.end()) continue;
    const absl::StatusOr<std::string> bytes =
        ReadFileToString(CorpusDir("malformed") + "/" + name);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    const absl::StatusOr<SafetensorsHeader> header =
        ParseSafetensorsHeader(*bytes);
    ASSERT_FALSE(header.ok());
    EXPECT_TRUE(header.status().code() == absl::StatusCode::kInvalidArgument ||
                header.status().code() == absl::StatusCode::kDataLoss)
        << header.status();
    const std::string message(header.status().message());
    EXPECT_THAT(message, ::testing::HasSubstr(it->second));
    // Distinct: no other case's signature matches this file's message.
    for (const auto& [other, other_message] : expected) {
      if (other != name) {
        EXPECT_THAT(message,
                    ::testing::Not(::testing::HasSubstr(other_message)))
            << "indistinguishable from " << other;
      }
    }
    // Opening the file gives the same error, prefixed with the path.
    const auto opened =
        SafetensorsFile::Open(CorpusDir("malformed") + "/" + name);
    ASSERT_FALSE(opened.ok());
    const std::string opened_message(opened.status().message());
    EXPECT_THAT(opened_message, ::testing::HasSubstr(name));
    EXPECT_THAT(opened_message, ::testing::HasSubstr(it->second));
  }
}

TEST(SafetensorsMalformedTest, TruncationIsDataLoss) {
  for (const std::string name :
       {"truncated_short.safetensors", "truncated_data.safetensors",
        "header_length_beyond_file.safetensors"}) {
    const auto bytes = ReadFileToString(CorpusDir("malformed") + "/" + name);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    EXPECT_EQ(ParseSafetensorsHeader(*bytes).status().code(),
              absl::StatusCode::kDataLoss)
        << name;
  }
}

TEST(SafetensorsMalformedTest, ErrorsNameTheTensor) {
  const auto bytes = ReadFileToString(CorpusDir("malformed") +
                                      "/overlapping_tensors.safetensors");
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(ParseSafetensorsHeader(*bytes).status().message(),
            "tensor \"b\": data_offsets [4, 12] overlap the previous tensor "
            "\"a\" ending at 8");
}

TEST(SafetensorsMalformedTest, ValidFilesParse) {
  const std::vector<std::string> files =
      FilesIn(CorpusDir("valid"), ".safetensors");
  ASSERT_GE(files.size(), 2u);
  for (const std::string& name : files) {
    const auto file = SafetensorsFile::Open(CorpusDir("valid") + "/" + name);
    ASSERT_TRUE(file.ok()) << file.status();
    for (const TensorInfo& info : (*file)->tensors()) {
      EXPECT_TRUE((*file)->ReadFloat(info.name).ok()) << name << info.name;
    }
  }
}

// Every prefix of a valid file is rejected (and none crashes).
TEST(SafetensorsMalformedTest, EveryTruncationOfAValidFileFails) {
  const auto bytes =
      ReadFileToString(CorpusDir("valid") + "/two_tensors.safetensors");
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  ASSERT_TRUE(ParseSafetensorsHeader(*bytes).ok());
  for (size_t size = 0; size < bytes->size(); ++size) {
    EXPECT_FALSE(
        ParseSafetensorsHeader(absl::string_view(*bytes).substr(0, size)).ok())
        << size;
  }
}

// Inputs the fuzzer once crashed on (or found interesting) must parse or
// fail cleanly.
TEST(SafetensorsMalformedTest, FuzzRegressionsDoNotCrash) {
  const std::string dir =
      FixturesDir() + "/../fuzz/regressions/safetensors_header";
  ASSERT_TRUE(std::filesystem::is_directory(dir)) << dir;
  for (const std::string& name : FilesIn(dir, "")) {
    const auto bytes = ReadFileToString(dir + "/" + name);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    (void)ParseSafetensorsHeader(*bytes);
  }
}

}  // namespace
}  // namespace quant
