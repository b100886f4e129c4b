// The in-memory and block-streamed LogitsModel implementations.
#include "core/eval/logits_model.h"

#include "core/base/status_macros.h"

namespace quant {

absl::Status LlamaLogitsModel::Forward(const std::vector<TokenBatch>& batches,
                                       const LogitsVisitor& visit) const {
  for (size_t i = 0; i < batches.size(); ++i) {
    QUANT_ASSIGN_OR_RETURN(const RowMatrixF logits, model_.Forward(batches[i]));
    QUANT_RETURN_IF_ERROR(visit(i, logits));
  }
  return absl::OkStatus();
}

absl::Status StreamedLogitsModel::Forward(
    const std::vector<TokenBatch>& batches, const LogitsVisitor& visit) const {
  if (batches.empty()) return absl::OkStatus();
  QUANT_ASSIGN_OR_RETURN(const std::vector<RowMatrixF> hidden,
                         model_.FinalHidden(batches, pool_));
  // The logits one batch at a time: [rows, vocab] is far wider than the
  // hidden states, too large to hold several of.
  for (size_t i = 0; i < hidden.size(); ++i) {
    QUANT_RETURN_IF_ERROR(visit(i, model_.Logits(hidden[i])));
  }
  return absl::OkStatus();
}

}  // namespace quant
