// Eigen matrix aliases shared by the quantization cores. Weights are
// [out N, in K] and activations [tokens T, K], both row-major like the
// tensors they come from.
#ifndef QUANT_CORE_QUANT_MATRIX_TYPES_H_
#define QUANT_CORE_QUANT_MATRIX_TYPES_H_

#include <Eigen/Core>

namespace quant {

using RowMatrixF =
    Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using RowMatrixD =
    Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ColMatrixF = Eigen::MatrixXf;
using ConstRowMatrixRef = Eigen::Ref<const RowMatrixF>;

}  // namespace quant

#endif  // QUANT_CORE_QUANT_MATRIX_TYPES_H_
