// deploy/compose.yaml with deploy/prometheus/prometheus.yml and
// deploy/grafana/: services refer to defined volumes, secrets and services;
// Prometheus scrapes compose services on the ports they serve /metrics on;
// workers share quantd's artifact volume and reach its gRPC port; Grafana's
// provisioning points at what compose mounts.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/deploy/deploy_files.h"

namespace quant::deploy_test {
namespace {

struct Mount {
  std::string source;
  std::string target;
};

// "SOURCE:TARGET[:ro]" volume entries of a service.
std::vector<Mount> MountsOf(const YamlNode& service) {
  std::vector<Mount> mounts;
  for (const std::string& spec : ScalarsAt(service, "volumes")) {
    // A ${VAR:-default} source holds a colon of its own.
    std::string source, rest;
    if (absl::StartsWith(spec, "${")) {
      const size_t close = spec.find('}');
      source = spec.substr(0, close + 1);
      rest = spec.substr(close + 2);
    } else {
      const size_t colon = spec.find(':');
      source = spec.substr(0, colon);
      rest = colon == std::string::npos ? "" : spec.substr(colon + 1);
    }
    mounts.push_back({source, rest.substr(0, rest.find(':'))});
  }
  return mounts;
}

class ComposeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<YamlNode>> compose =
        LoadYaml("deploy/compose.yaml");
    ASSERT_TRUE(compose.ok()) << compose.status();
    ASSERT_EQ(compose->size(), 1u);
    compose_ = std::move(compose->front());
    const YamlNode* services = Find(compose_, "services");
    ASSERT_NE(services, nullptr);
    ASSERT_TRUE(services->IsMap());
    for (const auto& [name, service] : services->entries) {
      services_[name.scalar] = &service;
    }
  }

  const YamlNode& Service(const std::string& name) {
    static const YamlNode* const kNone = new YamlNode;
    auto it = services_.find(name);
    return it == services_.end() ? *kNone : *it->second;
  }
  std::set<std::string> TopLevelNames(const std::string& section) {
    std::set<std::string> names;
    const YamlNode* node = Find(compose_, section);
    if (node != nullptr && node->IsMap()) {
      for (const auto& [name, value] : node->entries) names.insert(name.scalar);
    }
    return names;
  }

  YamlNode compose_;
  std::map<std::string, const YamlNode*> services_;
};

TEST_F(ComposeTest, ServicesReferToDefinedVolumesSecretsAndServices) {
  EXPECT_THAT(services_, ::testing::Contains(::testing::Key("quantd")));
  EXPECT_THAT(services_, ::testing::Contains(::testing::Key("quant-worker")));
  EXPECT_THAT(services_, ::testing::Contains(::testing::Key("prometheus")));
  EXPECT_THAT(services_, ::testing::Contains(::testing::Key("grafana")));
  const std::set<std::string> volumes = TopLevelNames("volumes");
  const std::set<std::string> secrets = TopLevelNames("secrets");
  for (const auto& [name, service] : services_) {
    SCOPED_TRACE(name);
    EXPECT_TRUE(Find(*service, "image") != nullptr ||
                Find(*service, "build") != nullptr);
    for (const Mount& m : MountsOf(*service)) {
      EXPECT_FALSE(m.target.empty()) << m.source;
      const bool path = absl::StartsWith(m.source, ".") ||
                        absl::StartsWith(m.source, "/") ||
                        absl::StartsWith(m.source, "${");
      if (!path) {
        EXPECT_EQ(volumes.count(m.source), 1u)
            << "undefined volume " << m.source;
      } else if (absl::StartsWith(m.source, "./")) {
        // Configuration from the checkout must be there.
        EXPECT_TRUE(RepoPathExists("deploy/" + m.source.substr(2))) << m.source;
      }
    }
    for (const std::string& secret : ScalarsAt(*service, "secrets")) {
      EXPECT_EQ(secrets.count(secret), 1u) << "undefined secret " << secret;
    }
    const YamlNode* depends = Find(*service, "depends_on");
    if (depends == nullptr) continue;
    std::vector<std::string> names = ScalarsAt(*service, "depends_on");
    for (const auto& [key, value] : depends->entries)
      names.push_back(key.scalar);
    for (const std::string& other : names) {
      EXPECT_EQ(services_.count(other), 1u) << "depends on unknown " << other;
    }
  }
  for (const std::string& secret : secrets) {
    // Tokens are made by the operator, never committed.
    EXPECT_TRUE(absl::StartsWith(
        ScalarAt(*Find(compose_, "secrets"), secret + ".file"), "./secrets/"))
        << secret;
  }
}

