// deploy/k8s: every manifest parses, has a known kind, and what it refers to
// exists: Secrets, PVCs and Services of the workloads, selectors and ports of
// the Services, the HPA's target and metric, the ServiceMonitors' Services,
// and the flags that tie the coordinator, the workers and their volumes
// together.
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/deploy/deploy_files.h"

namespace quant::deploy_test {
namespace {

struct Resource {
  std::string file;
  std::string kind;
  std::string name;
  YamlNode doc;
};

// apiVersion each kind must use.
const std::map<std::string, std::string>& KnownKinds() {
  static const auto* const kKinds = new std::map<std::string, std::string>{
      {"Namespace", "v1"},
      {"Secret", "v1"},
      {"Service", "v1"},
      {"PersistentVolumeClaim", "v1"},
      {"ConfigMap", "v1"},
      {"StatefulSet", "apps/v1"},
      {"Deployment", "apps/v1"},
      {"HorizontalPodAutoscaler", "autoscaling/v2"},
      {"ServiceMonitor", "monitoring.coreos.com/v1"},
      {"Kustomization", "kustomize.config.k8s.io/v1beta1"},
      {"Component", "kustomize.config.k8s.io/v1alpha1"},
  };
  return *kKinds;
}

class K8sManifestsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    files_ = ListRepoFiles("deploy/k8s", {".yaml", ".yml"}, /*recursive=*/true);
    ASSERT_FALSE(files_.empty()) << "no manifests under deploy/k8s";
    for (const std::string& file : files_) {
      absl::StatusOr<std::vector<YamlNode>> docs = LoadYaml(file);
      ASSERT_TRUE(docs.ok()) << docs.status();
      for (YamlNode& doc : *docs) {
        if (doc.IsNull()) continue;  // An empty document between "---".
        ASSERT_TRUE(doc.IsMap()) << file << ": a document is not a mapping";
        resources_.push_back({file, ScalarAt(doc, "kind"),
                              ScalarAt(doc, "metadata.name"), std::move(doc)});
      }
    }
  }

  std::vector<const Resource*> OfKind(const std::string& kind) const {
    std::vector<const Resource*> out;
    for (const Resource& r : resources_) {
      if (r.kind == kind) out.push_back(&r);
    }
    return out;
  }
  const Resource* Get(const std::string& kind, const std::string& name) const {
    for (const Resource& r : resources_) {
      if (r.kind == kind && r.name == name) return &r;
    }
    return nullptr;
  }
  std::vector<const Resource*> Workloads() const {
    std::vector<const Resource*> out = OfKind("StatefulSet");
    for (const Resource* r : OfKind("Deployment")) out.push_back(r);
    return out;
  }
  // The workload whose pods a Service's selector picks.
  const Resource* WorkloadSelectedBy(
      const std::map<std::string, std::string>& selector) const {
    if (selector.empty()) return nullptr;
    for (const Resource* w : Workloads()) {
      if (IsSubset(selector,
                   StringMapAt(w->doc, "spec.template.metadata.labels"))) {
        return w;
      }
    }
    return nullptr;
  }
  // Keys a Secret holds (data and stringData).
  std::set<std::string> SecretKeys(const Resource& secret) const {
    std::set<std::string> keys;
    for (const char* field : {"data", "stringData"}) {
      for (const auto& [key, value] : StringMapAt(secret.doc, field)) {
        keys.insert(key);
      }
    }
    return keys;
  }

  std::vector<std::string> files_;
  std::vector<Resource> resources_;
};

const YamlNode& FirstContainer(const Resource& workload) {
  const std::vector<YamlNode>& containers =
      ItemsAt(workload.doc, "spec.template.spec.containers");
  static const YamlNode* const kNone = new YamlNode;
  return containers.empty() ? *kNone : containers.front();
}

// containerPort by port name, across the pod's containers.
std::map<std::string, int> NamedPorts(const Resource& workload) {
  std::map<std::string, int> ports;
  for (const YamlNode& c :
       ItemsAt(workload.doc, "spec.template.spec.containers")) {
    for (const YamlNode& p : ItemsAt(c, "ports")) {
      int number = 0;
      EXPECT_TRUE(absl::SimpleAtoi(ScalarAt(p, "containerPort"), &number))
          << workload.name << ": containerPort of " << ScalarAt(p, "name");
      ports[ScalarAt(p, "name")] = number;
    }
  }
  return ports;
}

