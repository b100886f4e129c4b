// Validating and dequantizing packed linear layers (GPTQ v1 and
// compressed-tensors pack-quantized).
#include "core/pack/packed_layer_reader.h"

#include <algorithm>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/dtype.h"
#include "core/base/status_macros.h"
#include "core/pack/bit_packing.h"

namespace quant {
namespace {

constexpr int kWordBits = 32;

std::string ShapeString(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// One tensor of a packed layer, checked against the dtype(s) and shape the
// format implies for the layer's [N, K].
class TensorChecker {
 public:
  TensorChecker(const TensorCollection& tensors, std::string layer,
                std::string context)
      : tensors_(tensors),
        layer_(std::move(layer)),
        context_(std::move(context)) {}

  absl::StatusOr<TensorCollection::Entry> Get(
      absl::string_view suffix, std::initializer_list<DType> dtypes,
      const std::vector<int64_t>& shape) const {
    const std::string name = absl::StrCat(layer_, ".", suffix);
    const TensorCollection::Entry entry = tensors_.Find(name);
    if (entry.info == nullptr) {
      return absl::NotFoundError(
          absl::StrCat("packed layer ", layer_, ": tensor \"", name,
                       "\" is missing (", context_, ")"));
    }
    bool dtype_ok = false;
    std::vector<std::string> names;
    for (DType dtype : dtypes) {
      dtype_ok = dtype_ok || entry.info->dtype == dtype;
      names.emplace_back(DTypeName(dtype));
    }
    if (!dtype_ok) {
      return absl::InvalidArgumentError(absl::StrCat(
          "packed layer ", layer_, ": tensor \"", name, "\" has dtype ",
          DTypeName(entry.info->dtype), ", expected ",
          absl::StrJoin(names, " or "), " (", context_, ")"));
    }
    if (entry.info->shape != shape) {
      return absl::InvalidArgumentError(
          absl::StrCat("packed layer ", layer_, ": tensor \"", name,
                       "\" has shape ", ShapeString(entry.info->shape),
                       ", expected ", ShapeString(shape), " (", context_, ")"));
    }
    return entry;
  }

  bool Has(absl::string_view suffix) const {
    return tensors_.Find(absl::StrCat(layer_, ".", suffix)).info != nullptr;
  }

  absl::Status Unexpected(absl::string_view suffix,
                          absl::string_view why) const {
    return absl::InvalidArgumentError(
        absl::StrCat("packed layer ", layer_, ": tensor \"", layer_, ".",
                     suffix, "\" is present but ", why));
  }

  absl::Status BadValue(absl::string_view suffix,
                        absl::string_view what) const {
    return absl::InvalidArgumentError(absl::StrCat("packed layer ", layer_,
                                                   ": tensor \"", layer_, ".",
                                                   suffix, "\" ", what));
  }

  const std::string& layer() const { return layer_; }

 private:
  const TensorCollection& tensors_;
  std::string layer_;
  std::string context_;
};

// The raw elements of a 4-byte or 8-byte integer tensor (little-endian, any
// alignment).
template <typename T>
std::vector<T> ReadInts(const TensorCollection::Entry& entry) {
  const absl::Span<const uint8_t> bytes = entry.file->RawBytes(*entry.info);
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
  return values;
}

std::vector<float> ReadFloats(const TensorCollection::Entry& entry) {
  const absl::Span<const uint8_t> bytes = entry.file->RawBytes(*entry.info);
  std::vector<float> values(static_cast<size_t>(entry.info->NumElements()));
  ConvertToFloat(entry.info->dtype, bytes.data(), values.size(), values.data());
  return values;
}

// Checks every g_idx value is a group; without act-order also that it is the
// sequential k / group_size a runtime would assume.
absl::Status CheckGroupIndex(const TensorChecker& checker,
                             absl::string_view suffix,
                             const std::vector<int32_t>& g_idx,
                             int64_t num_groups, int64_t group_size,
                             bool act_order, absl::string_view order_flag) {
  for (size_t k = 0; k < g_idx.size(); ++k) {
    const int64_t g = g_idx[k];
    if (g < 0 || g >= num_groups) {
      return checker.BadValue(
          suffix,
          absl::StrCat("has value ", g, " at index ", k, ", outside the ",
                       num_groups, " groups [0, ", num_groups, ")"));
    }
    const int64_t sequential =
        group_size > 0 ? static_cast<int64_t>(k) / group_size : 0;
    if (!act_order && g != sequential) {
      return checker.BadValue(
          suffix,
          absl::StrCat("has value ", g, " at index ", k, " but ", order_flag,
                       " is off, so runtimes use group ", sequential,
                       " (k / group_size); the checkpoint is ambiguous"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<PackedLayerReader> PackedLayerReader::Create(
    const TensorCollection* tensors,
    const nlohmann::json& quantization_config) {
  if (tensors == nullptr) {
    return absl::InvalidArgumentError("PackedLayerReader: no tensors");
  }
  QUANT_ASSIGN_OR_RETURN(PackedFormatConfig config,
                         ParsePackedFormatConfig(quantization_config));
  return PackedLayerReader(tensors, config);
}

absl::StatusOr<LinearStorage> PackedLayerReader::Storage(
    absl::string_view layer) const {
  const std::string plain = absl::StrCat(layer, ".weight");
  const std::string packed = absl::StrCat(
      layer,
      config_.format == PackedFormat::kGptq ? ".qweight" : ".weight_packed");
  const bool has_plain = tensors_->Find(plain).info != nullptr;
  const bool has_packed = tensors_->Find(packed).info != nullptr;
  if (has_plain && has_packed) {
    return absl::InvalidArgumentError(
        absl::StrCat("linear layer ", layer, " is stored twice: both \"", plain,
                     "\" and \"", packed, "\" are present"));
  }
  if (!has_plain && !has_packed) {
    return absl::NotFoundError(absl::StrCat("linear layer ", layer,
                                            ": neither \"", plain, "\" nor \"",
                                            packed, "\" is present"));
  }
  QUANT_ASSIGN_OR_RETURN(const std::optional<PackedScheme> scheme,
                         SchemeForLayer(config_, layer));
  if (has_packed && !scheme.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("linear layer ", layer, " is stored packed (\"", packed,
                     "\") but the quantization_config leaves it unquantized"));
  }
  if (has_plain && scheme.has_value()) {
    return absl::InvalidArgumentError(
        absl::StrCat("linear layer ", layer, " is stored as \"", plain,
                     "\" but the quantization_config quantizes it (",
                     scheme->bits, " bits); runtimes would look for \"", packed,
                     "\" (list the layer as unquantized)"));
  }
  return has_packed ? LinearStorage::kPacked : LinearStorage::kPlain;
}

absl::StatusOr<PackedScheme> PackedLayerReader::QuantizedScheme(
    absl::string_view layer) const {
  QUANT_ASSIGN_OR_RETURN(const std::optional<PackedScheme> scheme,
                         SchemeForLayer(config_, layer));
  if (!scheme.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("linear layer ", layer,
                     ": the quantization_config leaves it unquantized"));
  }
  return *scheme;
}

absl::StatusOr<std::vector<std::string>> PackedLayerReader::PackedTensorNames(
    absl::string_view layer) const {
  QUANT_ASSIGN_OR_RETURN(const PackedScheme scheme, QuantizedScheme(layer));
  std::vector<std::string> suffixes;
  if (config_.format == PackedFormat::kGptq) {
    suffixes = {"qweight", "qzeros", "scales", "g_idx"};
  } else {
    suffixes = {"weight_packed", "weight_scale", "weight_shape"};
    if (!scheme.symmetric) suffixes.push_back("weight_zero_point");
    if (scheme.act_order) suffixes.push_back("weight_g_idx");
  }
  std::vector<std::string> names;
  for (const std::string& suffix : suffixes) {
    names.push_back(absl::StrCat(layer, ".", suffix));
  }
  return names;
}

absl::StatusOr<FloatTensor> PackedLayerReader::Dequantize(
    absl::string_view layer, int64_t n, int64_t k) const {
  if (n <= 0 || k <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "packed layer ", layer, ": empty weight shape [", n, ", ", k, "]"));
  }
  QUANT_ASSIGN_OR_RETURN(const PackedScheme scheme, QuantizedScheme(layer));
  const std::string name(layer);
  if (config_.format == PackedFormat::kGptq) {
    return DequantizeGptq(name, scheme, n, k);
  }
  return DequantizeCompressedTensors(name, scheme, n, k);
}

absl::StatusOr<FloatTensor> PackedLayerReader::DequantizeGptq(
    const std::string& layer, const PackedScheme& scheme, int64_t n,
    int64_t k) const {
  const int bits = scheme.bits;
  const int64_t group_size = scheme.group_size;
  const int64_t groups = group_size > 0 ? (k + group_size - 1) / group_size : 1;
  const TensorChecker checker(
      *tensors_, layer,
      absl::StrCat("GPTQ v1, weight [N=", n, ", K=", k, "], ", bits, " bits, ",
                   groups, " groups"));
  if (k * bits % kWordBits != 0 || n * bits % kWordBits != 0) {
    return checker.BadValue(
        "qweight",
        absl::StrCat("cannot hold weight [N=", n, ", K=", k, "] at ", bits,
                     " bits: GPTQ v1 needs K*bits and N*bits to be "
                     "multiples of 32"));
  }
  const int64_t word_rows = k * bits / kWordBits;
  const int64_t zero_words = n * bits / kWordBits;
  QUANT_ASSIGN_OR_RETURN(TensorCollection::Entry qweight_entry,
                         checker.Get("qweight", {DType::kI32}, {word_rows, n}));
  QUANT_ASSIGN_OR_RETURN(
      TensorCollection::Entry qzeros_entry,
      checker.Get("qzeros", {DType::kI32}, {groups, zero_words}));
  QUANT_ASSIGN_OR_RETURN(TensorCollection::Entry scales_entry,
                         checker.Get("scales", {DType::kF16}, {groups, n}));
  QUANT_ASSIGN_OR_RETURN(TensorCollection::Entry g_idx_entry,
                         checker.Get("g_idx", {DType::kI32}, {k}));
  const std::vector<int32_t> g_idx = ReadInts<int32_t>(g_idx_entry);
  QUANT_RETURN_IF_ERROR(CheckGroupIndex(checker, "g_idx", g_idx, groups,
                                        group_size, scheme.act_order,
                                        "desc_act"));
  const std::vector<uint32_t> qweight = ReadInts<uint32_t>(qweight_entry);
  const std::vector<uint32_t> qzeros = ReadInts<uint32_t>(qzeros_entry);
  const std::vector<float> scales = ReadFloats(scales_entry);

  // Zeros as runtimes see them: the stored b-bit value plus one.
  std::vector<int> zeros(static_cast<size_t>(groups * n));
  std::vector<uint8_t> line(static_cast<size_t>(std::max(n, k)));
  for (int64_t g = 0; g < groups; ++g) {
    UnpackLine(qzeros.data() + g * zero_words, 1, n, bits,
               PackLayout::kBitstream, line.data(), 1);
    for (int64_t r = 0; r < n; ++r) {
      zeros[static_cast<size_t>(g * n + r)] = line[static_cast<size_t>(r)] + 1;
    }
  }
  FloatTensor weight;
  weight.shape = {n, k};
  weight.data.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    // Column r of qweight is row r's bit stream along K.
    UnpackLine(qweight.data() + r, n, k, bits, PackLayout::kBitstream,
               line.data(), 1);
    float* out = weight.data.data() + r * k;
    for (int64_t c = 0; c < k; ++c) {
      const size_t at = static_cast<size_t>(g_idx[c] * n + r);
      out[c] = scales[at] *
               static_cast<float>(line[static_cast<size_t>(c)] - zeros[at]);
    }
  }
  return weight;
}

absl::StatusOr<FloatTensor> PackedLayerReader::DequantizeCompressedTensors(
    const std::string& layer, const PackedScheme& scheme, int64_t n,
    int64_t k) const {
  const int bits = scheme.bits;
  const int64_t group_size = scheme.group_size;
  const int64_t groups = group_size > 0 ? k / group_size : 1;
  // Dense (0.18+) or the 0.17 layout, from the config's version.
  const PackLayout layout = config_.compressed_tensors_layout;
  const TensorChecker checker(
      *tensors_, layer,
      absl::StrCat("compressed-tensors pack-quantized, weight [N=", n,
                   ", K=", k, "], ", bits, " bits, ", groups, " groups"));
  if (group_size > 0 && k % group_size != 0) {
    return checker.BadValue(
        "weight_scale",
        absl::StrCat("cannot describe K=", k, " in groups of ", group_size,
                     ": the group strategy needs whole groups"));
  }
  const int64_t words_per_row = PackedWordCount(k, bits, layout);
  QUANT_ASSIGN_OR_RETURN(
      TensorCollection::Entry packed_entry,
      checker.Get("weight_packed", {DType::kI32}, {n, words_per_row}));
  QUANT_ASSIGN_OR_RETURN(
      TensorCollection::Entry scale_entry,
      checker.Get("weight_scale", {DType::kF16, DType::kBF16, DType::kF32},
                  {n, groups}));
  QUANT_ASSIGN_OR_RETURN(TensorCollection::Entry shape_entry,
                         checker.Get("weight_shape", {DType::kI64}, {2}));
  const std::vector<int64_t> stored_shape = ReadInts<int64_t>(shape_entry);
  if (stored_shape != std::vector<int64_t>{n, k}) {
    return checker.BadValue("weight_shape",
                            absl::StrCat("holds ", ShapeString(stored_shape),
                                         ", expected [", n, ", ", k, "]"));
  }

  // Zero points as [G, N] (the stored tensor is [ceil(N/p), G] packed along
  // N); 2^(b-1) everywhere when symmetric.
  std::vector<int> zeros(static_cast<size_t>(groups * n), 1 << (bits - 1));
  std::vector<uint8_t> line(static_cast<size_t>(std::max(n, k)));
  if (scheme.symmetric) {
    if (checker.Has("weight_zero_point")) {
      return checker.Unexpected("weight_zero_point",
                                "the config says symmetric: true");
    }
  } else {
    const int64_t zero_rows = PackedWordCount(n, bits, layout);
    QUANT_ASSIGN_OR_RETURN(
        TensorCollection::Entry zero_entry,
        checker.Get("weight_zero_point", {DType::kI32}, {zero_rows, groups}));
    const std::vector<uint32_t> packed_zeros = ReadInts<uint32_t>(zero_entry);
    for (int64_t g = 0; g < groups; ++g) {
      UnpackLine(packed_zeros.data() + g, groups, n, bits, layout, line.data(),
                 1);
      for (int64_t r = 0; r < n; ++r) {
        zeros[static_cast<size_t>(g * n + r)] = line[static_cast<size_t>(r)];
      }
    }
  }

  std::vector<int32_t> g_idx;
  if (scheme.act_order) {
    QUANT_ASSIGN_OR_RETURN(TensorCollection::Entry g_idx_entry,
                           checker.Get("weight_g_idx", {DType::kI32}, {k}));
    g_idx = ReadInts<int32_t>(g_idx_entry);
    QUANT_RETURN_IF_ERROR(CheckGroupIndex(checker, "weight_g_idx", g_idx,
                                          groups, group_size,
                                          /*act_order=*/true, "actorder"));
  } else {
    if (checker.Has("weight_g_idx")) {
      return checker.Unexpected("weight_g_idx",
                                "the config's actorder is not \"group\"");
    }
    g_idx.resize(static_cast<size_t>(k));
    for (int64_t c = 0; c < k; ++c) {
      g_idx[static_cast<size_t>(c)] =
          static_cast<int32_t>(group_size > 0 ? c / group_size : 0);
    }
  }

  const std::vector<uint32_t> packed = ReadInts<uint32_t>(packed_entry);
  const std::vector<float> scales = ReadFloats(scale_entry);  // [N, G]
  FloatTensor weight;
  weight.shape = {n, k};
  weight.data.resize(static_cast<size_t>(n * k));
  for (int64_t r = 0; r < n; ++r) {
    UnpackLine(packed.data() + r * words_per_row, 1, k, bits, layout,
               line.data(), 1);
    float* out = weight.data.data() + r * k;
    for (int64_t c = 0; c < k; ++c) {
      const int64_t g = g_idx[static_cast<size_t>(c)];
      out[c] = scales[static_cast<size_t>(r * groups + g)] *
               static_cast<float>(line[static_cast<size_t>(c)] -
                                  zeros[static_cast<size_t>(g * n + r)]);
    }
  }
  return weight;
}

}  // namespace quant
