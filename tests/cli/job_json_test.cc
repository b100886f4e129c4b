// quantctl's views of the service's messages, from constructed protos: the
// stable JSON of jobs and reports (state and verdict names, audit.json's
// layer keys, 64-bit and non-finite numbers as JSON numbers), the report
// table, --state / --label parsing, the exit rule of watch and submit
// --wait, and fetch's local copy.
#include "client/job_json.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "client/command.h"
#include "client/fetch_command.h"
#include "client/watch_command.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;

v1::Job MakeJob() {
  v1::Job job;
  job.set_id("job-000007");
  job.set_state(v1::JOB_STATE_SUCCEEDED);
  job.set_verdict(v1::VERDICT_PASS);
  job.set_checkpoint_uri("file:///models/m");
  job.set_calibration_sha256(std::string(64, 'a'));
  (*job.mutable_labels())["team"] = "lm";
  (*job.mutable_labels())["run"] = "7";
  job.set_request_id("r7");
  job.mutable_progress()->set_blocks_done(5);
  job.mutable_progress()->set_blocks_total(5);
  job.mutable_progress()->set_fraction(1.0);
  job.mutable_progress()->set_layers_done(35);
  job.mutable_progress()->set_layers_total(35);
  job.set_artifact_uri("file:///art/jobs/job-000007/packed");
  job.mutable_create_time()->set_seconds(1700000000);
  job.mutable_recipe()->set_bits(4);
  job.add_warnings("overrides[0]: match \"x\" matches no layer");
  return job;
}

v1::LayerAudit MakeLayer(const std::string& name, double gain) {
  v1::LayerAudit layer;
  layer.set_name(name);
  layer.set_type("q_proj");
  layer.set_method("gptq");
  layer.set_bits(4);
  layer.set_group_size(128);
  layer.set_packed(true);
  layer.set_rel_output_error_cal(0.011);
  layer.set_rel_output_error_heldout(0.0125);
  layer.set_rtn_rel_output_error_heldout(0.02);
  layer.set_gain_heldout(gain);
  layer.set_flattery(1.05);
  layer.mutable_hessian()->set_tokens(int64_t{5000000000});  // > 2^32.
  layer.mutable_hessian()->set_k(64);
  layer.add_flags("outlier");
  return layer;
}

v1::JobReport MakeReport(bool with_gates) {
  v1::JobReport report;
  *report.mutable_job() = MakeJob();
  *report.add_layers() = MakeLayer("model.layers.0.self_attn.q_proj", 1.6);
  v1::LayerAudit* kept = report.add_layers();
  kept->set_name("model.layers.0.mlp.down_proj");
  kept->set_packed(false);
  kept->set_reason("width 172 is not a multiple of 8");
  if (with_gates) {
    v1::GateReport* gates = report.mutable_gates();
    gates->set_perplexity(12.5);
    gates->set_reference_perplexity(12.0);
    gates->set_ppl_ratio(12.5 / 12.0);
    gates->set_mean_kl(0.02);
    gates->set_top1_agreement(0.9);
    gates->set_tokens(4096);
    v1::GateCheck* check = gates->add_checks();
    check->set_gate("max_ppl_ratio");
    check->set_threshold(1.01);
    check->set_value(12.5 / 12.0);
    check->set_passed(false);
    gates->set_verdict("FAIL");
    report.set_verdict(v1::VERDICT_FAIL);
    report.set_artifact_uri("file:///art/jobs/job-000007/packed");
  }
  return report;
}

