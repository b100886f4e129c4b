// Packed checkpoint assembly, gates, audit and manifest; see finalize_task.h.
#include "core/pipeline/finalize_task.h"

#include <unistd.h>

#include <filesystem>
#include <optional>
#include <set>
#include <utility>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/eval/evaluation_parts.h"
#include "core/kernels/dispatch.h"
#include "core/model/linear_layers.h"
#include "core/pack/checkpoint_config.h"
#include "core/pack/compressed_tensors_format.h"
#include "core/pack/gptq_format.h"
#include "core/pipeline/audit_report.h"
#include "core/pipeline/layer_packing.h"
#include "core/pipeline/output_size.h"
#include "core/pipeline/previous_release.h"
#include "core/report/report_html.h"
#include "core/runtime/runtime_conformance.h"

#ifndef QUANT_VERSION
#define QUANT_VERSION "unknown"
#endif

namespace quant {
namespace {

using nlohmann::json;

// "model.layers.3.mlp.experts" for "model.layers.3.mlp.experts.7.up_proj":
// the module vLLM builds a block's experts as (ExpertsModuleName).
std::string ExpertsModuleOf(const std::string& expert_layer) {
  constexpr char kExperts[] = ".experts.";
  return expert_layer.substr(
      0, expert_layer.find(kExperts) + sizeof(kExperts) - 2);
}

// What the formats record as unquantized: the layers kept unquantized (an
// expert also under its experts module, since runtimes look a block's
// experts up by that name and PlanQuantization made them agree) and the
// mixture-of-experts routers, which vLLM builds unquantized anyway but
// transformers' loaders would otherwise treat as quantized Linear layers.
struct UnquantizedNames {
  std::vector<std::string> layers;          // Exact module names.
  std::vector<std::string> expert_modules;  // Every submodule too.
};

UnquantizedNames UnquantizedLinearLayers(
    const ModelConfig& config, const std::vector<LayerResult>& layers) {
  UnquantizedNames names;
  std::set<std::string> modules;
  for (const LayerResult& l : layers) {
    if (l.quantized) continue;
    names.layers.push_back(l.name);
    if (l.expert >= 0 && modules.insert(ExpertsModuleOf(l.name)).second) {
      names.expert_modules.push_back(ExpertsModuleOf(l.name));
    }
  }
  for (int b = 0; b < config.num_hidden_layers; ++b) {
    if (config.IsMoeBlock(b)) names.layers.push_back(RouterName(config, b));
  }
  return names;
}

// The damping recorded in the GPTQ config: the recipe's fraction, or with
// damp: auto the median chosen; readers insist on a value in (0, 1).
double ConfigDamp(const Recipe& recipe,
                  const std::vector<LayerResult>& layers) {
  std::vector<double> used;
  for (const LayerResult& l : layers) {
    if (l.quantized && l.settings.method == QuantMethod::kGptq) {
      used.push_back(l.choices.damp_used);
    }
  }
  double damp = recipe.damp.fraction;
  if (recipe.damp.automatic && !used.empty()) {
    std::sort(used.begin(), used.end());
    damp = used[used.size() / 2];
  }
  return damp > 0.0 && damp < 1.0 ? damp : 0.01;
}

struct FormatFiles {
  json quantization_config;
  std::optional<json> quantize_config_file;  // GPTQ only.
};

bool Symmetric(QuantGrid grid) { return grid != QuantGrid::kAsym; }

// Quantized layers whose bits, group size or symmetry differ from the
// recipe's: the formats record them per layer.
std::vector<const LayerResult*> LayersWithOwnScheme(
    const Recipe& recipe, const std::vector<LayerResult>& layers) {
  std::vector<const LayerResult*> out;
  for (const LayerResult& l : layers) {
    const LayerSettings& s = l.settings;
    if (l.quantized &&
        (s.bits != recipe.bits || s.group_size != recipe.group_size ||
         Symmetric(s.grid) != Symmetric(recipe.grid))) {
      out.push_back(&l);
    }
  }
  return out;
}

// A layer's own scheme under the names runtimes look it up by: its own,
// and for a part of a fused layer (q/k/v, gate/up) the fused layer's too,
// since vLLM matches GPTQ "dynamic" rules and compressed-tensors targets
// against "qkv_proj" and "gate_up_proj", never their parts (see
// docs/RUNTIME_CONFORMANCE.md). PlanQuantization made the parts agree, so
// the fused name takes the first part's scheme. An expert's is also
// recorded under its block's experts module (`prefix`: it covers every
// expert), which is what vLLM's fused-MoE layer looks up.
struct SchemeName {
  std::string name;
  const LayerResult* layer;
  bool prefix;
};

std::vector<SchemeName> SchemeNames(
    const std::vector<const LayerResult*>& layers) {
  std::vector<SchemeName> out;
  std::set<std::string> fused_done;
  for (const LayerResult* l : layers) {
    out.push_back({l->name, l, false});
    if (l->expert >= 0) {
      std::string module = ExpertsModuleOf(l->name);
      if (fused_done.insert(module).second) {
        out.push_back({std::move(module), l, true});
      }
      continue;
    }
    if (FusedLayerName(l->type) == LayerTypeName(l->type)) continue;
    const size_t dot = l->name.rfind('.');
    std::string fused =
        absl::StrCat(l->name.substr(0, dot + 1), FusedLayerName(l->type));
    if (fused_done.insert(fused).second) {
      out.push_back({std::move(fused), l, false});
    }
  }
  return out;
}

absl::StatusOr<FormatFiles> FormatConfig(const ModelConfig& config,
                                         const Recipe& recipe,
                                         const std::vector<LayerResult>& l) {
  FormatFiles files;
  const UnquantizedNames unquantized = UnquantizedLinearLayers(config, l);
  if (recipe.format == OutputFormat::kCompressedTensors) {
    CompressedTensorsConfigOptions options;
    options.bits = recipe.bits;
    options.group_size = recipe.group_size;
    options.symmetric = Symmetric(recipe.grid);
    options.actorder = ActOrderFor(recipe, recipe.group_size);
    // Exact names only: each expert is listed, and its module for vLLM.
    options.ignore = unquantized.layers;
    options.ignore.insert(options.ignore.end(),
                          unquantized.expert_modules.begin(),
                          unquantized.expert_modules.end());
    for (const auto& [name, layer, prefix] :
         SchemeNames(LayersWithOwnScheme(recipe, l))) {
      const LayerSettings& s = layer->settings;
      options.layer_schemes.push_back({name, s.bits, s.group_size,
                                       Symmetric(s.grid),
                                       ActOrderFor(recipe, s.group_size)});
    }
    QUANT_ASSIGN_OR_RETURN(files.quantization_config,
                           CompressedTensorsQuantizationConfig(options));
    return files;
  }
  GptqConfigOptions options;
  options.bits = recipe.bits;
  options.group_size = recipe.group_size;
  options.sym = Symmetric(recipe.grid);
  options.desc_act = recipe.act_order;
  options.static_groups = recipe.static_groups;
  options.damp_percent = ConfigDamp(recipe, l);
  options.true_sequential = recipe.propagation == Propagation::kSequential;
  // re.match rules: an experts module's prefix rule covers every expert.
  for (const std::string& name : unquantized.layers) {
    if (!absl::StrContains(name, ".experts.")) {
      options.unquantized_layers.push_back(name);
    }
  }
  options.unquantized_prefixes = unquantized.expert_modules;
  options.quantizer = ToolVersion();
  for (const auto& [name, layer, prefix] :
       SchemeNames(LayersWithOwnScheme(recipe, l))) {
    if (layer->expert >= 0 && !prefix) continue;
    const LayerSettings& s = layer->settings;
    options.layer_schemes.push_back({name, s.bits, s.group_size,
                                     Symmetric(s.grid), recipe.act_order,
                                     prefix});
  }
  QUANT_ASSIGN_OR_RETURN(files.quantization_config,
                         GptqQuantizationConfig(options));
  QUANT_ASSIGN_OR_RETURN(json file, GptqQuantizeConfigFile(options));
  files.quantize_config_file = std::move(file);
  return files;
}

// The source's tensors outside the blocks (embeddings, final norm, lm_head),
// in their stored dtype.
absl::StatusOr<std::vector<PackedTensor>> OuterTensors(const Checkpoint& source,
                                                       bool before_blocks) {
  std::vector<PackedTensor> out;
  for (const ExpectedTensor& expected : source.expected_tensors()) {
    if (absl::StartsWith(expected.name, "model.layers.")) continue;
    const bool is_embedding = expected.name == "model.embed_tokens.weight";
    if (is_embedding != before_blocks) continue;
    const TensorCollection::Entry entry = source.tensors().Find(expected.name);
    QUANT_ASSIGN_OR_RETURN(FloatTensor t, source.ReadFloat(expected.name));
    QUANT_ASSIGN_OR_RETURN(
        PackedTensor packed,
        FloatTensorAs(expected.name, t.shape, t.data, entry.info->dtype));
    out.push_back(std::move(packed));
  }
  return out;
}

// The tensors' data bytes, checked against the layers' final decisions.
absl::StatusOr<int64_t> CheckOutputSize(
    const Checkpoint& source, const Recipe& recipe,
    const std::vector<LayerResult>& layers,
    const std::vector<PackedTensor>& tensors) {
  std::vector<LayerOutputDecision> decisions;
  decisions.reserve(layers.size());
  for (const LayerResult& l : layers) {
    decisions.push_back({l.name, l.settings, l.quantized});
  }
  QUANT_ASSIGN_OR_RETURN(std::vector<SourceTensor> stored,
                         SourceTensorsOf(source));
  return CheckWrittenTensorBytes(stored, source.config(), recipe, decisions,
                                 tensors);
}

absl::Status CopyFile(const std::string& from, const std::string& to,
                      FileSystem* fs) {
  // Tokenizer files: a tokenizer.json of a large vocabulary is tens of MiB.
  QUANT_ASSIGN_OR_RETURN(std::string bytes,
                         fs->ReadFile(from, size_t{1} << 30));
  return WriteFileAtomically(to, bytes, fs);
}

json SplitJson(const CalibrationSplit& split) {
  const CalibrationSplitOptions& o = split.options;
  json result = {
      {"sha256", split.calibration_hash},
      {"samples", o.samples},
      {"seq_len", o.seq_len},
      {"heldout_fraction", o.heldout_fraction},
      {"heldout_count", o.heldout_count},
      {"heldout_samples", o.heldout_samples},
      {"seed", o.seed},
      {"packing", o.packing == WindowPacking::kPerDocument ? "per-document"
                                                           : "concatenate"},
      {"calibration_documents", split.calibration_documents},
      {"heldout_documents", split.heldout_documents},
      {"calibration_windows", split.calibration.sequences.size()},
      {"heldout_windows", split.heldout.sequences.size()},
      {"calibration_tokens", split.calibration.RealTokens()},
      {"heldout_tokens", split.heldout.RealTokens()}};
  // A mixed set: each source's part (the document lists above are empty).
  if (!split.sources.empty()) {
    json sources = json::array();
    for (const CalibrationSourceSplit& s : split.sources) {
      sources.push_back({{"sha256", s.sha256},
                         {"weight", s.weight},
                         {"samples", s.samples},
                         {"heldout_samples", s.heldout_samples},
                         {"calibration_documents", s.calibration_documents},
                         {"heldout_documents", s.heldout_documents},
                         {"calibration_windows", s.calibration_windows},
                         {"heldout_windows", s.heldout_windows},
                         {"calibration_tokens", s.calibration_tokens},
                         {"heldout_tokens", s.heldout_tokens},
                         {"conversation_documents", s.conversation_documents}});
    }
    result["sources"] = std::move(sources);
  }
  // What the model saw of its conversations: the template by content, so a
  // changed tokenizer_config.json or file shows.
  if (o.chat != nullptr && split.conversation_documents > 0) {
    const ChatTemplateChoice& choice = o.chat->choice();
    json chat = {{"source", o.chat->origin().source},
                 {"sha256", o.chat->origin().sha256},
                 {"add_generation_prompt", choice.add_generation_prompt},
                 {"conversation_documents", split.conversation_documents}};
    if (choice.system_prompt.has_value()) {
      chat["system_prompt"] = *choice.system_prompt;
    }
    result["chat_template"] = std::move(chat);
  }
  return result;
}

absl::StatusOr<json> SourceFingerprint(const Checkpoint& source, FileSystem* fs,
                                       ThreadPool* pool) {
  std::vector<std::string> names;
  for (const auto& file : source.tensors().files()) {
    names.push_back(std::filesystem::path(file->path()).filename().string());
  }
  if (source.tensors().sharded()) {
    names.push_back("model.safetensors.index.json");
  }
  std::sort(names.begin(), names.end());
  QUANT_ASSIGN_OR_RETURN(json files,
                         FingerprintFiles(source.directory(), names, fs, pool));
  std::error_code error;
  const std::string absolute =
      std::filesystem::absolute(source.directory(), error).string();
  files["path"] = error ? source.directory() : absolute;
  return files;
}

}  // namespace

std::string ToolVersion() { return absl::StrCat("quant ", QUANT_VERSION); }

const std::vector<std::string>& TokenizerFileNames() {
  static const auto* names = new std::vector<std::string>{
      "tokenizer.json",  "tokenizer_config.json",  "special_tokens_map.json",
      "tokenizer.model", "generation_config.json", "added_tokens.json"};
  return *names;
}

namespace {

// One output file's manifest entry: its name, sha256 and size.
absl::StatusOr<json> FileEntry(const std::string& dir, const std::string& name,
                               FileSystem* fs) {
  const std::string path = JoinPath(dir, name);
  QUANT_ASSIGN_OR_RETURN(std::string sha, Sha256File(path, fs));
  std::error_code error;
  const auto bytes = std::filesystem::file_size(path, error);
  return json{{"name", name},
              {"sha256", sha},
              {"bytes", error ? 0 : static_cast<int64_t>(bytes)}};
}

}  // namespace

absl::StatusOr<json> FingerprintFiles(const std::string& dir,
                                      const std::vector<std::string>& names,
                                      FileSystem* fs, ThreadPool* pool) {
  std::vector<std::string> sorted = names;
  std::sort(sorted.begin(), sorted.end());
  std::vector<absl::StatusOr<json>> entries(sorted.size(),
                                            absl::UnknownError("not hashed"));
  ParallelFor(pool, static_cast<int64_t>(sorted.size()),
              [&](int64_t i) { entries[i] = FileEntry(dir, sorted[i], fs); });
  json files = json::array();
  std::string lines;
  for (size_t i = 0; i < sorted.size(); ++i) {
    QUANT_ASSIGN_OR_RETURN(json entry, std::move(entries[i]));
    absl::StrAppend(&lines, sorted[i], " ",
                    entry.at("sha256").get<std::string>(), "\n");
    files.push_back(std::move(entry));
  }
  return json{{"fingerprint", Sha256Hex(lines)}, {"files", std::move(files)}};
}

namespace {

constexpr char kStagedFormat[] = "quant-staged-finalize/1";

using Say = std::function<void(const std::string&)>;

Say Sayer(const StageProgress& progress) {
  return [progress](const std::string& what) {
    if (progress) progress(what);
  };
}

// What StageFinalize wrote, recorded beside the staged directory for the
// steps after it (another task, maybe on another worker).
struct StagedCheckpoint {
  std::vector<std::string> files;  // In the staged directory.
  int64_t tensor_bytes = 0;
};

std::string StagedRecordPath(const std::string& staged_dir) {
  return absl::StrCat(staged_dir, ".staged.json");
}

absl::StatusOr<StagedCheckpoint> ReadStagedRecord(const std::string& staged_dir,
                                                  FileSystem* fs) {
  const std::string path = StagedRecordPath(staged_dir);
  QUANT_ASSIGN_OR_RETURN(const std::string text,
                         fs->ReadFile(path, size_t{1} << 20));
  // Written by StageFinalize alone: a duplicate key means it was not.
  const json record = ParseJsonOrDiscarded(text, StrictJsonOptions{});
  StagedCheckpoint staged;
  const bool shaped = record.is_object() &&
                      record.value("format", "") == kStagedFormat &&
                      record.contains("files") && record["files"].is_array() &&
                      record.contains("tensor_bytes") &&
                      record["tensor_bytes"].is_number_integer() &&
                      record["tensor_bytes"].get<int64_t>() >= 0;
  if (shaped) {
    for (const json& name : record["files"]) {
      if (!name.is_string() || name.get<std::string>().empty() ||
          name.get<std::string>().find('/') != std::string::npos) {
        staged.files.clear();
        break;
      }
      staged.files.push_back(name.get<std::string>());
    }
  }
  if (!shaped || staged.files.empty()) {
    return absl::DataLossError(absl::StrCat(
        path, ": not a staged checkpoint's record (", kStagedFormat,
        ": \"files\", a list of file names, and \"tensor_bytes\")"));
  }
  staged.tensor_bytes = record["tensor_bytes"].get<int64_t>();
  return staged;
}

absl::Status CheckOutputFree(const std::string& out) {
  if (FileExists(out) || IsDirectory(out)) {
    return absl::AlreadyExistsError(
        absl::StrCat("output ", out, " already exists; choose a new path"));
  }
  return absl::OkStatus();
}

// The previous release the gates compare with, when the recipe has one.
// Checked before anything is written: one that is not what it claims
// fails the task with nothing left behind.
absl::StatusOr<std::optional<PreviousRelease>> OpenFinalizePrevious(
    const FinalizeInput& input, const Say& say) {
  const Recipe& recipe = *input.recipe;
  if (recipe.gates.compare_to.empty()) {
    return std::optional<PreviousRelease>();
  }
  if (input.previous_dir.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gates.compare_to: \"", recipe.gates.compare_to,
                     "\" was not resolved to a directory for this run"));
  }
  say("checking the previous release");
  QUANT_ASSIGN_OR_RETURN(
      PreviousRelease previous,
      OpenPreviousRelease(recipe.gates.compare_to, input.previous_dir,
                          input.source->config(),
                          {!input.previous_verified, input.file_system}));
  return std::optional<PreviousRelease>(std::move(previous));
}

