// Decoders of tokenizer.json ("decoder"): turn token strings back into
// text, as a chain of steps over the list of token strings.
#ifndef QUANT_CORE_TEXT_DECODER_H_
#define QUANT_CORE_TEXT_DECODER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace quant {

class Decoder {
 public:
  virtual ~Decoder() = default;
  // One step of the chain; the final text is the concatenation of the
  // returned strings. An error is a Replace pattern that gave up.
  virtual absl::StatusOr<std::vector<std::string>> DecodeChain(
      std::vector<std::string> tokens) const = 0;
};

// Supported types: Sequence, Replace, ByteFallback, Fuse, Strip, ByteLevel,
// Metaspace.
absl::StatusOr<std::unique_ptr<Decoder>> DecoderFromJson(
    const nlohmann::json& config, const std::string& path);

}  // namespace quant

#endif  // QUANT_CORE_TEXT_DECODER_H_