// A Service or probe port: a name of a containerPort, or a number that is one.
bool PortResolves(const std::map<std::string, int>& ports,
                  const std::string& port) {
  int number = 0;
  if (!absl::SimpleAtoi(port, &number)) return ports.count(port) > 0;
  for (const auto& [name, value] : ports) {
    if (value == number) return true;
  }
  return false;
}

TEST_F(K8sManifestsTest, EveryManifestHasAKnownKindApiVersionAndName) {
  std::set<std::pair<std::string, std::string>> seen;
  std::set<std::string> kinds;
  for (const Resource& r : resources_) {
    auto known = KnownKinds().find(r.kind);
    ASSERT_NE(known, KnownKinds().end())
        << r.file << ": unknown kind '" << r.kind << "'";
    EXPECT_EQ(ScalarAt(r.doc, "apiVersion"), known->second)
        << r.file << ": apiVersion of " << r.kind;
    kinds.insert(r.kind);
    if (r.kind == "Kustomization" || r.kind == "Component") continue;
    EXPECT_FALSE(r.name.empty()) << r.file << ": metadata.name";
    EXPECT_TRUE(seen.insert({r.kind, r.name}).second)
        << r.file << ": a second " << r.kind << " named " << r.name;
  }
  for (const char* kind :
       {"StatefulSet", "Deployment", "Service", "PersistentVolumeClaim",
        "Secret", "HorizontalPodAutoscaler", "ServiceMonitor"}) {
    EXPECT_EQ(kinds.count(kind), 1u) << "no " << kind << " in deploy/k8s";
  }
}

TEST_F(K8sManifestsTest, KustomizationListsEveryManifestButTheSecrets) {
  const Resource* kustomization = nullptr;
  for (const Resource* r : OfKind("Kustomization")) {
    if (r->file == "deploy/k8s/kustomization.yaml") kustomization = r;
  }
  ASSERT_NE(kustomization, nullptr) << "deploy/k8s/kustomization.yaml";
  std::set<std::string> listed;
  for (const std::string& resource :
       ScalarsAt(kustomization->doc, "resources")) {
    const std::string file = absl::StrCat("deploy/k8s/", resource);
    EXPECT_TRUE(RepoPathExists(file)) << "kustomization lists " << file;
    EXPECT_TRUE(listed.insert(file).second) << "listed twice: " << file;
  }
  for (const Resource& r : resources_) {
    const bool top_level =
        r.file.find('/', std::string("deploy/k8s/").size()) ==
        std::string::npos;
    if (!top_level || r.kind == "Kustomization") continue;
    EXPECT_EQ(listed.count(r.file), 1u)
        << r.file << " is not in kustomization.yaml";
    // Applying the manifests again must never reset real tokens or keys.
    EXPECT_NE(r.kind, "Secret") << r.file << ": Secrets belong in secrets/";
  }
  EXPECT_FALSE(ScalarAt(kustomization->doc, "namespace").empty());
}

TEST_F(K8sManifestsTest, ComponentPatchesTargetExistingWorkloads) {
  const std::vector<const Resource*> components = OfKind("Component");
  ASSERT_FALSE(components.empty()) << "deploy/k8s/tls/ (TLS component)";
  for (const Resource* component : components) {
    const std::vector<YamlNode>& patches = ItemsAt(component->doc, "patches");
    EXPECT_FALSE(patches.empty()) << component->file;
    for (const YamlNode& patch : patches) {
      const std::string kind = ScalarAt(patch, "target.kind");
      const std::string name = ScalarAt(patch, "target.name");
      EXPECT_NE(Get(kind, name), nullptr)
          << component->file << ": patch target " << kind << "/" << name;
      // The JSON patch is itself YAML: a list of operations on paths that
      // exist in the target (args, probes).
      absl::StatusOr<std::vector<YamlNode>> ops =
          ParseYamlDocuments(ScalarAt(patch, "patch"), component->file);
      ASSERT_TRUE(ops.ok()) << ops.status();
      ASSERT_EQ(ops->size(), 1u);
      for (const YamlNode& op : ops->front().items) {
        const std::string path = ScalarAt(op, "path");
        EXPECT_TRUE(absl::StartsWith(path, "/spec/template/spec/containers/0/"))
            << path;
        const Resource* target = Get(kind, name);
        if (target == nullptr || ScalarAt(op, "op") != "replace") continue;
        const std::string field = path.substr(path.rfind('/') + 1);
        EXPECT_NE(Find(FirstContainer(*target), field), nullptr)
            << component->file << ": replaces missing " << path;
      }
    }
  }
}