absl::StatusOr<std::optional<TaskGateInput>> FinalizeGateTasks(
    const FinalizeInput& input) {
  const Recipe& recipe = *input.recipe;
  if (recipe.gates.tasks.empty()) return std::optional<TaskGateInput>();
  if (input.tasks == nullptr || input.tokenizer == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("gates.tasks: \"", recipe.gates.tasks,
                     "\" was not loaded for this run"));
  }
  TaskGateInput tasks;
  tasks.source = recipe.gates.tasks;
  tasks.file = input.tasks;
  tasks.tokenizer = input.tokenizer;
  tasks.options.max_hidden_bytes = input.eval_max_hidden_bytes;
  return std::optional<TaskGateInput>(std::move(tasks));
}

absl::Status CheckFinalizeInput(const FinalizeInput& input) {
  if (input.file_system == nullptr) {
    return absl::InvalidArgumentError("finalize: file_system is null");
  }
  if (input.source == nullptr || input.recipe == nullptr ||
      input.split == nullptr) {
    return absl::InvalidArgumentError(
        "finalize: source, recipe and split are required");
  }
  return absl::OkStatus();
}

StreamedEvaluationOptions FinalizeEvaluationOptions(const FinalizeInput& input,
                                                    ThreadPool* pool) {
  StreamedEvaluationOptions options;
  options.batch_windows = input.eval_batch_windows;
  options.max_hidden_bytes = input.eval_max_hidden_bytes;
  options.pool = pool;
  return options;
}

