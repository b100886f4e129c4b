// .npy reading and writing. The header is a Python dict literal; we parse the
// small fixed grammar NumPy writes ({'descr': str, 'fortran_order': bool,
// 'shape': tuple of ints}) with explicit bounds checks rather than evaluating
// anything.
#include "core/io/npy.h"

#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/file_util.h"
#include "core/base/mapped_file.h"
#include "core/base/status_macros.h"

namespace quant {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr size_t kDataAlignment = 64;
constexpr int kMaxRank = 32;

// One parsed header value: a string, a bool or a tuple of integers.
struct HeaderValue {
  enum class Kind { kString, kBool, kTuple } kind = Kind::kString;
  std::string text;
  bool flag = false;
  std::vector<int64_t> dims;
};

// Recursive-descent parser over the header text; every read is bounds
// checked and every failure says what was expected where.
class HeaderParser {
 public:
  explicit HeaderParser(absl::string_view text) : text_(text) {}

  absl::StatusOr<std::map<std::string, HeaderValue>> ParseDict() {
    std::map<std::string, HeaderValue> dict;
    SkipSpace();
    if (!Consume('{')) return Error("expected '{'");
    SkipSpace();
    while (!Consume('}')) {
      QUANT_ASSIGN_OR_RETURN(std::string key, ParseString());
      SkipSpace();
      if (!Consume(':')) return Error("expected ':' after a key");
      SkipSpace();
      QUANT_ASSIGN_OR_RETURN(HeaderValue value, ParseValue());
      if (!dict.emplace(key, std::move(value)).second) {
        return Error(
            absl::StrCat("duplicate key '", absl::CHexEscape(key), "'"));
      }
      SkipSpace();
      if (Consume(',')) {
        SkipSpace();
      } else if (Peek() != '}') {
        return Error("expected ',' or '}'");
      }
    }
    SkipSpace();
    if (pos_ != text_.size()) return Error("unexpected text after '}'");
    return dict;
  }

 private:
  char Peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  bool Consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool ConsumeWord(absl::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }
  void SkipSpace() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\t' ||
            text_[pos_] == '\r')) {
      ++pos_;
    }
  }
  absl::Status Error(absl::string_view problem) const {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed header at character ", pos_, ": ", problem));
  }

  // A quoted string without escapes (NumPy never writes any in keys or
  // descr).
  absl::StatusOr<std::string> ParseString() {
    const char quote = Peek();
    if (quote != '\'' && quote != '"') return Error("expected a quoted string");
    ++pos_;
    const size_t end = text_.find(quote, pos_);
    if (end == absl::string_view::npos) return Error("unterminated string");
    std::string value(text_.substr(pos_, end - pos_));
    if (value.find('\\') != std::string::npos) {
      return Error("escapes in strings are not supported");
    }
    pos_ = end + 1;
    return value;
  }

  absl::StatusOr<int64_t> ParseInteger() {
    const size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
      const int digit = text_[pos_] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10) {
        return Error("dimension too large");
      }
      value = value * 10 + digit;
      ++pos_;
    }
    if (pos_ == start) {
      return Error(Peek() == '-' ? "negative dimension"
                                 : "expected a non-negative integer");
    }
    // Python 2 era files may write long integers as "3L".
    Consume('L');
    return value;
  }

  absl::StatusOr<HeaderValue> ParseValue() {
    HeaderValue value;
    const char c = Peek();
    if (c == '\'' || c == '"') {
      value.kind = HeaderValue::Kind::kString;
      QUANT_ASSIGN_OR_RETURN(value.text, ParseString());
      return value;
    }
    if (ConsumeWord("True")) {
      value.kind = HeaderValue::Kind::kBool;
      value.flag = true;
      return value;
    }
    if (ConsumeWord("False")) {
      value.kind = HeaderValue::Kind::kBool;
      value.flag = false;
      return value;
    }
    if (Consume('(')) {
      value.kind = HeaderValue::Kind::kTuple;
      SkipSpace();
      bool need_comma_for_single = true;
      while (!Consume(')')) {
        if (value.dims.size() >= static_cast<size_t>(kMaxRank)) {
          return Error(
              absl::StrCat("shape has more than ", kMaxRank, " dimensions"));
        }
        QUANT_ASSIGN_OR_RETURN(const int64_t dim, ParseInteger());
        value.dims.push_back(dim);
        SkipSpace();
        if (Consume(',')) {
          need_comma_for_single = false;
          SkipSpace();
        } else if (Peek() != ')') {
          return Error("expected ',' or ')' in the shape tuple");
        } else if (value.dims.size() == 1 && need_comma_for_single) {
          return Error("a one-element tuple needs a trailing comma: (n,)");
        }
      }
      return value;
    }
    return Error("expected a string, True/False or a tuple");
  }

  absl::string_view text_;
  size_t pos_ = 0;
};