TEST_F(K8sManifestsTest, WorkloadsReferToExistingSecretsClaimsAndServices) {
  ASSERT_EQ(Workloads().size(), 2u);
  for (const Resource* w : Workloads()) {
    SCOPED_TRACE(w->file);
    const auto selector = StringMapAt(w->doc, "spec.selector.matchLabels");
    EXPECT_FALSE(selector.empty()) << "spec.selector.matchLabels";
    EXPECT_TRUE(IsSubset(selector,
                         StringMapAt(w->doc, "spec.template.metadata.labels")))
        << "selector does not match the pod template's labels";

    std::set<std::string> volumes;
    for (const YamlNode& t : ItemsAt(w->doc, "spec.volumeClaimTemplates")) {
      volumes.insert(ScalarAt(t, "metadata.name"));
    }
    for (const YamlNode& v : ItemsAt(w->doc, "spec.template.spec.volumes")) {
      const std::string name = ScalarAt(v, "name");
      EXPECT_TRUE(volumes.insert(name).second) << "volume twice: " << name;
      if (const std::string claim =
              ScalarAt(v, "persistentVolumeClaim.claimName");
          !claim.empty()) {
        EXPECT_NE(Get("PersistentVolumeClaim", claim), nullptr)
            << "volume " << name << ": no PVC " << claim;
      }
      if (const std::string map = ScalarAt(v, "configMap.name"); !map.empty()) {
        EXPECT_NE(Get("ConfigMap", map), nullptr) << "no ConfigMap " << map;
      }
      if (const std::string secret = ScalarAt(v, "secret.secretName");
          !secret.empty()) {
        const Resource* s = Get("Secret", secret);
        ASSERT_NE(s, nullptr) << "volume " << name << ": no Secret " << secret;
        for (const YamlNode& item : ItemsAt(v, "secret.items")) {
          EXPECT_EQ(SecretKeys(*s).count(ScalarAt(item, "key")), 1u)
              << "Secret " << secret << " has no key " << ScalarAt(item, "key");
        }
      }
    }
    for (const YamlNode& c : ItemsAt(w->doc, "spec.template.spec.containers")) {
      for (const YamlNode& m : ItemsAt(c, "volumeMounts")) {
        EXPECT_EQ(volumes.count(ScalarAt(m, "name")), 1u)
            << "mount of undefined volume " << ScalarAt(m, "name");
      }
      for (const YamlNode& e : ItemsAt(c, "env")) {
        if (const std::string secret =
                ScalarAt(e, "valueFrom.secretKeyRef.name");
            !secret.empty()) {
          EXPECT_NE(Get("Secret", secret), nullptr)
              << "env: no Secret " << secret;
        }
      }
      const std::map<std::string, int> ports = NamedPorts(*w);
      for (const char* probe :
           {"startupProbe", "readinessProbe", "livenessProbe"}) {
        const YamlNode* p = Find(c, probe);
        if (p == nullptr) continue;
        for (const char* port :
             {"grpc.port", "httpGet.port", "tcpSocket.port"}) {
          const std::string value = ScalarAt(*p, port);
          if (!value.empty()) {
            EXPECT_TRUE(PortResolves(ports, value))
                << probe << " port " << value << " is no container port";
          }
        }
      }
    }
    if (w->kind == "StatefulSet") {
      EXPECT_NE(Get("Service", ScalarAt(w->doc, "spec.serviceName")), nullptr)
          << "spec.serviceName";
    }
  }
}