absl::StatusOr<std::unique_ptr<Checkpoint>> OpenStaged(const std::string& dir,
                                                       FileSystem* fs) {
  CheckpointOptions open_options;
  open_options.allow_packed = true;
  open_options.file_system = fs;
  return Checkpoint::Open(dir, open_options);
}

// The packed checkpoint's files (tensors, config, the format's own config,
// the tokenizer's files) written into `dir`, which exists and is empty.
absl::StatusOr<StagedCheckpoint> WriteStagedFiles(FinalizeInput& input,
                                                  const std::string& dir,
                                                  const Say& say) {
  const Recipe& recipe = *input.recipe;
  FileSystem* const fs = input.file_system;
  StagedCheckpoint staged;
  say("writing tensors");
  QUANT_ASSIGN_OR_RETURN(std::vector<PackedTensor> tensors,
                         OuterTensors(*input.source, true));
  for (std::vector<PackedTensor>& block : input.block_tensors) {
    for (PackedTensor& t : block) tensors.push_back(std::move(t));
    block.clear();
  }
  QUANT_ASSIGN_OR_RETURN(std::vector<PackedTensor> tail,
                         OuterTensors(*input.source, false));
  for (PackedTensor& t : tail) tensors.push_back(std::move(t));
  QUANT_ASSIGN_OR_RETURN(
      staged.tensor_bytes,
      CheckOutputSize(*input.source, recipe, input.layers, tensors));
  QUANT_ASSIGN_OR_RETURN(
      staged.files, WriteModelTensors(dir, tensors, input.max_shard_bytes, fs));
  tensors.clear();

  QUANT_ASSIGN_OR_RETURN(
      FormatFiles format,
      FormatConfig(input.source->config(), recipe, input.layers));
  QUANT_ASSIGN_OR_RETURN(
      std::string source_config,
      fs->ReadFile(JoinPath(input.source->directory(), "config.json"),
                   size_t{1} << 20));
  QUANT_ASSIGN_OR_RETURN(
      std::string config,
      WithQuantizationConfig(source_config, format.quantization_config));
  QUANT_RETURN_IF_ERROR(
      WriteFileAtomically(JoinPath(dir, "config.json"), config, fs));
  staged.files.push_back("config.json");
  if (format.quantize_config_file.has_value()) {
    QUANT_RETURN_IF_ERROR(
        WriteFileAtomically(JoinPath(dir, "quantize_config.json"),
                            format.quantize_config_file->dump(2) + "\n", fs));
    staged.files.push_back("quantize_config.json");
  }
  for (const std::string& name : TokenizerFileNames()) {
    const std::string from = JoinPath(input.tokenizer_dir, name);
    if (!FileExists(from)) continue;
    QUANT_RETURN_IF_ERROR(CopyFile(from, JoinPath(dir, name), fs));
    staged.files.push_back(name);
  }
  return staged;
}

