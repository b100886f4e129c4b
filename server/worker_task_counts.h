// Layers a block task quantizes and reports (q, k, v, o, gate, up, down):
// what progress counts a block's work in.
#ifndef QUANT_SERVER_WORKER_TASK_COUNTS_H_
#define QUANT_SERVER_WORKER_TASK_COUNTS_H_

namespace quant::server {

inline constexpr int kLayersPerBlockTask = 7;

}  // namespace quant::server

#endif  // QUANT_SERVER_WORKER_TASK_COUNTS_H_
