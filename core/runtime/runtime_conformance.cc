// The runtime conformance check; see runtime_conformance.h and
// docs/RUNTIME_CONFORMANCE.md for the rules and where they come from.
#include "core/runtime/runtime_conformance.h"

#include <algorithm>
#include <memory>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/file_util.h"
#include "core/base/regex.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/io/tensor_collection.h"
#include "core/model/linear_layers.h"

namespace quant {
namespace {

using json = nlohmann::json;

// Per-layer rules of a large MoE model can take megabytes of config.json.
constexpr size_t kMaxConfigBytes = size_t{64} << 20;

// How a runtime reads one layer.
struct Scheme {
  bool quantized = false;
  int bits = 4;
  int64_t group_size = -1;  // -1: per output row.
  bool symmetric = true;
  bool act_order = false;  // g_idx stored and used.
  bool operator==(const Scheme& o) const {
    return quantized == o.quantized &&
           (!quantized ||
            (bits == o.bits && group_size == o.group_size &&
             symmetric == o.symmetric && act_order == o.act_order));
  }
};

std::string SchemeText(const Scheme& s) {
  if (!s.quantized) return "unquantized";
  return absl::StrCat(s.bits, " bits, group ", s.group_size, ", ",
                      s.symmetric ? "sym" : "asym",
                      s.act_order ? ", act-order" : "");
}

// One runtime layer being checked: the layer and the parts' specs.
struct Planned {
  RuntimeLayerCheck* out;
  std::vector<LinearLayerSpec> parts;
  std::string class_name;  // vLLM's module class, for target matching.
  // vLLM builds it with quant_config=None whatever the config says: a
  // mixture-of-experts router (ReplicatedLinear in Qwen3MoeSparseMoeBlock
  // and MixtralMoE).
  bool never_quantized = false;
};

// A mixture-of-experts block's experts as vLLM builds them: one FusedMoE
// layer named after the experts module, whose w13 holds every expert's gate
// and up (N = 2 x moe_intermediate, K = hidden) and w2 every down, all read
// with one quantization method.
struct PlannedExperts {
  RuntimeLayerCheck* out;
  std::vector<LinearLayerSpec> parts;  // Every expert's gate, up and down.
  int64_t hidden = 0;
  int64_t intermediate = 0;
};

// Patterns compiled once per check: a config's rules are matched against
// every layer.
struct PatternCache {
  // nullptr: the pattern does not compile (reported once per layer that
  // tries it).
  std::map<std::string, std::unique_ptr<Regex>, std::less<>> compiled;
  std::map<std::string, std::string, std::less<>> errors;
};

// Python's re.match: `pattern` anchored at the start of `text` only.
// Patterns come from the checkpoint, so a bad or runaway one is reported.
bool ReMatch(const std::string& pattern, absl::string_view text,
             PatternCache* cache, std::vector<std::string>* problems) {
  auto it = cache->compiled.find(pattern);
  if (it == cache->compiled.end()) {
    absl::StatusOr<std::unique_ptr<Regex>> re =
        Regex::Compile(absl::StrCat("\\A(?:", pattern, ")"));
    if (!re.ok()) {
      cache->errors[pattern] = std::string(re.status().message());
      it = cache->compiled.emplace(pattern, nullptr).first;
    } else {
      it = cache->compiled.emplace(pattern, *std::move(re)).first;
    }
  }
  if (it->second == nullptr) {
    problems->push_back(
        absl::StrCat("pattern \"", pattern,
                     "\" does not compile: ", cache->errors[pattern]));
    return false;
  }
  absl::StatusOr<std::vector<Regex::Match>> matches = it->second->FindAll(text);
  if (!matches.ok()) {
    problems->push_back(std::string(matches.status().message()));
    return false;
  }
  return !matches->empty() && matches->front().first == 0;
}

// compressed-tensors' exact-or-"re:" comparison.
bool EqualOrRegex(const std::string& target, absl::string_view name,
                  PatternCache* cache, std::vector<std::string>* problems) {
  if (absl::StartsWith(target, "re:")) {
    return ReMatch(target.substr(3), name, cache, problems);
  }
  return target == name;
}

// The module prefix of a tensor name: "a.b.qweight" -> "a.b".
std::string ModuleOf(absl::string_view tensor) {
  const size_t dot = tensor.rfind('.');
  return std::string(dot == absl::string_view::npos ? tensor
                                                    : tensor.substr(0, dot));
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// An expected tensor: an integer or a float of any width (loaders copy
// floats into the model's dtype).
struct Expected {
  std::string suffix;
  bool integer = true;
  std::vector<int64_t> shape;  // Empty: any.
  DType exact = DType::kI32;   // For integer tensors.
};

// Checks that `module` stores exactly `expected` (plus a bias when the
// model has one) and nothing else.
void CheckTensors(const TensorHeaders& tensors, const std::string& module,
                  const std::vector<Expected>& expected, bool has_bias,
                  std::vector<std::string>* problems) {
  std::set<std::string> wanted;
  for (const Expected& e : expected) {
    const std::string name = absl::StrCat(module, ".", e.suffix);
    wanted.insert(name);
    auto it = tensors.find(name);
    if (it == tensors.end()) {
      problems->push_back(absl::StrCat(name, " is missing"));
      continue;
    }
    const TensorHeader& t = it->second;
    if (e.integer ? t.dtype != e.exact : !IsFloatingPoint(t.dtype)) {
      problems->push_back(absl::StrCat(
          name, " is ", DTypeName(t.dtype), "; the loader wants ",
          e.integer ? std::string(DTypeName(e.exact)) : "a float type"));
    } else if (!e.shape.empty() && t.shape != e.shape) {
      problems->push_back(absl::StrCat(name, " has shape ", ShapeText(t.shape),
                                       "; the loader "
                                       "wants ",
                                       ShapeText(e.shape)));
    }
  }
  if (has_bias) wanted.insert(module + ".bias");
  const std::string prefix = module + ".";
  for (auto it = tensors.lower_bound(prefix);
       it != tensors.end() && absl::StartsWith(it->first, prefix); ++it) {
    if (it->first.find('.', prefix.size()) != std::string::npos) continue;
    if (wanted.count(it->first) == 0) {
      problems->push_back(
          absl::StrCat(it->first,
                       " is stored but the loader has no parameter for it "
                       "(\"There is no module or parameter named ...\")"));
    }
  }
}

std::vector<Expected> PlainTensors(const LinearLayerSpec& spec) {
  return {{"weight", false, {spec.out_features, spec.in_features}}};
}

// Scale rows: vLLM allocates K // group_size of them (a K the group does
// not divide fails its kernels anyway), transformers' and
// compressed-tensors' modules ceil(K / group_size).
int64_t Groups(const Scheme& s, int64_t k, bool vllm) {
  if (s.group_size <= 0) return 1;
  return vllm ? k / s.group_size : (k + s.group_size - 1) / s.group_size;
}

std::vector<Expected> GptqTensors(const LinearLayerSpec& spec, const Scheme& s,
                                  bool vllm) {
  const int64_t n = spec.out_features, k = spec.in_features;
  const int64_t g = Groups(s, k, vllm);
  std::vector<Expected> out = {
      {"qweight", true, {k * s.bits / 32, n}, DType::kI32},
      {"qzeros", true, {g, n * s.bits / 32}, DType::kI32},
      {"scales", false, {g, n}},
      {"g_idx", true, {k}, DType::kI32}};
  return out;
}

std::vector<Expected> CompressedTensors(const LinearLayerSpec& spec,
                                        const Scheme& s, bool vllm) {
  const int64_t n = spec.out_features, k = spec.in_features;
  const int64_t g = Groups(s, k, vllm);
  // Words of packed codes: vLLM allocates width // (32 / bits);
  // compressed-tensors pads the last word (ceil) and so reads those.
  auto words = [&](int64_t width) {
    return vllm ? width * s.bits / 32 : (width * s.bits + 31) / 32;
  };
  std::vector<Expected> out = {
      {"weight_packed", true, {n, words(k)}, DType::kI32},
      {"weight_scale", false, {n, g}},
      {"weight_shape", true, {2}, DType::kI64}};
  if (!s.symmetric) {
    out.push_back({"weight_zero_point", true, {words(n), g}, DType::kI32});
  }
  if (s.act_order) out.push_back({"weight_g_idx", true, {k}, DType::kI32});
  return out;
}

bool OneOf(int64_t v, std::initializer_list<int64_t> set) {
  return std::find(set.begin(), set.end(), v) != set.end();
}

// vLLM's choose_mp_linear_kernel: the first kernel that can run the layer,
// or empty with every kernel's reason.
std::string ChooseKernel(int capability, bool float16, const Scheme& s,
                         int64_t n, int64_t k,
                         std::vector<std::string>* problems) {
  std::vector<std::string> reasons;
  const bool zero_points = !s.symmetric;
  const bool type_ok = s.bits == 4 || s.bits == 8;
  // Machete (Hopper only).
  if (capability != 90) {
    reasons.push_back("machete: needs compute capability 90");
  } else if (!type_ok) {
    reasons.push_back(absl::StrCat("machete: no ", s.bits, "-bit type"));
  } else if (!OneOf(s.group_size, {-1, 64, 128})) {
    reasons.push_back(absl::StrCat("machete: group size ", s.group_size));
  } else if (k % 64 != 0) {
    reasons.push_back("machete: input features not divisible by 64");
  } else if (n % 128 != 0) {
    reasons.push_back("machete: output features not divisible by 128");
  } else {
    return "machete";
  }
  // Marlin.
  if (capability < 75) {
    reasons.push_back("marlin: needs compute capability 75");
  } else if (!type_ok || (zero_points && s.bits != 4)) {
    reasons.push_back(absl::StrCat("marlin: no ", s.bits, "-bit ",
                                   zero_points ? "zero-point " : "", "type"));
  } else if (!OneOf(s.group_size, {-1, 32, 64, 128})) {
    reasons.push_back(absl::StrCat("marlin: group size ", s.group_size));
  } else if (n % 64 != 0) {
    reasons.push_back(absl::StrCat("marlin: output_size_per_partition = ", n,
                                   " is not divisible by min_thread_n = 64"));
  } else if (k % 128 != 0) {
    reasons.push_back(absl::StrCat("marlin: input_size_per_partition = ", k,
                                   " is not divisible by min_thread_k = 128"));
  } else if (s.group_size > 0 && s.group_size < k && k % s.group_size != 0) {
    reasons.push_back("marlin: group size does not divide the input");
  } else {
    return "marlin";
  }
  // Exllama.
  if (!float16) {
    reasons.push_back("exllama: float16 activations only");
  } else if (zero_points || !type_ok) {
    reasons.push_back(absl::StrCat("exllama: no ", s.bits, "-bit ",
                                   zero_points ? "zero-point " : "", "type"));
  } else if (s.group_size <= 0) {
    reasons.push_back("exllama: needs a group size (not per row)");
  } else if (k % s.group_size != 0) {
    reasons.push_back("exllama: group size does not divide the input");
  } else if (n % (32 / s.bits) != 0) {
    reasons.push_back("exllama: output features not a whole number of words");
  } else {
    return "exllama";
  }
  problems->push_back(absl::StrCat(
      "Failed to find a kernel that can implement the WNA16 linear layer "
      "(N ",
      n, ", K ", k, ", ", SchemeText(s),
      "). Reasons: ", absl::StrJoin(reasons, "; ")));
  return "";
}

// The runtime's layers: vLLM's fused ones, or each module (transformers).
// A mixture-of-experts block adds its router and its experts: for vLLM one
// router layer (never quantized) and one FusedMoE layer in `experts`; for
// transformers, which loads every module on its own, the router and each
// expert's layers as modules of their own.
std::vector<Planned> PlanLayers(const ModelConfig& model, bool fuse,
                                RuntimeCheck* check,
                                std::vector<PlannedExperts>* experts) {
  auto router_spec = [&](int block) {
    LinearLayerSpec router;
    router.block = block;
    router.name = RouterName(model, block);
    router.type = LayerType::kGateProj;
    router.out_features = model.moe->num_experts;
    router.in_features = model.hidden_size;
    return router;
  };
  // Block by block; transformers' modules include the routers and experts.
  std::vector<std::vector<LinearLayerSpec>> blocks(model.num_hidden_layers);
  size_t layer_count = 0;
  for (int b = 0; b < model.num_hidden_layers; ++b) {
    blocks[b] = ListLinearLayers(model, b);
    if (model.IsMoeBlock(b)) {
      if (fuse) {
        layer_count += 2;
      } else {
        blocks[b].push_back(router_spec(b));
        for (LinearLayerSpec& e : ListExpertLayers(model, b)) {
          blocks[b].push_back(std::move(e));
        }
      }
    }
    layer_count += blocks[b].size();
  }
  // Planned entries point into check->layers: no reallocation after this.
  check->layers.reserve(layer_count);
  std::vector<Planned> planned;
  for (int b = 0; b < model.num_hidden_layers; ++b) {
    for (const LinearLayerSpec& spec : blocks[b]) {
      const std::string name =
          fuse ? absl::StrCat(BlockPrefix(spec.block),
                              LayerModuleName(spec.type), ".",
                              FusedLayerName(spec.type))
               : spec.name;
      if (!planned.empty() && planned.back().out->name == name) {
        planned.back().parts.push_back(spec);
        planned.back().out->parts.push_back(spec.name);
        planned.back().out->out_features += spec.out_features;
        continue;
      }
      check->layers.emplace_back();
      RuntimeLayerCheck* out = &check->layers.back();
      out->name = name;
      out->parts = {spec.name};
      out->out_features = spec.out_features;
      out->in_features = spec.in_features;
      std::string class_name = "Linear";
      if (fuse) {
        class_name = FusedLayerName(spec.type) == "qkv_proj"
                         ? "QKVParallelLinear"
                     : FusedLayerName(spec.type) == "gate_up_proj"
                         ? "MergedColumnParallelLinear"
                         : "RowParallelLinear";
      }
      planned.push_back({out, {spec}, class_name});
    }
    if (!fuse || !model.IsMoeBlock(b)) continue;
    const LinearLayerSpec router = router_spec(b);
    check->layers.emplace_back();
    RuntimeLayerCheck* out = &check->layers.back();
    out->name = router.name;
    out->parts = {router.name};
    out->out_features = router.out_features;
    out->in_features = router.in_features;
    planned.push_back({out, {router}, "ReplicatedLinear", true});

    check->layers.emplace_back();
    PlannedExperts e;
    e.out = &check->layers.back();
    e.out->name = ExpertsModuleName(model, b);
    e.hidden = model.hidden_size;
    e.intermediate = model.moe->expert_intermediate_size;
    e.out->out_features = 2 * e.intermediate;
    e.out->in_features = e.hidden;
    e.parts = ListExpertLayers(model, b);
    for (const LinearLayerSpec& part : e.parts) {
      e.out->parts.push_back(part.name);
    }
    experts->push_back(std::move(e));
  }
  return planned;
}

// vLLM's check_moe_marlin_supports_layer: the fused-MoE Marlin kernel takes
// (N, K) = (2 x intermediate, hidden) and (hidden, intermediate) when
// hidden % 128 == 0 and intermediate % max(64, group) == 0, for groups
// -1, 32, 64 and 128 (the models here route with SiLU and weigh outputs
// after the experts, as it also requires).
bool MoeMarlinSupports(int64_t hidden, int64_t intermediate,
                       int64_t group_size) {
  return hidden % 128 == 0 &&
         intermediate % std::max<int64_t>(64, group_size) == 0 &&
         OneOf(group_size, {-1, 32, 64, 128});
}

// What vLLM's MoeWNA16Method (the Triton fused-MoE kernel for GPTQ/AWQ
// weights) refuses or misreads. It halves the group size until it divides
// both hidden and intermediate, asserting it stays >= 32; it takes 4 and 8
// bits; it skips g_idx, so act-order weights would be read in the wrong
// groups.
void CheckMoeWna16(const PlannedExperts& e, const Scheme& s,
                   std::vector<std::string>* problems) {
  if (!OneOf(s.bits, {4, 8})) {
    problems->push_back(absl::StrCat(
        "MoeWNA16 (vLLM's fused-MoE kernel for this config) supports 4 and "
        "8 bits, not ",
        s.bits));
  }
  if (s.group_size <= 0) {
    problems->push_back(
        "MoeWNA16 needs a group size: group_size -1 gives its scales a "
        "negative shape (hidden // -1)");
  } else {
    int64_t g = s.group_size;
    while (g >= 32 && (e.intermediate % g != 0 || e.hidden % g != 0)) g /= 2;
    if (g < 32) {
      problems->push_back(absl::StrCat(
          "MoeWNA16 halves group_size ", s.group_size,
          " until it divides hidden ", e.hidden, " and moe intermediate ",
          e.intermediate, ", and asserts it stays >= 32; it does not"));
    }
  }
  if (s.act_order) {
    problems->push_back(
        "MoeWNA16 skips g_idx, so act-order (desc_act) experts would be "
        "dequantized with the wrong groups");
  }
}

// Checks every expert's tensors with `tensors_of`, reporting at most a few
// problems: 128 experts x 3 layers of the same mistake say nothing more.
template <typename TensorsOf>
void CheckExpertTensors(const TensorHeaders& tensors, const PlannedExperts& e,
                        TensorsOf tensors_of,
                        std::vector<std::string>* problems) {
  constexpr size_t kMaxReported = 6;
  std::vector<std::string> all;
  for (const LinearLayerSpec& part : e.parts) {
    CheckTensors(tensors, part.name, tensors_of(part), part.has_bias, &all);
  }
  for (size_t i = 0; i < all.size() && i < kMaxReported; ++i) {
    problems->push_back(std::move(all[i]));
  }
  if (all.size() > kMaxReported) {
    problems->push_back(absl::StrCat("... and ", all.size() - kMaxReported,
                                     " more tensor problems in its experts"));
  }
}

// Records the experts' scheme; unquantized experts (UnquantizedFusedMoEMethod)
// are checked for their plain weights here.
void RecordExperts(const PlannedExperts& e, const Scheme& s,
                   const TensorHeaders& tensors) {
  RuntimeLayerCheck& out = *e.out;
  out.quantized = s.quantized;
  if (!s.quantized) {
    CheckExpertTensors(tensors, e, PlainTensors, &out.problems);
    if (out.problems.empty()) out.kernel = "unquantized";
    return;
  }
  out.bits = s.bits;
  out.group_size = s.group_size;
  out.symmetric = s.symmetric;
  out.act_order = s.act_order;
}

// Records `s` as the layer's scheme. An unquantized layer's plain weights
// are checked here, which settles it: false then.
bool RecordScheme(const Planned& p, const Scheme& s,
                  const TensorHeaders& tensors) {
  RuntimeLayerCheck& out = *p.out;
  out.quantized = s.quantized;
  if (!s.quantized) {
    for (const LinearLayerSpec& part : p.parts) {
      CheckTensors(tensors, part.name, PlainTensors(part), part.has_bias,
                   &out.problems);
    }
    if (out.problems.empty()) out.kernel = "unquantized";
    return false;
  }
  out.bits = s.bits;
  out.group_size = s.group_size;
  out.symmetric = s.symmetric;
  out.act_order = s.act_order;
  return true;
}

// A JSON integer field or nullopt; `problems` says when it has another type.
std::optional<int64_t> IntField(const json& o, const char* key,
                                std::vector<std::string>* problems,
                                const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (!it->is_number_integer()) {
    problems->push_back(absl::StrCat(where, key, " must be an integer"));
    return std::nullopt;
  }
  return it->get<int64_t>();
}

std::optional<bool> BoolField(const json& o, const char* key,
                              std::vector<std::string>* problems,
                              const std::string& where) {
  auto it = o.find(key);
  if (it == o.end() || it->is_null()) return std::nullopt;
  if (!it->is_boolean()) {
    problems->push_back(absl::StrCat(where, key, " must be true or false"));
    return std::nullopt;
  }
  return it->get<bool>();
}

// ---- GPTQ ----

struct DynamicRule {
  std::string key;
  bool negative = false;
  std::string pattern;
  json overrides;
};

// GPTQ packs K along 32-bit words: false, with the problem, when a layer's
// inputs do not fill whole words.
bool FillsWords(const LinearLayerSpec& part, int bits,
                std::vector<std::string>* problems) {
  if ((part.in_features * bits) % 32 == 0) return true;
  problems->push_back(absl::StrCat(part.name, ": ", part.in_features,
                                   " inputs do not fill whole ", bits,
                                   "-bit words"));
  return false;
}

// A positive dynamic rule's overrides of bits, group_size, desc_act, sym.
void ApplyDynamicOverrides(const DynamicRule& rule, Scheme* s,
                           std::vector<std::string>* problems) {
  const std::string rw = absl::StrCat("dynamic \"", rule.key, "\": ");
  if (auto b = IntField(rule.overrides, "bits", problems, rw)) s->bits = *b;
  if (auto g = IntField(rule.overrides, "group_size", problems, rw)) {
    s->group_size = *g == 0 ? -1 : *g;
  }
  if (auto d = BoolField(rule.overrides, "desc_act", problems, rw)) {
    s->act_order = *d;
  }
  if (auto y = BoolField(rule.overrides, "sym", problems, rw)) {
    s->symmetric = *y;
  }
  if (s->group_size == -1) s->act_order = false;
}

// vLLM's GPTQ configs for a FusedMoE layer (gptq_marlin.py, gptq.py,
// moe_wna16.py). gptq_marlin: GPTQMarlinMoEMethod when
// check_moe_marlin_supports_layer holds for the config's group size, with
// the dynamic rule matching the experts module applied (a negative one:
// unquantized experts), else MoeWNA16 built from the config alone. gptq
// (the legacy method): always MoeWNA16, from bits and group_size with sym
// forced true and no dynamic rule. Which experts are quantized is never
// read from the stored tensors, unlike linear layers.
void CheckGptqExperts(const PlannedExperts& e, const Scheme& base,
                      bool marlin_method, const std::vector<DynamicRule>& rules,
                      PatternCache* patterns, const TensorHeaders& tensors) {
  RuntimeLayerCheck& out = *e.out;
  std::vector<std::string>& lp = out.problems;
  const DynamicRule* applied = nullptr;
  for (const DynamicRule& rule : rules) {
    if (ReMatch(rule.pattern, out.name, patterns, &lp)) {
      applied = &rule;
      break;
    }
  }
  Scheme s = base;
  std::string kernel;
  if (marlin_method &&
      MoeMarlinSupports(e.hidden, e.intermediate, base.group_size)) {
    if (applied != nullptr && applied->negative) {
      RecordExperts(e, Scheme(), tensors);
      return;
    }
    if (applied != nullptr) ApplyDynamicOverrides(*applied, &s, &lp);
    if (!s.symmetric || !OneOf(s.bits, {4, 8})) {
      lp.push_back(
          absl::StrCat("GPTQMarlinMoEMethod: unsupported bits=", s.bits,
                       ", sym=", s.symmetric ? "True" : "False"));
    } else if (!MoeMarlinSupports(e.hidden, e.intermediate, s.group_size)) {
      lp.push_back(absl::StrCat(
          "dynamic \"", applied->key, "\" gives the experts group size ",
          s.group_size,
          " but vLLM chose the fused-MoE Marlin kernel from the config's ",
          base.group_size, ", which that group does not fit"));
    }
    kernel = "marlin_moe";
  } else {
    // MoeWNA16 builds the experts from the config's bits and group_size;
    // the gptq method also forces sym true, ignoring zero points.
    if (applied != nullptr) {
      Scheme with_rule = base;
      if (!applied->negative) ApplyDynamicOverrides(*applied, &with_rule, &lp);
      if (applied->negative || !(with_rule == base)) {
        lp.push_back(absl::StrCat(
            "dynamic rule \"", applied->key, "\" matches ", out.name,
            " but vLLM's MoeWNA16 fused-MoE method (used for ",
            marlin_method ? "experts the MoE Marlin kernel cannot take"
                          : "every GPTQ config that is not gptq_marlin",
            ") never applies dynamic rules: it reads the experts as ",
            SchemeText(base)));
      }
    }
    if (!marlin_method && !base.symmetric) {
      lp.push_back(
          "vLLM's gptq method builds MoeWNA16 with sym forced true: the "
          "experts' zero points would be ignored");
    }
    CheckMoeWna16(e, s, &lp);
    kernel = "moe_wna16";
  }
  RecordExperts(e, s, tensors);
  for (const LinearLayerSpec& part : e.parts) {
    if (!FillsWords(part, s.bits, &lp)) return;
  }
  CheckExpertTensors(
      tensors, e,
      [&](const LinearLayerSpec& part) { return GptqTensors(part, s, true); },
      &lp);
  if (lp.empty()) out.kernel = kernel;
}

void CheckGptq(const json& q, const ModelConfig& model,
               const TensorHeaders& tensors, bool vllm, bool float16,
               RuntimeCheck* check) {
  std::vector<std::string>& problems = check->problems;
  const std::string where = "quantization_config.";
  std::optional<int64_t> bits = IntField(q, "bits", &problems, where);
  std::optional<int64_t> group = IntField(q, "group_size", &problems, where);
  std::optional<bool> desc_act = BoolField(q, "desc_act", &problems, where);
  std::optional<bool> sym = BoolField(q, "sym", &problems, where);
  for (const auto& [key, present] :
       {std::pair<const char*, bool>{"bits", bits.has_value()},
        {"group_size", group.has_value()},
        {"desc_act", desc_act.has_value()}}) {
    if (!present) {
      problems.push_back(absl::StrCat("Cannot find any of ['", key,
                                      "'] in the model's quantization "
                                      "config."));
    }
  }
  if (!problems.empty()) return;
  if (!vllm) {
    if (!OneOf(*bits, {2, 3, 4, 8})) {
      problems.push_back(absl::StrCat(
          "transformers: Only support quantization to [2,3,4,8] bits but "
          "found ",
          *bits));
    }
    if (*group != -1 && *group <= 0) {
      problems.push_back(
          "transformers: group_size must be greater than 0 or equal to -1");
    }
    if (auto d = q.find("damp_percent");
        d != q.end() && d->is_number() &&
        !(d->get<double>() > 0 && d->get<double>() < 1)) {
      problems.push_back("transformers: damp_percent must between 0 and 1.");
    }
  }
  const bool marlin_method =
      vllm && sym.has_value() && *sym && OneOf(*bits, {4, 8}) &&
      OneOf(*group, {-1, 32, 64, 128}) && check->compute_capability >= 75;
  check->method = !vllm ? "gptq" : marlin_method ? "gptq_marlin" : "gptq";
  if (vllm && !marlin_method) {
    if (!OneOf(*bits, {2, 3, 4, 8})) {
      problems.push_back(absl::StrCat(
          "Currently, only 2/3/4/8-bit weight quantization is supported for "
          "GPTQ, but got ",
          *bits, " bits."));
    }
    if (!float16) {
      problems.push_back(absl::StrCat(
          "torch.", check->activation_dtype,
          " is not supported for quantization method gptq (the config is "
          "not gptq_marlin-compatible, so vLLM falls back to gptq, which "
          "runs float16 only); serve with --dtype float16"));
    }
  }
  if (q.contains("checkpoint_format") && q["checkpoint_format"] != "gptq") {
    problems.push_back(
        "checkpoint_format must be \"gptq\" (v1) for these checks");
  }
  if (auto lm = q.find("lm_head"); lm != q.end() && lm->is_boolean() &&
                                   lm->get<bool>() &&
                                   !tensors.count("lm_head.qweight")) {
    problems.push_back("\"lm_head\": true but lm_head is not stored packed");
  }
  PatternCache patterns;
  std::vector<DynamicRule> rules;
  if (auto d = q.find("dynamic"); d != q.end() && !d->is_null()) {
    if (!d->is_object()) {
      problems.push_back("quantization_config.dynamic must be an object");
    } else {
      for (auto it = d->begin(); it != d->end(); ++it) {
        DynamicRule rule;
        rule.key = it.key();
        rule.negative = absl::StartsWith(rule.key, "-:");
        rule.pattern = rule.key;
        if (absl::StartsWith(rule.pattern, "-:") ||
            absl::StartsWith(rule.pattern, "+:")) {
          rule.pattern = rule.pattern.substr(2);
        }
        rule.overrides = it.value().is_object() ? it.value() : json::object();
        rules.push_back(std::move(rule));
      }
    }
  }
  // Which modules count as quantized: the config's list, or (as vLLM does
  // without one) every module that stores an integer tensor.
  std::vector<std::string> quantized_modules;
  const auto listed = q.find("modules_in_block_to_quantize");
  const bool has_list = listed != q.end() && !listed->is_null();
  if (has_list) {
    std::vector<const json*> stack = {&*listed};
    while (!stack.empty()) {
      const json* j = stack.back();
      stack.pop_back();
      if (j->is_string()) quantized_modules.push_back(j->get<std::string>());
      if (j->is_array()) {
        for (const json& e : *j) stack.push_back(&e);
      }
    }
  }
  // Without the list, the modules storing integer tensors: a set, as a
  // large MoE checkpoint has tens of thousands of them.
  std::set<std::string, std::less<>> integer_modules;
  if (!has_list) {
    for (const auto& [name, t] : tensors) {
      if (!IsFloatingPoint(t.dtype)) integer_modules.insert(ModuleOf(name));
    }
  }
  auto stored_quantized = [&](const std::string& part) {
    if (integer_modules.count(part) != 0) return true;
    return std::any_of(
        quantized_modules.begin(), quantized_modules.end(),
        [&](const std::string& m) { return absl::StrContains(part, m); });
  };
  const Scheme base{true, static_cast<int>(*bits), *group == 0 ? -1 : *group,
                    !sym.has_value() || *sym, *desc_act && *group != -1};
  std::vector<PlannedExperts> experts;
  std::vector<Planned> planned = PlanLayers(model, vllm, check, &experts);
  for (const PlannedExperts& e : experts) {
    CheckGptqExperts(e, base, marlin_method, rules, &patterns, tensors);
  }
  for (Planned& p : planned) {
    RuntimeLayerCheck& out = *p.out;
    std::vector<std::string>& lp = out.problems;
    if (p.never_quantized) {
      RecordScheme(p, Scheme(), tensors);
      continue;
    }
    // Quantized parts, as the tensors (or the module list) say.
    int quantized_parts = 0;
    for (const LinearLayerSpec& part : p.parts) {
      quantized_parts += stored_quantized(part.name) ? 1 : 0;
    }
    if (quantized_parts != 0 &&
        quantized_parts != static_cast<int>(p.parts.size())) {
      lp.push_back(absl::StrCat(
          "Detected some but not all shards of ", out.name,
          " are quantized. All shards of fused layers to have the same "
          "precision."));
      continue;
    }
    Scheme s = base;
    s.quantized = quantized_parts != 0;
    const DynamicRule* applied = nullptr;
    for (const DynamicRule& rule : rules) {
      if (ReMatch(rule.pattern, out.name, &patterns, &lp)) {
        applied = &rule;
        break;
      }
    }
    if (applied != nullptr && applied->negative) s.quantized = false;
    if (applied != nullptr && !applied->negative) {
      ApplyDynamicOverrides(*applied, &s, &lp);
    }
    // A rule written for a part, which vLLM never sees (it matches the
    // fused layer's name only), is a problem when it asks for something
    // other than what the fused layer gets.
    if (vllm && p.parts.size() > 1) {
      for (const DynamicRule& rule : rules) {
        if (&rule == applied) continue;
        std::vector<std::string> ignored;
        const LinearLayerSpec* part = nullptr;
        for (const LinearLayerSpec& candidate : p.parts) {
          if (ReMatch(rule.pattern, candidate.name, &patterns, &ignored)) {
            part = &candidate;
            break;
          }
        }
        if (part == nullptr ||
            ReMatch(rule.pattern, out.name, &patterns, &ignored)) {
          continue;
        }
        bool differs = rule.negative ? s.quantized : !s.quantized;
        if (!rule.negative && s.quantized) {
          const json& o = rule.overrides;
          auto int_differs = [&](const char* key, int64_t have) {
            if (!o.contains(key) || !o[key].is_number_integer()) return false;
            const int64_t want = o[key].get<int64_t>();
            return (want == 0 ? -1 : want) != have;  // 0: per row, as -1.
          };
          auto bool_differs = [&](const char* key, bool have) {
            return o.contains(key) && o[key].is_boolean() &&
                   o[key].get<bool>() != have;
          };
          differs = int_differs("bits", s.bits) ||
                    int_differs("group_size", s.group_size) ||
                    bool_differs("sym", s.symmetric) ||
                    bool_differs("desc_act", s.act_order);
        }
        if (differs) {
          lp.push_back(absl::StrCat(
              "dynamic rule \"", rule.key, "\" matches ", part->name,
              " but not ", out.name,
              ", the fused layer vLLM matches rules against: vLLM reads it "
              "as ",
              SchemeText(s)));
        }
      }
    }
    if (!RecordScheme(p, s, tensors)) continue;
    const int64_t n = out.out_features, k = out.in_features;
    std::string kernel;
    if (!vllm) {
      kernel = "torch";
    } else if (check->method == "gptq_marlin") {
      if (!s.symmetric || !OneOf(s.bits, {4, 8})) {
        lp.push_back(
            absl::StrCat("Unsupported quantization config: bits=", s.bits,
                         ", sym=", s.symmetric ? "True" : "False"));
      } else if (!OneOf(s.group_size, {-1, 32, 64, 128})) {
        lp.push_back(
            absl::StrCat("Marlin does not support group_size = ", s.group_size,
                         ". Only group_sizes = [-1, 32, 64, 128] "
                         "are supported."));
      } else {
        kernel = ChooseKernel(check->compute_capability, float16, s, n, k, &lp);
      }
    } else {
      if (s.group_size > 0 && k % s.group_size != 0) {
        lp.push_back(
            "The input size is not aligned with the quantized weight shape.");
      } else if (n % (32 / std::gcd(32, s.bits)) != 0) {
        lp.push_back(
            "The output size is not aligned with the quantized weight "
            "shape.");
      } else {
        kernel = "gptq_gemm";
      }
    }
    for (const LinearLayerSpec& part : p.parts) {
      if (!FillsWords(part, s.bits, &lp)) continue;
      CheckTensors(tensors, part.name, GptqTensors(part, s, vllm),
                   part.has_bias, &lp);
    }
    if (lp.empty()) out.kernel = kernel;
  }
}

// ---- compressed-tensors ----

struct CtGroup {
  std::string name;
  std::vector<std::string> targets;
  Scheme scheme;
  std::string unsupported;  // Why vLLM has no scheme for it; empty: WNA16.
};

std::optional<CtGroup> ParseCtGroup(const std::string& name, const json& g,
                                    const std::string& format,
                                    std::vector<std::string>* problems) {
  const std::string where = absl::StrCat("config_groups.", name, ".");
  CtGroup group;
  group.name = name;
  if (!g.is_object() || !g.contains("targets") || !g["targets"].is_array()) {
    problems->push_back(absl::StrCat(where, "targets must be a list"));
    return std::nullopt;
  }
  for (const json& t : g["targets"]) {
    if (!t.is_string()) {
      problems->push_back(absl::StrCat(where, "targets holds a non-string"));
      return std::nullopt;
    }
    group.targets.push_back(t.get<std::string>());
  }
  const json* w = g.contains("weights") ? &g["weights"] : nullptr;
  if (w == nullptr || w->is_null()) {
    group.scheme.quantized = false;
    return group;
  }
  if (!w->is_object()) {
    problems->push_back(absl::StrCat(where, "weights must be an object"));
    return std::nullopt;
  }
  const std::string ww = where + "weights.";
  Scheme& s = group.scheme;
  s.quantized = true;
  std::optional<int64_t> bits = IntField(*w, "num_bits", problems, ww);
  s.bits = static_cast<int>(bits.value_or(8));
  std::optional<int64_t> group_size = IntField(*w, "group_size", problems, ww);
  s.symmetric = BoolField(*w, "symmetric", problems, ww).value_or(true);
  std::string strategy = w->value("strategy", json()).is_string()
                             ? (*w)["strategy"].get<std::string>()
                             : "";
  if (strategy.empty()) {
    strategy = !group_size.has_value() ? "tensor"
               : *group_size > 0       ? "group"
                                       : "channel";
  }
  if (strategy == "group" && (!group_size.has_value() || *group_size <= 0)) {
    problems->push_back(absl::StrCat(
        ww,
        "strategy group requires group_size to be set to a positive "
        "value"));
    return std::nullopt;
  }
  s.group_size = strategy == "group" ? *group_size : -1;
  std::string actorder;
  if (auto a = w->find("actorder"); a != w->end() && !a->is_null()) {
    if (a->is_boolean()) {
      actorder = a->get<bool>() ? "group" : "";
    } else if (a->is_string()) {
      actorder = a->get<std::string>();
      if (actorder == "dynamic") actorder = "group";
      if (actorder == "static") actorder = "weight";
    }
  }
  if (!actorder.empty() && strategy != "group") {
    problems->push_back(
        absl::StrCat(ww,
                     "Must use group quantization strategy in order to apply "
                     "activation ordering"));
    return std::nullopt;
  }
  s.act_order = actorder == "group";
  const std::string type = w->value("type", json("int")).is_string()
                               ? (*w)["type"].get<std::string>()
                               : "";
  const std::string group_format = g.value("format", json()).is_string()
                                       ? g["format"].get<std::string>()
                                       : format;
  if (g.contains("input_activations") && !g["input_activations"].is_null()) {
    group.unsupported = "activations are quantized too";
  } else if (type != "int") {
    group.unsupported = absl::StrCat("weights of type \"", type, "\"");
  } else if (BoolField(*w, "dynamic", problems, ww).value_or(false)) {
    group.unsupported = "dynamic weights";
  } else if (strategy != "group" && strategy != "channel") {
    group.unsupported = absl::StrCat("strategy \"", strategy, "\"");
  } else if (group_format != "pack-quantized") {
    group.unsupported = absl::StrCat("format \"", group_format, "\"");
  } else if (!VllmCompressedTensorsTakesBits(s.bits)) {
    group.unsupported = absl::StrCat("Unsupported num_bits = ", s.bits,
                                     " (WNA16 supports 4 and 8)");
  }
  return group;
}

void CheckCompressedTensors(const json& q, const ModelConfig& model,
                            const TensorHeaders& tensors, bool vllm,
                            bool float16, RuntimeCheck* check) {
  std::vector<std::string>& problems = check->problems;
  check->method = "compressed-tensors";
  const std::string format = q.value("format", json()).is_string()
                                 ? q["format"].get<std::string>()
                                 : "";
  std::vector<CtGroup> groups;
  if (!q.contains("config_groups") || !q["config_groups"].is_object()) {
    problems.push_back("quantization_config.config_groups must be an object");
    return;
  }
  for (auto it = q["config_groups"].begin(); it != q["config_groups"].end();
       ++it) {
    std::optional<CtGroup> g =
        ParseCtGroup(it.key(), it.value(), format, &problems);
    if (g.has_value()) groups.push_back(std::move(*g));
  }
  std::vector<std::string> ignore;
  if (auto i = q.find("ignore"); i != q.end() && !i->is_null()) {
    if (!i->is_array()) {
      problems.push_back("quantization_config.ignore must be a list");
    } else {
      for (const json& e : *i) {
        if (e.is_string()) ignore.push_back(e.get<std::string>());
      }
    }
  }
  if (!problems.empty()) return;
  PatternCache patterns;
  auto ignored = [&](absl::string_view name, std::vector<std::string>* p) {
    return std::any_of(ignore.begin(), ignore.end(), [&](const std::string& e) {
      return EqualOrRegex(e, name, &patterns, p);
    });
  };
  // The group of the first target matching `name` (exact or "re:").
  auto by_name = [&](absl::string_view name,
                     std::vector<std::string>* p) -> const CtGroup* {
    for (const CtGroup& g : groups) {
      for (const std::string& t : g.targets) {
        if (EqualOrRegex(t, name, &patterns, p)) return &g;
      }
    }
    return nullptr;
  };
  auto by_class = [&](const std::string& class_name,
                      std::vector<std::string>* p) -> const CtGroup* {
    for (const CtGroup& g : groups) {
      for (const std::string& t : g.targets) {
        if (absl::StartsWith(t, "re:")
                ? ReMatch(t.substr(3), class_name, &patterns, p)
                : absl::StrContains(absl::AsciiStrToLower(class_name),
                                    absl::AsciiStrToLower(t))) {
          return &g;
        }
      }
    }
    return nullptr;
  };
  std::vector<PlannedExperts> experts;
  std::vector<Planned> planned = PlanLayers(model, vllm, check, &experts);
  // vLLM's compressed-tensors FusedMoE (compressed_tensors_moe.py): an
  // experts module in "ignore" is unquantized; otherwise the scheme is the
  // config group targeting "Linear" (not the experts' own names), WNA16
  // only, on the fused-MoE Marlin kernel when check_moe_marlin_supports_layer
  // holds, else the Triton WNA16 one, which refuses group act-order.
  for (const PlannedExperts& e : experts) {
    RuntimeLayerCheck& out = *e.out;
    std::vector<std::string>& lp = out.problems;
    if (ignored(out.name, &lp)) {
      RecordExperts(e, Scheme(), tensors);
      continue;
    }
    const CtGroup* group = nullptr;
    for (const CtGroup& g : groups) {
      if (std::find(g.targets.begin(), g.targets.end(), "Linear") !=
          g.targets.end()) {
        group = &g;
        break;
      }
    }
    if (group == nullptr) {
      lp.push_back(
          "vLLM takes a FusedMoE layer's scheme from the config group "
          "targeting \"Linear\", and no group does");
      continue;
    }
    if (!group->scheme.quantized || !group->unsupported.empty()) {
      lp.push_back(absl::StrCat(
          "Unsupported FusedMoe scheme (config group ", group->name, ": ",
          group->unsupported.empty() ? "no weights" : group->unsupported, ")"));
      continue;
    }
    const Scheme& s = group->scheme;
    for (const LinearLayerSpec& part : e.parts) {
      const CtGroup* own = by_name(part.name, &lp);
      if (own != nullptr && !(own->scheme == s)) {
        lp.push_back(absl::StrCat(
            part.name, " is in config group ", own->name, " (",
            SchemeText(own->scheme), ") but vLLM reads all of ", out.name,
            " with group ", group->name, " (", SchemeText(s), ")"));
        break;
      }
    }
    // Only vLLM's plan has FusedMoE layers (transformers checks experts as
    // modules), so the kernel is always one of vLLM's.
    std::string kernel = "wna16_moe";
    if (MoeMarlinSupports(e.hidden, e.intermediate, s.group_size)) {
      kernel = "marlin_moe";
      if (!s.symmetric && s.bits != 4) {
        lp.push_back(absl::StrCat("the fused-MoE Marlin kernel has no ", s.bits,
                                  "-bit zero-point type"));
      }
    } else if (s.act_order) {
      lp.push_back("WNA16MoE is not supported with actorder=group/dynamic.");
    }
    RecordExperts(e, s, tensors);
    CheckExpertTensors(
        tensors, e,
        [&](const LinearLayerSpec& part) {
          return CompressedTensors(part, s, vllm);
        },
        &lp);
    if (lp.empty()) out.kernel = kernel;
  }
  for (Planned& p : planned) {
    RuntimeLayerCheck& out = *p.out;
    std::vector<std::string>& lp = out.problems;
    if (p.never_quantized) {
      RecordScheme(p, Scheme(), tensors);
      continue;
    }
    bool is_ignored = ignored(out.name, &lp);
    if (!is_ignored && p.parts.size() > 1) {
      size_t count = 0;
      for (const LinearLayerSpec& part : p.parts) {
        count += ignored(part.name, &lp) ? 1 : 0;
      }
      if (count != 0 && count != p.parts.size()) {
        lp.push_back(
            absl::StrCat("Found a different quantization schemes for [",
                         absl::StrJoin(out.parts, ", "), "] in ", out.name,
                         ". vLLM requires all to use the same scheme."));
        continue;
      }
      is_ignored = count != 0;
    }
    const CtGroup* group = nullptr;
    if (!is_ignored) {
      group = by_name(out.name, &lp);
      if (group == nullptr) group = by_class(p.class_name, &lp);
      if (group == nullptr && p.parts.size() > 1) {
        std::vector<const CtGroup*> per_part;
        for (const LinearLayerSpec& part : p.parts) {
          per_part.push_back(by_name(part.name, &lp));
        }
        if (std::find(per_part.begin(), per_part.end(), nullptr) ==
            per_part.end()) {
          group = per_part.front();
        }
      }
      if (group == nullptr) {
        lp.push_back(absl::StrCat("Unable to find matching target for ",
                                  out.name,
                                  " in the compressed-tensors config."));
        continue;
      }
      // vLLM reads every part with the scheme it found for the layer; a
      // part that a config group gives another scheme is misread.
      if (vllm && p.parts.size() > 1) {
        for (const LinearLayerSpec& part : p.parts) {
          const CtGroup* own = by_name(part.name, &lp);
          if (own != nullptr && !(own->scheme == group->scheme)) {
            lp.push_back(absl::StrCat(part.name, " is in config group ",
                                      own->name, " (", SchemeText(own->scheme),
                                      ") but vLLM reads all of ", out.name,
                                      " with group ", group->name, " (",
                                      SchemeText(group->scheme), ")"));
          }
        }
      }
    }
    Scheme s;
    s.quantized = group != nullptr && group->scheme.quantized;
    if (s.quantized) s = group->scheme;
    if (s.quantized && vllm && !group->unsupported.empty()) {
      lp.push_back(absl::StrCat(
          "No compressed-tensors compatible scheme was found (config group ",
          group->name, ": ", group->unsupported, ")."));
      continue;
    }
    if (!RecordScheme(p, s, tensors)) continue;
    std::string kernel = "torch";
    if (vllm) {
      kernel = ChooseKernel(check->compute_capability, float16, s,
                            out.out_features, out.in_features, &lp);
    }
    for (const LinearLayerSpec& part : p.parts) {
      CheckTensors(tensors, part.name, CompressedTensors(part, s, vllm),
                   part.has_bias, &lp);
    }
    if (lp.empty()) out.kernel = kernel;
  }
}

}  // namespace

bool VllmCompressedTensorsTakesBits(int bits) { return bits == 4 || bits == 8; }

const char* TargetRuntimeName(TargetRuntime runtime) {
  return runtime == TargetRuntime::kVllm ? "vllm" : "transformers";
}

std::optional<TargetRuntime> TargetRuntimeFromName(absl::string_view name) {
  if (name == "vllm") return TargetRuntime::kVllm;
  if (name == "transformers") return TargetRuntime::kTransformers;
  return std::nullopt;
}

bool RuntimeCheck::loads() const { return AllProblems().empty(); }

std::vector<std::string> RuntimeCheck::AllProblems() const {
  std::vector<std::string> all = problems;
  for (const RuntimeLayerCheck& l : layers) {
    for (const std::string& p : l.problems) {
      all.push_back(absl::StrCat(l.name, ": ", p));
    }
  }
  return all;
}

RuntimeCheck CheckRuntimeConformance(const json& config_json,
                                     const ModelConfig& model,
                                     const TensorHeaders& tensors,
                                     const RuntimeCheckOptions& options) {
  RuntimeCheck check;
  check.runtime = options.runtime;
  const bool vllm = options.runtime == TargetRuntime::kVllm;
  check.compute_capability = vllm ? options.compute_capability : 0;
  // vLLM's --dtype auto: bfloat16 stays, float16 and float32 (cast down)
  // run as float16.
  check.activation_dtype =
      model.torch_dtype == "bfloat16" ? "bfloat16" : "float16";
  const bool float16 = check.activation_dtype == "float16";
  const json* q = nullptr;
  if (config_json.is_object() && config_json.contains("quantization_config")) {
    q = &config_json["quantization_config"];
  }
  if (q == nullptr || q->is_null()) {
    check.method = "none";
    std::vector<PlannedExperts> experts;
    for (const Planned& p : PlanLayers(model, vllm, &check, &experts)) {
      RecordScheme(p, Scheme(), tensors);
    }
    for (const PlannedExperts& e : experts) {
      RecordExperts(e, Scheme(), tensors);
    }
    return check;
  }
  if (!q->is_object()) {
    check.problems.push_back("quantization_config must be an object");
    return check;
  }
  const std::string method = q->value("quant_method", json()).is_string()
                                 ? (*q)["quant_method"].get<std::string>()
                                 : "";
  if (absl::AsciiStrToLower(method) == "gptq") {
    CheckGptq(*q, model, tensors, vllm, float16, &check);
  } else if (method == "compressed-tensors") {
    CheckCompressedTensors(*q, model, tensors, vllm, float16, &check);
  } else {
    check.method = method;
    check.problems.push_back(absl::StrCat(
        "quant_method \"", method,
        "\": this check knows \"gptq\" and \"compressed-tensors\""));
  }
  return check;
}

absl::StatusOr<RuntimeCheck> CheckCheckpointRuntimeConformance(
    const std::string& dir, const RuntimeCheckOptions& options,
    FileSystem* fs) {
  const std::string path = JoinPath(dir, "config.json");
  QUANT_ASSIGN_OR_RETURN(const std::string text,
                         fs->ReadFile(path, kMaxConfigBytes));
  QUANT_ASSIGN_OR_RETURN(const json config, ParseJsonFile(text, path));
  QUANT_ASSIGN_OR_RETURN(const ModelConfig model, ParseModelConfig(text, path));
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<TensorCollection> collection,
                         TensorCollection::Open(dir, {}, fs));
  TensorHeaders headers;
  for (const TensorCollection::Entry& e : collection->Entries()) {
    headers[e.info->name] = {e.info->dtype, e.info->shape};
  }
  return CheckRuntimeConformance(config, model, headers, options);
}

json RuntimeCheckToJson(const RuntimeCheck& check) {
  json out = {{"runtime", TargetRuntimeName(check.runtime)},
              {"method", check.method},
              {"loads", check.loads()},
              {"problems", check.AllProblems()}};
  if (check.runtime == TargetRuntime::kVllm) {
    out["compute_capability"] = check.compute_capability;
    out["activation_dtype"] = check.activation_dtype;
  }
  json kernels = json::object();
  json layers = json::array();
  for (const RuntimeLayerCheck& l : check.layers) {
    const std::string kernel = l.kernel.empty() ? "fails" : l.kernel;
    kernels[kernel] = kernels.value(kernel, 0) + 1;
    json layer = {{"name", l.name},           {"parts", l.parts},
                  {"n", l.out_features},      {"k", l.in_features},
                  {"quantized", l.quantized}, {"kernel", l.kernel},
                  {"problems", l.problems}};
    if (l.quantized) {
      layer["bits"] = l.bits;
      layer["group_size"] = l.group_size;
      layer["symmetric"] = l.symmetric;
      layer["act_order"] = l.act_order;
    }
    layers.push_back(std::move(layer));
  }
  out["kernels"] = std::move(kernels);
  out["layers"] = std::move(layers);
  return out;
}

std::string FormatRuntimeCheck(const RuntimeCheck& check) {
  const std::vector<std::string> problems = check.AllProblems();
  std::string out = absl::StrCat(TargetRuntimeName(check.runtime), ": ",
                                 problems.empty() ? "loads" : "would NOT load",
                                 " (method ", check.method);
  if (check.runtime == TargetRuntime::kVllm) {
    absl::StrAppend(&out, ", ", check.activation_dtype,
                    " activations, compute capability ",
                    check.compute_capability);
  }
  absl::StrAppend(&out, ")\n");
  std::map<std::string, int> kernels;
  for (const RuntimeLayerCheck& l : check.layers) {
    if (!l.kernel.empty()) ++kernels[l.kernel];
  }
  for (const auto& [kernel, count] : kernels) {
    absl::StrAppend(&out, "  ", count, " layer", count == 1 ? "" : "s", " on ",
                    kernel, "\n");
  }
  for (const std::string& p : problems) absl::StrAppend(&out, "  ! ", p, "\n");
  return out;
}

}  // namespace quant