absl::Status FileError(const std::string& path, const absl::Status& status) {
  return absl::Status(status.code(),
                      absl::StrCat(path, ": ", status.message()));
}

absl::Status InvalidFile(const std::string& path, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(path, ": ", problem));
}

uint32_t LoadLittleEndian(const char* p, size_t bytes) {
  uint32_t value = 0;
  for (size_t i = bytes; i > 0; --i) {
    value = (value << 8) | static_cast<uint8_t>(p[i - 1]);
  }
  return value;
}

std::string ShapeTuple(const std::vector<int64_t>& shape) {
  if (shape.size() == 1) return absl::StrCat("(", shape[0], ",)");
  return absl::StrCat("(", absl::StrJoin(shape, ", "), ")");
}

}  // namespace

absl::StatusOr<FloatTensor> ReadNpy(const std::string& path) {
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> file,
                         MappedFile::Open(path));
  const absl::string_view bytes = file->view();
  if (bytes.size() < kMagicBytes + 2 ||
      bytes.substr(0, kMagicBytes) != absl::string_view(kMagic, kMagicBytes)) {
    return InvalidFile(path, "not a .npy file (bad magic)");
  }
  const int major = static_cast<uint8_t>(bytes[6]);
  const int minor = static_cast<uint8_t>(bytes[7]);
  if ((major != 1 && major != 2 && major != 3) || minor != 0) {
    return InvalidFile(
        path, absl::StrCat("unsupported .npy format version ", major, ".",
                           minor, " (supported: 1.0, 2.0, 3.0)"));
  }
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagicBytes + 2 + length_bytes;
  if (bytes.size() < prefix) {
    return FileError(path, absl::DataLossError("truncated header length"));
  }
  const uint64_t header_length =
      LoadLittleEndian(bytes.data() + kMagicBytes + 2, length_bytes);
  if (header_length > bytes.size() - prefix) {
    return FileError(path, absl::DataLossError(
                               absl::StrCat("header length ", header_length,
                                            " runs past the end of the file")));
  }
  const absl::string_view header = bytes.substr(prefix, header_length);
  absl::StatusOr<std::map<std::string, HeaderValue>> dict =
      HeaderParser(header).ParseDict();
  if (!dict.ok()) return FileError(path, dict.status());

  for (const auto& [key, value] : *dict) {
    if (key != "descr" && key != "fortran_order" && key != "shape") {
      return InvalidFile(path, absl::StrCat("unexpected header key '",
                                            absl::CHexEscape(key), "'"));
    }
  }
  auto descr = dict->find("descr");
  auto fortran = dict->find("fortran_order");
  auto shape = dict->find("shape");
  if (descr == dict->end() || fortran == dict->end() || shape == dict->end()) {
    return InvalidFile(path,
                       "header must have 'descr', 'fortran_order' and 'shape'");
  }
  if (descr->second.kind != HeaderValue::Kind::kString) {
    return InvalidFile(path, "'descr' must be a string");
  }
  DType dtype;
  if (descr->second.text == "<f4") {
    dtype = DType::kF32;
  } else if (descr->second.text == "<f2") {
    dtype = DType::kF16;
  } else {
    return InvalidFile(path, absl::StrCat("unsupported dtype '",
                                          absl::CHexEscape(descr->second.text),
                                          "' (supported: '<f4' float32, '<f2' "
                                          "float16, little-endian)"));
  }
  if (fortran->second.kind != HeaderValue::Kind::kBool) {
    return InvalidFile(path, "'fortran_order' must be True or False");
  }
  if (fortran->second.flag) {
    return InvalidFile(path,
                       "Fortran-order (column-major) arrays are not "
                       "supported; save a C-order array");
  }
  if (shape->second.kind != HeaderValue::Kind::kTuple) {
    return InvalidFile(path, "'shape' must be a tuple of integers");
  }

  FloatTensor tensor;
  tensor.shape = shape->second.dims;
  uint64_t count = 1;
  for (int64_t dim : tensor.shape) {
    if (__builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count) ||
        count > (uint64_t{1} << 40)) {
      return InvalidFile(path, absl::StrCat("shape ", ShapeTuple(tensor.shape),
                                            " has too many elements"));
    }
  }
  const size_t element_size = DTypeSize(dtype);
  const uint64_t data_bytes = count * element_size;
  const uint64_t available = bytes.size() - prefix - header_length;
  if (available < data_bytes) {
    return FileError(path, absl::DataLossError(absl::StrCat(
                               "shape ", ShapeTuple(tensor.shape), " needs ",
                               data_bytes, " bytes of data but the file has ",
                               available, " (truncated file?)")));
  }
  if (available > data_bytes) {
    return InvalidFile(path, absl::StrCat("file has ", available - data_bytes,
                                          " unexpected bytes after the data"));
  }
  tensor.data.resize(static_cast<size_t>(count));
  if (count > 0) {
    ConvertToFloat(dtype, bytes.data() + prefix + header_length,
                   static_cast<size_t>(count), tensor.data.data());
  }
  return tensor;
}