// From the held-out evaluation's metrics on: the runtime checks and the
// other gates, audit.json, the report and manifest.json written into the
// staged `dir`, which is then renamed to input.out_dir.
absl::StatusOr<FinalizeOutput> CompleteStaged(
    FinalizeInput& input, const std::string& dir, StagedCheckpoint staged,
    const std::vector<NextTokenMetrics>& scored,
    const PreviousRelease* previous, const TaskGateInput* tasks,
    ThreadPool* pool, const Say& say) {
  const Recipe& recipe = *input.recipe;
  FileSystem* const fs = input.file_system;
  std::vector<std::string>& files = staged.files;
  // Whether vLLM and transformers would load what was written (the
  // headers only: cheap next to the gates).
  say("checking that vLLM and transformers would load it");
  std::vector<RuntimeCheck> runtime_checks;
  for (TargetRuntime runtime :
       {TargetRuntime::kVllm, TargetRuntime::kTransformers}) {
    RuntimeCheckOptions check_options;
    check_options.runtime = runtime;
    QUANT_ASSIGN_OR_RETURN(
        RuntimeCheck check,
        CheckCheckpointRuntimeConformance(dir, check_options, fs));
    runtime_checks.push_back(std::move(check));
  }

  FinalizeOutput output;
  {
    // The gates read the checkpoint as a runtime would read it.
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> packed,
                           OpenStaged(dir, fs));
    QUANT_ASSIGN_OR_RETURN(
        output.gates,
        EvaluateGatesOnScores(scored, *packed, *input.source, recipe.gates,
                              FinalizeEvaluationOptions(input, pool), previous,
                              tasks));
  }
  AddRuntimeChecks(recipe.gates, std::move(runtime_checks), &output.gates);
  {
    int64_t experts = 0, starved = 0;
    for (const nlohmann::json& block : ExpertBlockSummaries(input.layers)) {
      experts += block["experts"].get<int64_t>();
      starved += block["starved"].get<int64_t>();
    }
    AddStarvedExpertsCheck(recipe.gates, starved, experts, &output.gates);
  }

  say("writing audit and manifest");
  MarkLayerOutliers(&input.layers);
  output.audit = BuildAuditJson(input.layers, GateReportToJson(output.gates));
  if (!input.mixed_precision.is_null()) {
    output.audit["mixed_precision"] = std::move(input.mixed_precision);
  }
  QUANT_RETURN_IF_ERROR(WriteFileAtomically(JoinPath(dir, "audit.json"),
                                            output.audit.dump(2) + "\n", fs));
  files.push_back("audit.json");

  QUANT_ASSIGN_OR_RETURN(json source,
                         SourceFingerprint(*input.source, fs, pool));
  QUANT_ASSIGN_OR_RETURN(json outputs, FingerprintFiles(dir, files, fs, pool));
  output.manifest = {
      {"format_version", 1},
      {"tool", ToolVersion()},
      // Every block and the gates ran at this level (the block outputs say
      // so; ReadBlockOutput refuses a mix).
      {"kernels",
       {{"isa", std::string(kernels::IsaName(kernels::CurrentIsa()))},
        {"description",
         std::string(kernels::IsaDescription(kernels::CurrentIsa()))}}},
      {"recipe", json::parse(RecipeToJson(recipe), nullptr, false)},
      {"source", std::move(source)},
      {"calibration", SplitJson(*input.split)},
      {"output",
       {{"format", OutputFormatName(recipe.format)},
        {"verdict", output.audit.at("verdict")},
        {"tensor_bytes", staged.tensor_bytes},
        {"files", outputs.at("files")}}}};
  if (output.gates.previous.has_value()) {
    const PreviousComparison& p = *output.gates.previous;
    output.manifest["compared_with"] = {{"compare_to", p.compare_to},
                                        {"manifest_sha256", p.manifest_sha256},
                                        {"job_id", p.job_id}};
  }
  if (output.gates.tasks.has_value()) {
    output.manifest["tasks"] = {
        {"file", output.gates.tasks->source},
        {"sha256", output.gates.tasks->comparison.reference.file_sha256},
        {"count", output.gates.tasks->comparison.reference.items.size()}};
  }
  if (!input.job_id.empty()) {
    output.manifest["job"] = {{"id", input.job_id},
                              {"recipe_sha256", RecipeSha256(recipe)}};
  }
  // The page shows the manifest's provenance, so it is rendered from the
  // manifest before its own entry joins the file list (the page leaves
  // itself out, so rendering again from the final manifest gives these
  // bytes).
  say("writing report");
  QUANT_ASSIGN_OR_RETURN(
      const std::string report_html,
      report::RenderReportHtml(output.audit, output.manifest));
  QUANT_RETURN_IF_ERROR(WriteFileAtomically(
      JoinPath(dir, report::kReportFileName), report_html, fs));
  // Only the page is new: hash it alone and insert its entry in name order.
  QUANT_ASSIGN_OR_RETURN(json report_entry,
                         FileEntry(dir, report::kReportFileName, fs));
  json& listed = output.manifest["output"]["files"];
  auto position = std::find_if(listed.begin(), listed.end(), [](const json& f) {
    return f.at("name").get<std::string>() > report::kReportFileName;
  });
  listed.insert(position, std::move(report_entry));
  QUANT_RETURN_IF_ERROR(WriteFileAtomically(
      JoinPath(dir, "manifest.json"), output.manifest.dump(2) + "\n", fs));
  QUANT_RETURN_IF_ERROR(SyncDirectory(dir, fs));
  QUANT_RETURN_IF_ERROR(RenameDirectoryIntoPlace(dir, input.out_dir, fs));
  return output;
}

}  // namespace

