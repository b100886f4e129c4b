// libyaml events -> YamlNode trees.
#include "core/recipe/yaml_tree.h"

#include <yaml.h>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace quant {
namespace {

YamlMark MarkOf(const yaml_mark_t& mark) {
  return {static_cast<int>(mark.line), static_cast<int>(mark.column)};
}

absl::Status ErrorAt(const YamlMark& mark, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(
      mark.line + 1, ":", mark.column + 1, ": invalid YAML: ", problem));
}

// Owns the parser and the current event.
class EventReader {
 public:
  explicit EventReader(absl::string_view text) {
    yaml_parser_initialize(&parser_);
    yaml_parser_set_input_string(
        &parser_, reinterpret_cast<const unsigned char*>(text.data()),
        text.size());
  }
  ~EventReader() {
    if (has_event_) yaml_event_delete(&event_);
    yaml_parser_delete(&parser_);
  }
  EventReader(const EventReader&) = delete;
  EventReader& operator=(const EventReader&) = delete;

  // Advances to the next event.
  absl::Status Next() {
    if (has_event_) {
      yaml_event_delete(&event_);
      has_event_ = false;
    }
    if (!yaml_parser_parse(&parser_, &event_)) {
      const YamlMark mark = MarkOf(parser_.problem_mark);
      std::string problem =
          parser_.problem != nullptr ? parser_.problem : "syntax error";
      if (parser_.context != nullptr) {
        problem = absl::StrCat(parser_.context, ": ", problem);
      }
      return ErrorAt(mark, problem);
    }
    has_event_ = true;
    return absl::OkStatus();
  }

  const yaml_event_t& event() const { return event_; }

 private:
  yaml_parser_t parser_;
  yaml_event_t event_;
  bool has_event_ = false;
};

bool IsNullScalar(const yaml_event_t& e) {
  if (e.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
  const absl::string_view value(
      reinterpret_cast<const char*>(e.data.scalar.value), e.data.scalar.length);
  return value.empty() || value == "~" || value == "null" || value == "Null" ||
         value == "NULL";
}

// Reads the node starting at the current event; leaves the reader on the
// node's last event.
absl::Status ReadNode(EventReader& reader, int depth, const YamlLimits& limits,
                      YamlNode* node) {
  const yaml_event_t& e = reader.event();
  node->mark = MarkOf(e.start_mark);
  constexpr absl::string_view kProperty =
      "anchors, aliases and tags (&, *, !) are not allowed in a recipe";
  switch (e.type) {
    case YAML_ALIAS_EVENT:
      return ErrorAt(node->mark, kProperty);
    case YAML_SCALAR_EVENT: {
      if (e.data.scalar.anchor != nullptr || e.data.scalar.tag != nullptr) {
        return ErrorAt(node->mark, kProperty);
      }
      if (IsNullScalar(e)) {
        node->kind = YamlNode::Kind::kNull;
        return absl::OkStatus();
      }
      node->kind = YamlNode::Kind::kScalar;
      node->scalar.assign(reinterpret_cast<const char*>(e.data.scalar.value),
                          e.data.scalar.length);
      node->quoted = e.data.scalar.style != YAML_PLAIN_SCALAR_STYLE;
      return absl::OkStatus();
    }
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
      const bool mapping = e.type == YAML_MAPPING_START_EVENT;
      const bool has_property = mapping
                                    ? e.data.mapping_start.anchor != nullptr ||
                                          e.data.mapping_start.tag != nullptr
                                    : e.data.sequence_start.anchor != nullptr ||
                                          e.data.sequence_start.tag != nullptr;
      if (has_property) return ErrorAt(node->mark, kProperty);
      if (depth >= limits.max_depth) {
        return ErrorAt(node->mark, absl::StrCat("nested deeper than ",
                                                limits.max_depth, " levels"));
      }
      node->kind =
          mapping ? YamlNode::Kind::kMapping : YamlNode::Kind::kSequence;
      const yaml_event_type_t end =
          mapping ? YAML_MAPPING_END_EVENT : YAML_SEQUENCE_END_EVENT;
      while (true) {
        QUANT_RETURN_IF_ERROR(reader.Next());
        if (reader.event().type == end) return absl::OkStatus();
        YamlNode first;
        QUANT_RETURN_IF_ERROR(ReadNode(reader, depth + 1, limits, &first));
        if (!mapping) {
          node->items.push_back(std::move(first));
          continue;
        }
        QUANT_RETURN_IF_ERROR(reader.Next());
        YamlNode value;
        QUANT_RETURN_IF_ERROR(ReadNode(reader, depth + 1, limits, &value));
        node->entries.emplace_back(std::move(first), std::move(value));
      }
    }
    default:
      return ErrorAt(node->mark, "unexpected YAML event");
  }
}

absl::StatusOr<std::vector<YamlNode>> ParseDocuments(absl::string_view text,
                                                     const YamlLimits& limits) {
  EventReader reader(text);
  std::vector<YamlNode> documents;
  QUANT_RETURN_IF_ERROR(reader.Next());  // Stream start.
  while (true) {
    QUANT_RETURN_IF_ERROR(reader.Next());
    if (reader.event().type == YAML_STREAM_END_EVENT) return documents;
    if (reader.event().type != YAML_DOCUMENT_START_EVENT) {
      return ErrorAt(MarkOf(reader.event().start_mark), "expected a document");
    }
    QUANT_RETURN_IF_ERROR(reader.Next());
    YamlNode root;
    QUANT_RETURN_IF_ERROR(ReadNode(reader, 0, limits, &root));
    QUANT_RETURN_IF_ERROR(reader.Next());  // Document end.
    documents.push_back(std::move(root));
  }
}

}  // namespace

absl::StatusOr<std::vector<YamlNode>> ParseYamlDocuments(
    absl::string_view text, absl::string_view source_name,
    const YamlLimits& limits) {
  absl::StatusOr<std::vector<YamlNode>> documents =
      ParseDocuments(text, limits);
  if (documents.ok()) return documents;
  return absl::InvalidArgumentError(
      absl::StrCat(source_name, ":", documents.status().message()));
}

}  // namespace quant