TEST_F(K8sManifestsTest, ServicesSelectPodsThatHaveTheirTargetPorts) {
  for (const Resource* s : OfKind("Service")) {
    const Resource* w =
        WorkloadSelectedBy(StringMapAt(s->doc, "spec.selector"));
    ASSERT_NE(w, nullptr) << s->file << ": the selector matches no workload";
    const std::map<std::string, int> ports = NamedPorts(*w);
    EXPECT_FALSE(ItemsAt(s->doc, "spec.ports").empty()) << s->file;
    for (const YamlNode& p : ItemsAt(s->doc, "spec.ports")) {
      std::string target = ScalarAt(p, "targetPort");
      if (target.empty()) target = ScalarAt(p, "port");
      EXPECT_TRUE(PortResolves(ports, target))
          << s->file << ": targetPort " << target << " is not a port of "
          << w->name;
    }
  }
}

TEST_F(K8sManifestsTest, CoordinatorIsOneReplicaWithGrpcProbesAndOwnVolume) {
  const Resource* quantd = Get("StatefulSet", "quantd");
  ASSERT_NE(quantd, nullptr);
  EXPECT_EQ(ScalarAt(quantd->doc, "spec.replicas"), "1")
      << "quantd's state is one SQLite database";
  const YamlNode& c = FirstContainer(*quantd);
  const std::map<std::string, int> ports = NamedPorts(*quantd);
  ASSERT_EQ(ports.count("grpc"), 1u);
  for (const char* probe : {"readinessProbe", "livenessProbe"}) {
    EXPECT_EQ(ScalarAt(c, absl::StrCat(probe, ".grpc.port")),
              std::to_string(ports.at("grpc")))
        << probe << " must be a gRPC probe on the gRPC port";
  }
  const std::vector<std::string> args = ScalarsAt(c, "args");
  EXPECT_EQ(PortOf(FlagValue(args, "listen")), ports.at("grpc"));
  // Off loopback quantd needs both tokens.
  EXPECT_FALSE(FlagValue(args, "client_token_file").empty());
  EXPECT_FALSE(FlagValue(args, "worker_token_file").empty());
  // The database lives on the StatefulSet's own ReadWriteOnce claim.
  const std::string data_dir = FlagValue(args, "data_dir");
  bool on_claim = false;
  for (const YamlNode& m : ItemsAt(c, "volumeMounts")) {
    if (ScalarAt(m, "mountPath") != data_dir) continue;
    for (const YamlNode& t :
         ItemsAt(quantd->doc, "spec.volumeClaimTemplates")) {
      if (ScalarAt(t, "metadata.name") == ScalarAt(m, "name")) {
        on_claim = true;
        EXPECT_THAT(ScalarsAt(t, "spec.accessModes"),
                    ::testing::ElementsAre("ReadWriteOnce"));
      }
    }
  }
  EXPECT_TRUE(on_claim) << "--data_dir=" << data_dir
                        << " is not on a volumeClaimTemplate";
}

// The claim a container mounts at `path` (the longest mountPath that is a
// prefix of it), or "" when the path is on no PVC.
std::string ClaimAt(const Resource& workload, const YamlNode& container,
                    const std::string& path) {
  std::string best_mount, volume;
  for (const YamlNode& m : ItemsAt(container, "volumeMounts")) {
    const std::string mount = ScalarAt(m, "mountPath");
    if ((path == mount || absl::StartsWith(path, mount + "/")) &&
        mount.size() > best_mount.size()) {
      best_mount = mount;
      volume = ScalarAt(m, "name");
    }
  }
  for (const YamlNode& v :
       ItemsAt(workload.doc, "spec.template.spec.volumes")) {
    if (ScalarAt(v, "name") == volume) {
      return ScalarAt(v, "persistentVolumeClaim.claimName");
    }
  }
  return "";
}

