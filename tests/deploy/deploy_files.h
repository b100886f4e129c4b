// Reading the deployment files of the checkout (deploy/, Dockerfile) for the
// tests in tests/deploy: paths from the repository root, YAML documents as
// YamlNode trees (core/recipe/yaml_tree.h), and lookups in them.
#ifndef QUANT_TESTS_DEPLOY_DEPLOY_FILES_H_
#define QUANT_TESTS_DEPLOY_DEPLOY_FILES_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "core/recipe/yaml_tree.h"

namespace quant::deploy_test {

// The repository root + "/" + relative.
std::string RepoPath(absl::string_view relative);
bool RepoPathExists(absl::string_view relative);

// The whole file, NotFound naming it when it cannot be read.
absl::StatusOr<std::string> ReadRepoFile(absl::string_view relative);

// Every YAML document of the file (one for most files).
absl::StatusOr<std::vector<YamlNode>> LoadYaml(absl::string_view relative);

// Files under the directory (relative to the root) whose names end in one of
// `suffixes`, as paths relative to the root, sorted; recursive when asked.
std::vector<std::string> ListRepoFiles(absl::string_view directory,
                                       const std::vector<std::string>& suffixes,
                                       bool recursive);

// The value at a dotted path of mapping keys ("spec.template.metadata"), or
// nullptr when a step is missing or not a mapping.
const YamlNode* Find(const YamlNode& node, absl::string_view dotted_path);
// The scalar at the path; "" when absent, null or not a scalar.
std::string ScalarAt(const YamlNode& node, absl::string_view dotted_path);
// The sequence's items at the path; empty when absent.
const std::vector<YamlNode>& ItemsAt(const YamlNode& node,
                                     absl::string_view dotted_path);
// A mapping of scalars (labels, selectors) as a map; empty when absent.
std::map<std::string, std::string> StringMapAt(const YamlNode& node,
                                               absl::string_view dotted_path);
// Every scalar of a sequence at the path.
std::vector<std::string> ScalarsAt(const YamlNode& node,
                                   absl::string_view dotted_path);

// True when every entry of `subset` is in `superset` with the same value.
bool IsSubset(const std::map<std::string, std::string>& subset,
              const std::map<std::string, std::string>& superset);

// The value of "--name=value" in a program's arguments; "" when absent.
std::string FlagValue(const std::vector<std::string>& args,
                      absl::string_view name);

// The port of "HOST:PORT" (-1 when there is none) and the host.
int PortOf(absl::string_view host_port);
std::string HostOf(absl::string_view host_port);

// Metric names that metrics/*.cc register (their "quant_..." string
// literals).
absl::StatusOr<std::set<std::string>> ExportedMetricNames();
// Every quant_... identifier in a PromQL expression (or any text).
std::set<std::string> MetricNamesIn(absl::string_view text);
// True when `name` is exported, directly or as a histogram's _bucket, _sum or
// _count series.
bool IsExported(const std::set<std::string>& exported, const std::string& name);

}  // namespace quant::deploy_test

#endif  // QUANT_TESTS_DEPLOY_DEPLOY_FILES_H_