TEST(JobJsonTest, JobHasStableKeysAndReadableNames) {
  const json j = JobToJson(MakeJob());
  for (const char* key :
       {"id", "state", "verdict", "checkpoint_uri", "calibration_sha256",
        "request_id", "labels", "progress", "artifact_uri", "error", "warnings",
        "create_time", "update_time", "recipe"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  ASSERT_EQ(j["warnings"].size(), 1u);
  EXPECT_EQ(j["warnings"][0], "overrides[0]: match \"x\" matches no layer");
  EXPECT_EQ(j["id"], "job-000007");
  EXPECT_EQ(j["state"], "SUCCEEDED");
  EXPECT_EQ(j["verdict"], "PASS");
  EXPECT_EQ(j["labels"], (json{{"team", "lm"}, {"run", "7"}}));
  EXPECT_EQ(j["progress"]["blocks_done"], 5);
  EXPECT_EQ(j["progress"]["blocks_total"], 5);
  EXPECT_DOUBLE_EQ(j["progress"]["fraction"].get<double>(), 1.0);
  EXPECT_EQ(j["progress"]["layers_done"], 35);
  EXPECT_EQ(j["progress"]["layers_total"], 35);
  EXPECT_EQ(j["artifact_uri"], "file:///art/jobs/job-000007/packed");
  EXPECT_EQ(j["create_time"], "2023-11-14T22:13:20Z");
  EXPECT_EQ(j["update_time"], "");  // Unset.
  EXPECT_EQ(j["recipe"]["bits"], 4);
  EXPECT_EQ(j["error"], "");
}

TEST(JobJsonTest, StateAndVerdictNames) {
  EXPECT_EQ(JobStateName(v1::JOB_STATE_QUEUED), "QUEUED");
  EXPECT_EQ(JobStateName(v1::JOB_STATE_CANCELLED), "CANCELLED");
  EXPECT_EQ(VerdictName(v1::VERDICT_FAIL), "FAIL");
  EXPECT_EQ(VerdictName(v1::VERDICT_UNSPECIFIED), "");
  v1::Job queued;
  queued.set_state(v1::JOB_STATE_QUEUED);
  EXPECT_EQ(JobToJson(queued)["verdict"], "");
  EXPECT_EQ(JobToJson(queued)["state"], "QUEUED");
  EXPECT_TRUE(IsTerminalState(v1::JOB_STATE_FAILED));
  EXPECT_FALSE(IsTerminalState(v1::JOB_STATE_RUNNING));
}

TEST(JobJsonTest, ParsesStates) {
  EXPECT_EQ(*ParseJobState("running"), v1::JOB_STATE_RUNNING);
  EXPECT_EQ(*ParseJobState("CANCELLED"), v1::JOB_STATE_CANCELLED);
  EXPECT_EQ(*ParseJobState("JOB_STATE_QUEUED"), v1::JOB_STATE_QUEUED);
  for (const char* bad : {"", "unspecified", "done", "JOB_STATE_"}) {
    const absl::StatusOr<v1::JobState> state = ParseJobState(bad);
    ASSERT_FALSE(state.ok()) << bad;
    EXPECT_THAT(state.status().message(), HasSubstr("--state")) << bad;
  }
}

TEST(JobJsonTest, ParsesLabels) {
  const auto labels = ParseLabels({"team=lm", "note=a=b", "empty="});
  ASSERT_TRUE(labels.ok()) << labels.status();
  EXPECT_EQ(labels->at("team"), "lm");
  EXPECT_EQ(labels->at("note"), "a=b");
  EXPECT_EQ(labels->at("empty"), "");
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"team"}, {"=lm"}, {"a=1", "a=2"}}) {
    const auto parsed = ParseLabels(bad);
    ASSERT_FALSE(parsed.ok()) << bad[0];
    EXPECT_THAT(parsed.status().message(), HasSubstr("--label"));
  }
}

TEST(JobJsonTest, ReportJsonHasAuditJsonKeys) {
  const absl::StatusOr<json> j = ReportToJson(MakeReport(true));
  ASSERT_TRUE(j.ok()) << j.status();
  for (const char* key : {"job", "verdict", "gates", "layers"}) {
    EXPECT_TRUE(j->contains(key)) << key;
  }
  EXPECT_EQ((*j)["verdict"], "FAIL");
  EXPECT_EQ((*j)["job"]["id"], "job-000007");
  ASSERT_EQ((*j)["layers"].size(), 2u);
  const json& layer = (*j)["layers"][0];
  for (const char* key :
       {"name", "type", "method", "bits", "group_size", "rel_output_error_cal",
        "rel_output_error_heldout", "rtn_rel_output_error_heldout",
        "gain_heldout", "flattery", "flags", "packed", "reason", "seconds",
        "bits_per_weight", "hessian"}) {
    EXPECT_TRUE(layer.contains(key)) << key;
  }
  EXPECT_EQ(layer["bits"], 4);
  EXPECT_EQ(layer["packed"], true);
  EXPECT_EQ(layer["flags"], json::array({"outlier"}));
  // The JSON mapping writes int64 as strings; the view gives numbers.
  ASSERT_TRUE(layer["hessian"]["tokens"].is_number_integer())
      << layer["hessian"]["tokens"];
  EXPECT_EQ(layer["hessian"]["tokens"].get<int64_t>(), 5000000000);
  // Defaults are printed: a kept layer still has every primitive key.
  const json& kept = (*j)["layers"][1];
  EXPECT_EQ(kept["packed"], false);
  EXPECT_EQ(kept["bits"], 0);
  EXPECT_EQ(kept["flags"], json::array());
  EXPECT_EQ((*j)["gates"]["tokens"], 4096);
  EXPECT_EQ((*j)["gates"]["verdict"], "FAIL");
  EXPECT_EQ((*j)["gates"]["checks"][0]["gate"], "max_ppl_ratio");
}

