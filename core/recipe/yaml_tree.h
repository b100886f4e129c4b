// A YAML document as a plain tree, read with libyaml's event parser: only
// what recipes use (mappings, sequences, scalars), each node with its
// position for error messages. Anchors, aliases and tags are refused, and
// nesting is bounded, so no document can expand or recurse without limit.
#ifndef QUANT_CORE_RECIPE_YAML_TREE_H_
#define QUANT_CORE_RECIPE_YAML_TREE_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant {

struct YamlMark {
  int line = -1;  // 0-based; -1 when unknown.
  int column = -1;
};

struct YamlNode {
  // kNull: an empty value or a plain ~ / null / Null / NULL.
  enum class Kind { kNull, kScalar, kSequence, kMapping };
  Kind kind = Kind::kNull;
  std::string scalar;
  // Written in quotes or as a block scalar: always a string, never a number
  // or boolean.
  bool quoted = false;
  YamlMark mark;
  std::vector<YamlNode> items;                         // kSequence
  std::vector<std::pair<YamlNode, YamlNode>> entries;  // kMapping, in order

  bool IsNull() const { return kind == Kind::kNull; }
  bool IsScalar() const { return kind == Kind::kScalar; }
  bool IsSequence() const { return kind == Kind::kSequence; }
  bool IsMap() const { return kind == Kind::kMapping; }
};

struct YamlLimits {
  int max_depth = 32;  // Nested collections.
};

// Every document of `text`. InvalidArgument "<source_name>:<line>:<column>:
// invalid YAML: <problem>" (1-based) for a syntax error, an anchor, alias or
// tag, or nesting deeper than the limit.
absl::StatusOr<std::vector<YamlNode>> ParseYamlDocuments(
    absl::string_view text, absl::string_view source_name,
    const YamlLimits& limits = {});

}  // namespace quant

#endif  // QUANT_CORE_RECIPE_YAML_TREE_H_
