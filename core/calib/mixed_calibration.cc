// Calibration sources mixed by weight; see mixed_calibration.h.
#include "core/calib/mixed_calibration.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"

namespace quant {

absl::StatusOr<std::vector<int>> ShareWindowsByWeight(
    int total, const std::vector<double>& weights) {
  const int n = static_cast<int>(weights.size());
  if (n == 0) return absl::InvalidArgumentError("calibration.sources: empty");
  double sum = 0;
  for (int i = 0; i < n; ++i) {
    if (!(std::isfinite(weights[i]) && weights[i] > 0)) {
      return absl::InvalidArgumentError(
          absl::StrCat("calibration.sources[", i, "].weight: ", weights[i],
                       " is not a positive number"));
    }
    sum += weights[i];
  }
  if (total < n) {
    return absl::InvalidArgumentError(
        absl::StrCat(total, " windows cannot give each of ", n,
                     " calibration sources one; raise calibration.samples (and "
                     "heldout_samples) to at least ",
                     n));
  }
  // One window each first, then the rest by largest remainder.
  std::vector<int> shares(n, 1);
  const int rest = total - n;
  std::vector<double> remainder(n);
  int given = 0;
  for (int i = 0; i < n; ++i) {
    const double exact = rest * (weights[i] / sum);
    const int whole = static_cast<int>(std::floor(exact));
    shares[i] += whole;
    given += whole;
    remainder[i] = exact - whole;
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int a, int b) { return remainder[a] > remainder[b]; });
  for (int k = 0; given < rest; ++k, ++given) ++shares[order[k % n]];
  return shares;
}

std::string CalibrationMixSha256(
    const std::vector<std::pair<std::string, double>>& sources) {
  std::string identity;
  for (const auto& [sha256, weight] : sources) {
    absl::StrAppend(&identity, sha256, " ", absl::StrFormat("%.17g", weight),
                    "\n");
  }
  return Sha256Hex(identity);
}

absl::StatusOr<CalibrationSplit> BuildMixedCalibrationSplit(
    const std::vector<WeightedCalibrationFile>& sources,
    const Tokenizer& tokenizer, const CalibrationSplitOptions& options) {
  std::vector<double> weights;
  for (const WeightedCalibrationFile& source : sources) {
    if (source.file == nullptr) {
      return absl::InvalidArgumentError("calibration source without a file");
    }
    weights.push_back(source.weight);
  }
  QUANT_ASSIGN_OR_RETURN(const std::vector<int> samples,
                         ShareWindowsByWeight(options.samples, weights));
  const int heldout_total =
      options.heldout_samples > 0 ? options.heldout_samples : options.samples;
  QUANT_ASSIGN_OR_RETURN(const std::vector<int> heldout,
                         ShareWindowsByWeight(heldout_total, weights));
  CalibrationSplit mixed;
  mixed.options = options;
  mixed.calibration.seq_len = options.seq_len;
  mixed.heldout.seq_len = options.seq_len;
  std::vector<std::pair<std::string, double>> identity;
  for (size_t i = 0; i < sources.size(); ++i) {
    CalibrationSplitOptions own = options;
    own.samples = samples[i];
    own.heldout_samples = heldout[i];
    absl::StatusOr<CalibrationSplit> split =
        BuildCalibrationSplit(*sources[i].file, tokenizer, own);
    if (!split.ok()) {
      return absl::Status(split.status().code(),
                          absl::StrCat("calibration.sources[", i, "] (sha256 ",
                                       sources[i].file->sha256,
                                       "): ", split.status().message()));
    }
    CalibrationSourceSplit part;
    part.sha256 = sources[i].file->sha256;
    part.weight = sources[i].weight;
    part.samples = samples[i];
    part.heldout_samples = heldout[i];
    part.calibration_documents = split->calibration_documents;
    part.heldout_documents = split->heldout_documents;
    part.calibration_windows =
        static_cast<int>(split->calibration.sequences.size());
    part.heldout_windows = static_cast<int>(split->heldout.sequences.size());
    part.calibration_tokens = split->calibration.RealTokens();
    part.heldout_tokens = split->heldout.RealTokens();
    part.conversation_documents = split->conversation_documents;
    mixed.sources.push_back(std::move(part));
    identity.emplace_back(sources[i].file->sha256, sources[i].weight);
    mixed.calibration_tokens_available += split->calibration_tokens_available;
    mixed.heldout_tokens_available += split->heldout_tokens_available;
    mixed.conversation_documents += split->conversation_documents;
    for (TokenWindows* from : {&split->calibration, &split->heldout}) {
      TokenWindows& to =
          from == &split->calibration ? mixed.calibration : mixed.heldout;
      for (auto& sequence : from->sequences) {
        to.sequences.push_back(std::move(sequence));
      }
      to.lengths.insert(to.lengths.end(), from->lengths.begin(),
                        from->lengths.end());
    }
  }
  mixed.calibration_hash = CalibrationMixSha256(identity);
  return mixed;
}

}  // namespace quant
