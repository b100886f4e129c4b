// quant_bad_input_report: sends every bad input of issue 8 (broken
// checkpoints, calibration sets and recipes, URIs outside the allowed roots,
// a calibration set too small for the layers' width) through a real quantd
// with one local worker, and prints what happened to each as a markdown
// table (docs/RELIABILITY.md's) or, with --json, one JSON document.
// Exit status: 0 when every row is as expected, 1 when some row is not,
// 2 when the run could not start.
//
//   quant_bad_input_report [--json] [--shared_dir=DIR] [--keep_temp]
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "bench/reliability/bad_input_cases.h"
#include "bench/reliability/bad_input_report.h"
#include "bench/reliability/bad_input_runner.h"
#include "common/flag_names.h"

ABSL_FLAG(bool, json, false, "Print one JSON document instead of markdown.");
ABSL_FLAG(std::string, shared_dir, "",
          "The shared folder with models/stories260K and data/ (default: "
          "$QUANT_SHARED_DIR, else the build's QUANT_SHARED_DIR).");
ABSL_FLAG(std::string, quantd, "",
          "The quantd program (default: server/quantd of this build tree).");
ABSL_FLAG(std::string, quantctl, "",
          "The quantctl program (default: client/quantctl of this build "
          "tree).");
ABSL_FLAG(int, job_timeout_s, 300,
          "Seconds a job that the table runs may take to end.");
ABSL_FLAG(bool, keep_temp, false,
          "Keep the temporary folder (it is always kept when a row fails).");

namespace {

// bench/reliability/<this program> -> <build>/`relative`.
std::string InBuildTree(const std::string& relative) {
  char buffer[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return relative;
  buffer[n] = '\0';
  std::string here(buffer);
  here = here.substr(0, here.rfind('/'));
  return here + "/../../" + relative;
}

std::string DefaultShared() {
  const char* env = getenv("QUANT_SHARED_DIR");
  if (env != nullptr && *env != '\0') return env;
  return QUANT_RELIABILITY_DEFAULT_SHARED_DIR;
}

std::string FlagOr(const std::string& value, const std::string& fallback) {
  return value.empty() ? fallback : value;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "Bad inputs against a real quantd, one table row each: "
      "quant_bad_input_report [--json] [--shared_dir=DIR]");
  quant::common::ParseCommandLineAcceptingDashes(argc, argv);
  if (absl::GetFlag(FLAGS_job_timeout_s) < 1) {
    std::fprintf(stderr,
                 "quant_bad_input_report: --job_timeout_s: must be at least "
                 "1\n");
    return 2;
  }
  quant::reliability::EnvOptions options;
  options.quantd_path =
      FlagOr(absl::GetFlag(FLAGS_quantd), InBuildTree("server/quantd"));
  options.quantctl_path =
      FlagOr(absl::GetFlag(FLAGS_quantctl), InBuildTree("client/quantctl"));
  options.shared_dir = FlagOr(absl::GetFlag(FLAGS_shared_dir), DefaultShared());
  options.job_timeout = absl::Seconds(absl::GetFlag(FLAGS_job_timeout_s));
  options.keep_temp = absl::GetFlag(FLAGS_keep_temp);

  absl::StatusOr<quant::reliability::BadInputReport> report =
      quant::reliability::RunBadInputCases(
          options, quant::reliability::AllBadInputCases());
  if (!report.ok()) {
    std::fprintf(stderr, "quant_bad_input_report: %s\n",
                 std::string(report.status().message()).c_str());
    return 2;
  }
  const std::string text = absl::GetFlag(FLAGS_json)
                               ? quant::reliability::FormatJson(*report) + "\n"
                               : quant::reliability::FormatMarkdown(*report);
  std::fputs(text.c_str(), stdout);
  return report->ok() ? 0 : 1;
}
