// QuantdProcess: fork/exec of quantd with its stdout on a pipe.
#include "bench/load/quantd_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

extern char** environ;

namespace quant::load {
namespace {

constexpr char kListening[] = "quantd: listening on ";

// One line from `fd`, or "" at end of file or after `deadline`.
std::string ReadLine(int fd, absl::Time deadline) {
  std::string line;
  char c;
  while (true) {
    const int64_t left = absl::ToInt64Milliseconds(deadline - absl::Now());
    if (left <= 0) return "";
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left)) <= 0) return "";
    if (read(fd, &c, 1) != 1) return line;
    if (c == '\n') return line;
    line.push_back(c);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<QuantdProcess>> QuantdProcess::Start(
    std::vector<std::string> args, const std::string& log_path,
    absl::Duration startup) {
  if (args.empty()) return absl::InvalidArgumentError("args: empty");
  if (access(args[0].c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("quantd: no executable at ", args[0]));
  }
  int out[2];
  if (pipe(out) != 0) return absl::InternalError("pipe failed");
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::unique_ptr<QuantdProcess> process(new QuantdProcess());
  process->pid_ = fork();
  if (process->pid_ < 0) return absl::InternalError("fork failed");
  if (process->pid_ == 0) {
    dup2(out[1], STDOUT_FILENO);
    close(out[0]);
    close(out[1]);
    const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) dup2(fd, STDERR_FILENO);
    execve(argv[0], argv.data(), environ);
    _exit(127);
  }
  close(out[1]);
  process->stdout_fd_ = out[0];
  const std::string line = ReadLine(process->stdout_fd_, absl::Now() + startup);
  if (!absl::StartsWith(line, kListening)) {
    return absl::UnavailableError(
        absl::StrCat("quantd did not start: its first line was \"", line,
                     "\"; see ", log_path));
  }
  process->address_ = line.substr(sizeof(kListening) - 1);
  const int fd = process->stdout_fd_;
  std::atomic<bool>* stop = &process->stop_drain_;
  process->drain_ = std::thread([fd, stop] {
    char buffer[4096];
    // Polls so that it ends even when a local worker that outlived quantd
    // still holds the pipe.
    while (!stop->load()) {
      pollfd p{fd, POLLIN, 0};
      const int ready = poll(&p, 1, 200);
      if (ready < 0) return;
      if (ready > 0 && read(fd, buffer, sizeof(buffer)) <= 0) return;
    }
  });
  return process;
}

QuantdProcess::~QuantdProcess() {
  if (pid_ > 0 && !reaped_) {
    kill(pid_, SIGKILL);
    WaitUntil(absl::InfiniteFuture());
  }
  stop_drain_ = true;
  if (drain_.joinable()) drain_.join();
  if (stdout_fd_ >= 0) close(stdout_fd_);
}

int QuantdProcess::WaitUntil(absl::Time deadline) {
  while (!reaped_) {
    const pid_t done = waitpid(pid_, &status_, WNOHANG);
    if (done == pid_) {
      reaped_ = true;
      break;
    }
    if (absl::Now() >= deadline) return -1;
    absl::SleepFor(absl::Milliseconds(20));
  }
  return status_;
}

absl::StatusOr<std::unique_ptr<QuantdProcess>> StartLoopbackQuantd(
    const LoopbackQuantdOptions& options) {
  std::vector<std::string> args = {
      options.quantd_path, "--listen=127.0.0.1:0",
      absl::StrCat("--data-dir=", options.temp_dir, "/data"),
      absl::StrCat("--artifact-root=file://", options.temp_dir, "/artifacts"),
      absl::StrCat("--allowed-roots=", options.allowed_roots)};
  if (options.max_upload_mb.has_value()) {
    args.push_back(absl::StrCat("--max-upload-mb=", *options.max_upload_mb));
  }
  args.push_back(absl::StrCat("--local-workers=", options.local_workers));
  return QuantdProcess::Start(std::move(args), options.temp_dir + "/quantd.log",
                              absl::Seconds(60));
}

absl::Status QuantdProcess::Stop(absl::Duration timeout) {
  if (pid_ <= 0 || reaped_) {
    return absl::FailedPreconditionError("quantd is not running");
  }
  kill(pid_, SIGTERM);
  const int status = WaitUntil(absl::Now() + timeout);
  if (status == -1) {
    return absl::DeadlineExceededError(
        absl::StrCat("quantd still running ", absl::FormatDuration(timeout),
                     " after SIGTERM"));
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  if (WIFSIGNALED(status)) {
    return absl::InternalError(
        absl::StrCat("quantd died of signal ", WTERMSIG(status)));
  }
  return absl::InternalError(
      absl::StrCat("quantd exited with status ", WEXITSTATUS(status)));
}

}  // namespace quant::load