absl::Status WriteNpy(const std::string& path, const FloatTensor& tensor,
                      DType dtype) {
  const char* descr = nullptr;
  if (dtype == DType::kF32) {
    descr = "<f4";
  } else if (dtype == DType::kF16) {
    descr = "<f2";
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot write ", path, " as ", DTypeName(dtype),
                     ": .npy output supports F32 and F16 only"));
  }
  uint64_t count = 1;
  for (int64_t dim : tensor.shape) {
    if (dim < 0 ||
        __builtin_mul_overflow(count, static_cast<uint64_t>(dim), &count)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cannot write ", path, ": invalid shape ", tensor.ShapeString()));
    }
  }
  if (count != tensor.data.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "cannot write ", path, ": shape ", tensor.ShapeString(), " holds ",
        count, " elements but the tensor has ", tensor.data.size()));
  }

  std::string header = absl::StrCat(
      "{'descr': '", descr,
      "', 'fortran_order': False, 'shape': ", ShapeTuple(tensor.shape), ", }");
  // Version 1.0 has a 2-byte header length; 2.0 has 4 bytes (huge ranks).
  const bool version2 = header.size() + 1 + 12 > 0xFFFF;
  const size_t prefix = kMagicBytes + 2 + (version2 ? 4 : 2);
  // Pad with spaces and end with '\n' so the data starts 64-byte aligned.
  const size_t unpadded = prefix + header.size() + 1;
  header.append((kDataAlignment - unpadded % kDataAlignment) % kDataAlignment,
                ' ');
  header.push_back('\n');

  std::string contents(kMagic, kMagicBytes);
  contents.push_back(version2 ? 2 : 1);
  contents.push_back(0);
  uint32_t length = static_cast<uint32_t>(header.size());
  for (size_t i = 0; i < (version2 ? 4u : 2u); ++i) {
    contents.push_back(static_cast<char>(length & 0xFF));
    length >>= 8;
  }
  contents += header;
  const size_t data_start = contents.size();
  contents.resize(data_start + count * DTypeSize(dtype));
  if (count > 0) {
    QUANT_RETURN_IF_ERROR(ConvertFromFloat(tensor.data.data(), count, dtype,
                                           &contents[data_start]));
  }
  return WriteFileAtomically(path, contents);
}

}  // namespace quant
