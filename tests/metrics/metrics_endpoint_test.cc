// MetricsEndpoint over real loopback HTTP: quantd's and the worker's
// registries are served live on a bound port, pass `promtool check
// metrics`, and bad or busy addresses are refused with the right codes.
#include "metrics/metrics_endpoint.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <memory>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "metrics/quantd_metrics.h"
#include "metrics/text_exposition.h"
#include "metrics/worker_metrics.h"
#include "tests/metrics/exposition_test_util.h"
#include "tests/support/test_env.h"

namespace quant::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

// A quantd registry with every kind of series: jobs, a running and a
// finished job with layers and gates, tasks, workers, leases and RPCs.
void FillQuantd(QuantdMetrics& metrics) {
  const absl::Time now = absl::FromUnixSeconds(1'700'000'000);
  metrics.SetJobCounts({1, 1, 1, 0, 0});
  ASSERT_TRUE(
      metrics.SetJobProgress("job-000001", {5, 5, 35, 35, std::nullopt}).ok());
  ASSERT_TRUE(
      metrics.SetJobProgress("job-000002", {1, 5, 9, 35, std::nullopt}).ok());
  LayerResult layer;
  layer.name = "model.layers.0.self_attn.q_proj";
  layer.type = "q_proj";
  layer.rel_output_error_cal = 0.0123;
  layer.rel_output_error_heldout = 0.0145;
  layer.gain_cal = 2.5;
  layer.gain_heldout = 1.75;
  ASSERT_TRUE(metrics.OnLayerFinished("job-000001", layer).ok());
  ASSERT_TRUE(metrics.OnLayerFinished("job-000002", layer).ok());
  ASSERT_TRUE(
      metrics.SetGateValues("job-000001", {1.02, 0.015, 0.96, true}).ok());
  ASSERT_TRUE(metrics.OnJobFinished("job-000001", now).ok());
  metrics.OnTaskStarted(TaskKind::kBlock);
  metrics.OnTaskCompleted(TaskKind::kBlock, absl::Seconds(3));
  metrics.OnTaskFailed(TaskKind::kFinalize);
  metrics.OnTaskRetried(TaskKind::kFinalize);
  metrics.SetQueueDepth(4);
  metrics.SetWorkerCounts({1, 2, 0});
  metrics.OnLeasesExpired(1);
  metrics.OnRpcFinished("quant.v1.QuantService/CreateJob",
                        absl::StatusCode::kOk, absl::Milliseconds(12));
  metrics.OnRpcFinished("quant.v1.QuantService/GetJob",
                        absl::StatusCode::kNotFound, absl::Microseconds(800));
}

void FillWorker(WorkerMetrics& metrics) {
  metrics.SetSlots(2);
  ASSERT_TRUE(metrics.OnTaskStarted("job-000001", 0).ok());
  ASSERT_TRUE(metrics.OnTaskStarted("job-000001", 1).ok());
  ASSERT_TRUE(metrics
                  .OnTaskFinished("job-000001", 0, TaskKind::kBlock,
                                  TaskOutcome::kCompleted, absl::Seconds(12))
                  .ok());
  ASSERT_TRUE(
      metrics
          .RecordCoreThroughput(WorkerCore::kHessian, 4.2e9, absl::Seconds(1))
          .ok());
  ASSERT_TRUE(
      metrics.RecordCoreThroughput(WorkerCore::kGptq, 1.3e9, absl::Seconds(2))
          .ok());
}

// GET /metrics from `endpoint`; fails the test unless it is a 200 with the
// text format.
std::string FetchMetrics(const MetricsEndpoint& endpoint) {
  auto response = testing::HttpGet(endpoint.port(), "/metrics");
  EXPECT_TRUE(response.ok()) << response.status();
  if (!response.ok()) return "";
  EXPECT_EQ(response->status, 200) << response->body;
  EXPECT_THAT(response->content_type, StartsWith("text/plain"));
  return response->body;
}

// The quant_ samples of an exposition.
std::map<std::string, double> QuantSamples(const std::string& text) {
  auto samples = testing::ParseSamples(text);
  EXPECT_TRUE(samples.ok()) << samples.status();
  std::map<std::string, double> quant;
  if (!samples.ok()) return quant;
  for (const auto& [series, value] : *samples) {
    if (absl::StartsWith(series, "quant_")) quant.emplace(series, value);
  }
  return quant;
}

void ExpectPromtoolPasses(const std::string& body) {
  auto result = testing::PromtoolCheckMetrics(body);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->exit_code, 0) << "promtool check metrics:\n"
                                  << result->output << "\non:\n"
                                  << body;
}

