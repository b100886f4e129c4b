// JobLifecycle::FinishJob and AuditWarnings: a job that succeeds carries the
// warnings its audit found (layers whose Hessian was rank-deficient, T < K)
// next to those found at submit, and keeps them in the store.
#include "server/job_lifecycle.h"

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/artifact_store.h"
#include "server/change_signal.h"
#include "server/job_spec.h"
#include "server/store/clock.h"
#include "server/store/sqlite_job_store.h"
#include "server/task_plan.h"
#include "tests/support/test_env.h"

namespace quant::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

nlohmann::json Layer(const std::string& name, int64_t tokens, int64_t k,
                     std::vector<std::string> flags) {
  return {{"name", name},
          {"hessian", {{"tokens", tokens}, {"k", k}}},
          {"flags", flags}};
}

std::string Audit(const std::vector<nlohmann::json>& layers) {
  return nlohmann::json{{"verdict", "PASS"}, {"layers", layers}}.dump();
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
      AuditWarnings(audit),
      ElementsAre(
          "audit: 4 layers calibrated on 48 tokens, fewer than their 64 "
          "inputs (T < K), so GPTQ and AWQ leaned on damping there "
          "(flag rank_deficient): l.0.q_proj, l.0.k_proj, l.1.q_proj "
          "and 1 more",
          "audit: 1 layer calibrated on 48 tokens, fewer than its 172 "
          "inputs (T < K), so GPTQ and AWQ leaned on damping there "
          "(flag rank_deficient): l.0.down_proj"));
}

TEST(AuditWarningsTest, NoneForAFullRankOrUnreadableAudit) {
  EXPECT_THAT(AuditWarnings(Audit({Layer("a", 500, 64, {"outlier"})})),
              IsEmpty());
  EXPECT_THAT(AuditWarnings("not json"), IsEmpty());
  EXPECT_THAT(AuditWarnings(R"({"layers": 3})"), IsEmpty());
  EXPECT_THAT(AuditWarnings(R"({"layers": [{"flags": "rank_deficient"}]})"),
              IsEmpty());
}

TEST(JobLifecycleTest, FinishedJobShowsSubmitAndAuditWarnings) {
  const std::string dir = testing::MakeTempDir();
  auto store = store::SqliteJobStore::Open(dir + "/quantd.db",
                                           store::SystemClock::Default());
  ASSERT_TRUE(store.ok()) << store.status();
  auto artifacts = FileArtifactStore::Open("file://" + dir + "/art", 1 << 20);
  ASSERT_TRUE(artifacts.ok()) << artifacts.status();
  ChangeSignal signal;
  JobLifecycle lifecycle(store->get(), artifacts->get(), &signal);

  JobSpec spec;
  spec.checkpoint_uri = "file:///models/m";
  spec.checkpoint_path = "/models/m";
  spec.num_blocks = 1;
  spec.calibration_sha256 = std::string(64, 'a');
  spec.calibration_path = "/calib/a.jsonl";
  spec.warnings = {"recipe: at submit"};
  auto created = (*store)->CreateJob("req", JobSpecToJson(spec), {});
  ASSERT_TRUE(created.ok()) << created.status();
  const std::string id = created->job.id;
  bool planned = false;
  ASSERT_TRUE(
      EnsureJobPlanned(**store, id, 1, Propagation::kSequential, &planned)
          .ok());
  for (int task = 0; task < 2; ++task) {  // block 0, finalize
    auto lease = (*store)->LeaseTask("w", 60'000);
    ASSERT_TRUE(lease.ok() && lease->has_value());
    ASSERT_TRUE((*store)->CompleteTask((*lease)->lease_id, "file:///o").ok());
  }
  const std::string checkpoint =
      absl::StrCat(dir, "/art/jobs/", id, "/checkpoint");
  std::filesystem::create_directories(checkpoint);
  ASSERT_TRUE(WriteFileAtomically(
                  checkpoint + "/audit.json",
                  Audit({Layer("l.0.down_proj", 96, 172, {"rank_deficient"}),
                         Layer("l.0.q_proj", 96, 64, {})}))
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

}  // namespace
}  // namespace quant::server
