// A SAX-driven DOM builder that rejects duplicate keys and deep nesting.
#include "core/base/strict_json.h"

#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace quant {
namespace {

using json = nlohmann::json;

// Builds the DOM itself (rather than using nlohmann's builder) so it can see
// every key of every object as it is read.
class StrictDomBuilder : public json::json_sax_t {
 public:
  explicit StrictDomBuilder(const StrictJsonOptions& options)
      : options_(options) {}

  bool null() override { return AddScalar(json(nullptr)); }
  bool boolean(bool value) override { return AddScalar(json(value)); }
  bool number_integer(number_integer_t value) override {
    return AddScalar(json(value));
  }
  bool number_unsigned(number_unsigned_t value) override {
    return AddScalar(json(value));
  }
  bool number_float(number_float_t value, const string_t& /*text*/) override {
    return AddScalar(json(value));
  }
  bool string(string_t& value) override {
    return AddScalar(json(std::move(value)));
  }
  bool binary(binary_t& value) override {
    return AddScalar(json::binary(std::move(value)));
  }

  bool start_object(std::size_t /*elements*/) override {
    return OpenContainer(json::object());
  }
  bool key(string_t& key) override {
    Frame& frame = stack_.back();
    if (options_.reject_duplicate_keys && !frame.keys.insert(key).second) {
      error_ = absl::StrCat("duplicate key \"", absl::CHexEscape(key), "\"");
      if (!frame.name.empty()) {
        absl::StrAppend(&error_, " in object \"", absl::CHexEscape(frame.name),
                        "\"");
      } else if (stack_.size() == 1) {
        absl::StrAppend(&error_, " in the top-level object");
      }
      return false;
    }
    frame.pending_key = std::move(key);
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t /*elements*/) override {
    return OpenContainer(json::array());
  }
  bool end_array() override {
    stack_.pop_back();
    return true;
  }

  bool parse_error(std::size_t /*position*/, const std::string& /*last_token*/,
                   const json::exception& ex) override {
    absl::string_view message = ex.what();
    // Drop nlohmann's "[json.exception.parse_error.101] " tag.
    if (absl::ConsumePrefix(&message, "[json.exception.")) {
      const size_t end = message.find("] ");
      if (end != absl::string_view::npos) message.remove_prefix(end + 2);
    }
    // The message quotes input bytes; keep it printable ASCII.
    error_.clear();
    for (const char c : message) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte < 0x20 || byte >= 0x7F) {
        absl::StrAppend(&error_, "\\x", absl::Hex(byte, absl::kZeroPad2));
      } else {
        error_.push_back(c);
      }
    }
    return false;
  }

  json& root() { return root_; }
  const std::string& error() const { return error_; }

 private:
  struct Frame {
    json* value;
    std::string name;  // Key under which this object sits; "" if none.
    std::set<std::string> keys;
    std::string pending_key;
  };

  // Places `value` in the innermost open container (or as the root) and
  // returns where it now lives.
  json* Place(json&& value) {
    if (stack_.empty()) {
      root_ = std::move(value);
      return &root_;
    }
    json& parent = *stack_.back().value;
    if (parent.is_array()) {
      parent.push_back(std::move(value));
      return &parent.back();
    }
    json& slot = parent[stack_.back().pending_key];
    slot = std::move(value);
    return &slot;
  }

  // False (with the error) once the document holds too many values.
  bool CountValue() {
    if (options_.max_values > 0 && ++values_ > options_.max_values) {
      error_ = absl::StrCat("more than ", options_.max_values, " values");
      return false;
    }
    return true;
  }

  bool AddScalar(json&& value) {
    if (!CountValue()) return false;
    Place(std::move(value));
    return true;
  }

  bool OpenContainer(json&& container) {
    if (!CountValue()) return false;
    if (static_cast<int>(stack_.size()) >= options_.max_depth) {
      error_ =
          absl::StrCat("nested deeper than ", options_.max_depth, " levels");
      return false;
    }
    std::string name;
    if (!stack_.empty() && stack_.back().value->is_object()) {
      name = stack_.back().pending_key;
    }
    // Pointers to open containers stay valid: only the innermost one is
    // ever modified, and its own ancestors are not touched meanwhile.
    json* placed = Place(std::move(container));
    stack_.push_back(Frame{placed, std::move(name), {}, {}});
    return true;
  }

  const StrictJsonOptions& options_;
  json root_;
  std::vector<Frame> stack_;
  std::string error_;
  int64_t values_ = 0;
};

// The value, or the problem in `error`.
std::optional<json> Parse(absl::string_view text,
                          const StrictJsonOptions& options,
                          std::string* error) {
  StrictDomBuilder builder(options);
  const bool ok = json::sax_parse(text.begin(), text.end(), &builder,
                                  json::input_format_t::json,
                                  /*strict=*/true, /*ignore_comments=*/false);
  if (!ok) {
    *error =
        builder.error().empty() ? std::string("parse failed") : builder.error();
    return std::nullopt;
  }
  return std::move(builder.root());
}

// The value, or InvalidArgument "<prefix><problem>".
absl::StatusOr<json> ParseOrExplain(absl::string_view text,
                                    const StrictJsonOptions& options,
                                    absl::string_view prefix) {
  std::string error;
  std::optional<json> value = Parse(text, options, &error);
  if (!value.has_value()) {
    return absl::InvalidArgumentError(absl::StrCat(prefix, error));
  }
  return *std::move(value);
}

}  // namespace

absl::StatusOr<json> ParseJsonStrict(absl::string_view text,
                                     absl::string_view what,
                                     const StrictJsonOptions& options) {
  return ParseOrExplain(text, options,
                        absl::StrCat(what, " is not valid JSON: "));
}

absl::StatusOr<json> ParseJsonFile(absl::string_view text,
                                   absl::string_view source,
                                   const StrictJsonOptions& options) {
  return ParseOrExplain(text, options,
                        absl::StrCat(source, ": not valid JSON: "));
}

json ParseJsonOrDiscarded(absl::string_view text,
                          const StrictJsonOptions& options) {
  absl::StatusOr<json> parsed = ParseOrExplain(text, options, "");
  if (!parsed.ok()) return json(json::value_t::discarded);
  return *std::move(parsed);
}

}  // namespace quant
