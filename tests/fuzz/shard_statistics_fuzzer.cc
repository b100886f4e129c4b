// libFuzzer target: shard statistics files (core/pipeline/shard_sums_file.h)
// of arbitrary bytes are read for K = 4 or refused with an error; a file
// that is read gives finite sums whose counts add up.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/pipeline/shard_sums_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string* path =
      new std::string("/tmp/shard_statistics_fuzzer." +
                      std::to_string(getpid()) + ".safetensors");
  {
    std::ofstream out(*path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data),
              static_cast<std::streamsize>(size));
  }
  auto sums = quant::ReadShardSums(*path, /*k=*/4);
  if (!sums.ok()) return 0;
  if (sums->calibration.k() != 4 || sums->heldout.k() != 4 ||
      !sums->calibration.Finish().allFinite() ||
      !sums->heldout.Finish().allFinite()) {
    std::abort();
  }
  const int64_t tokens = sums->calibration.token_count();
  if (sums->split.has_value()) {
    const quant::SplitHessianAccumulator& split = *sums->split;
    if (split.next_token() - split.first_token() != tokens ||
        split.train().token_count() + split.validation().token_count() !=
            tokens ||
        !split.train().Finish().allFinite() ||
        !split.validation().Finish().allFinite()) {
      std::abort();
    }
  }
  if (sums->mean_abs.has_value() && (sums->mean_abs->token_count() != tokens ||
                                     !sums->mean_abs->sum_abs().allFinite())) {
    std::abort();
  }
  return 0;
}