TEST_F(K8sManifestsTest, WorkersShareTheArtifactClaimAndReachTheCoordinator) {
  const Resource* quantd = Get("StatefulSet", "quantd");
  const Resource* worker = Get("Deployment", "quant-worker");
  ASSERT_NE(quantd, nullptr);
  ASSERT_NE(worker, nullptr);
  const YamlNode& qc = FirstContainer(*quantd);
  const YamlNode& wc = FirstContainer(*worker);
  const std::vector<std::string> quantd_args = ScalarsAt(qc, "args");
  const std::vector<std::string> worker_args = ScalarsAt(wc, "args");

  // Workers open the files at the paths quantd hands out: same claim, same
  // mount path, and the claim is ReadWriteMany.
  const std::string root = FlagValue(quantd_args, "artifact_root");
  ASSERT_TRUE(absl::StartsWith(root, "file://")) << root;
  const std::string artifacts = root.substr(std::string("file://").size());
  const std::string claim = ClaimAt(*quantd, qc, artifacts);
  ASSERT_FALSE(claim.empty()) << artifacts << " is on no PVC in quantd";
  EXPECT_EQ(ClaimAt(*worker, wc, artifacts), claim)
      << "workers do not mount " << claim << " at " << artifacts;
  const Resource* pvc = Get("PersistentVolumeClaim", claim);
  ASSERT_NE(pvc, nullptr);
  EXPECT_THAT(ScalarsAt(pvc->doc, "spec.accessModes"),
              ::testing::ElementsAre("ReadWriteMany"));
  // And they read checkpoints and calibration text where quantd allows them.
  for (absl::string_view allowed :
       absl::StrSplit(FlagValue(quantd_args, "allowed_roots"), ',')) {
    const std::string dir(allowed);
    EXPECT_FALSE(ClaimAt(*quantd, qc, dir).empty()) << dir << " in quantd";
    EXPECT_EQ(ClaimAt(*worker, wc, dir), ClaimAt(*quantd, qc, dir))
        << dir << " in the workers";
  }

  // A task's threads match the CPU the pod requests (it would otherwise
  // size itself by the node's cores).
  EXPECT_EQ(FlagValue(worker_args, "threads"),
            ScalarAt(wc, "resources.requests.cpu"));

  // --server names the quantd Service and a port of it that leads to
  // quantd's --listen port.
  const std::string server = FlagValue(worker_args, "server");
  const std::string host = HostOf(server);
  // "quantd" or "quantd.quant.svc...": the Service is the first label.
  const Resource* service = Get("Service", host.substr(0, host.find('.')));
  ASSERT_NE(service, nullptr) << "--server=" << server;
  EXPECT_EQ(WorkloadSelectedBy(StringMapAt(service->doc, "spec.selector")),
            quantd);
  bool port_found = false;
  const std::map<std::string, int> ports = NamedPorts(*quantd);
  for (const YamlNode& p : ItemsAt(service->doc, "spec.ports")) {
    if (ScalarAt(p, "port") != std::to_string(PortOf(server))) continue;
    port_found = true;
    const std::string target = ScalarAt(p, "targetPort");
    const int target_port =
        ports.count(target) > 0 ? ports.at(target) : std::stoi(target);
    EXPECT_EQ(target_port, PortOf(FlagValue(quantd_args, "listen")));
  }
  EXPECT_TRUE(port_found) << "Service " << service->name << " has no port "
                          << PortOf(server);

  // The worker's token file is the worker token of the Secret, and it sees
  // no client token.
  const std::string token_file = FlagValue(worker_args, "token_file");
  bool token_mounted = false;
  for (const YamlNode& m : ItemsAt(wc, "volumeMounts")) {
    const std::string mount = ScalarAt(m, "mountPath");
    if (!absl::StartsWith(token_file, mount + "/")) continue;
    for (const YamlNode& v :
         ItemsAt(worker->doc, "spec.template.spec.volumes")) {
      if (ScalarAt(v, "name") != ScalarAt(m, "name")) continue;
      for (const YamlNode& item : ItemsAt(v, "secret.items")) {
        EXPECT_NE(ScalarAt(item, "key"), "client-token");
        if (mount + "/" + ScalarAt(item, "path") == token_file) {
          token_mounted = true;
          EXPECT_EQ(ScalarAt(item, "key"), "worker-token");
        }
      }
    }
  }
  EXPECT_TRUE(token_mounted) << "--token_file=" << token_file;
}

