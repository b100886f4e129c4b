// Turning a calibration file into token windows: a deterministic split of
// the documents into calibration and held-out parts, then fixed-length
// sequences, either packed (documents concatenated, each after a BOS, cut
// into windows) or one document per sequence (truncated, right-padded).
// Every choice made is recorded in the result.
#ifndef QUANT_CORE_CALIB_CALIBRATION_SPLIT_H_
#define QUANT_CORE_CALIB_CALIBRATION_SPLIT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/calib/calibration_file.h"
#include "core/calib/chat_rendering.h"
#include "core/text/tokenizer.h"

namespace quant {

enum class WindowPacking {
  kConcatenate,  // BOS + doc, BOS + doc, ... cut into seq_len windows.
  kPerDocument,  // One document per sequence, truncated or right-padded.
};

struct CalibrationSplitOptions {
  int samples = 128;  // Calibration sequences wanted.
  int seq_len = 2048;
  // Held-out documents: `heldout_count` when > 0, else
  // round(heldout_fraction * documents), at least one when the fraction is
  // positive. At least one document always stays for calibration.
  double heldout_fraction = 0.1;
  int heldout_count = 0;
  int heldout_samples = 0;  // Held-out sequences wanted; 0 = `samples`.
  uint64_t seed = 0;
  WindowPacking packing = WindowPacking::kConcatenate;
  // Before each text document (not before input_ids or conversations).
  // Text documents are tokenized with surrounding whitespace stripped.
  bool add_bos = true;
  // Renders conversation documents; null: a set with one is refused. Not
  // owned.
  const ChatRenderer* chat = nullptr;
};

// Equal-length sequences. Positions at or after lengths[i] in sequence i are
// padding: causal attention keeps them from affecting real positions, and
// callers exclude them from statistics.
struct TokenWindows {
  int seq_len = 0;
  std::vector<std::vector<int32_t>> sequences;
  std::vector<int> lengths;

  int64_t RealTokens() const;
};

// One source's part of a mixed split (mixed_calibration.h).
struct CalibrationSourceSplit {
  std::string sha256;  // The source file's.
  double weight = 1.0;
  int samples = 0;                         // Calibration windows wanted of it.
  int heldout_samples = 0;                 // Held-out windows wanted of it.
  std::vector<int> calibration_documents;  // Indices into its file.
  std::vector<int> heldout_documents;
  int calibration_windows = 0;
  int heldout_windows = 0;
  int64_t calibration_tokens = 0;  // Real tokens in its windows.
  int64_t heldout_tokens = 0;
  int conversation_documents = 0;
};

struct CalibrationSplit {
  // The file's sha256; for a mixed split the mix's (mixed_calibration.h).
  std::string calibration_hash;
  CalibrationSplitOptions options;
  std::vector<int>
      calibration_documents;  // Indices into the file, in use order.
  std::vector<int> heldout_documents;
  int64_t calibration_tokens_available = 0;  // After tokenization.
  int64_t heldout_tokens_available = 0;
  // Conversation documents the split used (both sides), rendered with
  // options.chat.
  int conversation_documents = 0;
  TokenWindows calibration;
  TokenWindows heldout;
  // A mixed split's sources in order (calibration_documents and
  // heldout_documents above are then empty: each source has its own);
  // empty for a split of one file.
  std::vector<CalibrationSourceSplit> sources;
};

// A document's tokens as the split uses them: input_ids as given (each
// checked against the vocabulary, naming the line and index), text stripped
// of surrounding whitespace and encoded, after BOS when `add_bos`, and a
// conversation rendered with `chat` and encoded as it is (the template
// writes its special tokens; none are added). A conversation without a
// `chat` is InvalidArgument naming its line.
absl::StatusOr<std::vector<int32_t>> CalibrationDocumentTokens(
    const CalibrationDocument& doc, const Tokenizer& tokenizer, bool add_bos,
    const ChatRenderer* chat = nullptr);

// Errors (InvalidArgument, naming the problem): options out of range, an
// input_ids document with an id outside the tokenizer's vocabulary (naming
// its line and index), and a split with fewer tokens than one window.
absl::StatusOr<CalibrationSplit> BuildCalibrationSplit(
    const CalibrationFile& file, const Tokenizer& tokenizer,
    const CalibrationSplitOptions& options);

}  // namespace quant

#endif  // QUANT_CORE_CALIB_CALIBRATION_SPLIT_H_
