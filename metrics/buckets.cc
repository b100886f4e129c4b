// The bucket boundaries of the duration histograms.
#include "metrics/buckets.h"

namespace quant::metrics {

const std::vector<double>& TaskDurationBuckets() {
  static const auto* const kBuckets = new std::vector<double>{
      0.01, 0.025, 0.05, 0.1, 0.25, 0.5,  1,    2.5,  5,   10,
      25,   50,    100,  250, 500,  1000, 1800, 2500, 3600};
  return *kBuckets;
}

const std::vector<double>& RpcDurationBuckets() {
  static const auto* const kBuckets = new std::vector<double>{
      0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
      0.5,    1,     2.5,    5,     10,   30,    60,   300};
  return *kBuckets;
}

}  // namespace quant::metrics