int64_t FinalizeEvaluationBatches(const FinalizeInput& input) {
  return CountEvaluationBatches(input.split->heldout, input.eval_batch_windows);
}

absl::Status StageFinalize(FinalizeInput input, const std::string& staged_dir,
                           const StageProgress& progress) {
  QUANT_RETURN_IF_ERROR(CheckFinalizeInput(input));
  const Say say = Sayer(progress);
  FileSystem* const fs = input.file_system;
  QUANT_RETURN_IF_ERROR(CheckOutputFree(staged_dir));
  QUANT_RETURN_IF_ERROR(OpenFinalizePrevious(input, say).status());
  QUANT_RETURN_IF_ERROR(FinalizeGateTasks(input).status());
  const std::string record_path = StagedRecordPath(staged_dir);
  QUANT_RETURN_IF_ERROR(fs->RemoveTree(record_path));
  QUANT_RETURN_IF_ERROR(MakeDirectory(staged_dir, fs));
  absl::Cleanup remove_staged = [&] {
    fs->RemoveTree(staged_dir).IgnoreError();
  };
  QUANT_ASSIGN_OR_RETURN(const StagedCheckpoint staged,
                         WriteStagedFiles(input, staged_dir, say));
  QUANT_RETURN_IF_ERROR(SyncDirectory(staged_dir, fs));
  // Written last: a staged directory without its record is unfinished.
  const json record = {{"format", kStagedFormat},
                       {"files", staged.files},
                       {"tensor_bytes", staged.tensor_bytes}};
  QUANT_RETURN_IF_ERROR(
      WriteFileAtomically(record_path, record.dump(2) + "\n", fs));
  std::move(remove_staged).Cancel();
  return absl::OkStatus();
}

