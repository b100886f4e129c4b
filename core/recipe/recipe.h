// The quantization recipe: what to quantize, how, on which calibration split,
// and which end-to-end gates a release must pass. A plain C++ mirror of
// quant.v1.Recipe (proto/quant/v1/recipe.proto) with the same field names, so
// that the service converts proto <-> struct mechanically; core/ never sees
// protobuf.
//
// Recipe files are YAML (JSON is YAML too). The keys are those of the struct
// below, except that damp.auto_grid is spelled `damp_grid` at the top level:
//
//   method: gptq            # rtn | gptq | awq
//   bits: 4                 # 2 | 3 | 4 | 8
//   group_size: 128         # 0 = one group per output row
//   grid: sym               # sym | sym-restricted | asym
//   damp: 0.01              # a number in [0, 1), or auto
//   damp_grid: [0.001, ...] # the candidates of damp: auto
//   act_order: true
//   static_groups: false
//   propagation: sequential # sequential | independent
//   calibration: {samples, seq_len, heldout_fraction, heldout_count,
//                 heldout_samples, seed, packing: concatenate | per-document,
//                 chat_template, system_prompt, add_generation_prompt,
//                 sources: [{file, sha256, weight}, ...]}
//   ignore: ["lm_head"]     # full-match regexes of layers kept unquantized
//   overrides:              # per-layer settings, see LayerOverride
//     - match: "model\\.layers\\.0\\..*down_proj"
//       bits: 8
//   gates: {max_ppl_ratio, max_mean_kl, min_top1_agreement, compare_to,
//           max_ppl_ratio_vs_previous, tasks, min_task_accuracy_ratio,
//           runtime, max_starved_experts}
//   format: gptq            # gptq | compressed-tensors
//   awq_alpha_grid: [0, 0.05, ...]
//   awq_clip_search: false
//   mixed_precision: {average_bits: 4.5, bits: [3, 4, 8], group_sizes: [128],
//                     keep_float: false}
//   moe: {routing: natural, min_tokens_per_expert: 0,   # mixture-of-experts
//         on_starved_expert: rtn}                     # models, see
//         MoeCalibration
//
// The defaults are the member initialisers below and nowhere else.
//
// Validation rules (ValidateRecipe; ParseRecipe applies them too):
// - bits in {2, 3, 4, 8}; group_size 0 or a positive multiple of 8 (every
//   GPTQ / compressed-tensors kernel packs at least 8 codes per 32-bit word
//   along K, and no runtime ships groups that split a word; whether a given
//   layer's K is divisible is a per-layer packing matter, not a recipe error).
// - damp and every damp_grid entry in [0, 1); awq_alpha_grid entries in
//   [0, 1]; grids that are used must be non-empty.
// - calibration: samples and seq_len in [1, 2^20]; heldout_fraction in
//   [0, 1); heldout_count, heldout_samples >= 0; a held-out split must exist
//   (heldout_fraction > 0 or heldout_count > 0): the audit and gates need it.
//   sources: at most 64, each with a file or a sha256 (64 lowercase hex)
//   and a weight > 0; samples and heldout_samples (when set) at least one
//   per source.
// - gates: max_ppl_ratio >= 1, max_mean_kl >= 0, min_top1_agreement in [0, 1];
//   max_ppl_ratio_vs_previous > 0 and only with compare_to; compare_to at
//   most 4096 bytes without control characters; tasks an absolute path or
//   file:/// URI (LoadRecipe resolves a relative one against the recipe
//   file's directory); min_task_accuracy_ratio in [0, 1] and only with
//   tasks; runtime "vllm" or "transformers"; max_starved_experts in [0, 1].
// - mixed_precision: average_bits finite in (0, 32]; bits a non-empty list
//   of distinct widths in {2, 3, 4, 8}; group_sizes distinct, each 0 or a
//   positive multiple of 8; no override may set bits or group_size (the
//   selection chooses them; keep_unquantized and method still apply).
// - moe: min_tokens_per_expert in [0, 2^40]; on_starved_expert: damp only
//   when some layer can use GPTQ (it raises GPTQ's damping).
// - ignore / overrides[i].match: non-empty PCRE2 patterns that compile.
// - overrides: each must set something; keep_unquantized excludes the other
//   settings.
// - Settings that could have no effect are errors, because the manifest
//   records the recipe and a reader would believe they mattered: act_order,
//   static_groups or damp: auto when no layer can use GPTQ (method is not
//   gptq and no override sets method: gptq); static_groups without act_order
//   or without any group_size > 0; awq_clip_search when no layer can use AWQ.
// - Not errors: asym with format gptq (a zero of 0 that v1 cannot store is
//   decided per layer by the packer), sym-restricted with compressed-tensors
//   (its codes are a subset of the signed range the format stores).
#ifndef QUANT_CORE_RECIPE_RECIPE_H_
#define QUANT_CORE_RECIPE_RECIPE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant {

