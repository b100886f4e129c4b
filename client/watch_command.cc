// `quantctl watch`; see watch_command.h.
#include "client/watch_command.h"

#include <unistd.h>

#include <iostream>
#include <memory>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/job_json.h"
#include "client/job_print.h"
#include "client/reconnect_budget.h"
#include "common/job_constants.h"
#include "core/base/status_macros.h"

namespace quant {
namespace {

constexpr int kBarWidth = 30;
constexpr char kClearLine[] = "\r\033[K";

// Prints events as they come; on a terminal the latest progress stays on
// one redrawn line below the other output.
class EventPrinter {
 public:
  explicit EventPrinter(const WatchDisplay& display) : display_(display) {}

  absl::Status OnEvent(const v1::JobEvent& event) {
    switch (event.event_case()) {
      case v1::JobEvent::kJob:
        last_job_ = event.job();
        have_job_ = true;
        if (event.job().has_progress()) progress_ = event.job().progress();
        OnJob(event.job());
        break;
      case v1::JobEvent::kProgress:
        progress_ = event.progress();
        OnProgress();
        break;
      case v1::JobEvent::kLayer:
        OnLayer(event.layer());
        break;
      default:
        break;  // An event kind newer than this client.
    }
    return absl::OkStatus();
  }

  void Finish() {
    if (display_.out == nullptr) return;
    if (bar_shown_) {
      *display_.out << "\n";
      bar_shown_ = false;
    }
    if (!final_state_line_.empty() && display_.show_final_state) {
      *display_.out << final_state_line_ << "\n";
    }
    final_state_line_.clear();
    *display_.out << std::flush;
  }

  bool have_job() const { return have_job_; }
  const v1::Job& last_job() const { return last_job_; }

 private:
  // Clears the bar so a normal line can be written in its place.
  void ClearBar() {
    if (bar_shown_) *display_.out << kClearLine;
    bar_shown_ = false;
  }

  void Line(const std::string& text) {
    if (display_.out == nullptr) return;
    ClearBar();
    *display_.out << text << "\n";
    if (display_.terminal && have_progress_) DrawBar();
    *display_.out << std::flush;
  }

  void OnJob(const v1::Job& job) {
    if (job.state() == shown_state_) return;
    shown_state_ = job.state();
    std::string text = absl::StrCat(job.id(), ": ", JobStateName(job.state()));
    if (!VerdictName(job.verdict()).empty()) {
      absl::StrAppend(&text, ", verdict ", VerdictName(job.verdict()));
    }
    if (!job.error().empty()) absl::StrAppend(&text, ": ", job.error());
    // A watch that reconnected after the end gets the final state before
    // the layers it missed: the final state is shown last, by Finish.
    if (IsTerminalState(job.state())) {
      final_state_line_ = text;
      return;
    }
    Line(text);
  }

  void OnProgress() {
    have_progress_ = true;
    if (display_.out == nullptr) return;
    if (display_.terminal) {
      DrawBar();
      *display_.out << std::flush;
    } else {
      Line(absl::StrCat("progress ", FormatProgress(progress_)));
    }
  }

  void DrawBar() {
    ClearBar();
    const double fraction = ProgressFraction(progress_);
    const int filled = static_cast<int>(fraction * kBarWidth + 0.5);
    *display_.out << "[" << std::string(filled, '#')
                  << std::string(kBarWidth - filled, '.') << "] "
                  << FormatProgress(progress_);
    bar_shown_ = true;
  }

  void OnLayer(const v1::LayerAudit& layer) {
    // A stream resumed after a reconnect replays the job's layers.
    // Shown once complete: the block's last reduce reports it again.
    if (layer.heldout_pending()) return;
    if (!layers_shown_.insert(layer.name()).second) return;
    if (!header_shown_) {
      header_shown_ = true;
      Line(absl::StrFormat("  %-36s %-6s %4s %9s %9s %9s %7s  %s", "layer",
                           "method", "bits", "cal_err", "held_err", "rtn_held",
                           "gain", "flags"));
    }
    if (!layer.packed()) {
      Line(absl::StrFormat("  %-36s kept: %s", layer.name(), layer.reason()));
      return;
    }
    Line(absl::StrFormat(
        "  %-36s %-6s %4d %9.5f %9.5f %9.5f %7.3f  %s", layer.name(),
        layer.method(), layer.bits(), layer.rel_output_error_cal(),
        layer.rel_output_error_heldout(), layer.rtn_rel_output_error_heldout(),
        layer.gain_heldout(), absl::StrJoin(layer.flags(), ",")));
  }

  WatchDisplay display_;
  v1::Job last_job_;
  bool have_job_ = false;
  v1::Progress progress_;
  bool have_progress_ = false;
  bool bar_shown_ = false;
  bool header_shown_ = false;
  v1::JobState shown_state_ = v1::JOB_STATE_UNSPECIFIED;
  std::set<std::string> layers_shown_;
  std::string final_state_line_;
};

// What the run itself found (the audit's warnings, "audit: ..."); those
// found at submit were shown by submit and stay in `status`.
void PrintAuditWarnings(const v1::Job& job, std::ostream& err) {
  for (const std::string& warning : job.warnings()) {
    if (absl::StartsWith(warning, common::kAuditWarningPrefix)) {
      err << "warning: " << warning << "\n";
    }
  }
}

absl::Status RunWatch(const CommandInvocation& invocation) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<ServiceClient> client,
                         ServiceClient::FromFlags());
  WatchDisplay display;
  display.out = invocation.out;
  display.terminal = IsTerminalStream(invocation.out);
  display.err = invocation.err;
  display.show_final_state = false;  // FinalLine below says it all.
  QUANT_ASSIGN_OR_RETURN(
      const v1::Job job,
      WatchUntilTerminal(*client, invocation.args[0], display));
  PrintAuditWarnings(job, *invocation.err);
  *invocation.out << FinalLine(job) << "\n";
  return JobOutcome(job);
}

}  // namespace

