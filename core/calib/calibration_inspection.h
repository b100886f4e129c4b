// What a calibration set holds before a job uses it (`quantctl calib
// inspect`): documents and their token lengths under a tokenizer, and with
// a recipe's split, the windows each side gets and the rank arithmetic the
// seeds ask for: calibration tokens T per input width K of each layer type
// (T < K leaves that Hessian rank-deficient whatever the damping).
#ifndef QUANT_CORE_CALIB_CALIBRATION_INSPECTION_H_
#define QUANT_CORE_CALIB_CALIBRATION_INSPECTION_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/calib/calibration_file.h"
#include "core/calib/calibration_split.h"
#include "core/calib/chat_rendering.h"
#include "core/text/tokenizer.h"
#include "nlohmann/json.hpp"

namespace quant {

// Nearest-rank percentiles of document lengths in tokens.
struct LengthDistribution {
  int64_t min = 0;
  int64_t p10 = 0;
  int64_t p50 = 0;
  int64_t p90 = 0;
  int64_t max = 0;
  double mean = 0.0;
};

struct SplitInspection {
  int calibration_documents = 0;
  int heldout_documents = 0;
  int calibration_windows = 0;
  int heldout_windows = 0;
  int seq_len = 0;
  int64_t calibration_tokens = 0;  // T: real tokens in the windows.
  int64_t heldout_tokens = 0;
  int64_t calibration_tokens_available = 0;
  int64_t heldout_tokens_available = 0;
};

// T against one input width.
struct RankLine {
  int64_t inputs = 0;               // K
  std::vector<std::string> layers;  // The layer types that read K inputs.
  double tokens_per_input = 0.0;    // T / K
  bool rank_deficient = false;      // T < K
};

struct CalibrationInspection {
  std::string sha256;
  int documents = 0;
  int text_documents = 0;
  int id_documents = 0;
  int conversation_documents = 0;
  // The template that rendered them (when there were any).
  std::optional<ChatTemplateOrigin> chat_template;
  int64_t tokens = 0;  // Every document's, BOS included.
  LengthDistribution lengths;
  std::optional<SplitInspection> split;
  std::vector<RankLine> rank;  // By K, ascending; empty without a split.
};

// Tokenizes every document as the split would. Errors name the document's
// line (an id outside the vocabulary, text that cannot be encoded).
absl::StatusOr<CalibrationInspection> InspectCalibration(
    const CalibrationFile& file, const Tokenizer& tokenizer, bool add_bos,
    const ChatRenderer* chat = nullptr);

// Adds the split's counts and, for each input width K (the layer types
// reading it), T / K.
void AddSplitInspection(
    const CalibrationSplit& split,
    const std::map<int64_t, std::vector<std::string>>& layers_by_inputs,
    CalibrationInspection* inspection);

nlohmann::json CalibrationInspectionToJson(const CalibrationInspection& in);
// A few lines for a terminal.
std::string FormatCalibrationInspection(const CalibrationInspection& in);

}  // namespace quant

#endif  // QUANT_CORE_CALIB_CALIBRATION_INSPECTION_H_
