// The built quantd program as a subprocess: it serves health on a free
// loopback port, stops cleanly on SIGTERM, and refuses a non-loopback
// --listen address.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "client/health_probe.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

std::string QuantdPath() { return testing::BinaryDir() + "/server/quantd"; }

std::vector<std::string> BaseArgs(const std::string& temp) {
  return {QuantdPath(), "--data_dir=" + temp + "/data",
          "--artifact_root=file://" + temp + "/artifacts",
          "--allowed_roots=" + temp};
}

// Reads the child's stdout until a full line arrives or `timeout_ms` ends.
std::string ReadLine(int fd, int timeout_ms) {
  std::string line;
  char c;
  while (true) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) break;
    if (read(fd, &c, 1) != 1 || c == '\n') break;
    line.push_back(c);
  }
  return line;
}

TEST(QuantdBinaryTest, ServesHealthAndStopsOnSigterm) {
  const std::string temp = testing::MakeTempDir();
  std::vector<std::string> args = BaseArgs(temp);
  args.push_back("--listen=127.0.0.1:0");
  int out[2];
  ASSERT_EQ(pipe(out), 0);
  const pid_t pid = fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  close(out[1]);
  const std::string line = ReadLine(out[0], 30000);
  const std::string prefix = "quantd: listening on 127.0.0.1:";
  int port = 0;
  const bool started = absl::StartsWith(line, prefix) &&
                       absl::SimpleAtoi(line.substr(prefix.size()), &port);
  if (started) {
    auto channel = grpc::CreateChannel(absl::StrCat("127.0.0.1:", port),
                                       grpc::InsecureChannelCredentials());
    for (const std::string service : {"", "quant.v1.QuantService"}) {
      const absl::StatusOr<int> serving = CheckHealth(channel, service);
      ASSERT_TRUE(serving.ok()) << service << ": " << serving.status();
      EXPECT_EQ(*serving, 1) << service;  // SERVING
    }
  }
  kill(pid, SIGTERM);
  int status = 0;
  ASSERT_EQ(waitpid(pid, &status, 0), pid);
  const std::string rest = ReadLine(out[0], 1000);
  close(out[0]);
  ASSERT_TRUE(started) << "first line: \"" << line << "\"";
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_NE(rest.find("SIGTERM"), std::string::npos) << rest;
  EXPECT_TRUE(testing::PathExists(temp + "/data/quantd.db"));
}

TEST(QuantdBinaryTest, RefusesNonLoopbackListen) {
  const std::string temp = testing::MakeTempDir();
  std::string command;
  for (const std::string& arg : BaseArgs(temp)) {
    absl::StrAppend(&command, testing::Quote(arg), " ");
  }
  absl::StrAppend(&command, "--listen=0.0.0.0:0 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string output;
  char buffer[256];
  while (fgets(buffer, sizeof(buffer), pipe) != nullptr) output += buffer;
  const int status = pclose(pipe);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 1) << status;
  EXPECT_NE(output.find("0.0.0.0:0"), std::string::npos) << output;
  EXPECT_NE(output.find("loopback"), std::string::npos) << output;
  EXPECT_FALSE(testing::PathExists(temp + "/data/quantd.db"));
}

// Runs quantd with `flags` (after the base ones) until it exits; its
// combined output and exit status.
std::pair<int, std::string> RunQuantd(const std::string& temp,
                                      const std::string& flags) {
  std::string command;
  for (const std::string& arg : BaseArgs(temp)) {
    absl::StrAppend(&command, testing::Quote(arg), " ");
  }
  absl::StrAppend(&command, flags, " 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  std::string output;
  char buffer[256];
  while (pipe != nullptr && fgets(buffer, sizeof(buffer), pipe) != nullptr) {
    output += buffer;
  }
  const int status = pipe != nullptr ? pclose(pipe) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST(QuantdBinaryTest, BadTokenAndWorkerFlagsAreUsageErrors) {
  const std::string temp = testing::MakeTempDir();
  {
    FILE* f = fopen((temp + "/short").c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("abc\n", f);
    fclose(f);
  }
  auto [code, output] =
      RunQuantd(temp, "--client-token-file=" + temp + "/short");
  EXPECT_EQ(code, 2) << output;
  EXPECT_NE(output.find("--client_token_file"), std::string::npos) << output;
  EXPECT_NE(output.find("at least 16"), std::string::npos) << output;

  std::tie(code, output) =
      RunQuantd(temp, "--worker-token-file=" + temp + "/missing");
  EXPECT_EQ(code, 2) << output;
  EXPECT_NE(output.find("--worker_token_file"), std::string::npos) << output;

  std::tie(code, output) = RunQuantd(
      temp, "--listen=127.0.0.1:0 --local-workers=1 --worker-binary=" + temp +
                "/no-such-worker");
  EXPECT_EQ(code, 1) << output;
  EXPECT_NE(output.find("--worker_binary"), std::string::npos) << output;

  std::tie(code, output) = RunQuantd(temp, "--lease-seconds=0");
  EXPECT_EQ(code, 2) << output;
  EXPECT_NE(output.find("--lease_seconds"), std::string::npos) << output;

  // A signing key that is missing or not an Ed25519 private key: quantd
  // does not start (it would publish unsigned checkpoints).
  for (const std::string& key : {temp + "/no-such-key.pem", temp + "/short"}) {
    std::tie(code, output) =
        RunQuantd(temp, "--listen=127.0.0.1:0 --signing-key=" + key);
    EXPECT_NE(code, 0) << output;
    EXPECT_NE(output.find("--signing_key"), std::string::npos) << output;
  }
}

}  // namespace
}  // namespace quant