TEST_F(ComposeTest, WorkersShareArtifactsAndReachQuantd) {
  const std::vector<std::string> quantd =
      ScalarsAt(Service("quantd"), "command");
  const std::vector<std::string> worker =
      ScalarsAt(Service("quant-worker"), "command");
  ASSERT_FALSE(quantd.empty());
  ASSERT_FALSE(worker.empty());
  EXPECT_EQ(quantd.front(), "quantd");
  EXPECT_EQ(worker.front(), "quant-worker");
  EXPECT_FALSE(ScalarAt(Service("quant-worker"), "deploy.replicas").empty());

  const std::string server = FlagValue(worker, "server");
  EXPECT_EQ(HostOf(server), "quantd");
  EXPECT_EQ(PortOf(server), PortOf(FlagValue(quantd, "listen")));
  EXPECT_FALSE(FlagValue(quantd, "client_token_file").empty());
  EXPECT_FALSE(FlagValue(quantd, "worker_token_file").empty());
  // quantd's worker token file and the worker's are the same secret.
  EXPECT_EQ(FlagValue(worker, "token_file"),
            FlagValue(quantd, "worker_token_file"));

  const std::string root = FlagValue(quantd, "artifact_root");
  ASSERT_TRUE(absl::StartsWith(root, "file://")) << root;
  const std::string artifacts = root.substr(std::string("file://").size());
  std::string quantd_volume, worker_volume;
  for (const Mount& m : MountsOf(Service("quantd"))) {
    if (m.target == artifacts) quantd_volume = m.source;
  }
  for (const Mount& m : MountsOf(Service("quant-worker"))) {
    if (m.target == artifacts) worker_volume = m.source;
  }
  EXPECT_FALSE(quantd_volume.empty()) << artifacts << " is not a volume";
  EXPECT_EQ(worker_volume, quantd_volume);
  for (absl::string_view allowed :
       absl::StrSplit(FlagValue(quantd, "allowed_roots"), ',')) {
    for (const char* name : {"quantd", "quant-worker"}) {
      bool mounted = false;
      for (const Mount& m : MountsOf(Service(name))) {
        mounted = mounted || m.target == allowed;
      }
      EXPECT_TRUE(mounted) << name << " does not mount " << allowed;
    }
  }
  // The image's health check probes the worker's metrics port.
  EXPECT_EQ(PortOf(ScalarAt(Service("quant-worker"),
                            "environment.QUANT_HEALTH_ADDR")),
            PortOf(FlagValue(worker, "metrics_listen")));
}

TEST_F(ComposeTest, PrometheusScrapesComposeServicesOnTheirMetricsPorts) {
  absl::StatusOr<std::vector<YamlNode>> config =
      LoadYaml("deploy/prometheus/prometheus.yml");
  ASSERT_TRUE(config.ok()) << config.status();
  std::set<std::string> jobs, scraped;
  for (const YamlNode& scrape : ItemsAt(config->front(), "scrape_configs")) {
    const std::string job = ScalarAt(scrape, "job_name");
    jobs.insert(job);
    std::vector<std::string> targets;
    for (const YamlNode& sc : ItemsAt(scrape, "static_configs")) {
      for (const std::string& t : ScalarsAt(sc, "targets"))
        targets.push_back(t);
    }
    for (const YamlNode& dns : ItemsAt(scrape, "dns_sd_configs")) {
      for (const std::string& n : ScalarsAt(dns, "names")) {
        targets.push_back(n + ":" + ScalarAt(dns, "port"));
      }
    }
    EXPECT_FALSE(targets.empty()) << job;
    for (const std::string& target : targets) {
      if (HostOf(target) == "localhost") continue;  // Prometheus itself.
      const std::string host = HostOf(target);
      ASSERT_EQ(services_.count(host), 1u)
          << job << ": " << host << " is no compose service";
      scraped.insert(host);
      EXPECT_EQ(PortOf(target),
                PortOf(FlagValue(ScalarsAt(Service(host), "command"),
                                 "metrics_listen")))
          << job << ": " << target << " is not " << host << "'s metrics port";
      // Per-job series name the quantization job "job_id"; honoring scraped
      // labels would let a series override the target's "job".
      const std::string honor = ScalarAt(scrape, "honor_labels");
      EXPECT_TRUE(honor.empty() || honor == "false")
          << job << ": honor_labels: " << honor;
    }
  }
  EXPECT_THAT(scraped,
              ::testing::UnorderedElementsAre("quantd", "quant-worker"));
  // The scrape jobs are the ones the alert rules name.
  absl::StatusOr<std::string> alerts =
      ReadRepoFile("deploy/prometheus/alerts.yml");
  ASSERT_TRUE(alerts.ok()) << alerts.status();
  EXPECT_THAT(*alerts, ::testing::HasSubstr("up{job=\"quantd\"}"));
  EXPECT_EQ(jobs.count("quantd"), 1u);
  // Compose mounts the folder, so the rule files it names are beside it.
  for (const std::string& rules : ScalarsAt(config->front(), "rule_files")) {
    EXPECT_TRUE(RepoPathExists("deploy/prometheus/" + rules)) << rules;
  }
  bool config_mounted = false;
  for (const Mount& m : MountsOf(Service("prometheus"))) {
    config_mounted = config_mounted || (m.source == "./prometheus" &&
                                        m.target == "/etc/prometheus");
  }
  EXPECT_TRUE(config_mounted);
}