bool IsTerminalStream(const std::ostream* stream) {
  if (stream == &std::cout) return isatty(STDOUT_FILENO) == 1;
  if (stream == &std::cerr) return isatty(STDERR_FILENO) == 1;
  return false;
}

absl::StatusOr<v1::Job> WatchUntilTerminal(ServiceClient& client,
                                           const std::string& id,
                                           const WatchDisplay& display) {
  EventPrinter printer(display);
  // quantd may restart under a long watch (its jobs resume): reconnect
  // with backoff while it is unreachable, for up to two minutes counted
  // from the last stream that delivered events.
  ReconnectBudget budget(ReconnectOptions{}, absl::Now());
  while (true) {
    int events = 0;
    const absl::Status status =
        client.WatchJob(id, [&printer, &events](const v1::JobEvent& e) {
          ++events;
          return printer.OnEvent(e);
        });
    if (printer.have_job() && IsTerminalState(printer.last_job().state())) {
      printer.Finish();
      return printer.last_job();
    }
    if (events > 0) budget.OnConnected(absl::Now());
    const bool unreachable = absl::IsUnavailable(status) ||
                             absl::IsDeadlineExceeded(status) ||
                             status.ok();  // Ended early: quantd stopping.
    if (!unreachable || budget.Exhausted(absl::Now())) {
      printer.Finish();
      if (!status.ok()) return status;
      return client.GetJob(id);
    }
    const absl::Duration backoff = budget.NextBackoff();
    if (display.err != nullptr) {
      *display.err << "quantctl: lost the watch of " << id << " ("
                   << (status.ok() ? "stream ended" : status.message())
                   << "); reconnecting in " << absl::FormatDuration(backoff)
                   << "\n";
    }
    absl::SleepFor(backoff);
  }
}

absl::Status WatchAndPrintOutcome(ServiceClient& client, const std::string& id,
                                  bool json_output,
                                  const CommandInvocation& invocation) {
  // With --json stdout holds only the final object and stderr stays quiet.
  WatchDisplay display;
  if (!json_output) {
    display.out = invocation.err;
    display.terminal = IsTerminalStream(invocation.err);
    display.err = invocation.err;
  }
  QUANT_ASSIGN_OR_RETURN(const v1::Job job,
                         WatchUntilTerminal(client, id, display));
  if (!json_output) PrintAuditWarnings(job, *invocation.err);
  PrintJob(job, json_output, absl::StrCat(FinalLine(job), "\n"),
           *invocation.out);
  return JobOutcome(job);
}

std::string FinalLine(const v1::Job& job) {
  std::string text = absl::StrCat(job.id(), ": ", JobStateName(job.state()));
  if (!VerdictName(job.verdict()).empty()) {
    absl::StrAppend(&text, ", verdict ", VerdictName(job.verdict()));
  }
  if (!job.artifact_uri().empty()) {
    absl::StrAppend(&text, ", artifact ", job.artifact_uri());
  }
  if (!job.error().empty()) absl::StrAppend(&text, ", error: ", job.error());
  return text;
}

absl::Status JobOutcome(const v1::Job& job) {
  switch (job.state()) {
    case v1::JOB_STATE_SUCCEEDED:
      if (job.verdict() == v1::VERDICT_FAIL) {
        return GateFailedError(absl::StrCat(
            "job ", job.id(),
            ": gate verdict FAIL; the artifact was written but must not "
            "ship (see `quantctl report ",
            job.id(), "`)"));
      }
      return absl::OkStatus();
    case v1::JOB_STATE_FAILED:
      return absl::AbortedError(absl::StrCat(
          "job ", job.id(),
          " FAILED: ", job.error().empty() ? "no reason given" : job.error()));
    case v1::JOB_STATE_CANCELLED:
      return absl::CancelledError(
          absl::StrCat("job ", job.id(), " was CANCELLED"));
    default:
      return absl::UnavailableError(absl::StrCat(
          "job ", job.id(), " is still ", JobStateName(job.state()),
          " but the watch stream ended; watch it again"));
  }
}

Command WatchCommand() {
  Command command;
  command.name = "watch";
  command.summary =
      "Follow a job until it ends: state, progress and per-layer audit rows.";
  command.usage = "watch JOB [connection flags]";
  command.description =
      "Streams the job's events from quantd: its state first, then progress "
      "per block (a redrawn bar on a terminal, plain lines otherwise) and a "
      "row per layer as it finishes (name, method, bits, relative output "
      "error on calibration and held-out data, RTN's held-out error, gain "
      "over RTN, flags), until the job is terminal. Ends with the warnings "
      "the audit found (\"warning: audit: ...\" on stderr, e.g. layers "
      "calibrated on fewer tokens than inputs) and the final state and "
      "verdict. If quantd restarts, the watch reconnects with backoff for up "
      "to two minutes. Exit codes: 0 SUCCEEDED with verdict PASS, 3 "
      "verdict FAIL, 1 FAILED, CANCELLED or an error, 2 usage.";
  command.example = "quantctl watch job-000042";
  command.flags = ServiceFlags();
  command.min_args = 1;
  command.max_args = 1;
  command.run = RunWatch;
  return command;
}

}  // namespace quant
