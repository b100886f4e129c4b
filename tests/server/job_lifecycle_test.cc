// JobLifecycle: FinishJob and AuditWarnings (a job that succeeds carries the
// warnings its audit found, layers whose Hessian was rank-deficient, T < K,
// next to those found at submit, and keeps them in the store), Upkeep's
// state events; and the report page quantd serves for a succeeded job.
#include "server/job_lifecycle.h"

#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/clock.h"
#include "core/base/file_util.h"
#include "core/recipe/recipe.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/artifact_store.h"
#include "server/auth.h"
#include "server/change_signal.h"
#include "server/job_events.h"
#include "server/job_report.h"
#include "server/job_spec.h"
#include "server/report_page.h"
#include "server/store/sqlite_job_store.h"
#include "server/task_plan.h"
#include "tests/support/forwarding_job_store.h"
#include "tests/support/test_env.h"

namespace quant::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

nlohmann::json Layer(const std::string& name, int64_t tokens, int64_t k,
                     std::vector<std::string> flags) {
  return {{"name", name},
          {"hessian", {{"tokens", tokens}, {"k", k}}},
          {"flags", flags}};
}

std::string Audit(const std::vector<nlohmann::json>& layers) {
  return nlohmann::json{
      {"verdict", "PASS"},
      {"gates",
       {{"ppl_ratio", 1.01}, {"mean_kl", 0.002}, {"top1_agreement", 0.97}}},
      {"layers", layers}}
      .dump();
}

PublishedAudit Parsed(const std::string& audit_json) {
  absl::StatusOr<PublishedAudit> parsed = ParseAudit(audit_json);
  EXPECT_TRUE(parsed.ok()) << parsed.status();
  return parsed.ok() ? *std::move(parsed) : PublishedAudit();
}

// The "job" section a finalize writes into manifest.json.
std::string Manifest(const std::string& job_id, const Recipe& recipe) {
  return nlohmann::json{
      {"format_version", 1},
      {"job", {{"id", job_id}, {"recipe_sha256", RecipeSha256(recipe)}}}}
      .dump();
}

// A planned job of one block in a fresh store on `clock`, with no task run.
struct PlannedJob {
  std::string dir;
  std::unique_ptr<store::SqliteJobStore> store;
  std::unique_ptr<FileArtifactStore> artifacts;
  JobSpec spec;
  std::string id;
};

PlannedJob MakePlannedJob(Clock* clock, int max_attempts,
                          std::vector<std::string> warnings = {}) {
  PlannedJob out;
  out.dir = testing::MakeTempDir();
  store::SqliteJobStoreOptions options;
  options.max_attempts = max_attempts;
  auto store =
      store::SqliteJobStore::Open(out.dir + "/quantd.db", clock, options);
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return out;
  out.store = *std::move(store);
  auto artifacts =
      FileArtifactStore::Open("file://" + out.dir + "/art", 1 << 20);
  EXPECT_TRUE(artifacts.ok()) << artifacts.status();
  if (!artifacts.ok()) return out;
  out.artifacts = *std::move(artifacts);
  out.spec.checkpoint_uri = "file:///models/m";
  out.spec.checkpoint_path = "/models/m";
  out.spec.num_blocks = 1;
  out.spec.calibration_sha256 = std::string(64, 'a');
  out.spec.calibration_path = "/calib/a.jsonl";
  out.spec.warnings = std::move(warnings);
  auto created = out.store->CreateJob("req", JobSpecToJson(out.spec), {});
  EXPECT_TRUE(created.ok()) << created.status();
  if (!created.ok()) return out;
  out.id = created->job.id;
  bool planned = false;
  EXPECT_TRUE(EnsureJobPlanned(*out.store, out.id, out.spec, &planned).ok());
  return out;
}

// A planned job (with a warning from submit) whose every task is done, and
// its checkpoint folder.
struct FinishedTasks : PlannedJob {
  std::string checkpoint;
};

