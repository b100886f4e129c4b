// RunBadInputCases: act, then the shared checks, then wait for the jobs.
#include "bench/reliability/bad_input_runner.h"

#include <cctype>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "bench/reliability/case_actions.h"

namespace quant::reliability {
namespace {

bool NamesAll(const std::string& text, const std::vector<std::string>& names,
              std::vector<std::string>* missing) {
  for (const std::string& name : names) {
    if (!absl::StrContains(text, name)) missing->push_back(name);
  }
  return missing->empty();
}

std::string Describe(const Expectation& e) {
  return absl::StrCat(StageName(e.stage), " ", e.status);
}

// The first line naming `names[0]`, else the first non-empty line: the
// line a reader of the table needs.
std::string KeyLine(const std::string& text,
                    const std::vector<std::string>& names) {
  std::string first;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (first.empty()) first = std::string(line);
    if (!names.empty() && absl::StrContains(line, names[0])) {
      return std::string(line);
    }
  }
  return first;
}

// "task 3 (block 3)" out of a job's error, or "".
std::string FailedTask(const std::string& error) {
  size_t at = 0;
  while ((at = error.find("task ", at)) != std::string::npos) {
    size_t end = at + 5;
    while (end < error.size() &&
           std::isdigit(static_cast<unsigned char>(error[end]))) {
      ++end;
    }
    if (end > at + 5) {
      if (error.compare(end, 2, " (") == 0) {
        const size_t close = error.find(')', end);
        if (close != std::string::npos) end = close + 1;
      }
      return error.substr(at, end - at);
    }
    at += 5;
  }
  return "";
}

// Judges status and message against the expectation, or one of the
// alternatives when that is what happened.
void JudgeOutcome(const BadInputCase& c, Stage stage, const std::string& text,
                  BadInputRow& row) {
  const Expectation* matched = nullptr;
  std::vector<const Expectation*> all = {&c.expect};
  for (const Expectation& e : c.also_accepted) all.push_back(&e);
  for (const Expectation* e : all) {
    if (e->stage == stage && e->status == row.status) {
      matched = e;
      break;
    }
  }
  row.status_ok = matched != nullptr;
  if (!row.status_ok) {
    row.problems.push_back(absl::StrCat("expected ", Describe(c.expect),
                                        ", got ", StageName(stage), " ",
                                        row.status));
  } else if (matched != &c.expect) {
    row.notes.push_back(
        absl::StrCat("accepted alternative outcome ", Describe(*matched)));
  }
  const Expectation& names = matched != nullptr ? *matched : c.expect;
  std::vector<std::string> missing;
  row.message_ok = NamesAll(text, names.names, &missing);
  row.message = KeyLine(text, names.names);
  if (!row.message_ok) {
    const std::string list = absl::StrJoin(missing, "\", \"");
    row.problems.push_back(
        absl::StrCat("message does not name: \"", list, "\""));
    row.message = absl::StrCat("(names no \"", list, "\") ", row.message);
  }
}

// Paths of this run's temporary folders as placeholders, so that the table
// reads the same from run to run.
void Anonymize(const BadInputEnv& env, BadInputRow& row) {
  const std::vector<std::pair<std::string, std::string>> replacements = {
      {env.temp_dir() + "/inputs", "ROOT"},
      {env.temp_dir(), "TMP"},
      {env.shared_dir(), "SHARED"}};
  for (std::string* text : {&row.message, &row.full_message}) {
    *text = absl::StrReplaceAll(*text, replacements);
  }
}

void CheckServing(BadInputEnv& env, BadInputRow& row) {
  const absl::Status serving = env.StillServing();
  if (!serving.ok()) {
    row.still_serving = false;
    row.problems.push_back(
        absl::StrCat("quantd stopped answering: ", serving.ToString()));
  }
}

// After a refusal: no new job, and the refused calibration set not stored
// (neither on disk nor usable by hash).
void CheckNothingCreated(BadInputEnv& env, int jobs_before,
                         const Observation& observed, BadInputRow& row) {
  std::vector<std::string> left;
  absl::StatusOr<int> jobs_after = env.CountJobs();
  if (!jobs_after.ok()) {
    left.push_back(
        absl::StrCat("ListJobs failed: ", jobs_after.status().message()));
  } else if (*jobs_after != jobs_before) {
    left.push_back(
        absl::StrCat("job count ", jobs_before, " -> ", *jobs_after));
  }
  if (!observed.unstored_sha256.empty()) {
    if (env.CalibrationStored(observed.unstored_sha256)) {
      left.push_back("calibration set stored in the artifact store");
    }
    v1::CreateJobRequest probe = env.GoodRequest();
    probe.mutable_calibration()->set_sha256(observed.unstored_sha256);
    v1::Job job;
    const grpc::Status status = env.CreateJob(probe, &job);
    if (status.error_code() != grpc::StatusCode::NOT_FOUND) {
      left.push_back(
          absl::StrCat("CreateJob by the refused set's sha256 answered ",
                       CodeName(status.error_code()), " (expected NOT_FOUND)"));
    }
  }
  row.nothing_created_ok = left.empty();
  row.nothing_created = left.empty() ? "yes" : absl::StrJoin(left, "; ");
  if (!left.empty()) {
    row.problems.push_back(absl::StrCat("left behind: ", row.nothing_created));
  }
}

void FinishJobRow(BadInputEnv& env, const BadInputCase& c,
                  const Observation& observed, BadInputRow& row) {
  absl::StatusOr<v1::Job> job = env.WaitForJob(observed.job_id);
  if (!job.ok()) {
    row.status = "no end";
    row.refused_at = "job";
    row.problems.push_back(std::string(job.status().message()));
    JudgeOutcome(c, Stage::kJob, observed.message, row);
    return;
  }
  row.status = std::string(
      absl::StripPrefix(v1::JobState_Name(job->state()), "JOB_STATE_"));
  std::string summary;
  if (c.check_job) {
    for (std::string& problem : c.check_job(env, *job, &summary)) {
      row.problems.push_back(std::move(problem));
    }
  }
  const std::string task = FailedTask(job->error());
  row.refused_at = job->state() == v1::JOB_STATE_FAILED
                       ? absl::StrCat("job: ", task.empty() ? "?" : task)
                       : absl::StrCat("job ran (", row.status, ")");
  row.full_message =
      absl::StrCat(summary, "\n", job->error(), "\n", observed.message);
  JudgeOutcome(c, Stage::kJob, row.full_message, row);
  if (absl::StrContains(job->error(), " attempts: ") &&
      !absl::StrContains(job->error(), "after 1 attempts")) {
    row.notes.push_back(
        "the worker reported the bad input as retryable: the task ran "
        "again before the job failed");
  }
  if (c.expect.stage != Stage::kJob) {
    row.nothing_created_ok = false;
    row.nothing_created = absl::StrCat("job ", job->id(), " was created");
    row.problems.push_back(row.nothing_created);
  } else if (c.expect.status == "FAILED") {
    // A failed run must publish nothing.
    const bool published =
        !job->artifact_uri().empty() || env.CheckpointPublished(job->id());
    row.nothing_created_ok = !published;
    row.nothing_created =
        published ? "packed checkpoint published" : "yes (job FAILED)";
    if (published) {
      row.problems.push_back("a failed job published a checkpoint");
    }
  } else {
    row.nothing_created_ok = true;  // A job is expected here.
    row.nothing_created = "job created, as expected";
  }
}

}  // namespace

