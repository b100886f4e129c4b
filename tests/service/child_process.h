// Real processes for the service tests: quantd and quant-worker started
// from the build tree, their stdout readable line by line, killable with
// any signal.
#ifndef QUANT_TESTS_SERVICE_CHILD_PROCESS_H_
#define QUANT_TESTS_SERVICE_CHILD_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

namespace quant::testing {

class ChildProcess {
 public:
  // Starts args[0] with `args`; stdout is captured, stderr goes to
  // `stderr_path` when given (else inherited). Extra environment entries
  // are "NAME=value".
  ChildProcess(std::vector<std::string> args,
               std::vector<std::string> extra_env = {},
               const std::string& stderr_path = "");
  ~ChildProcess();  // SIGKILL if still running.

  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  pid_t pid() const { return pid_; }
  bool running();
  // The next stdout line, or "" after `timeout_ms`.
  std::string ReadLine(int timeout_ms);
  // Everything left on stdout up to its end (the process exited and closed
  // it), or what came within `timeout_ms`.
  std::string ReadToEnd(int timeout_ms);
  void Signal(int signal_number);
  // Waits up to `timeout_ms` for the exit; returns the wait status, or -1
  // when it is still running.
  int Wait(int timeout_ms);

 private:
  pid_t pid_ = -1;
  int stdout_fd_ = -1;
  bool reaped_ = false;
  int status_ = 0;
};

// A TCP port on 127.0.0.1 free right now (for a server restarted on the
// same address).
int FreeLoopbackPort();

}  // namespace quant::testing

#endif  // QUANT_TESTS_SERVICE_CHILD_PROCESS_H_
