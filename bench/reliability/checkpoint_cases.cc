// The checkpoint rows: broken safetensors, tensors and config.json, and
// URIs that point where quantd must not read.
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "bench/reliability/bad_input_cases.h"
#include "bench/reliability/bad_input_files.h"
#include "bench/reliability/case_actions.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"

namespace quant::reliability {
namespace {

constexpr char kQProj[] = "model.layers.0.self_attn.q_proj.weight";
constexpr char kGateProj[] = "model.layers.1.mlp.gate_proj.weight";
constexpr char kUpProj[] = "model.layers.2.mlp.up_proj.weight";

// A copy of the good checkpoint named `name`, changed by `change`, as the
// request's checkpoint.
RequestEdit BrokenCopy(std::string name,
                       std::function<absl::Status(const std::string&)> change) {
  return [name = std::move(name), change = std::move(change)](
             BadInputEnv& env, v1::CreateJobRequest& request) -> absl::Status {
    const std::string dir = JoinPath(env.ModelsDir(), name);
    QUANT_RETURN_IF_ERROR(CopyCheckpoint(env.good_checkpoint(), dir));
    QUANT_RETURN_IF_ERROR(change(dir));
    request.set_checkpoint_uri("file://" + dir);
    return absl::OkStatus();
  };
}

RequestEdit Uri(std::function<absl::StatusOr<std::string>(BadInputEnv&)> uri) {
  return [uri = std::move(uri)](BadInputEnv& env,
                                v1::CreateJobRequest& request) -> absl::Status {
    QUANT_ASSIGN_OR_RETURN(const std::string value, uri(env));
    request.set_checkpoint_uri(value);
    return absl::OkStatus();
  };
}

// A weight that is not finite: found by the worker's scan when the job
// runs (CreateJob does not read every weight); a CreateJob refusal would
// be as good.
BadInputCase NonFiniteCase(std::string name, std::string input,
                           const char* tensor, float value, std::string word) {
  BadInputCase c =
      CreateCase(std::move(name), std::move(input),
                 {Stage::kJob, "FAILED", {tensor, word}},
                 BrokenCopy(std::string("nonfinite_") + word,
                            [tensor, value](const std::string& dir) {
                              return PoisonTensor(dir, tensor, 5, value);
                            }));
  c.also_accepted = {{Stage::kCreateJob, "FAILED_PRECONDITION", {tensor, word}},
                     {Stage::kCreateJob, "INVALID_ARGUMENT", {tensor, word}}};
  return c;
}

}  // namespace

std::vector<BadInputCase> CheckpointCases() {
  std::vector<BadInputCase> cases;
  cases.push_back(
      CreateCase("checkpoint/malformed_header",
                 "model.safetensors whose header JSON is cut short by garbage",
                 {Stage::kCreateJob,
                  "INVALID_ARGUMENT",
                  {"checkpoint_uri", "model.safetensors", "header"}},
                 BrokenCopy("malformed_header", CorruptSafetensorsHeader)));
  cases.push_back(
      CreateCase("checkpoint/truncated",
                 "model.safetensors missing its last 1000 data bytes",
                 {Stage::kCreateJob,
                  "DATA_LOSS",
                  {"checkpoint_uri", "model.safetensors", "truncated"}},
                 BrokenCopy("truncated", [](const std::string& dir) {
                   return TruncateSafetensors(dir, 1000);
                 })));
  cases.push_back(CreateCase(
      "checkpoint/missing_tensor", absl::StrCat("no ", kGateProj),
      {Stage::kCreateJob, "INVALID_ARGUMENT", {kGateProj, "missing"}},
      BrokenCopy("missing_tensor", [](const std::string& dir) {
        return RewriteSafetensors(dir, [](std::vector<EditableTensor>& all) {
          for (auto it = all.begin(); it != all.end(); ++it) {
            if (it->name == kGateProj) {
              all.erase(it);
              return absl::OkStatus();
            }
          }
          return absl::NotFoundError(kGateProj);
        });
      })));
  cases.push_back(CreateCase(
      "checkpoint/wrong_shape",
      absl::StrCat(kQProj, " stored as [32, 128], config says [64, 64]"),
      {Stage::kCreateJob, "INVALID_ARGUMENT", {kQProj, "shape"}},
      BrokenCopy("wrong_shape", [](const std::string& dir) {
        return RewriteSafetensors(dir, [](std::vector<EditableTensor>& all) {
          for (EditableTensor& tensor : all) {
            if (tensor.name == kQProj) {
              tensor.shape = {32, 128};  // Same bytes, other shape.
              return absl::OkStatus();
            }
          }
          return absl::NotFoundError(kQProj);
        });
      })));
  cases.push_back(NonFiniteCase(
      "checkpoint/nan_weight", absl::StrCat("NaN at element 5 of ", kQProj),
      kQProj, std::numeric_limits<float>::quiet_NaN(), "NaN"));
  cases.push_back(NonFiniteCase(
      "checkpoint/inf_weight", absl::StrCat("+Inf at element 5 of ", kUpProj),
      kUpProj, std::numeric_limits<float>::infinity(), "infinity"));
  cases.push_back(CreateCase(
      "checkpoint/unsupported_architecture",
      "config.json: architectures [MambaForCausalLM], model_type mamba",
      {Stage::kCreateJob,
       "INVALID_ARGUMENT",
       {"checkpoint_uri", "architectures", "MambaForCausalLM"}},
      BrokenCopy("unsupported_architecture", [](const std::string& dir) {
        return EditConfig(dir, [](nlohmann::json& config) {
          config["architectures"] = nlohmann::json::array({"MambaForCausalLM"});
          config["model_type"] = "mamba";
        });
      })));
  cases.push_back(CreateCase(
      "checkpoint/outside_roots",
      "file:// URI of the shared stories260K folder (not an allowed root)",
      {Stage::kCreateJob, "PERMISSION_DENIED", {"checkpoint_uri"}},
      Uri([](BadInputEnv& env) -> absl::StatusOr<std::string> {
        return "file://" + env.SharedCheckpoint();
      })));
  cases.push_back(CreateCase(
      "checkpoint/dotdot_traversal",
      "file://ROOT/models/../../data (quantd's own data folder)",
      {Stage::kCreateJob, "PERMISSION_DENIED", {"checkpoint_uri"}},
      Uri([](BadInputEnv& env) -> absl::StatusOr<std::string> {
        return absl::StrCat("file://", env.ModelsDir(), "/../../data");
      })));
  cases.push_back(CreateCase(
      "checkpoint/symlink_out",
      "ROOT/models/link -> the shared stories260K folder",
      {Stage::kCreateJob, "PERMISSION_DENIED", {"checkpoint_uri"}},
      Uri([](BadInputEnv& env) -> absl::StatusOr<std::string> {
        const std::string link = JoinPath(env.ModelsDir(), "link");
        if (symlink(env.SharedCheckpoint().c_str(), link.c_str()) != 0) {
          return absl::InternalError(absl::StrCat("symlink ", link));
        }
        return "file://" + link;
      })));
  cases.push_back(
      CreateCase("checkpoint/missing_directory", "file://ROOT/models/absent",
                 {Stage::kCreateJob, "NOT_FOUND", {"checkpoint_uri", "absent"}},
                 Uri([](BadInputEnv& env) -> absl::StatusOr<std::string> {
                   return absl::StrCat("file://", env.ModelsDir(), "/absent");
                 })));
  return cases;
}

}  // namespace quant::reliability
