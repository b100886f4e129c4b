// Locations of shared data and fixtures for tests.
#include "tests/support/test_env.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <vector>

namespace quant::testing {
namespace {

std::string EnvOr(const char* name, const std::string& fallback) {
  const char* value = std::getenv(name);
  return value != nullptr && *value != '\0' ? std::string(value) : fallback;
}

// Temporary folders made by this process, removed at exit.
std::vector<std::string>& TempDirs() {
  static auto* dirs = new std::vector<std::string>();
  return *dirs;
}

void RemoveTempDirs() {
  for (const std::string& dir : TempDirs()) {
    std::error_code ignored;
    std::filesystem::remove_all(dir, ignored);
  }
}

}  // namespace

std::string SharedDir() { return EnvOr("QUANT_SHARED_DIR", "../shared"); }
std::string FixturesDir() {
  return EnvOr("QUANT_FIXTURES_DIR", "tests/fixtures");
}
std::string BinaryDir() { return EnvOr("QUANT_BINARY_DIR", "."); }

std::string SharedPath(const std::string& relative) {
  return SharedDir() + "/" + relative;
}

std::string MakeTempDir() {
  static std::once_flag once;
  std::call_once(once, [] { std::atexit(RemoveTempDirs); });
  std::string pattern =
      (std::filesystem::temp_directory_path() / "quant-test-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) return "";
  TempDirs().push_back(pattern);
  return pattern;
}

bool RunningInCi() { return EnvOr("CI", "") == "true"; }

bool PathExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

std::string RealPath(const std::string& path) {
  char buffer[PATH_MAX];
  if (realpath(path.c_str(), buffer) == nullptr) return path;
  return buffer;
}

}  // namespace quant::testing