TEST_F(K8sManifestsTest, HpaScalesTheWorkersOnTheAdapterMetric) {
  const std::vector<const Resource*> hpas = OfKind("HorizontalPodAutoscaler");
  ASSERT_EQ(hpas.size(), 1u);
  const YamlNode& hpa = hpas.front()->doc;
  EXPECT_EQ(ScalarAt(hpa, "spec.scaleTargetRef.kind"), "Deployment");
  const Resource* target =
      Get("Deployment", ScalarAt(hpa, "spec.scaleTargetRef.name"));
  ASSERT_NE(target, nullptr) << "scaleTargetRef";
  EXPECT_EQ(Find(target->doc, "spec.replicas"), nullptr)
      << "the HPA owns the replica count";
  EXPECT_LE(std::stoi(ScalarAt(hpa, "spec.minReplicas")),
            std::stoi(ScalarAt(hpa, "spec.maxReplicas")));
  ASSERT_EQ(ItemsAt(hpa, "spec.metrics").size(), 1u);
  const YamlNode& metric = ItemsAt(hpa, "spec.metrics").front();
  ASSERT_EQ(ScalarAt(metric, "type"), "External");
  const std::string name = ScalarAt(metric, "external.metric.name");

  // prometheus-adapter serves that name, computed from exported series.
  absl::StatusOr<std::vector<YamlNode>> adapter =
      LoadYaml("deploy/prometheus-adapter/values.yaml");
  ASSERT_TRUE(adapter.ok()) << adapter.status();
  bool served = false;
  for (const YamlNode& rule : ItemsAt(adapter->front(), "rules.external")) {
    if (ScalarAt(rule, "name.as") != name) continue;
    served = true;
    EXPECT_THAT(ScalarAt(rule, "metricsQuery"),
                ::testing::HasSubstr("quant_queue_depth"));
  }
  EXPECT_TRUE(served) << "no prometheus-adapter rule serves " << name;
}

TEST_F(K8sManifestsTest, ServiceMonitorsScrapeMetricsPortsKeepingTargetLabels) {
  const std::vector<const Resource*> monitors = OfKind("ServiceMonitor");
  std::set<std::string> scraped;
  for (const Resource* monitor : monitors) {
    SCOPED_TRACE(monitor->file);
    const auto selector =
        StringMapAt(monitor->doc, "spec.selector.matchLabels");
    const Resource* service = nullptr;
    for (const Resource* s : OfKind("Service")) {
      if (!selector.empty() &&
          IsSubset(selector, StringMapAt(s->doc, "metadata.labels"))) {
        EXPECT_EQ(service, nullptr) << "selects two Services";
        service = s;
      }
    }
    ASSERT_NE(service, nullptr) << "selects no Service";
    scraped.insert(service->name);
    const Resource* workload =
        WorkloadSelectedBy(StringMapAt(service->doc, "spec.selector"));
    ASSERT_NE(workload, nullptr);
    const int metrics_port = PortOf(FlagValue(
        ScalarsAt(FirstContainer(*workload), "args"), "metrics_listen"));
    for (const YamlNode& endpoint : ItemsAt(monitor->doc, "spec.endpoints")) {
      // The target's "job" must win over any scraped label (per-job series
      // name the quantization job "job_id").
      const std::string honor = ScalarAt(endpoint, "honorLabels");
      EXPECT_TRUE(honor.empty() || honor == "false")
          << "honorLabels: " << honor;
      bool port_found = false;
      for (const YamlNode& p : ItemsAt(service->doc, "spec.ports")) {
        if (ScalarAt(p, "name") != ScalarAt(endpoint, "port")) continue;
        port_found = true;
        const std::string target = ScalarAt(p, "targetPort");
        EXPECT_EQ(NamedPorts(*workload)[target], metrics_port)
            << "port " << target << " is not --metrics_listen's";
      }
      EXPECT_TRUE(port_found) << "endpoint port " << ScalarAt(endpoint, "port");
    }
  }
  // The Service names become the job labels the alert rules use.
  EXPECT_THAT(scraped,
              ::testing::UnorderedElementsAre("quantd", "quant-worker"));
}

}  // namespace
}  // namespace quant::deploy_test
