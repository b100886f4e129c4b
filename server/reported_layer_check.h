// What quantd accepts from a worker's heartbeat as a finished layer's audit
// row: only rows a real block task can produce. A worker is not trusted to
// name layers, count them or fill the numbers: a row for a layer that does
// not exist, a NaN error, or thousands of invented layers would otherwise
// reach the job's events, its metrics and the report.
#ifndef QUANT_SERVER_REPORTED_LAYER_CHECK_H_
#define QUANT_SERVER_REPORTED_LAYER_CHECK_H_

#include "absl/status/status.h"
#include "quant/v1/audit.pb.h"
#include "server/store/job_store.h"

namespace quant::server {

// OK when `layer` can come from `task`: a block task; the name
// "model.layers.<its block>.{self_attn,mlp}.<type>" of one of the block's
// seven linear layers, `type` its last part, or one of its experts' layers
// (".mlp.experts.E.down_proj", ".block_sparse_moe.experts.E.w2", `type` the
// part it plays: gate_proj, up_proj, down_proj); every number finite (gains may
// be +inf: a method error of zero) and the errors non-negative; bits in
// 0..16; short strings. A reduce reports its own group's (or layer's)
// rows; a pending row (heldout_pending) only a reduce. `audits_block`: the
// task is a block's last reduce in a job whose reduces left the held-out
// audits to it (spec rounds.heldout_later), which also reports the block's
// other layers, complete. InvalidArgument naming the field otherwise.
absl::Status CheckReportedLayer(const v1::LayerAudit& layer,
                                const store::Task& task,
                                bool audits_block = false);

}  // namespace quant::server

#endif  // QUANT_SERVER_REPORTED_LAYER_CHECK_H_
