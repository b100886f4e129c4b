// NumPy .npy files (format versions 1.0 to 3.0) holding float32 or float16
// C-order arrays: the exchange format of `quantctl lab` and of fixtures.
#ifndef QUANT_CORE_IO_NPY_H_
#define QUANT_CORE_IO_NPY_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/base/dtype.h"
#include "core/base/tensor.h"

namespace quant {

// Reads '<f4' or '<f2' (converted to float32), C order only. Errors name the
// file and the problem (bad magic, Fortran order, unsupported dtype, size).
absl::StatusOr<FloatTensor> ReadNpy(const std::string& path);

// Writes `tensor` as '<f4' (DType::kF32) or '<f2' (DType::kF16), atomically.
absl::Status WriteNpy(const std::string& path, const FloatTensor& tensor,
                      DType dtype = DType::kF32);

}  // namespace quant

#endif  // QUANT_CORE_IO_NPY_H_
