// A registry's current samples in the Prometheus text format (version
// 0.0.4), as /metrics serves them. For tests and debugging dumps.
#ifndef QUANT_METRICS_TEXT_EXPOSITION_H_
#define QUANT_METRICS_TEXT_EXPOSITION_H_

#include <string>

#include "prometheus/registry.h"

namespace quant::metrics {

std::string TextExposition(const prometheus::Registry& registry);

}  // namespace quant::metrics

#endif  // QUANT_METRICS_TEXT_EXPOSITION_H_