TEST(JobJsonTest, UnfinishedReportHasEmptyGatesAndNoVerdict) {
  v1::JobReport report;
  report.mutable_job()->set_id("job-000001");
  report.mutable_job()->set_state(v1::JOB_STATE_RUNNING);
  const absl::StatusOr<json> j = ReportToJson(report);
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["verdict"], "");
  EXPECT_EQ((*j)["gates"], json::object());
  EXPECT_EQ((*j)["layers"], json::array());
  const absl::StatusOr<std::string> text = FormatReport(report);
  ASSERT_TRUE(text.ok());
  EXPECT_THAT(*text, HasSubstr("no layer has finished yet"));
}

TEST(JobJsonTest, NonFiniteGainStaysANumber) {
  v1::JobReport report = MakeReport(true);
  report.mutable_layers(0)->set_gain_heldout(
      std::numeric_limits<double>::infinity());
  const absl::StatusOr<json> j = ReportToAuditJson(report);
  ASSERT_TRUE(j.ok()) << j.status();
  const json& gain = (*j)["layers"][0]["gain_heldout"];
  ASSERT_TRUE(gain.is_number_float()) << gain;
  EXPECT_TRUE(std::isinf(gain.get<double>()));
  const absl::StatusOr<std::string> text = FormatReport(report);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("inf"));
}

TEST(JobJsonTest, ReportTableHasLayersGatesAndVerdict) {
  const absl::StatusOr<std::string> text = FormatReport(MakeReport(true));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("job-000007: SUCCEEDED"));
  EXPECT_THAT(*text, HasSubstr("model.layers.0.self_attn.q_proj"));
  EXPECT_THAT(*text, HasSubstr("0.01250"));  // Method's held-out error.
  EXPECT_THAT(*text, HasSubstr("1.600"));    // Gain.
  EXPECT_THAT(*text, HasSubstr("outlier"));
  EXPECT_THAT(*text, HasSubstr("kept: width 172 is not a multiple of 8"));
  EXPECT_THAT(*text, HasSubstr("gate max_ppl_ratio"));
  EXPECT_THAT(*text, HasSubstr("over 4096 tokens"));
  EXPECT_THAT(*text, HasSubstr("verdict: FAIL"));
  EXPECT_THAT(*text, HasSubstr("artifact: file:///art/jobs/job-000007"));
}

TEST(JobJsonTest, RunningReportTableShowsLayersSoFar) {
  v1::JobReport report = MakeReport(false);
  report.mutable_job()->set_state(v1::JOB_STATE_RUNNING);
  const absl::StatusOr<std::string> text = FormatReport(report);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text, HasSubstr("model.layers.0.self_attn.q_proj"));
  EXPECT_THAT(*text, HasSubstr("model.layers.0.mlp.down_proj"));
  EXPECT_THAT(*text, HasSubstr("gates: not evaluated yet (2 layers"));
  EXPECT_THAT(*text, Not(HasSubstr("verdict:")));
  EXPECT_THAT(*text, Not(HasSubstr("held-out: perplexity")));
}

// The line watch prints: the counts and the percentage agree (the job's
// fraction also weighs the finalize task, so it is not what is shown).
TEST(JobJsonTest, ProgressLineCountsAgreeWithItsPercentage) {
  v1::Progress progress;
  progress.set_blocks_done(0);
  progress.set_blocks_total(5);
  progress.set_layers_done(5);
  progress.set_layers_total(35);
  progress.set_fraction(0.119);
  EXPECT_EQ(FormatProgress(progress), "0/5 blocks, 5/35 layers (14.3%)");
  EXPECT_DOUBLE_EQ(ProgressFraction(progress), 5.0 / 35.0);
  progress.set_current("block 1/5: model.layers.0.mlp.up_proj");
  EXPECT_EQ(FormatProgress(progress),
            "0/5 blocks, 5/35 layers (14.3%) - block 1/5: "
            "model.layers.0.mlp.up_proj");
  // A quantd that does not count layers: blocks and its fraction.
  v1::Progress older;
  older.set_blocks_done(2);
  older.set_blocks_total(5);
  older.set_fraction(0.4);
  EXPECT_EQ(FormatProgress(older), "2/5 blocks (40.0%)");
}

