// Builders of bad inputs: copies of a good checkpoint with one thing broken
// (safetensors header, data, a tensor, a shape, a weight value, config.json)
// and calibration texts, written under the report's temporary folder.
#ifndef QUANT_BENCH_RELIABILITY_BAD_INPUT_FILES_H_
#define QUANT_BENCH_RELIABILITY_BAD_INPUT_FILES_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "nlohmann/json.hpp"

namespace quant::reliability {

// Copies the regular files of checkpoint folder `from` into a new folder
// `to` (writable copies, whatever the source's permissions).
absl::Status CopyCheckpoint(const std::string& from, const std::string& to);

// Replaces the JSON header of `dir`/model.safetensors with bytes that are
// not JSON; the length prefix and the data stay.
absl::Status CorruptSafetensorsHeader(const std::string& dir);

// Drops the last `bytes` bytes of `dir`/model.safetensors, so the data
// section is shorter than the header says.
absl::Status TruncateSafetensors(const std::string& dir, int64_t bytes);

// One tensor of a safetensors file being rewritten: its name, shape and
// bytes; RewriteSafetensors writes back what the edit leaves.
struct EditableTensor {
  std::string name;
  std::vector<int64_t> shape;
  std::string bytes;
};

// Reads `dir`/model.safetensors (F32 tensors), lets `edit` change the list,
// and writes the result in its place.
absl::Status RewriteSafetensors(
    const std::string& dir,
    const std::function<absl::Status(std::vector<EditableTensor>&)>& edit);

// Stores `value` as element `index` of F32 tensor `name`, in place.
absl::Status PoisonTensor(const std::string& dir, const std::string& name,
                          int64_t index, float value);

// Rewrites `dir`/config.json through `edit`.
absl::Status EditConfig(const std::string& dir,
                        const std::function<void(nlohmann::json&)>& edit);

// The first `count` paragraphs (separated by blank lines) of `text`, in the
// same plain-text form.
std::string FirstParagraphs(absl::string_view text, int count);

}  // namespace quant::reliability

#endif  // QUANT_BENCH_RELIABILITY_BAD_INPUT_FILES_H_
