// Implementation of deploy_files.h.
#include "tests/deploy/deploy_files.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace quant::deploy_test {
namespace {

namespace fs = std::filesystem;

const std::vector<YamlNode>& EmptyItems() {
  static const std::vector<YamlNode>* const kEmpty = new std::vector<YamlNode>;
  return *kEmpty;
}

}  // namespace

std::string RepoPath(absl::string_view relative) {
  // QUANT_DEPLOY_SOURCE_DIR: tests/deploy/CMakeLists.txt sets it to the
  // checkout the test was built from.
  return absl::StrCat(QUANT_DEPLOY_SOURCE_DIR, "/", relative);
}

bool RepoPathExists(absl::string_view relative) {
  std::error_code error;
  return fs::exists(RepoPath(relative), error);
}

absl::StatusOr<std::string> ReadRepoFile(absl::string_view relative) {
  std::ifstream in(RepoPath(relative), std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(relative, ": cannot read"));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<std::vector<YamlNode>> LoadYaml(absl::string_view relative) {
  absl::StatusOr<std::string> text = ReadRepoFile(relative);
  if (!text.ok()) return text.status();
  return ParseYamlDocuments(*text, relative);
}

std::vector<std::string> ListRepoFiles(absl::string_view directory,
                                       const std::vector<std::string>& suffixes,
                                       bool recursive) {
  std::vector<std::string> files;
  const fs::path root(RepoPath(""));
  const fs::path start(RepoPath(directory));
  std::error_code error;
  auto add = [&](const fs::directory_entry& entry) {
    if (!entry.is_regular_file()) return;
    const std::string name = entry.path().filename().string();
    for (const std::string& suffix : suffixes) {
      if (absl::EndsWith(name, suffix)) {
        files.push_back(entry.path().lexically_relative(root).string());
        return;
      }
    }
  };
  if (recursive) {
    for (const auto& entry : fs::recursive_directory_iterator(start, error)) {
      add(entry);
    }
  } else {
    for (const auto& entry : fs::directory_iterator(start, error)) add(entry);
  }
  std::sort(files.begin(), files.end());
  return files;
}

const YamlNode* Find(const YamlNode& node, absl::string_view dotted_path) {
  const YamlNode* at = &node;
  for (absl::string_view key : absl::StrSplit(dotted_path, '.')) {
    if (!at->IsMap()) return nullptr;
    const YamlNode* next = nullptr;
    for (const auto& [k, v] : at->entries) {
      if (k.IsScalar() && k.scalar == key) {
        next = &v;
        break;
      }
    }
    if (next == nullptr) return nullptr;
    at = next;
  }
  return at;
}

std::string ScalarAt(const YamlNode& node, absl::string_view dotted_path) {
  const YamlNode* found = Find(node, dotted_path);
  return found != nullptr && found->IsScalar() ? found->scalar : "";
}

const std::vector<YamlNode>& ItemsAt(const YamlNode& node,
                                     absl::string_view dotted_path) {
  const YamlNode* found = Find(node, dotted_path);
  return found != nullptr && found->IsSequence() ? found->items : EmptyItems();
}

std::map<std::string, std::string> StringMapAt(const YamlNode& node,
                                               absl::string_view dotted_path) {
  std::map<std::string, std::string> out;
  const YamlNode* found = Find(node, dotted_path);
  if (found == nullptr || !found->IsMap()) return out;
  for (const auto& [k, v] : found->entries) out[k.scalar] = v.scalar;
  return out;
}

std::vector<std::string> ScalarsAt(const YamlNode& node,
                                   absl::string_view dotted_path) {
  std::vector<std::string> out;
  for (const YamlNode& item : ItemsAt(node, dotted_path)) {
    if (item.IsScalar()) out.push_back(item.scalar);
  }
  return out;
}

bool IsSubset(const std::map<std::string, std::string>& subset,
              const std::map<std::string, std::string>& superset) {
  for (const auto& [key, value] : subset) {
    auto it = superset.find(key);
    if (it == superset.end() || it->second != value) return false;
  }
  return true;
}

std::string FlagValue(const std::vector<std::string>& args,
                      absl::string_view name) {
  const std::string prefix = absl::StrCat("--", name, "=");
  for (const std::string& arg : args) {
    if (absl::StartsWith(arg, prefix)) return arg.substr(prefix.size());
  }
  return "";
}

int PortOf(absl::string_view host_port) {
  const size_t colon = host_port.rfind(':');
  int port = -1;
  if (colon == absl::string_view::npos ||
      !absl::SimpleAtoi(host_port.substr(colon + 1), &port)) {
    return -1;
  }
  return port;
}

std::string HostOf(absl::string_view host_port) {
  const size_t colon = host_port.rfind(':');
  return std::string(colon == absl::string_view::npos
                         ? host_port
                         : host_port.substr(0, colon));
}

absl::StatusOr<std::set<std::string>> ExportedMetricNames() {
  std::set<std::string> names;
  const std::regex literal("\"(quant_[a-z0-9_]+)\"");
  for (const std::string& file :
       ListRepoFiles("metrics", {".cc"}, /*recursive=*/false)) {
    absl::StatusOr<std::string> text = ReadRepoFile(file);
    if (!text.ok()) return text.status();
    for (std::sregex_iterator it(text->begin(), text->end(), literal), end;
         it != end; ++it) {
      names.insert((*it)[1].str());
    }
  }
  return names;
}

std::set<std::string> MetricNamesIn(absl::string_view text) {
  std::set<std::string> names;
  const std::string copy(text);
  // Not preceded by an identifier character: "quant_" inside another name
  // is no metric of ours.
  const std::regex name("(^|[^A-Za-z0-9_:])(quant_[a-z0-9_]+)");
  for (std::sregex_iterator it(copy.begin(), copy.end(), name), end; it != end;
       ++it) {
    names.insert((*it)[2].str());
  }
  return names;
}

bool IsExported(const std::set<std::string>& exported,
                const std::string& name) {
  if (exported.count(name) > 0) return true;
  for (absl::string_view suffix : {"_bucket", "_sum", "_count"}) {
    if (absl::EndsWith(name, suffix) &&
        exported.count(name.substr(0, name.size() - suffix.size())) > 0) {
      return true;
    }
  }
  return false;
}

}  // namespace quant::deploy_test
