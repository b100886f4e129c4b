// The Dockerfile: built on Debian 12 with the project's scripts, a runtime
// stage holding quantd, quant-worker and quantctl that runs as a non-root
// user with a health check, and runtime packages that provide every shared
// library the built programs load (ldd + dpkg on this Debian machine).
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_files.h"
#include "tests/support/test_env.h"

namespace quant::deploy_test {
namespace {

struct Instruction {
  std::string keyword;  // Upper case: FROM, RUN, COPY, ...
  std::string args;
};

struct Stage {
  std::string image;
  std::string name;
  std::vector<Instruction> instructions;
};

// Instructions with continuation lines joined and comments dropped (Docker
// drops comment lines inside a continued instruction too).
std::vector<Stage> ParseDockerfile(const std::string& text) {
  std::vector<Stage> stages;
  std::string current;
  auto flush = [&]() {
    const std::string line(absl::StripAsciiWhitespace(current));
    current.clear();
    if (line.empty()) return;
    const size_t space = line.find_first_of(" \t");
    Instruction in{
        absl::AsciiStrToUpper(line.substr(0, space)),
        space == std::string::npos
            ? ""
            : std::string(absl::StripAsciiWhitespace(line.substr(space + 1)))};
    if (in.keyword == "FROM") {
      std::vector<std::string> words =
          absl::StrSplit(in.args, absl::ByAnyChar(" \t"), absl::SkipEmpty());
      Stage stage;
      stage.image = words.empty() ? "" : words[0];
      if (words.size() == 3 && absl::AsciiStrToUpper(words[1]) == "AS") {
        stage.name = words[2];
      }
      stages.push_back(stage);
    } else if (!stages.empty()) {
      stages.back().instructions.push_back(in);
    }
  };
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    const absl::string_view line = absl::StripAsciiWhitespace(raw);
    if (absl::StartsWith(line, "#")) continue;
    if (absl::EndsWith(line, "\\")) {
      absl::StrAppend(
          &current,
          absl::StripTrailingAsciiWhitespace(line.substr(0, line.size() - 1)),
          " ");
      continue;
    }
    absl::StrAppend(&current, line);
    flush();
  }
  flush();
  return stages;
}

class DockerfileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::string> text = ReadRepoFile("Dockerfile");
    ASSERT_TRUE(text.ok()) << text.status();
    stages_ = ParseDockerfile(*text);
    ASSERT_GE(stages_.size(), 2u) << "a multi-stage build";
  }
  const Stage& Runtime() const { return stages_.back(); }
  std::string RunText(const Stage& stage) const {
    std::vector<std::string> runs;
    for (const Instruction& in : stage.instructions) {
      if (in.keyword == "RUN") runs.push_back(in.args);
    }
    return absl::StrJoin(runs, "\n");
  }
  // Packages the runtime stage installs with apt-get.
  std::set<std::string> RuntimePackages() const {
    std::set<std::string> packages;
    for (absl::string_view word : absl::StrSplit(
             RunText(Runtime()), absl::ByAnyChar(" \t\n"), absl::SkipEmpty())) {
      if (absl::StartsWith(word, "lib") || word == "zlib1g" ||
          word == "ca-certificates") {
        packages.insert(std::string(word));
      }
    }
    return packages;
  }

  std::vector<Stage> stages_;
};

TEST_F(DockerfileTest, ParsesContinuedInstructionsAndStages) {
  const std::vector<Stage> stages = ParseDockerfile(
      "FROM a:1 AS one\n# note\nRUN x \\\n  # inside\n  y\nFROM b\nUSER 7\n");
  ASSERT_EQ(stages.size(), 2u);
  EXPECT_EQ(stages[0].name, "one");
  ASSERT_EQ(stages[0].instructions.size(), 1u);
  EXPECT_EQ(stages[0].instructions[0].args, "x y");
  EXPECT_EQ(stages[1].image, "b");
  EXPECT_EQ(stages[1].instructions[0].keyword, "USER");
}