bool BadInputReport::ok() const {
  if (!quantd_clean_exit) return false;
  for (const BadInputRow& row : rows) {
    if (!row.passed()) return false;
  }
  return !rows.empty();
}

absl::StatusOr<BadInputReport> RunBadInputCases(
    const EnvOptions& options, const std::vector<BadInputCase>& cases) {
  absl::StatusOr<std::unique_ptr<BadInputEnv>> started =
      BadInputEnv::Start(options);
  if (!started.ok()) return started.status();
  BadInputEnv& env = **started;

  BadInputReport report;
  report.rows.resize(cases.size());
  std::vector<Observation> observed(cases.size());
  std::vector<size_t> jobs;
  for (size_t i = 0; i < cases.size(); ++i) {
    const BadInputCase& c = cases[i];
    BadInputRow& row = report.rows[i];
    row.name = c.name;
    row.input = c.input;
    row.expected = c.expect;
    row.still_serving = true;
    absl::StatusOr<int> jobs_before = env.CountJobs();
    if (!jobs_before.ok()) {
      row.problems.push_back(absl::StrCat("ListJobs before the case: ",
                                          jobs_before.status().message()));
    }
    observed[i] = c.act(env);
    Observation& o = observed[i];
    row.stage = StageName(o.stage);
    for (const std::string& problem : o.problems) {
      row.problems.push_back(problem);
    }
    if (o.stage == Stage::kJob) {
      env.NoteJob(o.job_id);
      jobs.push_back(i);  // Judged once the job ends.
    } else {
      row.status = o.status;
      row.refused_at = o.stage == Stage::kQuantctl ? "quantctl (local check)"
                                                   : StageName(o.stage);
      row.full_message = o.message;
      JudgeOutcome(c, o.stage, o.message, row);
      CheckNothingCreated(env, jobs_before.value_or(-1), o, row);
    }
    CheckServing(env, row);
  }
  // The jobs run one at a time on the one local worker, in creation order.
  for (size_t i : jobs) {
    FinishJobRow(env, cases[i], observed[i], report.rows[i]);
    CheckServing(env, report.rows[i]);
  }
  for (BadInputRow& row : report.rows) Anonymize(env, row);

  const absl::Status stopped = env.Stop();
  report.quantd_clean_exit = stopped.ok();
  report.quantd_exit = stopped.ok() ? "exit 0" : stopped.ToString();
  if (!report.ok()) {
    env.KeepTemp();
    report.temp_dir = env.temp_dir();
  }
  return report;
}

}  // namespace quant::reliability
