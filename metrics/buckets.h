// Histogram bucket boundaries (seconds) shared by quantd and the worker.
#ifndef QUANT_METRICS_BUCKETS_H_
#define QUANT_METRICS_BUCKETS_H_

#include <vector>

namespace quant::metrics {

// Task durations: a finalize of a tiny model takes ~10 ms, a block of a 70B
// model can take most of an hour; 1-2.5-5 steps from 0.01 s to 1 h.
const std::vector<double>& TaskDurationBuckets();

// RPC latencies: unary calls take 0.1 ms..seconds; long polls and uploads
// up to minutes. 0.5 ms to 5 min.
const std::vector<double>& RpcDurationBuckets();

}  // namespace quant::metrics

#endif  // QUANT_METRICS_BUCKETS_H_