absl::StatusOr<EvaluationPart> ScoreStagedEvaluationPart(
    const FinalizeInput& input, const std::string& staged_dir,
    int64_t first_batch, int64_t batch_count) {
  QUANT_RETURN_IF_ERROR(CheckFinalizeInput(input));
  QUANT_RETURN_IF_ERROR(
      ReadStagedRecord(staged_dir, input.file_system).status());
  QUANT_ASSIGN_OR_RETURN(std::optional<PreviousRelease> previous,
                         OpenFinalizePrevious(input, Sayer(nullptr)));
  QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> packed,
                         OpenStaged(staged_dir, input.file_system));
  std::vector<const Checkpoint*> models = {packed.get()};
  if (previous.has_value()) models.push_back(previous->checkpoint.get());
  ThreadPool pool(input.threads);
  return ScoreEvaluationPart(models, *input.source, input.split->heldout,
                             first_batch, batch_count,
                             FinalizeEvaluationOptions(input, &pool));
}

absl::StatusOr<FinalizeOutput> CompleteFinalize(
    FinalizeInput input, const std::string& staged_dir,
    std::vector<EvaluationPart> parts, const StageProgress& progress) {
  QUANT_RETURN_IF_ERROR(CheckFinalizeInput(input));
  const Say say = Sayer(progress);
  QUANT_RETURN_IF_ERROR(CheckOutputFree(input.out_dir));
  QUANT_ASSIGN_OR_RETURN(StagedCheckpoint staged,
                         ReadStagedRecord(staged_dir, input.file_system));
  QUANT_ASSIGN_OR_RETURN(std::optional<PreviousRelease> previous,
                         OpenFinalizePrevious(input, say));
  QUANT_ASSIGN_OR_RETURN(std::optional<TaskGateInput> tasks,
                         FinalizeGateTasks(input));
  const int64_t batches = FinalizeEvaluationBatches(input);
  for (const EvaluationPart& part : parts) {
    if (part.total_batches != batches) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the evaluation part of batches [", part.first_batch, ", ",
          part.first_batch + part.batch_count, ") is of an evaluation in ",
          part.total_batches, " batches; this job's has ", batches));
    }
  }
  say("adding the held-out evaluation's parts");
  QUANT_ASSIGN_OR_RETURN(const std::vector<NextTokenMetrics> scored,
                         MergeEvaluationParts(std::move(parts)));
  if (tasks.has_value()) say("evaluating the task gate");
  ThreadPool pool(input.threads);
  QUANT_ASSIGN_OR_RETURN(
      FinalizeOutput output,
      CompleteStaged(input, staged_dir, std::move(staged), scored,
                     previous.has_value() ? &*previous : nullptr,
                     tasks.has_value() ? &*tasks : nullptr, &pool, say));
  // In place: the record has served (a retry finds the output and stops).
  input.file_system->RemoveTree(StagedRecordPath(staged_dir)).IgnoreError();
  return output;
}