enum class QuantMethod { kRtn, kGptq, kAwq };
enum class QuantGrid { kSym, kSymRestricted, kAsym };
enum class Propagation { kSequential, kIndependent };
enum class OutputFormat { kGptq, kCompressedTensors };
enum class CalibrationPacking { kConcatenate, kPerDocument };
enum class ExpertRouting { kNatural, kAllExperts };
enum class StarvedExpertAction { kRtn, kDamp, kFail };

// The recipe spellings: "gptq", "sym-restricted", "per-document", ...
const char* QuantMethodName(QuantMethod method);
const char* QuantGridName(QuantGrid grid);
const char* PropagationName(Propagation propagation);
const char* OutputFormatName(OutputFormat format);
const char* CalibrationPackingName(CalibrationPacking packing);
const char* ExpertRoutingName(ExpertRouting routing);  // "all_experts"
const char* StarvedExpertActionName(StarvedExpertAction action);

// GPTQ damping: `fraction` * mean(diag H), or (automatic) the best of
// `auto_grid` on a validation split of the calibration tokens.
struct Damping {
  bool automatic = false;
  double fraction = 0.01;  // Used (and compared) only when !automatic.
  std::vector<double> auto_grid = {0.001, 0.0025, 0.005, 0.01,
                                   0.025, 0.05,   0.1};
};

// One source of a mixed calibration set (calibration.sources): a file (an
// absolute path or file:/// URI; LoadRecipe resolves a relative one against
// the recipe file's directory) or, on quantd, an uploaded set by `sha256`;
// with both, the file must have that sha256.
struct CalibrationSource {
  std::string file;
  std::string sha256;
  double weight =
      1.0;  // Its share of the windows (core/calib/mixed_calibration.h).
};

// Mirrors quant.v1.CalibrationSplit and core/calib's CalibrationSplitOptions.
struct CalibrationSettings {
  int samples = 128;  // Calibration sequences.
  int seq_len = 2048;
  // Held-out documents: heldout_count when > 0, else
  // round(heldout_fraction * documents).
  double heldout_fraction = 0.1;
  int heldout_count = 0;
  int heldout_samples = 0;  // Held-out sequences; 0 = `samples`.
  uint64_t seed = 0;
  CalibrationPacking packing = CalibrationPacking::kConcatenate;
  // How conversation documents ({"messages": [...]}) are rendered:
  // "auto" (the tokenizer's chat template), "none" (conversations refused)
  // or a template file (an absolute path or file:/// URI).
  std::string chat_template = "auto";
  // A system message put first in conversations that have none.
  std::optional<std::string> system_prompt;
  bool add_generation_prompt = false;
  // Several calibration sets mixed by weight, each split into calibration
  // and held-out documents on its own; empty: the one set the job is given.
  std::vector<CalibrationSource> sources;
};

// One layer's damping: a fraction, or auto (chosen from the recipe's
// damp.auto_grid).
struct DampValue {
  bool automatic = false;
  double fraction = 0.01;  // Used (and compared) only when !automatic.
};

// Settings for the layers whose name fully matches `match`. Unset fields
// keep the recipe's values. grid and damp go beyond quant.v1.LayerOverride.
struct LayerOverride {
  std::string match;
  std::optional<int> bits;
  std::optional<int> group_size;
  std::optional<QuantMethod> method;
  std::optional<QuantGrid> grid;
  std::optional<DampValue> damp;
  bool keep_unquantized = false;
};

// Release gates; an unset gate is not checked.
struct Gates {
  std::optional<double> max_ppl_ratio;  // Held-out ppl quantized/unquantized.
  std::optional<double> max_mean_kl;    // Mean per-token KL(orig || quant).
  std::optional<double> min_top1_agreement;
  // The previous release to evaluate on the same held-out windows: a
  // quantd job id (JOB_ID, service runs) or its packed checkpoint's
  // directory (a path or file:// URI). Empty: none.
  std::string compare_to;
  // This checkpoint's held-out perplexity over the previous release's.
  std::optional<double> max_ppl_ratio_vs_previous;
  // A task file (core/eval/task_file.h) the finalize scores on the
  // unquantized and the packed model: an absolute path or file:/// URI.
  // Empty: none.
  std::string tasks;
  // The packed model's task accuracy over the unquantized model's, for
  // every task group and overall (core/eval/task_comparison.h).
  std::optional<double> min_task_accuracy_ratio;
  // Mixture-of-experts models: the fraction of experts (over every MoE
  // block) whose layers saw fewer than moe.min_tokens_per_expert
  // calibration tokens (or none), at most. A dense model has none.
  std::optional<double> max_starved_experts;
  // A runtime the packed checkpoint must load in, by the conformance check
  // every finalize runs (core/runtime/runtime_conformance.h): "vllm" or
  // "transformers". Empty: checked and reported, not gated.
  std::string runtime;
};

