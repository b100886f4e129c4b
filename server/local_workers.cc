// LocalWorkers: spawn and supervise quant-worker processes.
#include "server/local_workers.h"

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "core/base/directory_util.h"
#include "core/base/thread_pool.h"

extern char** environ;

namespace quant::server {
namespace {

std::string SelfDirectory() {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return ".";
  buffer[n] = '\0';
  return ParentDirectory(buffer);
}

}  // namespace

std::string FindWorkerBinary(const std::string& flag_value) {
  if (!flag_value.empty()) return flag_value;
  const std::string dir = SelfDirectory();
  for (const std::string& candidate :
       {absl::StrCat(dir, "/quant-worker"),
        absl::StrCat(dir, "/../worker/quant-worker")}) {
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return absl::StrCat(dir, "/quant-worker");
}

absl::StatusOr<std::unique_ptr<LocalWorkers>> LocalWorkers::Start(
    LocalWorkersOptions options) {
  if (options.count < 0 || options.count > 256) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--local_workers: must be in 0..256, got ", options.count));
  }
  if (options.count > 0 && access(options.binary.c_str(), X_OK) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--worker_binary: ", options.binary,
        " is not an executable quant-worker (", strerror(errno), ")"));
  }
  std::unique_ptr<LocalWorkers> workers(new LocalWorkers(std::move(options)));
  {
    MutexLock lock(&workers->mu_);
    workers->pids_.assign(workers->options_.count, 0);
  }
  for (int slot = 0; slot < workers->options_.count; ++slot) {
    absl::StatusOr<pid_t> pid = workers->Spawn(slot);
    if (!pid.ok()) {
      workers->Stop(std::chrono::milliseconds(0));
      return pid.status();
    }
    MutexLock lock(&workers->mu_);
    workers->pids_[slot] = *pid;
  }
  workers->supervisor_ = std::thread([w = workers.get()] { w->Supervise(); });
  return workers;
}

LocalWorkers::~LocalWorkers() { Stop(); }

absl::StatusOr<pid_t> LocalWorkers::Spawn(int slot) {
  std::vector<std::string> args = {
      options_.binary, absl::StrCat("--server=", options_.server_address),
      absl::StrCat("--name=local-", slot)};
  if (!options_.tls_ca_file.empty()) {
    args.push_back(absl::StrCat("--tls_ca=", options_.tls_ca_file));
  }
  // The machine's cores shared out, so N workers do not each take them all;
  // a --threads in extra_args comes later and wins.
  args.push_back(absl::StrCat(
      "--threads=",
      std::max(1, ThreadPool::AvailableCores() / std::max(1, options_.count))));
  for (const std::string& extra : options_.extra_args) args.push_back(extra);
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "QUANT_WORKER_TOKEN=", 19) == 0) continue;
    env_strings.emplace_back(*e);
  }
  // The worker stops when quantd dies, even by SIGKILL (quant-worker's
  // --exit_with_parent reads this).
  env_strings.push_back(absl::StrCat("QUANT_PARENT_PID=", getpid()));
  if (!options_.worker_token.empty()) {
    env_strings.push_back(
        absl::StrCat("QUANT_WORKER_TOKEN=", options_.worker_token));
  }
  std::vector<char*> envp;
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);

  // quantd blocks SIGTERM/SIGINT in its threads (it sigwaits for them); a
  // worker must start with them deliverable.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigemptyset(&none);
  posix_spawnattr_setsigmask(&attr, &none);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, options_.binary.c_str(), nullptr, &attr,
                             argv.data(), envp.data());
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("starting ", options_.binary, ": ", std::strerror(rc)));
  }
  return pid;
}

void LocalWorkers::Supervise() {
  MutexLock lock(&mu_);
  while (!stopping_) {
    for (size_t slot = 0; slot < pids_.size(); ++slot) {
      if (pids_[slot] == 0) continue;
      int status = 0;
      if (waitpid(pids_[slot], &status, WNOHANG) != pids_[slot]) continue;
      std::fprintf(
          stderr, "quantd: local worker %zu (pid %d) exited (%s %d)\n", slot,
          static_cast<int>(pids_[slot]),
          WIFSIGNALED(status) ? "signal" : "status",
          WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
      pids_[slot] = 0;
      const auto now = std::chrono::steady_clock::now();
      while (!recent_restarts_.empty() &&
             now - recent_restarts_.front() > std::chrono::minutes(1)) {
        recent_restarts_.erase(recent_restarts_.begin());
      }
      if (static_cast<int>(recent_restarts_.size()) >=
          options_.max_restarts_per_minute) {
        std::fprintf(stderr,
                     "quantd: local worker %zu restarted %d times within a "
                     "minute; leaving it down\n",
                     slot, options_.max_restarts_per_minute);
        continue;
      }
      absl::StatusOr<pid_t> pid = Spawn(static_cast<int>(slot));
      if (!pid.ok()) {
        std::fprintf(stderr, "quantd: %s\n",
                     std::string(pid.status().message()).c_str());
        continue;
      }
      recent_restarts_.push_back(now);
      ++restarts_;
      pids_[slot] = *pid;
    }
    const auto next_check =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(200);
    while (!stopping_ && wake_.WaitUntil(&mu_, next_check)) {
    }
  }
}

void LocalWorkers::Stop(std::chrono::milliseconds grace) {
  {
    MutexLock lock(&mu_);
    if (stopping_ && !supervisor_.joinable()) {
      bool any = false;
      for (pid_t pid : pids_) any = any || pid != 0;
      if (!any) return;
    }
    stopping_ = true;
  }
  wake_.SignalAll();
  if (supervisor_.joinable()) supervisor_.join();
  MutexLock lock(&mu_);
  for (pid_t pid : pids_) {
    if (pid != 0) kill(pid, SIGTERM);
  }
  const auto deadline = std::chrono::steady_clock::now() + grace;
  for (pid_t& pid : pids_) {
    while (pid != 0) {
      int status = 0;
      const pid_t done = waitpid(pid, &status, WNOHANG);
      if (done == pid || (done < 0 && errno == ECHILD)) {
        pid = 0;
        break;
      }
      if (std::chrono::steady_clock::now() >= deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        pid = 0;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

std::vector<pid_t> LocalWorkers::pids() const {
  MutexLock lock(&mu_);
  std::vector<pid_t> out;
  for (pid_t pid : pids_) {
    if (pid != 0) out.push_back(pid);
  }
  return out;
}

int LocalWorkers::restarts() const {
  MutexLock lock(&mu_);
  return restarts_;
}

}  // namespace quant::server