absl::StatusOr<FinalizeOutput> RunFinalizeTask(FinalizeInput input,
                                               const StageProgress& progress) {
  QUANT_RETURN_IF_ERROR(CheckFinalizeInput(input));
  const Say say = Sayer(progress);
  const std::string out = input.out_dir;
  QUANT_RETURN_IF_ERROR(CheckOutputFree(out));
  FileSystem* const fs = input.file_system;
  QUANT_ASSIGN_OR_RETURN(std::optional<PreviousRelease> previous,
                         OpenFinalizePrevious(input, say));
  QUANT_ASSIGN_OR_RETURN(std::optional<TaskGateInput> tasks,
                         FinalizeGateTasks(input));
  const std::string temp = absl::StrCat(out, ".partial-", ::getpid());
  QUANT_RETURN_IF_ERROR(RemoveTree(temp, fs));
  QUANT_RETURN_IF_ERROR(MakeDirectory(temp, fs));
  // Removed on every way out unless the result was renamed into place.
  absl::Cleanup remove_temp = [&] { fs->RemoveTree(temp).IgnoreError(); };
  QUANT_ASSIGN_OR_RETURN(StagedCheckpoint staged,
                         WriteStagedFiles(input, temp, say));

  // The held-out evaluation in one piece, on the checkpoint as a runtime
  // would read it.
  say(absl::StrCat("evaluating gates on the packed checkpoint",
                   previous.has_value() ? " and the previous release" : "",
                   tasks.has_value() ? ", with the task file" : ""));
  ThreadPool pool(input.threads);
  std::vector<NextTokenMetrics> scored;
  {
    QUANT_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> packed,
                           OpenStaged(temp, fs));
    std::vector<const Checkpoint*> models = {packed.get()};
    if (previous.has_value()) models.push_back(previous->checkpoint.get());
    QUANT_ASSIGN_OR_RETURN(
        scored,
        EvaluateCheckpointsTogether(models, *input.source, input.split->heldout,
                                    FinalizeEvaluationOptions(input, &pool)));
  }
  QUANT_ASSIGN_OR_RETURN(
      FinalizeOutput output,
      CompleteStaged(input, temp, std::move(staged), scored,
                     previous.has_value() ? &*previous : nullptr,
                     tasks.has_value() ? &*tasks : nullptr, &pool, say));
  std::move(remove_temp).Cancel();
  return output;
}

