// libFuzzer target: calibration files (JSONL or text) of arbitrary bytes
// parse or are refused with an error; a parsed file has at least one
// document, each either text or ids.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "core/calib/calibration_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  auto file = quant::ParseCalibrationFile(bytes);
  if (!file.ok()) return 0;
  if (file->documents.empty() || file->sha256.size() != 64) std::abort();
  for (const quant::CalibrationDocument& doc : file->documents) {
    const bool valid = doc.input_ids.has_value()
                           ? !doc.input_ids->empty() && doc.text.empty()
                           : !doc.text.empty();
    if (!valid) std::abort();
  }
  return 0;
}
