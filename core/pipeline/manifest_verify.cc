// VerifyCheckpointDirectory; see manifest_verify.h.
#include "core/pipeline/manifest_verify.h"

#include <filesystem>
#include <map>
#include <set>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/json_fields.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/pipeline/manifest_signature.h"

namespace quant {
namespace {

constexpr size_t kMaxManifestBytes = size_t{64} << 20;

bool PlainName(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

absl::StatusOr<std::vector<VerifiedFile>> ListManifestFiles(
    const std::string& manifest_text, const std::string& manifest_path) {
  QUANT_ASSIGN_OR_RETURN(const nlohmann::json manifest,
                         ParseJsonFile(manifest_text, manifest_path));
  const std::string path = absl::StrCat(manifest_path, ": output");
  QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(manifest, manifest_path));
  QUANT_ASSIGN_OR_RETURN(
      const nlohmann::json* output,
      json_fields::GetObject(manifest, "output", manifest_path));
  QUANT_ASSIGN_OR_RETURN(const nlohmann::json* files,
                         json_fields::GetArray(*output, "files", path));
  std::vector<VerifiedFile> out;
  std::set<std::string> names;
  for (size_t i = 0; i < files->size(); ++i) {
    const std::string at = json_fields::IndexPath(path + ".files", i);
    const nlohmann::json& entry = (*files)[i];
    QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(entry, at));
    VerifiedFile file;
    QUANT_ASSIGN_OR_RETURN(file.name,
                           json_fields::GetString(entry, "name", at));
    QUANT_ASSIGN_OR_RETURN(file.bytes, json_fields::GetInt(entry, "bytes", at));
    QUANT_ASSIGN_OR_RETURN(file.sha256,
                           json_fields::GetString(entry, "sha256", at));
    if (!PlainName(file.name) || file.name == "manifest.json") {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".name: \"", file.name.substr(0, 80),
                       "\" is not a file of the checkpoint (a plain name, not "
                       "manifest.json)"));
    }
    if (file.bytes < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".bytes: ", file.bytes, " is negative"));
    }
    if (!names.insert(file.name).second) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".name: \"", file.name, "\" is listed twice"));
    }
    out.push_back(std::move(file));
  }
  return out;
}

absl::StatusOr<ManifestVerification> VerifyCheckpointDirectory(
    const std::string& dir) {
  const std::string manifest_path = JoinPath(dir, "manifest.json");
  QUANT_ASSIGN_OR_RETURN(const std::string text,
                         ReadFileToString(manifest_path, kMaxManifestBytes));
  QUANT_ASSIGN_OR_RETURN(std::vector<VerifiedFile> files,
                         ListManifestFiles(text, manifest_path));
  struct Listed {
    int64_t bytes = 0;
    std::string sha256;
  };
  std::map<std::string, Listed> listed;
  for (VerifiedFile& file : files) {
    listed[file.name] = {file.bytes, std::move(file.sha256)};
  }

  ManifestVerification result;
  std::set<std::string> present;
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator(dir, error)) {
    const std::string name = entry.path().filename().string();
    // The manifest and its signature (manifest_signature.h) vouch for the
    // rest; they are not listed in it.
    if (name == "manifest.json" || name == kManifestSignatureFileName) {
      continue;
    }
    present.insert(name);
    if (listed.count(name) == 0) {
      result.problems.push_back(absl::StrCat(name, ": not in the manifest"));
    }
  }
  if (error) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": cannot list: ", error.message()));
  }
  for (const auto& [name, file] : listed) {
    const std::string file_path = JoinPath(dir, name);
    if (present.count(name) == 0) {
      result.problems.push_back(absl::StrCat(name, ": missing"));
      continue;
    }
    std::error_code kind_error;
    if (!std::filesystem::is_regular_file(
            std::filesystem::symlink_status(file_path, kind_error))) {
      result.problems.push_back(absl::StrCat(name, ": not a regular file"));
      continue;
    }
    const auto bytes = std::filesystem::file_size(file_path, kind_error);
    if (kind_error || static_cast<int64_t>(bytes) != file.bytes) {
      result.problems.push_back(absl::StrCat(
          name, ": ", kind_error ? -1 : static_cast<int64_t>(bytes),
          " bytes, the manifest says ", file.bytes));
      continue;
    }
    absl::StatusOr<std::string> sha = Sha256File(file_path);
    if (!sha.ok()) {
      result.problems.push_back(
          absl::StrCat(name, ": ", sha.status().message()));
      continue;
    }
    if (*sha != file.sha256) {
      result.problems.push_back(absl::StrCat(name, ": sha256 ", *sha,
                                             ", the manifest says ",
                                             file.sha256.substr(0, 80)));
      continue;
    }
    result.verified.push_back({name, file.bytes, *sha});
  }
  return result;
}

}  // namespace quant
