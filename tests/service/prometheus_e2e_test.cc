// Dashboards see what the service does: a real Prometheus server (Debian's
// `prometheus`, on loopback with a 1 s scrape interval and its own storage)
// scrapes quantd's /metrics while a stories260K job runs through quantd and
// a local worker. Queried over Prometheus' HTTP API: the job's progress
// ratio reaches 1, the held-out error series exist for every packed layer
// with the values GetJobReport serves, and after the retention window the
// job's series are gone while the service-wide ones remain.
#include <limits.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/recipe_convert.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/recipe/recipe.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "quant/v1/service.grpc.pb.h"
#include "tests/metrics/exposition_test_util.h"
#include "tests/service/child_process.h"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::ChildProcess;
using testing::RealPath;

std::string UrlEncode(const std::string& text) {
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '_' || c == '-' || c == '.') {
      out.push_back(static_cast<char>(c));
    } else {
      absl::StrAppend(&out, "%", absl::Hex(c, absl::kZeroPad2));
    }
  }
  return out;
}

// Instant query: the result vector as {labels, value} (empty on error).
std::vector<std::pair<nlohmann::json, double>> Query(
    int port, const std::string& promql) {
  auto response = metrics::testing::HttpGet(
      port, "/api/v1/query?query=" + UrlEncode(promql));
  std::vector<std::pair<nlohmann::json, double>> out;
  if (!response.ok() || response->status != 200) return out;
  const nlohmann::json doc =
      nlohmann::json::parse(response->body, nullptr, false);
  if (!doc.is_object() || doc.value("status", "") != "success") return out;
  for (const nlohmann::json& item : doc["data"]["result"]) {
    double value = 0;
    if (!absl::SimpleAtod(item["value"][1].get<std::string>(), &value)) {
      continue;
    }
    out.emplace_back(item["metric"], value);
  }
  return out;
}

template <typename Predicate>
bool Eventually(int timeout_s, Predicate done) {
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
  }
  return done();
}

