// Exposition parsing, a minimal HTTP/1.0 client and the promtool runner
// used by the metrics tests.
#include "tests/metrics/exposition_test_util.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/support/test_env.h"

namespace quant::metrics::testing {
namespace {

// Closes a file descriptor when it goes out of scope.
class ScopedFd {
 public:
  explicit ScopedFd(int fd) : fd_(fd) {}
  ~ScopedFd() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScopedFd(const ScopedFd&) = delete;
  ScopedFd& operator=(const ScopedFd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

absl::Status Errno(absl::string_view what) {
  return absl::UnavailableError(absl::StrCat(what, ": ", std::strerror(errno)));
}

}  // namespace

absl::StatusOr<std::map<std::string, double>> ParseSamples(
    const std::string& text) {
  std::map<std::string, double> samples;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (line.empty() || line[0] == '#') continue;
    // Label values may hold spaces; the value follows the last one.
    const size_t space = line.rfind(' ');
    double value = 0;
    absl::string_view value_text =
        space == absl::string_view::npos ? "" : line.substr(space + 1);
    if (value_text == "+Inf") {
      value = HUGE_VAL;
    } else if (value_text == "-Inf") {
      value = -HUGE_VAL;
    } else if (value_text == "NaN" || value_text == "Nan") {
      value = std::nan("");
    } else if (!absl::SimpleAtod(value_text, &value)) {
      return absl::InvalidArgumentError(
          absl::StrCat("not a sample line: \"", line, "\""));
    }
    const std::string series(line.substr(0, space));
    if (!samples.emplace(series, value).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("series printed twice: ", series));
    }
  }
  return samples;
}

int CountWithLabel(const std::map<std::string, double>& samples,
                   const std::string& name, const std::string& value) {
  const std::string needle = absl::StrCat(name, "=\"", value, "\"");
  int count = 0;
  for (const auto& [series, unused] : samples) {
    // Preceded by '{' or ',' so that job="a" does not match subjob="a".
    const size_t at = series.find(needle);
    if (at != std::string::npos && at > 0 &&
        (series[at - 1] == '{' || series[at - 1] == ',')) {
      ++count;
    }
  }
  return count;
}

absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path,
                                     const std::string& authorization) {
  ScopedFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  if (fd.get() < 0) return Errno("socket");
  timeval timeout{10, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  ::setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof(timeout));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) !=
      0) {
    return Errno(absl::StrCat("connect to 127.0.0.1:", port));
  }
  const std::string request =
      absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: 127.0.0.1:", port, "\r\n",
                   authorization.empty()
                       ? std::string()
                       : absl::StrCat("Authorization: ", authorization, "\r\n"),
                   "\r\n");
  size_t sent = 0;
  while (sent < request.size()) {
    const ssize_t n =
        ::send(fd.get(), request.data() + sent, request.size() - sent, 0);
    if (n <= 0) return Errno("send");
    sent += static_cast<size_t>(n);
  }
  std::string raw;
  char buffer[4096];
  while (true) {
    const ssize_t n = ::recv(fd.get(), buffer, sizeof(buffer), 0);
    if (n < 0) return Errno("recv");
    if (n == 0) break;
    raw.append(buffer, static_cast<size_t>(n));
  }
  const size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    return absl::DataLossError(absl::StrCat("no HTTP header end in: ", raw));
  }
  HttpResponse response;
  std::vector<std::string> header_lines =
      absl::StrSplit(raw.substr(0, header_end), "\r\n");
  // "HTTP/1.1 200 OK"
  std::vector<std::string> status_line =
      absl::StrSplit(header_lines[0], absl::MaxSplits(' ', 2));
  if (status_line.size() < 2 ||
      !absl::SimpleAtoi(status_line[1], &response.status)) {
    return absl::DataLossError(
        absl::StrCat("bad HTTP status line: ", header_lines[0]));
  }
  for (size_t i = 1; i < header_lines.size(); ++i) {
    const size_t colon = header_lines[i].find(':');
    if (colon == std::string::npos) continue;
    if (absl::EqualsIgnoreCase(header_lines[i].substr(0, colon),
                               "content-type")) {
      response.content_type = std::string(
          absl::StripAsciiWhitespace(header_lines[i].substr(colon + 1)));
    }
  }
  response.body = raw.substr(header_end + 4);
  return response;
}

bool HavePromtool() {
  return std::system("command -v promtool >/dev/null 2>&1") == 0;
}

absl::StatusOr<PromtoolResult> PromtoolCheckMetrics(const std::string& body) {
  const std::string dir = quant::testing::MakeTempDir();
  if (dir.empty()) return absl::InternalError("cannot make a temp folder");
  const std::string path = dir + "/metrics.txt";
  {
    std::ofstream out(path, std::ios::binary);
    out << body;
    if (!out.good()) return absl::InternalError("cannot write " + path);
  }
  const std::string command =
      absl::StrCat("promtool check metrics < '", path, "' 2>&1");
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return Errno("popen promtool");
  PromtoolResult result;
  char buffer[1024];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    result.output.append(buffer, n);
  }
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace quant::metrics::testing