TEST(JobJsonTest, TextViewsOfJobs) {
  const std::string details = FormatJobDetails(MakeJob());
  EXPECT_THAT(details, HasSubstr("state:       SUCCEEDED"));
  EXPECT_THAT(details, HasSubstr("verdict:     PASS"));
  EXPECT_THAT(details, HasSubstr("5/5 blocks, 35/35 layers (100.0%)"));
  EXPECT_THAT(details, HasSubstr("labels:      run=7,team=lm"));
  const std::string table = FormatJobTable({MakeJob()});
  EXPECT_THAT(table, HasSubstr("ID "));
  EXPECT_THAT(table, HasSubstr("job-000007 SUCCEEDED"));
  EXPECT_THAT(table, HasSubstr("run=7,team=lm"));
}

TEST(JobOutcomeTest, ExitRuleOfWatchAndWait) {
  v1::Job job = MakeJob();
  EXPECT_TRUE(JobOutcome(job).ok());
  job.set_verdict(v1::VERDICT_FAIL);
  EXPECT_TRUE(IsGateFailedError(JobOutcome(job)));
  job.set_state(v1::JOB_STATE_FAILED);
  job.set_error("worker crashed");
  const absl::Status failed = JobOutcome(job);
  EXPECT_FALSE(failed.ok());
  EXPECT_FALSE(IsGateFailedError(failed));
  EXPECT_THAT(failed.message(), HasSubstr("worker crashed"));
  job.set_state(v1::JOB_STATE_CANCELLED);
  EXPECT_THAT(JobOutcome(job).message(), HasSubstr("CANCELLED"));
  job.set_state(v1::JOB_STATE_RUNNING);
  EXPECT_FALSE(JobOutcome(job).ok());
  EXPECT_THAT(FinalLine(MakeJob()),
              HasSubstr("job-000007: SUCCEEDED, verdict PASS, artifact "
                        "file:///art/jobs/job-000007/packed"));
}

// A checkpoint served from memory, a chunk of 1000 bytes at a time, as
// DownloadArtifact serves one; it can drop the connection after a number
// of bytes and damage a file, and records what it was asked for.
class FakeArtifact {
 public:
  FakeArtifact() {
    std::string big;
    for (int i = 0; i < 5000; ++i) big += static_cast<char>('a' + i % 26);
    files_["model.safetensors"] = big;
    files_["config.json"] = "{}";
    nlohmann::json listed = nlohmann::json::array();
    for (const auto& [name, bytes] : files_) {
      listed.push_back({{"name", name},
                        {"bytes", bytes.size()},
                        {"sha256", Sha256Hex(bytes)}});
    }
    manifest_ = nlohmann::json{{"output", {{"files", listed}}}}.dump();
  }

  ChunkSource Source() {
    return [this](const std::string& file, int64_t offset,
                  const std::function<absl::Status(const v1::ArtifactChunk&)>&
                      on_chunk) -> absl::Status {
      requests.push_back(absl::StrCat(file, "@", offset));
      if (file != "manifest.json" && files_.count(file) == 0) {
        return absl::NotFoundError(absl::StrCat(file, ": not served"));
      }
      const std::string bytes =
          file == "manifest.json" ? manifest_ : files_.at(file);
      for (int64_t at = offset; at < static_cast<int64_t>(bytes.size());
           at += 1000) {
        if (drop_after_bytes >= 0 && sent_ >= drop_after_bytes) {
          return absl::UnavailableError("connection reset");
        }
        v1::ArtifactChunk chunk;
        chunk.set_file(file);
        chunk.set_offset(at);
        chunk.set_data(bytes.substr(at, 1000));
        if (file == damaged_file) (*chunk.mutable_data())[0] ^= 1;
        chunk.set_file_size(static_cast<int64_t>(bytes.size()));
        if (file != "manifest.json") sent_ += chunk.data().size();
        if (absl::Status s = on_chunk(chunk); !s.ok()) return s;
      }
      return absl::OkStatus();
    };
  }

