// libFuzzer target: ParseSafetensorsHeader on arbitrary bytes must return
// (OK or an error) without crashing, reading out of bounds or leaking, and
// an accepted header must describe a layout that fits the input.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "core/io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  // A small header limit too, so the limit check itself gets exercised.
  quant::SafetensorsLimits small;
  small.max_header_bytes = 256;
  small.max_rank = 2;
  for (const quant::SafetensorsLimits& limits :
       {quant::SafetensorsLimits(), small}) {
    const auto header = quant::ParseSafetensorsHeader(bytes, limits);
    if (!header.ok()) continue;
    uint64_t expected_begin = 0;
    for (const quant::TensorInfo& info : header->tensors) {
      // The parser promised contiguous tensors inside the data section.
      if (info.data_begin != expected_begin ||
          info.data_end < info.data_begin ||
          header->data_offset + info.data_end > size) {
        std::abort();
      }
      expected_begin = info.data_end;
    }
    if (header->data_offset + expected_begin != size) std::abort();
  }
  return 0;
}
