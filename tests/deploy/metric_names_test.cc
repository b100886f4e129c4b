// The alert rules, their tests, the Grafana dashboards and the autoscaler's
// adapter query use only metric names that metrics/ exports, so a
// renamed metric cannot leave a silent alert or an empty panel behind; and
// the dashboard's and adapter's queries parse as PromQL (promtool).
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/deploy/deploy_files.h"
#include "tests/support/test_env.h"

namespace quant::deploy_test {
namespace {

class MetricNamesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::set<std::string>> exported = ExportedMetricNames();
    ASSERT_TRUE(exported.ok()) << exported.status();
    exported_ = *std::move(exported);
    // Both programs' families; a scan that found none would pass anything.
    ASSERT_THAT(exported_,
                ::testing::IsSupersetOf({"quant_jobs", "quant_queue_depth",
                                         "quant_layer_gain_over_rtn",
                                         "quant_worker_busy_slots"}));
  }

  void ExpectExported(const std::string& where, const std::string& text) {
    for (const std::string& name : MetricNamesIn(text)) {
      EXPECT_TRUE(IsExported(exported_, name))
          << where << " uses " << name << ", which metrics/ does not "
          << "export";
    }
  }

  std::set<std::string> exported_;
};

TEST_F(MetricNamesTest, FindsNamesOnlyAsWholeIdentifiers) {
  EXPECT_THAT(MetricNamesIn("sum(rate(quant_tasks_failed_total[5m])) / "
                            "my_quant_other + quant_jobs{state=\"x\"}"),
              ::testing::ElementsAre("quant_jobs", "quant_tasks_failed_total"));
  EXPECT_TRUE(IsExported(exported_, "quant_task_duration_seconds_bucket"));
  EXPECT_FALSE(IsExported(exported_, "quant_jobs_total"));
  EXPECT_FALSE(IsExported(exported_, "quant_no_such_metric"));
}

TEST_F(MetricNamesTest, AlertRulesAndTheirTestsUseExportedMetrics) {
  for (const char* file :
       {"deploy/prometheus/alerts.yml", "deploy/prometheus/alerts_test.yml"}) {
    absl::StatusOr<std::vector<YamlNode>> docs = LoadYaml(file);
    ASSERT_TRUE(docs.ok()) << docs.status();
    ASSERT_EQ(docs->size(), 1u);
    int exprs = 0;
    for (const YamlNode& group : ItemsAt(docs->front(), "groups")) {
      for (const YamlNode& rule : ItemsAt(group, "rules")) {
        ExpectExported(ScalarAt(rule, "alert"), ScalarAt(rule, "expr"));
        ++exprs;
      }
    }
    for (const YamlNode& test : ItemsAt(docs->front(), "tests")) {
      for (const YamlNode& series : ItemsAt(test, "input_series")) {
        ExpectExported(ScalarAt(test, "name"), ScalarAt(series, "series"));
        ++exprs;
      }
    }
    EXPECT_GT(exprs, 5) << file;
  }
}

TEST_F(MetricNamesTest, DashboardQueriesUseExportedMetrics) {
  int exprs = 0;
  for (const std::string& file :
       ListRepoFiles("deploy/grafana/dashboards", {".json"}, false)) {
    absl::StatusOr<std::string> text = ReadRepoFile(file);
    ASSERT_TRUE(text.ok()) << text.status();
    const nlohmann::json dash = nlohmann::json::parse(*text, nullptr, false);
    ASSERT_FALSE(dash.is_discarded()) << file;
    for (const auto& panel : dash.at("panels")) {
      for (const auto& target :
           panel.value("targets", nlohmann::json::array())) {
        ExpectExported(file + ": " + panel.value("title", ""),
                       target.at("expr").get<std::string>());
        ++exprs;
      }
    }
    for (const auto& variable : dash.at("templating").at("list")) {
      ExpectExported(file + ": $" + variable.value("name", ""),
                     variable.value("definition", ""));
    }
  }
  EXPECT_GT(exprs, 10);
}

TEST_F(MetricNamesTest, AutoscalerQueryUsesExportedMetrics) {
  absl::StatusOr<std::vector<YamlNode>> values =
      LoadYaml("deploy/prometheus-adapter/values.yaml");
  ASSERT_TRUE(values.ok()) << values.status();
  const std::vector<YamlNode>& rules =
      ItemsAt(values->front(), "rules.external");
  ASSERT_FALSE(rules.empty());
  for (const YamlNode& rule : rules) {
    ExpectExported("seriesQuery", ScalarAt(rule, "seriesQuery"));
    ExpectExported("metricsQuery", ScalarAt(rule, "metricsQuery"));
  }
}

// Queries of the dashboards (variables replaced by sample values) and of
// the adapter (its template replaced by a namespace matcher).
std::vector<std::string> QueriesToParse() {
  std::vector<std::string> queries;
  for (const std::string& file :
       ListRepoFiles("deploy/grafana/dashboards", {".json"}, false)) {
    absl::StatusOr<std::string> text = ReadRepoFile(file);
    if (!text.ok()) continue;
    const nlohmann::json dash = nlohmann::json::parse(*text, nullptr, false);
    if (dash.is_discarded()) continue;
    for (const auto& panel : dash.at("panels")) {
      for (const auto& target :
           panel.value("targets", nlohmann::json::array())) {
        queries.push_back(absl::StrReplaceAll(
            target.at("expr").get<std::string>(), {{"$job_id", "job-000001"},
                                                   {"$split", "heldout"},
                                                   {"$type", ".*"}}));
      }
    }
  }
  absl::StatusOr<std::vector<YamlNode>> adapter =
      LoadYaml("deploy/prometheus-adapter/values.yaml");
  if (adapter.ok()) {
    for (const YamlNode& rule : ItemsAt(adapter->front(), "rules.external")) {
      queries.push_back(
          absl::StrReplaceAll(ScalarAt(rule, "metricsQuery"),
                              {{"<<.LabelMatchers>>", "namespace=\"quant\""}}));
    }
  }
  return queries;
}

TEST(PromqlTest, DashboardAndAdapterQueriesParse) {
  if (std::system("command -v promtool >/dev/null 2>&1") != 0) {
    if (::quant::testing::RunningInCi()) FAIL() << "CI without promtool";
    GTEST_SKIP() << "promtool not installed (Debian package prometheus)";
  }
  const std::vector<std::string> queries = QueriesToParse();
  ASSERT_GT(queries.size(), 10u);
  // promtool parses the expressions of recording rules; JSON is YAML.
  nlohmann::json rules = nlohmann::json::array();
  for (size_t i = 0; i < queries.size(); ++i) {
    rules.push_back(
        {{"record", absl::StrCat("query_", i)}, {"expr", queries[i]}});
  }
  const nlohmann::json file = {
      {"groups", {{{"name", "queries"}, {"rules", rules}}}}};
  const std::string path = ::quant::testing::MakeTempDir() + "/queries.yml";
  std::ofstream(path) << file.dump(2);
  const std::string command =
      absl::StrCat("promtool check rules '", path, "' 2>&1");
  std::string output;
  FILE* pipe = popen(command.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) {
    output.append(buffer, n);
  }
  const int status = pclose(pipe);
  EXPECT_EQ(status, 0) << output;
  EXPECT_THAT(output, ::testing::HasSubstr(
                          absl::StrCat("SUCCESS: ", queries.size(), " rules")));
}

}  // namespace
}  // namespace quant::deploy_test
