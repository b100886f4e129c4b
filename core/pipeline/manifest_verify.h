// Checking a packed checkpoint directory against its manifest.json: every
// file the manifest lists is there with its size and sha256, and nothing
// else is (but manifest.json itself and its signature, manifest.json.sig).
// `quantctl verify` and `quantctl fetch` use it; a copy that does not verify is
// not a release.
#ifndef QUANT_CORE_PIPELINE_MANIFEST_VERIFY_H_
#define QUANT_CORE_PIPELINE_MANIFEST_VERIFY_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace quant {

struct VerifiedFile {
  std::string name;
  int64_t bytes = 0;
  std::string sha256;
};

struct ManifestVerification {
  std::vector<VerifiedFile> verified;  // listed and matching, by name
  // One line per mismatch: "model.safetensors: sha256 ab.., the manifest
  // says cd..", "x.bin: not in the manifest", "config.json: missing".
  std::vector<std::string> problems;
  bool ok() const { return problems.empty(); }
};

// The files `manifest_text` (read from `manifest_path`, for messages) lists
// in output.files, in its order. InvalidArgument naming the field when it is
// not JSON, lacks the list, or lists a file by anything but a plain name
// (no "/", no "..", not manifest.json), twice, or with a negative size.
absl::StatusOr<std::vector<VerifiedFile>> ListManifestFiles(
    const std::string& manifest_text, const std::string& manifest_path);

// InvalidArgument naming the field when manifest.json is missing, not JSON,
// or lists a file by anything but a plain name (no "/", no ".."): a
// manifest must not point outside its directory.
absl::StatusOr<ManifestVerification> VerifyCheckpointDirectory(
    const std::string& dir);

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_MANIFEST_VERIFY_H_