FinishedTasks MakeFinishedTasks() {
  FinishedTasks out;
  static_cast<PlannedJob&>(out) = MakePlannedJob(
      SystemClock::Default(), store::SqliteJobStoreOptions().max_attempts,
      {"recipe: at submit"});
  if (out.store == nullptr || out.artifacts == nullptr) return out;
  for (int task = 0; task < 2; ++task) {  // block 0, finalize
    auto lease = out.store->LeaseTask("w", 60'000);
    EXPECT_TRUE(lease.ok() && lease->has_value());
    if (!lease.ok() || !lease->has_value()) return out;
    EXPECT_TRUE(out.store->CompleteTask((*lease)->lease_id, "file:///o").ok());
  }
  out.checkpoint = absl::StrCat(out.dir, "/art/jobs/", out.id, "/checkpoint");
  std::filesystem::create_directories(out.checkpoint);
  return out;
}

TEST(AuditWarningsTest, OneLinePerShapeOfTheRankDeficientLayers) {
  const std::string audit = Audit({
      Layer("l.0.q_proj", 48, 64, {"rank_deficient"}),
      Layer("l.0.k_proj", 48, 64, {"overfit", "rank_deficient"}),
      Layer("l.0.down_proj", 48, 172, {"rank_deficient"}),
      Layer("l.1.q_proj", 48, 64, {"rank_deficient"}),
      Layer("l.1.k_proj", 48, 64, {"rank_deficient"}),
      Layer("l.1.v_proj", 200, 64, {"outlier"}),
      {{"name", "lm_head"}, {"packed", false}},  // Not quantized: no Hessian.
  });
  EXPECT_THAT(
      AuditWarnings(Parsed(audit)),
      ElementsAre(
          "audit: 4 layers calibrated on 48 tokens, fewer than their 64 "
          "inputs (T < K), so GPTQ and AWQ leaned on damping there "
          "(flag rank_deficient): l.0.q_proj, l.0.k_proj, l.1.q_proj "
          "and 1 more",
          "audit: 1 layer calibrated on 48 tokens, fewer than its 172 "
          "inputs (T < K), so GPTQ and AWQ leaned on damping there "
          "(flag rank_deficient): l.0.down_proj"));
}

TEST(AuditWarningsTest, NoneForAFullRankAudit) {
  EXPECT_THAT(AuditWarnings(Parsed(Audit({Layer("a", 500, 64, {"outlier"})}))),
              IsEmpty());
  nlohmann::json odd = {{"name", "b"}, {"flags", "rank_deficient"}};
  EXPECT_THAT(AuditWarnings(Parsed(Audit({odd}))), IsEmpty());
}

// The one reader of audit.json: the verdict, the gates and the rows, or an
// error naming what is wrong (an audit that does not parse used to give a
// job no warnings, a report with an unspecified verdict and no gate
// metrics, each reader deciding on its own).
TEST(ParseAuditTest, ReadsTheVerdictGatesAndRows) {
  const PublishedAudit audit = Parsed(Audit({Layer("l.0.q_proj", 96, 64, {})}));
  EXPECT_EQ(audit.verdict, store::Verdict::kPass);
  EXPECT_DOUBLE_EQ(audit.ppl_ratio, 1.01);
  EXPECT_DOUBLE_EQ(audit.mean_kl, 0.002);
  EXPECT_DOUBLE_EQ(audit.top1_agreement, 0.97);
  ASSERT_EQ(audit.layers().size(), 1u);
  EXPECT_EQ(audit.layers()[0]["name"], "l.0.q_proj");
  nlohmann::json fail = nlohmann::json::parse(Audit({}));
  fail["verdict"] = "FAIL";
  EXPECT_EQ(Parsed(fail.dump()).verdict, store::Verdict::kFail);
}

TEST(ParseAuditTest, RefusesWhatThisToolDoesNotWrite) {
  const nlohmann::json good = nlohmann::json::parse(Audit({}));
  auto changed = [&](const std::function<void(nlohmann::json&)>& change) {
    nlohmann::json audit = good;
    change(audit);
    return audit.dump();
  };
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "audit.json"},
      {"[1, 2]", "not a JSON object"},
      {R"({"verdict": "PASS", "verdict": "FAIL"})", "verdict"},
      {std::string(100, '[') + std::string(100, ']'), "deep"},
      {changed([](nlohmann::json& a) { a.erase("verdict"); }), "verdict"},
      {changed([](nlohmann::json& a) { a["verdict"] = "MAYBE"; }),
       "unknown verdict \"MAYBE\""},
      {changed([](nlohmann::json& a) { a.erase("gates"); }), "gates"},
      {changed([](nlohmann::json& a) { a["gates"].erase("mean_kl"); }),
       "gates.mean_kl"},
      {changed([](nlohmann::json& a) { a["gates"]["ppl_ratio"] = "1.0"; }),
       "gates.ppl_ratio"},
      {changed([](nlohmann::json& a) { a["layers"] = 3; }), "layers"},
      {changed([](nlohmann::json& a) { a["layers"] = {1}; }),
       "layers[0]: not an object"},
  };
  for (const auto& [text, needle] : cases) {
    SCOPED_TRACE(text.substr(0, 80));
    absl::StatusOr<PublishedAudit> parsed = ParseAudit(text);
    ASSERT_FALSE(parsed.ok());
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_THAT(parsed.status().message(), HasSubstr(needle));
  }
}

