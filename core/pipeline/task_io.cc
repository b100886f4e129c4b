// Task files: hidden states, block outputs and exact layer-result JSON.
#include "core/pipeline/task_io.h"

#include <algorithm>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/directory_util.h"
#include "core/base/file_digests.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "core/base/strict_json.h"
#include "core/base/thread_pool.h"
#include "core/io/safetensors.h"
#include "core/kernels/dispatch.h"
#include "core/quant/grid.h"

namespace quant {
namespace {

using nlohmann::json;

// Reads typed fields of a JSON object, remembering the first problem so a
// reader can fetch everything and check once.
class FieldReader {
 public:
  FieldReader(const json& object, std::string where)
      : object_(object), where_(std::move(where)) {
    if (!object_.is_object()) Fail("", "is not an object");
  }

  const absl::Status& status() const { return status_; }

  const json* Field(const char* key) {
    if (!status_.ok()) return nullptr;
    auto it = object_.find(key);
    if (it == object_.end()) {
      Fail(key, "is missing");
      return nullptr;
    }
    return &*it;
  }
  void Get(const char* key, double* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    if (!v->is_number()) return Fail(key, "is not a number");
    *out = v->get<double>();
  }
  void Get(const char* key, int64_t* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    if (!v->is_number_integer()) return Fail(key, "is not an integer");
    *out = v->get<int64_t>();
  }
  void Get(const char* key, int* out) {
    int64_t value = 0;
    Get(key, &value);
    *out = static_cast<int>(value);
  }
  void Get(const char* key, bool* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    if (!v->is_boolean()) return Fail(key, "is not true or false");
    *out = v->get<bool>();
  }
  void Get(const char* key, std::string* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    if (!v->is_string()) return Fail(key, "is not a string");
    *out = v->get<std::string>();
  }
  void Get(const char* key, std::vector<double>* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(key, "is not a list");
    out->clear();
    for (const json& item : *v) {
      if (!item.is_number()) return Fail(key, "holds a non-number");
      out->push_back(item.get<double>());
    }
  }
  template <typename Int>
  void Get(const char* key, std::vector<Int>* out) {
    const json* v = Field(key);
    if (v == nullptr) return;
    if (!v->is_array()) return Fail(key, "is not a list");
    out->clear();
    for (const json& item : *v) {
      if (!item.is_number_integer()) return Fail(key, "holds a non-integer");
      out->push_back(item.get<Int>());
    }
  }
  bool Has(const char* key) const {
    return status_.ok() && object_.contains(key);
  }
  // A nested object's reader.
  FieldReader Object(const char* key) {
    const json* v = Field(key);
    static const json* const kEmpty = new json(json::object());
    FieldReader child(v != nullptr ? *v : *kEmpty,
                      absl::StrCat(where_, ".", key));
    if (!status_.ok()) child.status_ = status_;
    return child;
  }
  // Merges a child's problem into this reader.
  void Absorb(const FieldReader& child) {
    if (status_.ok()) status_ = child.status_;
  }

 private:
  void Fail(absl::string_view key, absl::string_view problem) {
    if (!status_.ok()) return;
    status_ = absl::InvalidArgumentError(
        absl::StrCat(where_, key.empty() ? "" : ".", key, " ", problem));
  }