TEST_F(DockerfileTest, BuildsOnDebian12WithTheProjectScripts) {
  const Stage& build = stages_.front();
  EXPECT_TRUE(absl::StartsWith(build.image, "debian:12")) << build.image;
  EXPECT_TRUE(absl::StartsWith(Runtime().image, "debian:12"))
      << Runtime().image;
  EXPECT_FALSE(build.name.empty());
  const std::string runs = RunText(build);
  EXPECT_THAT(runs, ::testing::HasSubstr("scripts/install_deps.sh"));
  EXPECT_THAT(runs, ::testing::HasSubstr("scripts/build.sh release"));
  EXPECT_THAT(runs, ::testing::HasSubstr("-DQUANT_BUILD_TESTS=OFF"));
  EXPECT_THAT(runs, ::testing::HasSubstr("-DQUANT_BUILD_BENCHMARKS=OFF"));
}

// Where build.sh release leaves each program, relative to the build folder.
const std::map<std::string, std::string>& Programs() {
  static const auto* const kPrograms = new std::map<std::string, std::string>{
      {"quantd", "server/quantd"},
      {"quant-worker", "worker/quant-worker"},
      {"quantctl", "client/quantctl"},
  };
  return *kPrograms;
}

TEST_F(DockerfileTest, RuntimeHasTheThreeProgramsAndRunsAsNonRoot) {
  const Stage& build = stages_.front();
  const std::string build_runs = RunText(build);
  std::set<std::string> copied;
  std::string user;
  bool healthcheck = false;
  for (const Instruction& in : Runtime().instructions) {
    if (in.keyword == "USER") user = in.args;
    if (in.keyword == "HEALTHCHECK") {
      healthcheck = absl::StrContains(in.args, "CMD");
    }
    if (in.keyword != "COPY") continue;
    std::vector<std::string> words =
        absl::StrSplit(in.args, ' ', absl::SkipEmpty());
    if (words.size() < 2) continue;
    const std::string destination = words.back();
    const std::string source = words[words.size() - 2];
    if (words[0] == "--from=" + build.name) {
      const std::string program =
          destination.substr(destination.rfind('/') + 1);
      EXPECT_EQ(destination, "/usr/local/bin/" + program);
      copied.insert(program);
      // The build stage makes the copied file from the program build.sh
      // built.
      if (Programs().count(program) > 0) {
        EXPECT_THAT(build_runs,
                    ::testing::HasSubstr(absl::StrCat("-o ", source, " build/",
                                                      Programs().at(program))))
            << program;
      }
    } else {
      EXPECT_TRUE(RepoPathExists(source)) << "COPY " << source;
    }
  }
  for (const auto& [program, path] : Programs()) {
    EXPECT_EQ(copied.count(program), 1u) << program << " is not in the image";
  }
  const std::string uid = user.substr(0, user.find(':'));
  EXPECT_FALSE(uid.empty()) << "no USER in the runtime stage";
  EXPECT_NE(uid, "root");
  EXPECT_NE(uid, "0");
  EXPECT_TRUE(healthcheck) << "no HEALTHCHECK CMD";
}

TEST_F(DockerfileTest, DockerignoreKeepsBuildFoldersButNotWhatIsCopied) {
  absl::StatusOr<std::string> ignore = ReadRepoFile(".dockerignore");
  ASSERT_TRUE(ignore.ok()) << ignore.status();
  std::set<std::string> patterns;
  for (absl::string_view line : absl::StrSplit(*ignore, '\n')) {
    if (!line.empty() && line[0] != '#') patterns.insert(std::string(line));
  }
  EXPECT_THAT(patterns, ::testing::IsSupersetOf({"build", "build-*", ".git"}));
  for (const char* needed :
       {"scripts", "deploy", "deploy/docker", "scripts/install_deps.sh"}) {
    EXPECT_EQ(patterns.count(needed), 0u) << needed;
  }
}

// Runs a shell command; its standard output.
std::string ShellOutput(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0)
    out.append(buffer, n);
  pclose(pipe);
  return out;
}