// A damaged audit fails the job saying so; nothing is reported as PASS.
TEST(JobLifecycleTest, DamagedAuditFailsTheJob) {
  FinishedTasks f = MakeFinishedTasks();
  ASSERT_NE(f.artifacts, nullptr);
  ChangeSignal signal;
  JobLifecycle lifecycle(f.store.get(), f.artifacts.get(), &signal);
  nlohmann::json audit = nlohmann::json::parse(Audit({}));
  audit["gates"].erase("top1_agreement");
  ASSERT_TRUE(
      WriteFileAtomically(f.checkpoint + "/audit.json", audit.dump()).ok());
  ASSERT_TRUE(WriteFileAtomically(f.checkpoint + "/manifest.json",
                                  Manifest(f.id, f.spec.recipe))
                  .ok());
  ASSERT_TRUE(lifecycle.FinishJob(f.id).ok());
  auto job = lifecycle.JobProto(f.id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
  EXPECT_NE(job->verdict(), v1::VERDICT_PASS);
  EXPECT_THAT(job->error(), HasSubstr("published audit is damaged"));
  EXPECT_THAT(job->error(), HasSubstr("gates.top1_agreement"));
}

TEST(JobLifecycleTest, FinishedJobShowsSubmitAndAuditWarnings) {
  FinishedTasks f = MakeFinishedTasks();
  ASSERT_NE(f.artifacts, nullptr);
  ChangeSignal signal;
  JobLifecycle lifecycle(f.store.get(), f.artifacts.get(), &signal);
  const std::string& id = f.id;
  const JobSpec& spec = f.spec;
  auto* store = &f.store;
  ASSERT_TRUE(WriteFileAtomically(
                  f.checkpoint + "/audit.json",
                  Audit({Layer("l.0.down_proj", 96, 172, {"rank_deficient"}),
                         Layer("l.0.q_proj", 96, 64, {})}))
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(f.checkpoint + "/manifest.json",
                                  Manifest(id, spec.recipe))
                  .ok());

  ASSERT_TRUE(lifecycle.FinishJob(id).ok());
  auto job = lifecycle.JobProto(id);
  ASSERT_TRUE(job.ok()) << job.status();
  EXPECT_EQ(job->state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(job->verdict(), v1::VERDICT_PASS);
  ASSERT_EQ(job->warnings_size(), 2);
  EXPECT_EQ(job->warnings(0), "recipe: at submit");
  EXPECT_EQ(job->warnings(1),
            "audit: 1 layer calibrated on 96 tokens, fewer than its 172 "
            "inputs (T < K), so GPTQ and AWQ leaned on damping there (flag "
            "rank_deficient): l.0.down_proj");
  // spec_json stays as submitted: a CreateJob retried with the same
  // request id and spec is still the same job.
  auto again = (*store)->CreateJob("req", JobSpecToJson(spec), {});
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_FALSE(again->created);
  EXPECT_EQ(again->job.id, id);
}

// With the coordinator's state lost but the artifact root kept, a new job
// could get the id of an old one whose checkpoint is still published; it
// was then answered with the old checkpoint and its PASS. The manifest
// names its job and recipe, and FinishJob refuses one that is not this
// job's.
TEST(JobLifecycleTest, CheckpointOfAnotherJobIsNotReported) {
  Recipe other_recipe;
  other_recipe.bits = 8;
  struct Case {
    std::string name;
    std::function<std::string(const std::string& id, const Recipe& recipe)>
        manifest;
    std::string error;
  };
  const std::vector<Case> cases = {
      {"another job's id",
       [](const std::string&, const Recipe& r) { return Manifest("j-old", r); },
       "is the checkpoint of job j-old, not of job"},
      {"another recipe",
       [&](const std::string& id, const Recipe&) {
         return Manifest(id, other_recipe);
       },
       "was written with recipe sha256 "},
      {"no job section",
       [](const std::string&, const Recipe&) {
         return std::string("{\"format_version\": 1}");
       },
       "names no job"},
      {"not JSON",
       [](const std::string&, const Recipe&) { return std::string("{"); },
       "names no job"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    FinishedTasks f = MakeFinishedTasks();
    ASSERT_NE(f.artifacts, nullptr);
    ChangeSignal signal;
    JobLifecycle lifecycle(f.store.get(), f.artifacts.get(), &signal);
    ASSERT_TRUE(
        WriteFileAtomically(f.checkpoint + "/audit.json", Audit({})).ok());
    ASSERT_TRUE(WriteFileAtomically(f.checkpoint + "/manifest.json",
                                    c.manifest(f.id, f.spec.recipe))
                    .ok());
    ASSERT_TRUE(lifecycle.FinishJob(f.id).ok());
    auto job = lifecycle.JobProto(f.id);
    ASSERT_TRUE(job.ok()) << job.status();
    EXPECT_EQ(job->state(), v1::JOB_STATE_FAILED);
    EXPECT_NE(job->verdict(), v1::VERDICT_PASS);
    EXPECT_THAT(job->error(), HasSubstr("published checkpoint is not this "
                                        "job's"));
    EXPECT_THAT(job->error(), HasSubstr(c.error));
  }
}

// The states of the job's "job" events, in order.
std::vector<std::string> StateEvents(store::JobStore& store,
                                     const std::string& job_id) {
  std::vector<std::string> states;
  auto events = store.ListEvents(job_id, 0, 0);
  EXPECT_TRUE(events.ok()) << events.status();
  if (!events.ok()) return states;
  for (const store::Event& event : *events) {
    if (event.type != kJobStateEvent) continue;
    states.push_back(
        nlohmann::json::parse(event.payload_json).value("state", "?"));
  }
  return states;
}

// A store whose UnfinishedJobs is followed at once by a worker's lease that
// starts the job, as the worker service does it (the store's lease, then
// the lifecycle's state event): the interleaving a lease racing an upkeep
// pass produces by chance.
class LeaseAfterListingStore : public testing::ForwardingJobStore {
 public:
  using ForwardingJobStore::ForwardingJobStore;
  void set_lifecycle(JobLifecycle* lifecycle) { lifecycle_ = lifecycle; }
  absl::StatusOr<std::vector<store::Job>> UnfinishedJobs() override {
    auto jobs = base().UnfinishedJobs();
    if (lifecycle_ == nullptr) return jobs;
    auto lease = base().LeaseTask("w", 60'000, {});
    EXPECT_TRUE(lease.ok() && lease->has_value());
    if (lease.ok() && lease->has_value() && (*lease)->job_started) {
      EXPECT_TRUE(
          lifecycle_
              ->StateChanged((*lease)->task.job_id, store::JobState::kRunning)
              .ok());
    }
    lifecycle_ = nullptr;  // once
    return jobs;
  }

 private:
  JobLifecycle* lifecycle_ = nullptr;
};

// An upkeep pass records only the state changes it made. It used to compare
// each job's state with the one listed at its start, so a job a worker
// started meanwhile got its RUNNING event twice (seen in CI as an extra
// "job" event in WorkerProtocolTest).
TEST(JobLifecycleTest, UpkeepDoesNotRecordAStateChangeMadeByALease) {
  FakeClock clock;
  PlannedJob p = MakePlannedJob(&clock, 3);
  ASSERT_NE(p.artifacts, nullptr);
  LeaseAfterListingStore store(p.store.get());
  ChangeSignal signal;
  JobLifecycle lifecycle(&store, p.artifacts.get(), &signal);
  store.set_lifecycle(&lifecycle);
  auto upkeep = lifecycle.Upkeep();
  ASSERT_TRUE(upkeep.ok()) << upkeep.status();
  EXPECT_THAT(StateEvents(store, p.id), ElementsAre("RUNNING"));
  auto job = store.GetJob(p.id);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->state, store::JobState::kRunning);
}

// A job whose last attempt's lease expires fails in the upkeep pass, with
// one FAILED event. A lease asked for meanwhile requeues leases with
// attempts left but leaves failing the job to the upkeep, which learns from
// the store which jobs failed and records each once.
TEST(JobLifecycleTest, JobOutOfAttemptsByExpiryFailsOnceWithItsEvent) {
  FakeClock clock;
  PlannedJob p = MakePlannedJob(&clock, 1);
  ASSERT_NE(p.artifacts, nullptr);
  ChangeSignal signal;
  JobLifecycle lifecycle(p.store.get(), p.artifacts.get(), &signal);
  auto first = p.store->LeaseTask("w1", 100, {});
  ASSERT_TRUE(first.ok() && first->has_value());
  ASSERT_TRUE(lifecycle.StateChanged(p.id, store::JobState::kRunning).ok());
  clock.AdvanceMs(200);

  auto other = p.store->LeaseTask("w2", 100, {});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_FALSE(other->has_value());  // the task is out of attempts
  auto before = p.store->GetJob(p.id);
  ASSERT_TRUE(before.ok());
  EXPECT_EQ(before->state, store::JobState::kRunning);

  auto upkeep = lifecycle.Upkeep();
  ASSERT_TRUE(upkeep.ok()) << upkeep.status();
  EXPECT_EQ(upkeep->expired_leases, 1);
  auto after = p.store->GetJob(p.id);
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->state, store::JobState::kFailed);
  EXPECT_THAT(after->error, HasSubstr("expired"));
  EXPECT_THAT(StateEvents(*p.store, p.id), ElementsAre("RUNNING", "FAILED"));

  // A second pass finds nothing more to record.
  upkeep = lifecycle.Upkeep();
  ASSERT_TRUE(upkeep.ok()) << upkeep.status();
  EXPECT_EQ(upkeep->expired_leases, 0);
  EXPECT_THAT(StateEvents(*p.store, p.id), ElementsAre("RUNNING", "FAILED"));
}

// GET /jobs/ID/report on quantd's metrics port: the succeeded job's page
// for a caller with the client token (when one is set), and a plain reason
// for anything else.
TEST(ReportPageTest, ServesASucceededJobsPageToClients) {
  FinishedTasks f = MakeFinishedTasks();
  ASSERT_NE(f.artifacts, nullptr);
  ChangeSignal signal;
  JobLifecycle lifecycle(f.store.get(), f.artifacts.get(), &signal);
  ASSERT_TRUE(WriteFileAtomically(f.checkpoint + "/audit.json",
                                  Audit({Layer("model.layers.0.mlp.down_proj",
                                               96, 172, {"rank_deficient"})}))
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(f.checkpoint + "/manifest.json",
                                  Manifest(f.id, f.spec.recipe))
                  .ok());
  ASSERT_TRUE(lifecycle.FinishJob(f.id).ok());
  const std::string path = absl::StrCat("/jobs/", f.id, "/report");
  auto audit = ReadPublishedAudit(*f.artifacts, f.id);
  ASSERT_TRUE(audit.ok()) << audit.status();
  auto expected = RenderJobReportHtml(*f.artifacts, f.id, *audit);
  ASSERT_TRUE(expected.ok()) << expected.status();

  const Authenticator open(AuthTokens{});
  metrics::HttpResponse page =
      ServeJobReportPage({path, ""}, *f.store, *f.artifacts, open);
  EXPECT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(page.content_type, "text/html; charset=utf-8");
  EXPECT_EQ(page.body, *expected);
  EXPECT_THAT(page.body, HasSubstr("model.layers.0.mlp.down_proj"));

  const Authenticator tokens(AuthTokens{"client-t", "worker-t"});
  EXPECT_EQ(
      ServeJobReportPage({path, ""}, *f.store, *f.artifacts, tokens).status,
      401);
  EXPECT_EQ(
      ServeJobReportPage({path, "Bearer wrong"}, *f.store, *f.artifacts, tokens)
          .status,
      401);
  EXPECT_EQ(ServeJobReportPage({path, "Bearer worker-t"}, *f.store,
                               *f.artifacts, tokens)
                .status,
            403);
  page = ServeJobReportPage({path, "Bearer client-t"}, *f.store, *f.artifacts,
                            tokens);
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.body, *expected);

  for (const std::string& other :
       {std::string("/jobs/job-999999/report"), "/jobs/" + f.id, path + "/more",
        "/jobs/" + f.id + "/audit"}) {
    page = ServeJobReportPage({other, ""}, *f.store, *f.artifacts, open);
    EXPECT_EQ(page.status, 404) << other << ": " << page.body;
  }
  // A job that has not succeeded has no page yet.
  auto queued = f.store->CreateJob("another", JobSpecToJson(f.spec), {});
  ASSERT_TRUE(queued.ok()) << queued.status();
  page = ServeJobReportPage(
      {absl::StrCat("/jobs/", queued->job.id, "/report"), ""}, *f.store,
      *f.artifacts, open);
  EXPECT_EQ(page.status, 409);
  EXPECT_THAT(page.body, HasSubstr("is QUEUED"));
}

}  // namespace
}  // namespace quant::server
