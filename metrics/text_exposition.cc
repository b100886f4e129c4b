// TextExposition: Collect() through prometheus-cpp's TextSerializer.
#include "metrics/text_exposition.h"

#include "prometheus/text_serializer.h"

namespace quant::metrics {

std::string TextExposition(const prometheus::Registry& registry) {
  return prometheus::TextSerializer().Serialize(registry.Collect());
}

}  // namespace quant::metrics