TEST_F(ComposeTest, GrafanaProvisioningPointsAtWhatComposeMounts) {
  std::map<std::string, std::string> mounts;  // target -> source
  for (const Mount& m : MountsOf(Service("grafana")))
    mounts[m.target] = m.source;
  EXPECT_EQ(mounts["/etc/grafana/provisioning"], "./grafana/provisioning");

  absl::StatusOr<std::vector<YamlNode>> providers =
      LoadYaml("deploy/grafana/provisioning/dashboards/quant.yml");
  ASSERT_TRUE(providers.ok()) << providers.status();
  ASSERT_EQ(ItemsAt(providers->front(), "providers").size(), 1u);
  const std::string path = ScalarAt(
      ItemsAt(providers->front(), "providers").front(), "options.path");
  ASSERT_EQ(mounts.count(path), 1u)
      << "provider path " << path << " not mounted";
  const std::string source = mounts[path];
  ASSERT_TRUE(absl::StartsWith(source, "./"));
  EXPECT_FALSE(
      ListRepoFiles("deploy/" + source.substr(2), {".json"}, false).empty())
      << "no dashboard in " << source;

  absl::StatusOr<std::vector<YamlNode>> sources =
      LoadYaml("deploy/grafana/provisioning/datasources/prometheus.yml");
  ASSERT_TRUE(sources.ok()) << sources.status();
  ASSERT_EQ(ItemsAt(sources->front(), "datasources").size(), 1u);
  const YamlNode& ds = ItemsAt(sources->front(), "datasources").front();
  EXPECT_EQ(ScalarAt(ds, "type"), "prometheus");
  // http://prometheus:9090: the compose service, on Prometheus' port.
  const std::string url = ScalarAt(ds, "url");
  ASSERT_TRUE(absl::StartsWith(url, "http://")) << url;
  const std::string host_port = url.substr(std::string("http://").size());
  EXPECT_EQ(services_.count(HostOf(host_port)), 1u) << url;
  EXPECT_EQ(PortOf(host_port), 9090);
}

TEST(GrafanaDashboardTest, PanelsUseTheDataSourceVariableAndDefinedVariables) {
  const std::vector<std::string> dashboards =
      ListRepoFiles("deploy/grafana/dashboards", {".json"}, false);
  ASSERT_FALSE(dashboards.empty());
  for (const std::string& file : dashboards) {
    SCOPED_TRACE(file);
    absl::StatusOr<std::string> text = ReadRepoFile(file);
    ASSERT_TRUE(text.ok()) << text.status();
    const nlohmann::json dash = nlohmann::json::parse(*text, nullptr, false);
    ASSERT_FALSE(dash.is_discarded()) << "not JSON";
    EXPECT_FALSE(dash.value("uid", "").empty());
    std::set<std::string> variables;
    for (const auto& v : dash.at("templating").at("list")) {
      variables.insert(v.at("name").get<std::string>());
    }
    EXPECT_THAT(variables, ::testing::IsSupersetOf({"datasource", "job_id"}));
    // "job" is the scrape target's label, not a quantization job.
    EXPECT_EQ(variables.count("job"), 0u);
    std::set<int> ids;
    int queries = 0;
    for (const auto& panel : dash.at("panels")) {
      EXPECT_TRUE(ids.insert(panel.at("id").get<int>()).second)
          << "panel id " << panel.at("id");
      const std::string title = panel.value("title", "");
      if (panel.value("type", "") == "row") continue;
      EXPECT_EQ(panel.at("datasource").value("uid", ""), "${datasource}")
          << title;
      ASSERT_TRUE(panel.contains("targets")) << title;
      for (const auto& target : panel.at("targets")) {
        ++queries;
        EXPECT_EQ(target.at("datasource").value("uid", ""), "${datasource}")
            << title;
        // Every $variable in a query or title is defined.
        const std::string expr = target.at("expr").get<std::string>();
        for (const std::string& text : {expr, title}) {
          for (size_t at = text.find('$'); at != std::string::npos;
               at = text.find('$', at + 1)) {
            size_t end = at + 1;
            while (end < text.size() &&
                   (std::isalnum(static_cast<unsigned char>(text[end])) ||
                    text[end] == '_')) {
              ++end;
            }
            const std::string name = text.substr(at + 1, end - at - 1);
            // "$1" is label_replace's capture group, not a variable.
            if (name.empty() ||
                std::isdigit(static_cast<unsigned char>(name[0]))) {
              continue;
            }
            EXPECT_EQ(variables.count(name), 1u)
                << title << ": undefined variable $" << name;
          }
        }
      }
    }
    EXPECT_GE(queries, 10);
  }
}

}  // namespace
}  // namespace quant::deploy_test