TEST_F(DockerfileTest, RuntimePackagesProvideEveryLibraryTheProgramsLoad) {
  if (ShellOutput("command -v dpkg-query ldd").empty()) {
    if (::quant::testing::RunningInCi()) FAIL() << "CI without dpkg-query/ldd";
    GTEST_SKIP() << "no dpkg-query or ldd: not a Debian machine";
  }
  // Libraries of the three programs as built here.
  std::set<std::string> libraries;
  for (const auto& [program, path] : Programs()) {
    const std::string binary =
        absl::StrCat(::quant::testing::BinaryDir(), "/", path);
    ASSERT_TRUE(::quant::testing::PathExists(binary)) << binary;
    const std::string ldd = ShellOutput("ldd '" + binary + "'");
    ASSERT_THAT(ldd, ::testing::HasSubstr("libc.so")) << binary;
    for (absl::string_view line : absl::StrSplit(ldd, '\n')) {
      const size_t arrow = line.find("=> /");
      if (arrow == absl::string_view::npos) continue;
      absl::string_view path_part = line.substr(arrow + 3);
      libraries.insert(std::string(path_part.substr(0, path_part.find(' '))));
    }
  }
  ASSERT_GT(libraries.size(), 5u);
  // The owning package of each library: dpkg records /lib or /usr/lib
  // (merged /usr), under the name or behind a symlink. One readlink and one
  // dpkg-query for all of them (dpkg-query reads its database per call).
  std::vector<std::string> ordered(libraries.begin(), libraries.end());
  std::string readlink = "readlink -f";
  for (const std::string& library : ordered) {
    absl::StrAppend(&readlink, " '", library, "'");
  }
  const std::vector<std::string> real =
      absl::StrSplit(ShellOutput(readlink), '\n', absl::SkipEmpty());
  ASSERT_EQ(real.size(), ordered.size());
  std::map<std::string, std::vector<std::string>> candidates;
  std::set<std::string> all;
  for (size_t i = 0; i < ordered.size(); ++i) {
    std::vector<std::string>& c = candidates[ordered[i]];
    c = {ordered[i], real[i]};
    for (size_t j = 0, n = c.size(); j < n; ++j) {
      if (absl::StartsWith(c[j], "/usr/lib/")) c.push_back(c[j].substr(4));
      if (absl::StartsWith(c[j], "/lib/")) c.push_back("/usr" + c[j]);
    }
    all.insert(c.begin(), c.end());
  }
  std::string query = "dpkg-query -S";
  for (const std::string& path : all) absl::StrAppend(&query, " '", path, "'");
  std::map<std::string, std::string> package_of_path;
  // "libfoo1:amd64: /usr/lib/x86_64-linux-gnu/libfoo.so.1" per found path.
  for (absl::string_view line :
       absl::StrSplit(ShellOutput(query + " 2>/dev/null"), '\n')) {
    const size_t separator = line.find(": /");
    if (separator == absl::string_view::npos) continue;
    const absl::string_view packages = line.substr(0, separator);
    package_of_path[std::string(line.substr(separator + 2))] =
        std::string(packages.substr(0, packages.find_first_of(":,")));
  }
  std::map<std::string, std::string> owner;
  for (const auto& [library, paths] : candidates) {
    for (const std::string& path : paths) {
      if (package_of_path.count(path) > 0) {
        owner[library] = package_of_path[path];
        break;
      }
    }
  }
  // Essential or always in debian:12-slim (apt needs them); the sanitizers'
  // runtimes only exist in sanitizer builds.
  const std::set<std::string> base = {"libc6",  "libgcc-s1", "libstdc++6",
                                      "zlib1g", "libasan8",  "libubsan1"};
  const std::set<std::string> installed = RuntimePackages();
  for (const std::string& library : libraries) {
    ASSERT_EQ(owner.count(library), 1u) << "no package owns " << library;
    const std::string& package = owner[library];
    EXPECT_TRUE(base.count(package) > 0 || installed.count(package) > 0)
        << library << " comes from " << package
        << ", which the Dockerfile's runtime stage does not install";
  }
}

}  // namespace
}  // namespace quant::deploy_test