TEST(MetricsEndpointTest, ServesQuantdRegistryLiveOnABoundPort) {
  QuantdMetrics metrics;
  FillQuantd(metrics);
  auto endpoint = MetricsEndpoint::Start("127.0.0.1:0", metrics.registry());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const MetricsEndpoint& served = **endpoint;
  EXPECT_GT(served.port(), 0);
  EXPECT_EQ(served.address(), absl::StrCat("127.0.0.1:", served.port()));

  const std::string body = FetchMetrics(served);
  const auto samples = QuantSamples(body);
  EXPECT_EQ(samples, QuantSamples(TextExposition(*metrics.registry())));
  EXPECT_EQ(samples.at("quant_job_progress_ratio{job_id=\"job-000001\"}"), 1);
  EXPECT_EQ(samples.at("quant_queue_depth"), 4);

  // Served live: a change shows in the next scrape.
  metrics.SetQueueDepth(9);
  EXPECT_EQ(QuantSamples(FetchMetrics(served)).at("quant_queue_depth"), 9);
}

TEST(MetricsEndpointTest, QuantdMetricsPassPromtool) {
  QUANT_REQUIRE_PROMTOOL();
  QuantdMetrics metrics;
  FillQuantd(metrics);
  auto endpoint = MetricsEndpoint::Start("127.0.0.1:0", metrics.registry());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const std::string body = FetchMetrics(**endpoint);
  ASSERT_THAT(body, HasSubstr("quant_layer_rel_output_error{"));
  ASSERT_THAT(body, HasSubstr("quant_rpc_duration_seconds_bucket{"));
  ExpectPromtoolPasses(body);
}

TEST(MetricsEndpointTest, WorkerMetricsAreServedAndPassPromtool) {
  WorkerMetrics metrics;
  FillWorker(metrics);
  auto endpoint = MetricsEndpoint::Start("127.0.0.1:0", metrics.registry());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  const std::string body = FetchMetrics(**endpoint);
  const auto samples = QuantSamples(body);
  EXPECT_EQ(samples, QuantSamples(TextExposition(*metrics.registry())));
  EXPECT_EQ(
      samples.at("quant_worker_current_task{job_id=\"job-000001\",task=\"1\"}"),
      1);
  EXPECT_DOUBLE_EQ(
      samples.at("quant_worker_core_flops_per_second{core=\"gptq\"}"), 6.5e8);
  QUANT_REQUIRE_PROMTOOL();
  ExpectPromtoolPasses(body);
}

TEST(MetricsEndpointTest, PromtoolCheckCanFail) {
  // The check above means something only if a bad exposition fails it.
  QUANT_REQUIRE_PROMTOOL();
  auto result = testing::PromtoolCheckMetrics(
      "# HELP quant_things Things.\n# TYPE quant_things counter\n"
      "quant_things 1\n");
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_NE(result->exit_code, 0);
  EXPECT_THAT(result->output, HasSubstr("_total"));
}

TEST(MetricsEndpointTest, MalformedAddressesAreInvalidArgumentNamingThem) {
  auto registry = std::make_shared<prometheus::Registry>();
  for (const char* address :
       {"nonsense", "127.0.0.1", "127.0.0.1:99999", "127.0.0.1:-1",
        "127.0.0.1:http", "example.com:9090", ":9090", "::1:9090",
        "[nonsense]:9090"}) {
    auto endpoint = MetricsEndpoint::Start(address, registry, "--metrics");
    ASSERT_FALSE(endpoint.ok()) << address;
    EXPECT_TRUE(absl::IsInvalidArgument(endpoint.status()))
        << endpoint.status();
    EXPECT_THAT(endpoint.status().message(),
                HasSubstr(absl::StrCat("--metrics: \"", address, "\"")));
  }
  // Debian's civetweb cannot bind IPv6: refused up front, saying so.
  auto endpoint = MetricsEndpoint::Start("[::1]:0", registry, "--metrics");
  EXPECT_TRUE(absl::IsInvalidArgument(endpoint.status())) << endpoint.status();
  EXPECT_THAT(endpoint.status().message(), HasSubstr("IPv6"));
  endpoint = MetricsEndpoint::Start("127.0.0.1:0", nullptr);
  EXPECT_TRUE(absl::IsInvalidArgument(endpoint.status())) << endpoint.status();
}

