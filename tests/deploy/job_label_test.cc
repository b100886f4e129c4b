// The quantization job is the label "job_id" on quantd's per-job series and
// on quant_worker_current_task (docs/METRICS.md); "job" is Prometheus' own
// scrape-target label ("quantd", "quant-worker"). The alert rules, their
// tests and the dashboards must keep the two apart: a query or template that
// asks a per-job series for "job" finds nothing, or names quantd instead of
// the job.
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/deploy/deploy_files.h"

namespace quant::deploy_test {
namespace {

// Metrics whose row in docs/METRICS.md lists the label `job_id`.
std::set<std::string> PerJobMetrics() {
  std::set<std::string> names;
  absl::StatusOr<std::string> doc = ReadRepoFile("docs/METRICS.md");
  if (!doc.ok()) return names;
  for (absl::string_view line : absl::StrSplit(*doc, '\n')) {
    // | `name` | type | labels | meaning |
    const std::vector<absl::string_view> cells = absl::StrSplit(line, '|');
    if (cells.size() < 5 || !cells[0].empty()) continue;
    absl::string_view name = absl::StripAsciiWhitespace(cells[1]);
    if (!absl::ConsumePrefix(&name, "`quant_") ||
        !absl::ConsumeSuffix(&name, "`")) {
      continue;
    }
    if (absl::StrContains(cells[3], "`job_id`")) {
      names.insert(absl::StrCat("quant_", name));
    }
  }
  return names;
}

// The scrape jobs of deploy/prometheus/prometheus.yml: the only values the
// "job" label takes.
std::set<std::string> ScrapeJobs() {
  std::set<std::string> jobs;
  absl::StatusOr<std::vector<YamlNode>> config =
      LoadYaml("deploy/prometheus/prometheus.yml");
  if (!config.ok()) return jobs;
  for (const YamlNode& scrape : ItemsAt(config->front(), "scrape_configs")) {
    jobs.insert(ScalarAt(scrape, "job_name"));
  }
  return jobs;
}

// Label matchers (NAME op "VALUE") of a query or series, by label name.
std::multimap<std::string, std::string> MatchersIn(const std::string& query) {
  std::multimap<std::string, std::string> matchers;
  const std::regex matcher(
      R"re((^|[{,\s])([A-Za-z_][A-Za-z0-9_]*)\s*(=~|!~|!=|=)\s*"([^"]*)")re");
  for (std::sregex_iterator it(query.begin(), query.end(), matcher), end;
       it != end; ++it) {
    matchers.emplace((*it)[2].str(), (*it)[4].str());
  }
  return matchers;
}

// Label names a Go template reads ({{ $labels.NAME }}) or a Grafana legend
// prints ({{NAME}}).
std::set<std::string> TemplateLabelsIn(const std::string& text) {
  std::set<std::string> labels;
  const std::regex label(
      R"re(\{\{\s*(?:\$labels\.)?([A-Za-z_][A-Za-z0-9_]*)\s*\}\})re");
  for (std::sregex_iterator it(text.begin(), text.end(), label), end; it != end;
       ++it) {
    labels.insert((*it)[1].str());
  }
  return labels;
}

bool UsesPerJobMetric(const std::set<std::string>& per_job,
                      const std::string& query) {
  for (const std::string& name : MetricNamesIn(query)) {
    if (per_job.count(name) > 0) return true;
  }
  return false;
}

class JobLabelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    per_job_ = PerJobMetrics();
    // A METRICS.md that the parse misread would pass anything.
    ASSERT_THAT(per_job_,
                ::testing::IsSupersetOf(
                    {"quant_job_progress_ratio", "quant_layer_gain_over_rtn",
                     "quant_job_gates_passed", "quant_worker_current_task"}));
    ASSERT_EQ(per_job_.count("quant_jobs"), 0u);
    scrape_jobs_ = ScrapeJobs();
    ASSERT_THAT(scrape_jobs_,
                ::testing::IsSupersetOf({"quantd", "quant-worker"}));
  }

  // Every "job" matcher names a scrape job, never a quantization job.
  void ExpectJobMatchersNameScrapeJobs(const std::string& where,
                                       const std::string& query) {
    const std::multimap<std::string, std::string> matchers = MatchersIn(query);
    const auto [begin, end] = matchers.equal_range("job");
    for (auto it = begin; it != end; ++it) {
      EXPECT_EQ(scrape_jobs_.count(it->second), 1u)
          << where << ": job=\"" << it->second
          << "\" is no scrape job; the quantization job is job_id";
    }
  }

  std::set<std::string> per_job_;
  std::set<std::string> scrape_jobs_;
};

TEST_F(JobLabelTest, QueryParsingFindsMatchersAndTemplates) {
  const auto matchers = MatchersIn(
      "a{job=\"quantd\", job_id=~\"$job_id\"} + up{job!=\"x\",split=\"h\"}");
  EXPECT_EQ(matchers.count("job"), 2u);
  EXPECT_EQ(matchers.count("job_id"), 1u);
  EXPECT_EQ(matchers.count("split"), 1u);
  EXPECT_THAT(TemplateLabelsIn("Job {{ $labels.job_id }} on {{$labels.job}} "
                               "{{ $value }} {{instance}}"),
              ::testing::UnorderedElementsAre("job_id", "job", "instance"));
}

TEST_F(JobLabelTest, AlertsOnPerJobSeriesNameTheJobById) {
  absl::StatusOr<std::vector<YamlNode>> rules =
      LoadYaml("deploy/prometheus/alerts.yml");
  ASSERT_TRUE(rules.ok()) << rules.status();
  int per_job_alerts = 0;
  for (const YamlNode& group : ItemsAt(rules->front(), "groups")) {
    for (const YamlNode& rule : ItemsAt(group, "rules")) {
      const std::string alert = ScalarAt(rule, "alert");
      const std::string expr = ScalarAt(rule, "expr");
      ExpectJobMatchersNameScrapeJobs(alert, expr);
      if (!UsesPerJobMetric(per_job_, expr)) continue;
      ++per_job_alerts;
      const std::string summary = ScalarAt(rule, "annotations.summary");
      const std::string text =
          summary + ScalarAt(rule, "annotations.description");
      EXPECT_EQ(TemplateLabelsIn(summary).count("job_id"), 1u)
          << alert << ": the summary should name the job";
      EXPECT_EQ(TemplateLabelsIn(text).count("job"), 0u)
          << alert << ": $labels.job is the scrape target, not the job";
    }
  }
  EXPECT_GE(per_job_alerts, 2);
}

TEST_F(JobLabelTest, AlertTestSeriesCarryTargetLabelsAndJobIds) {
  absl::StatusOr<std::vector<YamlNode>> tests =
      LoadYaml("deploy/prometheus/alerts_test.yml");
  ASSERT_TRUE(tests.ok()) << tests.status();
  int per_job_series = 0;
  for (const YamlNode& test : ItemsAt(tests->front(), "tests")) {
    const std::string name = ScalarAt(test, "name");
    for (const YamlNode& input : ItemsAt(test, "input_series")) {
      const std::string series = ScalarAt(input, "series");
      const auto labels = MatchersIn(series);
      // As Prometheus attaches them when it scrapes.
      ASSERT_EQ(labels.count("job"), 1u) << name << ": " << series;
      ExpectJobMatchersNameScrapeJobs(name, series);
      EXPECT_EQ(labels.count("instance"), 1u) << name << ": " << series;
      if (!UsesPerJobMetric(per_job_, series)) continue;
      ++per_job_series;
      const std::string expected_job =
          absl::StartsWith(series, "quant_worker_") ? "quant-worker" : "quantd";
      EXPECT_EQ(labels.find("job")->second, expected_job) << series;
      const auto job_id = labels.find("job_id");
      ASSERT_NE(job_id, labels.end()) << name << ": " << series;
      EXPECT_TRUE(absl::StartsWith(job_id->second, "job-")) << series;
    }
    for (const YamlNode& check : ItemsAt(test, "alert_rule_test")) {
      for (const YamlNode& alert : ItemsAt(check, "exp_alerts")) {
        const std::string job = ScalarAt(alert, "exp_labels.job");
        EXPECT_EQ(scrape_jobs_.count(job), 1u)
            << name << ": expected job \"" << job << "\"";
      }
    }
  }
  EXPECT_GE(per_job_series, 3);
}

TEST_F(JobLabelTest, DashboardsSelectAndLabelPerJobSeriesByJobId) {
  const std::vector<std::string> dashboards =
      ListRepoFiles("deploy/grafana/dashboards", {".json"}, false);
  ASSERT_FALSE(dashboards.empty());
  const std::regex label_values(
      R"re(label_values\(\s*([^,]*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\))re");
  for (const std::string& file : dashboards) {
    SCOPED_TRACE(file);
    absl::StatusOr<std::string> text = ReadRepoFile(file);
    ASSERT_TRUE(text.ok()) << text.status();
    const nlohmann::json dash = nlohmann::json::parse(*text, nullptr, false);
    ASSERT_FALSE(dash.is_discarded()) << "not JSON";
    int per_job_queries = 0;
    for (const auto& panel : dash.at("panels")) {
      const std::string title = panel.value("title", "");
      for (const auto& target :
           panel.value("targets", nlohmann::json::array())) {
        const std::string expr = target.at("expr").get<std::string>();
        ExpectJobMatchersNameScrapeJobs(title, expr);
        if (!UsesPerJobMetric(per_job_, expr)) continue;
        ++per_job_queries;
        EXPECT_EQ(
            TemplateLabelsIn(target.value("legendFormat", "")).count("job"), 0u)
            << title << ": legend {{job}} is the scrape target";
      }
    }
    EXPECT_GE(per_job_queries, 5);
    bool job_variable = false;
    for (const auto& variable : dash.at("templating").at("list")) {
      // Grafana runs query.query; definition is what its editor shows.
      std::vector<std::string> queries = {variable.value("definition", "")};
      if (variable.contains("query") && variable.at("query").is_object()) {
        queries.push_back(variable.at("query").value("query", ""));
      }
      for (const std::string& query : queries) {
        ExpectJobMatchersNameScrapeJobs("$" + variable.value("name", ""),
                                        query);
        std::smatch m;
        if (!std::regex_search(query, m, label_values) ||
            !UsesPerJobMetric(per_job_, m[1].str())) {
          continue;
        }
        EXPECT_NE(m[2].str(), "job") << query;
        job_variable = job_variable || m[2].str() == "job_id";
      }
    }
    EXPECT_TRUE(job_variable) << "no variable lists the job ids";
  }
}

}  // namespace
}  // namespace quant::deploy_test