TEST(PrometheusE2eTest, ScrapedSeriesMatchTheReportAndExpire) {
  QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
  if (access("/usr/bin/prometheus", X_OK) != 0) {
    if (testing::RunningInCi()) FAIL() << "CI=true but prometheus is missing";
    GTEST_SKIP() << "Debian's prometheus is not installed "
                    "(scripts/install_deps.sh installs it)";
  }
  const std::string temp = RealPath(testing::MakeTempDir());
  const std::string checkpoint =
      RealPath(testing::SharedPath("models/stories260K/hf-f32"));
  const std::string calibration =
      RealPath(testing::SharedPath("data/tinystories_val.txt"));

  ChildProcess quantd(
      {testing::BinaryDir() + "/server/quantd", "--listen=127.0.0.1:0",
       "--metrics-listen=127.0.0.1:0", "--metrics-retention=20s",
       // The blocks as rounds: the series of the round task kinds.
       "--local-workers=1", "--round_tasks", "--data-dir=" + temp + "/data",
       "--artifact-root=file://" + temp + "/artifacts",
       "--allowed-roots=" + RealPath(testing::SharedDir())},
      {}, temp + "/quantd.log");
  const std::string listening = quantd.ReadLine(60'000);
  const std::string metrics_line = quantd.ReadLine(10'000);
  ASSERT_TRUE(absl::StartsWith(listening, "quantd: listening on "))
      << listening;
  int metrics_port = 0;
  ASSERT_TRUE(absl::StartsWith(metrics_line, "quantd: metrics on port ") &&
              absl::SimpleAtoi(metrics_line.substr(24), &metrics_port))
      << metrics_line;
  const std::string address = listening.substr(21);

  const int prometheus_port = testing::FreeLoopbackPort();
  ASSERT_TRUE(
      WriteFileAtomically(temp + "/prometheus.yml",
                          absl::StrCat("global:\n  scrape_interval: 1s\n"
                                       "scrape_configs:\n  - job_name: quantd\n"
                                       "    static_configs:\n"
                                       "      - targets: ['127.0.0.1:",
                                       metrics_port, "']\n"))
          .ok());
  ChildProcess prometheus(
      {"/usr/bin/prometheus", "--config.file=" + temp + "/prometheus.yml",
       "--storage.tsdb.path=" + temp + "/tsdb",
       absl::StrCat("--web.listen-address=127.0.0.1:", prometheus_port)},
      {}, temp + "/prometheus.log");
  ASSERT_TRUE(Eventually(60, [&] {
    auto ready = metrics::testing::HttpGet(prometheus_port, "/-/ready");
    return ready.ok() && ready->status == 200;
  })) << *ReadFileToString(temp + "/prometheus.log");

  auto stub = v1::QuantService::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  auto recipe = LoadRecipe(testing::FixturesDir() +
                           "/service/stories260k-gptq-small.yaml");
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  v1::CreateJobRequest request;
  request.set_checkpoint_uri("file://" + checkpoint);
  *request.mutable_recipe() = common::RecipeToProto(*recipe);
  request.mutable_calibration()->mutable_uri()->set_uri("file://" +
                                                        calibration);
  request.mutable_calibration()->mutable_uri()->set_sha256(
      *Sha256File(calibration));
  // The dry run first: once the local worker has registered its measured
  // rates, a time on it; no job created.
  nlohmann::json dry_run;
  EXPECT_TRUE(Eventually(60, [&] {
    const testing::RunResult result = testing::RunQuantctl(absl::StrCat(
        "submit --dry_run --json --checkpoint ", checkpoint, " --recipe ",
        testing::FixturesDir(), "/service/stories260k-gptq-small.yaml",
        " --addr ", address));
    dry_run = nlohmann::json::parse(result.out, nullptr, false);
    return result.exit_code == 0 && dry_run.is_object() &&
           dry_run["workers"] == 1;
  })) << dry_run.dump();
  EXPECT_TRUE(dry_run["expected_seconds"].is_number()) << dry_run.dump();
  // The blocks as rounds (8 sequences: 1 calibration and 1 held-out
  // shard): per block 4 groups of 2 shard tasks and 7 reduces (q, k, v;
  // o; gate, up; down: a GPTQ job reduces a layer at a time), 2 shard
  // outputs for all but the last block, and the finalize.
  EXPECT_EQ(dry_run["tasks"], 5 * (4 * 2 + 7) + 4 * 2 + 1) << dry_run.dump();
  {
    grpc::ClientContext context;
    v1::ListJobsResponse none;
    ASSERT_TRUE(stub->ListJobs(&context, v1::ListJobsRequest(), &none).ok());
    EXPECT_EQ(none.jobs_size(), 0) << "the dry run created a job";
  }
  v1::Job job;
  {
    grpc::ClientContext context;
    ASSERT_TRUE(stub->CreateJob(&context, request, &job).ok());
  }
  const std::string selector = absl::StrCat("{job_id=\"", job.id(), "\"}");

  // The job ends; its progress reaches 1 as Prometheus sees it.
  ASSERT_TRUE(Eventually(240, [&] {
    grpc::ClientContext context;
    v1::GetJobRequest get;
    get.set_id(job.id());
    v1::Job now;
    return stub->GetJob(&context, get, &now).ok() &&
           now.state() == v1::JOB_STATE_SUCCEEDED;
  })) << *ReadFileToString(temp + "/quantd.log");
  EXPECT_TRUE(Eventually(30, [&] {
    auto progress =
        Query(prometheus_port, "quant_job_progress_ratio" + selector);
    return progress.size() == 1 && progress[0].second == 1.0;
  })) << *ReadFileToString(temp + "/quantd.log");
  // Its ETA: nothing left once it has succeeded.
  EXPECT_TRUE(Eventually(30, [&] {
    auto eta = Query(prometheus_port, "quant_job_eta_seconds" + selector);
    return eta.size() == 1 && eta[0].second == 0.0;
  })) << *ReadFileToString(temp + "/quantd.log");
  // What a release pipeline reads: `quantctl report --json`.
  const testing::RunResult report = testing::RunQuantctl(
      absl::StrCat("report ", job.id(), " --json --addr ", address));
  ASSERT_TRUE(report.exit_code == 0 || report.exit_code == 3) << report.err;
  const nlohmann::json report_json =
      nlohmann::json::parse(report.out, nullptr, false);
  ASSERT_TRUE(report_json.is_object()) << report.out;
  EXPECT_EQ(report_json["job"]["state"], "SUCCEEDED");
  // The report page: the checkpoint's own, through quantctl and through
  // quantd's metrics port.
  const std::string page = temp + "/report.html";
  const testing::RunResult html_report = testing::RunQuantctl(
      absl::StrCat("report ", job.id(), " --html ", page, " --addr ", address));
  EXPECT_EQ(html_report.exit_code, report.exit_code) << html_report.err;
  auto carried = ReadFileToString(absl::StrCat(
      temp, "/artifacts/jobs/", job.id(), "/checkpoint/", "report.html"));
  auto written = ReadFileToString(page);
  ASSERT_TRUE(carried.ok()) << carried.status();
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(*written == *carried) << "quantctl's page is not the artifact's";
  auto served = metrics::testing::HttpGet(
      metrics_port, absl::StrCat("/jobs/", job.id(), "/report"));
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ(served->status, 200) << served->body;
  EXPECT_TRUE(absl::StartsWith(served->content_type, "text/html"))
      << served->content_type;
  EXPECT_TRUE(served->body == *carried) << "the served page is not the "
                                           "artifact's";
  auto unknown =
      metrics::testing::HttpGet(metrics_port, "/jobs/job-999/report");
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(unknown->status, 404) << unknown->body;
  std::map<std::string, double> expected;
  for (const nlohmann::json& layer : report_json["layers"]) {
    if (layer.value("packed", false)) {
      expected[layer["name"].get<std::string>()] =
          layer["rel_output_error_heldout"].get<double>();
    }
  }
  ASSERT_FALSE(expected.empty());
  std::map<std::string, double> scraped;
  EXPECT_TRUE(Eventually(30, [&] {
    scraped.clear();
    for (const auto& [labels, value] :
         Query(prometheus_port,
               absl::StrCat("quant_layer_rel_output_error{job_id=\"", job.id(),
                            "\",split=\"heldout\"}"))) {
      scraped[labels.value("layer", "")] = value;
    }
    return scraped.size() == expected.size();
  }));
  ASSERT_EQ(scraped.size(), expected.size());
  for (const auto& [name, value] : expected) {
    ASSERT_EQ(scraped.count(name), 1u) << name;
    EXPECT_NEAR(scraped[name], value, 1e-9 * std::abs(value)) << name;
  }
  std::vector<std::pair<nlohmann::json, double>> gates;
  EXPECT_TRUE(Eventually(30, [&] {
    gates = Query(prometheus_port, "quant_job_gates_passed" + selector);
    return gates.size() == 1;
  }));
  ASSERT_EQ(gates.size(), 1u);
  EXPECT_EQ(gates[0].second, report_json["verdict"] == "PASS" ? 1 : 0);
  // Every RPC is counted by method and code.
  auto created =
      Query(prometheus_port,
            "quant_rpc_requests_total{method=\"quant.v1.QuantService/"
            "CreateJob\",code=\"OK\"}");
  ASSERT_EQ(created.size(), 1u);
  EXPECT_EQ(created[0].second, 1.0);
  EXPECT_FALSE(Query(prometheus_port,
                     "quant_rpc_requests_total{method=\"quant.v1.WorkerService/"
                     "LeaseTask\"}")
                   .empty());

  // Past the retention window the job's series go; the service's stay.
  EXPECT_TRUE(Eventually(60, [&] {
    return Query(prometheus_port,
                 "{__name__=~\"quant_layer_.*|quant_job_.*\",job_id=\"" +
                     job.id() + "\"}")
        .empty();
  }));
  auto succeeded = Query(prometheus_port, "quant_jobs{state=\"succeeded\"}");
  ASSERT_EQ(succeeded.size(), 1u);
  EXPECT_EQ(succeeded[0].second, 1.0);
  // The blocks ran as rounds: each of the 5 blocks had a reduce per layer
  // of q, k, v and gate, up, and one each for o and down.
  auto completed =
      Query(prometheus_port, "quant_tasks_completed_total{kind=\"reduce\"}");
  ASSERT_EQ(completed.size(), 1u);
  EXPECT_EQ(completed[0].second, 35.0);
  auto blocks =
      Query(prometheus_port, "quant_tasks_completed_total{kind=\"block\"}");
  ASSERT_EQ(blocks.size(), 1u);
  EXPECT_EQ(blocks[0].second, 0.0);

  prometheus.Signal(SIGTERM);
  prometheus.Wait(30'000);
  quantd.Signal(SIGTERM);
  EXPECT_GE(quantd.Wait(60'000), 0);
}

}  // namespace
}  // namespace quant