absl::Status CheckManifestNamesJob(const json& manifest,
                                   const std::string& path,
                                   const std::string& job_id,
                                   const Recipe& recipe) {
  const std::string expected_recipe = RecipeSha256(recipe);
  const json* job = nullptr;
  if (manifest.is_object()) {
    auto it = manifest.find("job");
    if (it != manifest.end() && it->is_object()) job = &*it;
  }
  auto field = [&](const char* name) -> std::string {
    if (job == nullptr) return "";
    auto it = job->find(name);
    return it != job->end() && it->is_string() ? it->get<std::string>() : "";
  };
  const std::string id = field("id");
  const std::string recipe_sha256 = field("recipe_sha256");
  if (job == nullptr || id.empty() || recipe_sha256.empty()) {
    return absl::DataLossError(absl::StrCat(
        path,
        ": names no job (no \"job\" with \"id\" and \"recipe_sha256\"), "
        "so it cannot be the checkpoint of job ",
        job_id));
  }
  // Cut: the fields are the file's, which may be anything.
  const auto cut = [](const std::string& text) {
    return text.size() <= 80 ? text : absl::StrCat(text.substr(0, 80), "...");
  };
  if (id != job_id) {
    return absl::DataLossError(absl::StrCat(
        path, ": is the checkpoint of job ", cut(id), ", not of job ", job_id,
        " (a job id reused while the artifact store kept an old one?)"));
  }
  if (recipe_sha256 != expected_recipe) {
    return absl::DataLossError(absl::StrCat(
        path, ": was written with recipe sha256 ", cut(recipe_sha256), ", job ",
        job_id, "'s recipe has sha256 ", expected_recipe));
  }
  return absl::OkStatus();
}

}  // namespace quant
