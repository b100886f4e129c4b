// A dense float32 tensor in row-major (C) order: the in-memory form of
// weights and activations after they leave their stored dtype.
#ifndef QUANT_CORE_BASE_TENSOR_H_
#define QUANT_CORE_BASE_TENSOR_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"

namespace quant {

struct FloatTensor {
  std::vector<int64_t> shape;
  std::vector<float> data;  // Row-major; size() == NumElements().

  int64_t NumElements() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
  std::string ShapeString() const {
    return "[" + absl::StrJoin(shape, ", ") + "]";
  }
};

}  // namespace quant

#endif  // QUANT_CORE_BASE_TENSOR_H_