  const json& object_;
  std::string where_;
  absl::Status status_;
};

json SplitToJson(const SplitErrors& e) {
  return {{"relative_error", e.relative_error}, {"output_mse", e.output_mse}};
}

void ReadSplit(FieldReader& parent, const char* key, SplitErrors* e) {
  FieldReader r = parent.Object(key);
  r.Get("relative_error", &e->relative_error);
  r.Get("output_mse", &e->output_mse);
  parent.Absorb(r);
}

template <typename Enum>
bool EnumFromName(const std::string& name, const char* (*to_name)(Enum),
                  std::initializer_list<Enum> values, Enum* out) {
  for (Enum v : values) {
    if (name == to_name(v)) {
      *out = v;
      return true;
    }
  }
  return false;
}

absl::Status UnknownValue(const char* field, const std::string& value) {
  return absl::InvalidArgumentError(
      absl::StrCat("layer result: ", field, " \"", value, "\" is unknown"));
}

}  // namespace

json LayerResultToTaskJson(const LayerResult& l) {
  const LayerSettings& s = l.settings;
  const LayerAudit& a = l.audit;
  const HessianDiagnostics& h = a.hessian;
  const MethodChoices& c = l.choices;
  json out = {{"name", l.name},
              {"type", LayerTypeName(l.type)},
              {"input_group", InputGroupName(l.input_group)},
              {"settings",
               {{"name", s.name},
                {"method", QuantMethodName(s.method)},
                {"bits", s.bits},
                {"group_size", s.group_size},
                {"grid", QuantGridName(s.grid)},
                {"damp_automatic", s.damp.automatic},
                {"damp_fraction", s.damp.fraction},
                {"keep_unquantized", s.keep_unquantized},
                {"reason", s.reason},
                {"overrides", s.overrides}}},
              {"quantized", l.quantized},
              {"reason", l.reason},
              {"audit",
               {{"layer", a.layer},
                {"method", a.method},
                {"grid_kind", GridKindName(a.grid.kind)},
                {"grid_bits", a.grid.bits},
                {"grid_group_size", a.grid.group_size},
                {"grid_f16_scales", a.grid.f16_scales},
                {"method_calibration", SplitToJson(a.method_calibration)},
                {"method_heldout", SplitToJson(a.method_heldout)},
                {"rtn_calibration", SplitToJson(a.rtn_calibration)},
                {"rtn_heldout", SplitToJson(a.rtn_heldout)},
                {"method_weight_mse", a.method_weight_mse},
                {"rtn_weight_mse", a.rtn_weight_mse},
                {"gain_calibration", a.gain_calibration},
                {"gain_heldout", a.gain_heldout},
                {"flattery", a.flattery},
                {"bits_per_weight", a.bits_per_weight},
                {"hessian",
                 {{"tokens", h.tokens},
                  {"k", h.k},
                  {"tokens_per_input", h.tokens_per_input},
                  {"dead_channels", h.dead_channels},
                  {"rho_rms", h.rho_rms},
                  {"inv_sqrt_tokens", h.inv_sqrt_tokens},
                  {"damp_used", h.damp_used},
                  {"damp_retries", h.damp_retries}}},
                {"seconds", a.seconds},
                {"previous_heldout", a.previous_heldout.has_value()
                                         ? SplitToJson(*a.previous_heldout)
                                         : json()},
                {"worse_than_rtn_heldout", a.worse_than_rtn_heldout},
                {"overfit", a.overfit},
                {"rank_deficient", a.rank_deficient},
                {"outlier", a.outlier}}},
              {"choices",
               {{"damp_used", c.damp_used},
                {"damp_retries", c.damp_retries},
                {"damp_grid", c.damp_grid},
                {"damp_validation_error", c.damp_validation_error},
                {"awq_alpha", c.awq_alpha.has_value() ? json(*c.awq_alpha)
                                                      : json(nullptr)}}},
              {"awq_fold", l.awq_fold},
              {"absorbed_awq_scales_of", l.absorbed_awq_scales_of},
              {"expert", l.expert},
              {"calibration_tokens", l.calibration_tokens},
              {"heldout_tokens", l.heldout_tokens},
              {"fallback", l.fallback},
              {"fallback_reason", l.fallback_reason}};
  if (a.heldout_pending) out["audit"]["heldout_pending"] = true;
  return out;
}

absl::StatusOr<LayerResult> LayerResultFromTaskJson(const json& j) {
  LayerResult l;
  FieldReader r(j, "layer result");
  r.Get("name", &l.name);
  std::string type, input_group;
  r.Get("type", &type);
  r.Get("input_group", &input_group);
  r.Get("quantized", &l.quantized);
  r.Get("reason", &l.reason);
  r.Get("awq_fold", &l.awq_fold);
  r.Get("absorbed_awq_scales_of", &l.absorbed_awq_scales_of);
  r.Get("expert", &l.expert);
  r.Get("calibration_tokens", &l.calibration_tokens);
  r.Get("heldout_tokens", &l.heldout_tokens);
  r.Get("fallback", &l.fallback);
  r.Get("fallback_reason", &l.fallback_reason);

  std::string method, grid, grid_kind;
  FieldReader s = r.Object("settings");
  s.Get("name", &l.settings.name);
  s.Get("method", &method);
  s.Get("bits", &l.settings.bits);
  s.Get("group_size", &l.settings.group_size);
  s.Get("grid", &grid);
  s.Get("damp_automatic", &l.settings.damp.automatic);
  s.Get("damp_fraction", &l.settings.damp.fraction);
  s.Get("keep_unquantized", &l.settings.keep_unquantized);
  s.Get("reason", &l.settings.reason);
  s.Get("overrides", &l.settings.overrides);
  r.Absorb(s);

  LayerAudit& a = l.audit;
  FieldReader ar = r.Object("audit");
  ar.Get("layer", &a.layer);
  ar.Get("method", &a.method);
  ar.Get("grid_kind", &grid_kind);
  ar.Get("grid_bits", &a.grid.bits);
  ar.Get("grid_group_size", &a.grid.group_size);
  ar.Get("grid_f16_scales", &a.grid.f16_scales);
  ReadSplit(ar, "method_calibration", &a.method_calibration);
  ReadSplit(ar, "method_heldout", &a.method_heldout);
  ReadSplit(ar, "rtn_calibration", &a.rtn_calibration);
  ReadSplit(ar, "rtn_heldout", &a.rtn_heldout);
  ar.Get("method_weight_mse", &a.method_weight_mse);
  ar.Get("rtn_weight_mse", &a.rtn_weight_mse);
  ar.Get("gain_calibration", &a.gain_calibration);
  ar.Get("gain_heldout", &a.gain_heldout);
  ar.Get("flattery", &a.flattery);
  ar.Get("bits_per_weight", &a.bits_per_weight);
  FieldReader hr = ar.Object("hessian");
  hr.Get("tokens", &a.hessian.tokens);
  hr.Get("k", &a.hessian.k);
  hr.Get("tokens_per_input", &a.hessian.tokens_per_input);
  hr.Get("dead_channels", &a.hessian.dead_channels);
  hr.Get("rho_rms", &a.hessian.rho_rms);
  hr.Get("inv_sqrt_tokens", &a.hessian.inv_sqrt_tokens);
  hr.Get("damp_used", &a.hessian.damp_used);
  hr.Get("damp_retries", &a.hessian.damp_retries);
  ar.Absorb(hr);
  ar.Get("seconds", &a.seconds);
  if (ar.Has("previous_heldout") && !ar.Field("previous_heldout")->is_null()) {
    ReadSplit(ar, "previous_heldout", &a.previous_heldout.emplace());
  }
  ar.Get("worse_than_rtn_heldout", &a.worse_than_rtn_heldout);
  ar.Get("overfit", &a.overfit);
  ar.Get("rank_deficient", &a.rank_deficient);
  ar.Get("outlier", &a.outlier);
  // Written only while pending (a round's reduce before the block's held-out
  // audit), so a finished audit's JSON is as before.
  if (ar.Has("heldout_pending")) ar.Get("heldout_pending", &a.heldout_pending);
  r.Absorb(ar);

  FieldReader cr = r.Object("choices");
  cr.Get("damp_used", &l.choices.damp_used);
  cr.Get("damp_retries", &l.choices.damp_retries);
  cr.Get("damp_grid", &l.choices.damp_grid);
  cr.Get("damp_validation_error", &l.choices.damp_validation_error);
  if (const json* alpha = cr.Field("awq_alpha"); alpha != nullptr) {
    if (alpha->is_number()) {
      l.choices.awq_alpha = alpha->get<float>();
    } else if (!alpha->is_null()) {
      return absl::InvalidArgumentError(
          "layer result.choices.awq_alpha is not a number or null");
    }
  }
  r.Absorb(cr);
  QUANT_RETURN_IF_ERROR(r.status());

  if (!EnumFromName(method, QuantMethodName,
                    {QuantMethod::kRtn, QuantMethod::kGptq, QuantMethod::kAwq},
                    &l.settings.method)) {
    return UnknownValue("settings.method", method);
  }
  if (!EnumFromName(
          grid, QuantGridName,
          {QuantGrid::kSym, QuantGrid::kSymRestricted, QuantGrid::kAsym},
          &l.settings.grid)) {
    return UnknownValue("settings.grid", grid);
  }
  QUANT_ASSIGN_OR_RETURN(a.grid.kind, ParseGridKind(grid_kind));
  const std::optional<LayerType> known_type = LayerTypeFromName(type);
  if (!known_type.has_value()) return UnknownValue("type", type);
  l.type = *known_type;
  const std::optional<InputGroup> known_group = InputGroupFromName(input_group);
  if (!known_group.has_value()) return UnknownValue("input_group", input_group);
  l.input_group = *known_group;
  return l;
}

namespace {

// "block-00003": the name every file of block 3 starts with.
std::string BlockStem(int block) {
  return absl::StrFormat("block-%05d", block);
}

}  // namespace

std::string BlockOutputPrefix(const std::string& dir, int block) {
  return JoinPath(dir, BlockStem(block));
}

namespace {

// A block's layers.json holds a few KiB per layer; anything near this is not
// one the block task wrote.
constexpr size_t kMaxLayersFileBytes = size_t{64} << 20;

// The block files whose sha256 layers.json records, by suffix.
constexpr const char* kHashedSuffixes[] = {".safetensors", ".cal.safetensors",
                                           ".heldout.safetensors"};

constexpr char kChangedBlockPayload[] =
    "type.googleapis.com/quant.ChangedBlockOutput";

absl::Status ChangedBlockError(int block, std::string message) {
  absl::Status status = absl::DataLossError(std::move(message));
  status.SetPayload(kChangedBlockPayload, absl::Cord(absl::StrCat(block)));
  return status;
}

}  // namespace

std::optional<int> ChangedBlockOutput(const absl::Status& status) {
  const auto payload = status.GetPayload(kChangedBlockPayload);
  int block = 0;
  if (!payload.has_value() ||
      !absl::SimpleAtoi(std::string(*payload), &block) || block < 0) {
    return std::nullopt;
  }
  return block;
}

namespace {

// Non-empty `expected_sha256`: `text` (read from layers_path) must hash to
// it.
absl::Status CheckLayersFile(const std::string& layers_path, int block,
                             const std::string& text,
                             const std::string& expected_sha256) {
  if (expected_sha256.empty()) return absl::OkStatus();
  const std::string actual = Sha256Hex(text);
  if (actual == expected_sha256) return absl::OkStatus();
  return ChangedBlockError(
      block, absl::StrCat(layers_path, ": sha256 is ", actual,
                          ", the coordinator recorded ", expected_sha256,
                          " when block ", block,
                          "'s task completed: the file changed on disk "
                          "since, so block ",
                          block, " must be computed again"));
}

}  // namespace

absl::Status VerifyBlockFile(const std::string& dir, int block,
                             const std::string& suffix,
                             const std::string& expected_layers_sha256,
                             FileSystem* fs, FileDigests* digests) {
  const std::string prefix = BlockOutputPrefix(dir, block);
  const std::string layers_path = prefix + ".layers.json";
  QUANT_ASSIGN_OR_RETURN(std::string text,
                         fs->ReadFile(layers_path, kMaxLayersFileBytes));
  QUANT_RETURN_IF_ERROR(
      CheckLayersFile(layers_path, block, text, expected_layers_sha256));
  const json doc = ParseJsonOrDiscarded(text);
  const json* files = nullptr;
  if (doc.is_object()) {
    auto it = doc.find("sha256");
    if (it != doc.end() && it->is_object()) files = &*it;
  }
  if (files == nullptr || !files->contains(suffix) ||
      !(*files)[suffix].is_string()) {
    return ChangedBlockError(
        block,
        absl::StrCat(layers_path, ": records no sha256 for block-file suffix ",
                     suffix,
                     ": not the output of this version of the block "
                     "task"));
  }
  const std::string recorded = (*files)[suffix].get<std::string>();
  QUANT_ASSIGN_OR_RETURN(const std::string actual,
                         Sha256FileWith(digests, prefix + suffix, fs));
  if (actual != recorded) {
    return ChangedBlockError(
        block, absl::StrCat(prefix, suffix, ": sha256 is ", actual, ", block ",
                            block, "'s task recorded ", recorded,
                            " when it completed: the file changed on disk "
                            "since, so block ",
                            block, " must be computed again"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> VerifyPublishedBlock(const std::string& dir,
                                                 int block, FileSystem* fs) {
  const std::string prefix = BlockOutputPrefix(dir, block);
  const std::string layers_path = prefix + ".layers.json";
  QUANT_ASSIGN_OR_RETURN(std::string text,
                         fs->ReadFile(layers_path, kMaxLayersFileBytes));
  const std::string layers_sha256 = Sha256Hex(text);
  const json doc = ParseJsonOrDiscarded(text);
  if (!doc.is_object() || !doc.contains("sha256") ||
      !doc["sha256"].is_object() || !doc["sha256"].contains(".safetensors")) {
    return ChangedBlockError(
        block, absl::StrCat(layers_path,
                            ": records no sha256 of the block's tensors: not "
                            "the output of this version of the block task"));
  }
  std::vector<std::string> suffixes(std::begin(kHashedSuffixes),
                                    std::end(kHashedSuffixes));
  for (int g = 0; g < kBlockRoundGroups; ++g) {
    for (const bool by_layer : {false, true}) {
      for (const std::optional<LayerType>& layer :
           RoundGroupReduces(g, by_layer)) {
        suffixes.push_back(RoundDeltaSuffix(g, layer));
      }
    }
  }
  for (const std::string& suffix : suffixes) {
    if (!doc["sha256"].contains(suffix)) continue;
    QUANT_RETURN_IF_ERROR(
        VerifyBlockFile(dir, block, suffix, layers_sha256, fs));
  }
  return layers_sha256;
}

std::string ShardStatisticsFile(int block, int group, bool calibration,
                                int shard) {
  return absl::StrCat(BlockStem(block), ".rounds/g", group,
                      calibration ? ".cal-" : ".heldout-",
                      absl::Dec(shard, absl::kZeroPad4), ".stats.safetensors");
}

std::string BlockLayersFile(int block) {
  return BlockStem(block) + ".layers.json";
}

std::string RoundDeltaSuffix(int group, std::optional<LayerType> layer) {
  return absl::StrCat(".rounds/g", group,
                      layer.has_value()
                          ? absl::StrCat(".", LayerTypeName(*layer))
                          : std::string(),
                      ".delta.safetensors");
}

std::string RoundDeltaFile(int block, int group,
                           std::optional<LayerType> layer) {
  return BlockStem(block) + RoundDeltaSuffix(group, layer);
}

std::string ShardOutputFile(int block, bool calibration, int shard) {
  return absl::StrCat(BlockStem(block), ".rounds/",
                      calibration ? "cal-" : "heldout-",
                      absl::Dec(shard, absl::kZeroPad4), ".out.safetensors");
}

absl::Status WriteBlockOutput(
    const std::string& dir, const BlockTaskOutput& output, FileSystem* fs,
    const std::map<std::string, std::string>& round_delta_sha256, int threads) {
  const std::string prefix = BlockOutputPrefix(dir, output.block);
  QUANT_RETURN_IF_ERROR(WriteSafetensors(
      prefix + ".safetensors", AsTensorsToWrite(output.tensors), {}, fs));
  // Empty when the task streamed them to these files itself.
  if (!output.calibration_out.lengths.empty()) {
    QUANT_RETURN_IF_ERROR(WriteHiddenStates(prefix + ".cal.safetensors",
                                            output.calibration_out, fs));
  }
  if (!output.heldout_out.lengths.empty()) {
    QUANT_RETURN_IF_ERROR(WriteHiddenStates(prefix + ".heldout.safetensors",
                                            output.heldout_out, fs));
  }
  json layers = json::array();
  for (const LayerResult& l : output.layers) {
    layers.push_back(LayerResultToTaskJson(l));
  }
  // What a later task reads is checked against these: a file changed on
  // disk between tasks must not reach a published checkpoint.
  json sha256 = json::object();
  std::vector<const char*> present;
  for (const char* suffix : kHashedSuffixes) {
    if (FileExists(prefix + suffix)) present.push_back(suffix);
  }
  std::vector<absl::StatusOr<std::string>> digests(
      present.size(), absl::UnknownError("not hashed"));
  {
    // One thread each, at most the task's: the files are of similar size.
    ThreadPool pool(std::min(threads, static_cast<int>(present.size())));
    ParallelFor(&pool, static_cast<int64_t>(present.size()), [&](int64_t i) {
      digests[i] = Sha256File(prefix + present[i], fs);
    });
  }
  for (size_t i = 0; i < present.size(); ++i) {
    QUANT_ASSIGN_OR_RETURN(std::string digest, std::move(digests[i]));
    sha256[present[i]] = std::move(digest);
  }
  for (const auto& [suffix, digest] : round_delta_sha256) {
    sha256[suffix] = digest;
  }
  // Last: its presence means the block's other files are complete.
  // The level matters to every later reader: results differ in the last
  // bits between levels, and a job's blocks must not mix them.
  json doc{{"block", output.block},
           {"isa", std::string(kernels::IsaName(kernels::CurrentIsa()))},
           {"sha256", std::move(sha256)},
           {"layers", std::move(layers)}};
  if (!output.routed_calibration_tokens.empty()) {
    doc["experts"] = {
        {"routed_calibration_tokens", output.routed_calibration_tokens},
        {"routed_heldout_tokens", output.routed_heldout_tokens},
        {"starved", output.starved_experts}};
  }
  return WriteFileAtomically(prefix + ".layers.json", doc.dump(1), fs);
}

absl::Status PublishBlockOutput(const std::string& attempt_dir,
                                const std::string& work_dir, int block,
                                FileSystem* fs, bool leaving_states) {
  const std::string from = BlockOutputPrefix(attempt_dir, block);
  const std::string to = BlockOutputPrefix(work_dir, block);
  std::vector<const char*> suffixes = {".safetensors"};
  if (leaving_states) {
    suffixes.push_back(".cal.safetensors");
    suffixes.push_back(".heldout.safetensors");
  }
  suffixes.push_back(".layers.json");
  for (const char* suffix : suffixes) {
    const absl::Status renamed = fs->RenameFile(from + suffix, to + suffix);
    if (!renamed.ok()) {
      return absl::Status(
          renamed.code(),
          absl::StrCat("publishing block ", block, ": ", renamed.message()));
    }
  }
  return fs->SyncDirectory(work_dir);
}

absl::StatusOr<StoredBlockOutput> ReadBlockLayers(
    const std::string& dir, int block,
    const std::string& expected_layers_sha256, FileSystem* fs) {
  const std::string prefix = BlockOutputPrefix(dir, block);
  StoredBlockOutput out;
  QUANT_ASSIGN_OR_RETURN(std::string text, fs->ReadFile(prefix + ".layers.json",
                                                        kMaxLayersFileBytes));
  QUANT_RETURN_IF_ERROR(CheckLayersFile(prefix + ".layers.json", block, text,
                                        expected_layers_sha256));
  const json doc = ParseJsonOrDiscarded(text);
  if (!doc.is_object() || !doc.contains("layers") ||
      !doc["layers"].is_array() || !doc.contains("block") ||
      !doc["block"].is_number_integer() || doc["block"].get<int>() != block) {
    return absl::InvalidArgumentError(
        absl::StrCat(prefix, ".layers.json: not the layers of block ", block));
  }
  if (doc.contains("isa")) {
    const std::string running(kernels::IsaName(kernels::CurrentIsa()));
    if (!doc["isa"].is_string() || doc["isa"].get<std::string>() != running) {
      return absl::FailedPreconditionError(absl::StrCat(
          prefix, ".layers.json: block ", block, " was computed with ",
          doc["isa"].is_string() ? doc["isa"].get<std::string>() : "unknown",
          " kernels, this run uses ", running,
          ": a job runs at one kernel level (--isa / QUANT_ISA)"));
    }
    out.isa = running;
  }
  if (doc.contains("experts")) {
    FieldReader experts(doc["experts"], "experts");
    experts.Get("routed_calibration_tokens", &out.routed_calibration_tokens);
    experts.Get("routed_heldout_tokens", &out.routed_heldout_tokens);
    experts.Get("starved", &out.starved_experts);
    if (!experts.status().ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, ".layers.json: ", experts.status().message()));
    }
  }
  for (const json& layer : doc["layers"]) {
    absl::StatusOr<LayerResult> result = LayerResultFromTaskJson(layer);
    if (!result.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(prefix, ".layers.json: ", result.status().message()));
    }
    out.layers.push_back(std::move(*result));
  }
  return out;
}

absl::StatusOr<StoredBlockOutput> ReadBlockOutput(
    const std::string& dir, int block,
    const std::string& expected_layers_sha256, FileSystem* fs) {
  QUANT_ASSIGN_OR_RETURN(
      StoredBlockOutput out,
      ReadBlockLayers(dir, block, expected_layers_sha256, fs));
  const std::string prefix = BlockOutputPrefix(dir, block);
  QUANT_RETURN_IF_ERROR(
      VerifyBlockFile(dir, block, ".safetensors", expected_layers_sha256, fs));
  QUANT_ASSIGN_OR_RETURN(
      std::unique_ptr<SafetensorsFile> file,
      SafetensorsFile::Open(prefix + ".safetensors", {}, fs));
  for (const TensorInfo& info : file->tensors()) {
    const absl::Span<const uint8_t> bytes = file->RawBytes(info);
    out.tensors.push_back(
        {info.name, info.dtype, info.shape,
         std::string(reinterpret_cast<const char*>(bytes.data()),
                     bytes.size())});
  }
  return out;
}

}  // namespace quant