TEST(MetricsEndpointTest, PortInUseIsUnavailable) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t length = sizeof(addr);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &length), 0);
  const std::string address = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  auto endpoint = MetricsEndpoint::Start(
      address, std::make_shared<prometheus::Registry>(), "--metrics");
  ::close(fd);
  ASSERT_FALSE(endpoint.ok());
  EXPECT_TRUE(absl::IsUnavailable(endpoint.status())) << endpoint.status();
  EXPECT_THAT(endpoint.status().message(), HasSubstr(address));
}

TEST(MetricsEndpointTest, AddressNotOnThisHostIsUnavailable) {
  // 192.0.2.0/24 is TEST-NET-1: never assigned to a local interface.
  auto endpoint = MetricsEndpoint::Start(
      "192.0.2.1:0", std::make_shared<prometheus::Registry>());
  ASSERT_FALSE(endpoint.ok());
  EXPECT_TRUE(absl::IsUnavailable(endpoint.status())) << endpoint.status();
}

TEST(MetricsEndpointTest, LocalhostBindsLoopback) {
  auto endpoint = MetricsEndpoint::Start(
      "localhost:0", std::make_shared<prometheus::Registry>());
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  EXPECT_EQ((*endpoint)->address(),
            absl::StrCat("127.0.0.1:", (*endpoint)->port()));
}

// A page beside /metrics: its prefix and the paths below it reach the
// handler with the Authorization header; /metrics is still served; other
// paths are not found.
TEST(MetricsEndpointTest, AddedPagesAnswerBesideMetrics) {
  QuantdMetrics metrics;
  FillQuantd(metrics);
  PageRoute route;
  route.prefix = "/jobs";
  route.handler = [](const HttpRequest& request) {
    HttpResponse response;
    response.status = request.authorization == "Bearer t" ? 200 : 401;
    response.content_type = "text/html; charset=utf-8";
    response.body = "<p>" + request.path + "</p>";
    return response;
  };
  auto endpoint = MetricsEndpoint::Start("127.0.0.1:0", metrics.registry(),
                                         "--metrics_listen", {route});
  ASSERT_TRUE(endpoint.ok()) << endpoint.status();
  auto page = testing::HttpGet((*endpoint)->port(), "/jobs/job-000001/report",
                               "Bearer t");
  ASSERT_TRUE(page.ok()) << page.status();
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->content_type, StartsWith("text/html"));
  EXPECT_EQ(page->body, "<p>/jobs/job-000001/report</p>");
  auto refused = testing::HttpGet((*endpoint)->port(), "/jobs/x");
  ASSERT_TRUE(refused.ok()) << refused.status();
  EXPECT_EQ(refused->status, 401);
  EXPECT_EQ(QuantSamples(FetchMetrics(**endpoint)).at("quant_queue_depth"), 4);
  auto elsewhere = testing::HttpGet((*endpoint)->port(), "/other");
  ASSERT_TRUE(elsewhere.ok()) << elsewhere.status();
  EXPECT_EQ(elsewhere->status, 404);

  // A route that would hide /metrics, or has no handler, is refused.
  for (PageRoute bad :
       {PageRoute{"/metrics", route.handler}, PageRoute{"jobs", route.handler},
        PageRoute{"/jobs", nullptr}}) {
    auto refused_route = MetricsEndpoint::Start(
        "127.0.0.1:0", metrics.registry(), "--metrics_listen", {bad});
    EXPECT_TRUE(absl::IsInvalidArgument(refused_route.status()))
        << bad.prefix << ": " << refused_route.status();
  }
}

}  // namespace
}  // namespace quant::metrics