// Mixed precision chosen by the audit: every layer group runtimes fuse
// (q/k/v, gate/up; o and down alone) gets one of the candidate settings so
// that the quantized layers store at most `average_bits` per weight
// (codes, scales, zeros and g_idx: the audit's bits_per_weight), with the
// least held-out error weighted by the groups' measured sensitivity.
struct MixedPrecision {
  double average_bits = 0.0;
  std::vector<int> bits;         // Candidate widths, e.g. {3, 4, 8}.
  std::vector<int> group_sizes;  // Empty: the recipe's group_size only.
  bool keep_float = false;       // Keeping a group in 16 bits is a candidate.
};

// How a mixture-of-experts model's experts are calibrated (recipe `moe:`;
// core/pipeline/expert_quantizer.h does it). Each expert's layers see only
// the tokens the router sends them: tokens x top-k / experts on average,
// rare experts far fewer, so their Hessians are rank-deficient.
//   routing: natural      each expert's statistics from the tokens routed
//                         to it (what the model does at inference);
//            all_experts  every expert's statistics from every token of the
//                         block (outputs still routed as the model routes).
//   min_tokens_per_expert an expert whose layers saw fewer calibration
//                         tokens is starved (0: only one that saw none).
//   on_starved_expert     rtn: round it to nearest; damp: GPTQ with damping
//                         raised to min(1, max(damp, 0.01) x min / tokens);
//                         fail: fail the job, naming the expert.
// An expert that saw no token at all is rounded to nearest unless the
// policy is fail. Dense models ignore the section. Routers stay
// unquantized (vLLM builds them unquantized).
struct MoeCalibration {
  ExpertRouting routing = ExpertRouting::kNatural;
  int64_t min_tokens_per_expert = 0;
  StarvedExpertAction on_starved_expert = StarvedExpertAction::kRtn;
};

struct Recipe {
  QuantMethod method = QuantMethod::kGptq;
  int bits = 4;
  int group_size = 128;  // 0 = one group per output row.
  QuantGrid grid = QuantGrid::kSym;
  Damping damp;
  bool act_order = false;
  bool static_groups = false;
  Propagation propagation = Propagation::kSequential;
  CalibrationSettings calibration;
  std::vector<std::string> ignore = {"lm_head"};  // Full-match regexes.
  std::vector<LayerOverride> overrides;
  Gates gates;
  OutputFormat format = OutputFormat::kGptq;
  std::vector<double> awq_alpha_grid = {
      0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45,
      0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95};
  bool awq_clip_search = false;
  std::optional<MixedPrecision> mixed_precision;
  // Unset: MoeCalibration's defaults (and the recipe's hash is unchanged).
  std::optional<MoeCalibration> moe;
};

bool operator==(const CalibrationSource& a, const CalibrationSource& b);
bool operator==(const DampValue& a, const DampValue& b);
bool operator==(const Damping& a, const Damping& b);
bool operator==(const CalibrationSettings& a, const CalibrationSettings& b);
bool operator==(const LayerOverride& a, const LayerOverride& b);
bool operator==(const MixedPrecision& a, const MixedPrecision& b);
bool operator==(const MoeCalibration& a, const MoeCalibration& b);
bool operator==(const Gates& a, const Gates& b);
bool operator==(const Recipe& a, const Recipe& b);
inline bool operator!=(const Recipe& a, const Recipe& b) { return !(a == b); }

// Parses a YAML or JSON recipe; absent keys take the defaults above. Errors
// (InvalidArgument) read "<source_name>:<line>:<column>: <field path>:
// <problem>", e.g. "r.yaml:4:7: calibration.smaples: unknown field (known:
// samples, ...)". Rejected: unknown or duplicate keys, wrong types (a quoted
// "4" is a string, not a number; booleans are true/false only), null
// values except for the optional fields (gates.*, overrides[i].bits etc.),
// more than one YAML document, an empty text, a top level that is not a
// mapping, texts over 1 MiB, and everything ValidateRecipe rejects.
absl::StatusOr<Recipe> ParseRecipe(absl::string_view text,
                                   absl::string_view source_name);
// ParseRecipe on the file's contents, with `path` as the source name.
absl::StatusOr<Recipe> LoadRecipe(const std::string& path);

// The rules listed at the top of this file; the error (InvalidArgument)
// reads "<field path>: <problem>". For recipes built in code or converted
// from the API.
absl::Status ValidateRecipe(const Recipe& recipe);

// Canonical JSON (2-space indent): every field, in the order of the struct,
// unset optionals as null. ParseRecipe(RecipeToJson(r)) == r for every valid
// r, and equal recipes give identical text, so the manifest can store and
// hash it.
std::string RecipeToJson(const Recipe& recipe);

// sha256 (lowercase hex) of RecipeToJson(recipe): what a job's manifest
// records so that a published checkpoint can be tied to the recipe of the
// job that reports it.
std::string RecipeSha256(const Recipe& recipe);

}  // namespace quant

#endif  // QUANT_CORE_RECIPE_RECIPE_H_