  const std::string& file(const std::string& name) { return files_[name]; }

  int64_t drop_after_bytes = -1;
  std::string damaged_file;
  std::vector<std::string> requests;

 private:
  std::map<std::string, std::string> files_;
  std::string manifest_;
  int64_t sent_ = 0;
};

TEST(FetchTest, DownloadsEveryFileAndVerifiesIt) {
  FakeArtifact artifact;
  const std::string dest = testing::MakeTempDir() + "/copy";
  std::ostringstream progress;
  auto fetched = FetchCheckpoint(artifact.Source(), dest, &progress);
  ASSERT_TRUE(fetched.ok()) << fetched.status();
  EXPECT_EQ(fetched->files, 2);
  EXPECT_EQ(fetched->bytes, 5002);
  EXPECT_EQ(fetched->bytes_resumed, 0);
  EXPECT_EQ(*ReadFileToString(dest + "/model.safetensors"),
            artifact.file("model.safetensors"));
  EXPECT_TRUE(testing::PathExists(dest + "/manifest.json"));
  EXPECT_FALSE(testing::PathExists(dest + ".partial"));
  EXPECT_THAT(progress.str(), HasSubstr("[2/2] model.safetensors"));
  EXPECT_THAT(progress.str(), HasSubstr("sha256 verified"));
  // DIR must be new.
  auto again = FetchCheckpoint(artifact.Source(), dest, nullptr);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kAlreadyExists);
}

// A dropped connection keeps what arrived; the next fetch asks for each
// file from where it stopped and ends with the same bytes.
TEST(FetchTest, InterruptedFetchResumesByOffset) {
  FakeArtifact artifact;
  artifact.drop_after_bytes = 2000;  // config.json (2) and 1998 more.
  const std::string dest = testing::MakeTempDir() + "/copy";
  auto first = FetchCheckpoint(artifact.Source(), dest, nullptr);
  ASSERT_FALSE(first.ok());
  EXPECT_EQ(first.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(first.status().message(), HasSubstr("run the same fetch again"));
  EXPECT_FALSE(testing::PathExists(dest));
  ASSERT_TRUE(testing::PathExists(dest + ".partial/model.safetensors"));

  FakeArtifact healthy;
  auto second = FetchCheckpoint(healthy.Source(), dest, nullptr);
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ(healthy.requests,
            (std::vector<std::string>{"manifest.json@0", "manifest.json.sig@0",
                                      "model.safetensors@2000"}));
  EXPECT_EQ(second->bytes_resumed, 2 + 2000);
  EXPECT_EQ(*ReadFileToString(dest + "/model.safetensors"),
            healthy.file("model.safetensors"));
  EXPECT_FALSE(testing::PathExists(dest + ".partial"));
}

TEST(FetchTest, ADamagedFileLeavesNothing) {
  FakeArtifact artifact;
  artifact.damaged_file = "model.safetensors";
  const std::string dest = testing::MakeTempDir() + "/copy";
  auto fetched = FetchCheckpoint(artifact.Source(), dest, nullptr);
  ASSERT_FALSE(fetched.ok());
  EXPECT_EQ(fetched.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(fetched.status().message(),
              HasSubstr("does not match its manifest.json"));
  EXPECT_THAT(fetched.status().message(), HasSubstr("model.safetensors: "));
  EXPECT_FALSE(testing::PathExists(dest));
  EXPECT_FALSE(testing::PathExists(dest + ".partial"));
}

TEST(FetchTest, ChunksOutOfOrderAreRefused) {
  const std::string dest = testing::MakeTempDir() + "/copy";
  FakeArtifact artifact;
  const ChunkSource inner = artifact.Source();
  const ChunkSource skipping =
      [&](const std::string& file, int64_t offset,
          const std::function<absl::Status(const v1::ArtifactChunk&)>&
              on_chunk) {
        return inner(file, offset, [&](const v1::ArtifactChunk& chunk) {
          if (chunk.file() != "manifest.json" && chunk.offset() == 1000) {
            return absl::OkStatus();  // Lost on the way.
          }
          return on_chunk(chunk);
        });
      };
  auto fetched = FetchCheckpoint(skipping, dest, nullptr);
  ASSERT_FALSE(fetched.ok());
  EXPECT_EQ(fetched.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(fetched.status().message(), HasSubstr("bytes from 1000"));
  EXPECT_FALSE(testing::PathExists(dest));
}

}  // namespace
}  // namespace quant
