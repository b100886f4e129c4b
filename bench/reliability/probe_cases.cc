// The rows from the outside probe's classes (issue 23): files that are not
// regular or that lead out of the allowed roots, nesting and integers out of
// range in config.json, recipe checks that must come before any work, and
// request fields too large to store and serve back.
#include <sys/stat.h>
#include <unistd.h>

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

// The calibration by URI: `make` builds the file (or FIFO, or directory)
// and returns its path; the hash is the good set's (never reached).
RequestEdit CalibrationAt(
    std::function<absl::StatusOr<std::string>(BadInputEnv&)> make) {
  return [make = std::move(make)](BadInputEnv& env,
                                  v1::CreateJobRequest& request) {
    QUANT_ASSIGN_OR_RETURN(const std::string path, make(env));
    v1::UriWithHash* uri = request.mutable_calibration()->mutable_uri();
    uri->set_uri("file://" + path);
    uri->set_sha256(env.good_calibration_sha256());
    return absl::OkStatus();
  };
}

// A copy of the good checkpoint whose `file` is a symlink to a copy of the
// same file outside every root.
RequestEdit FileLeadingOut(std::string copy, std::string file) {
  return [copy = std::move(copy), file = std::move(file)](
             BadInputEnv& env, v1::CreateJobRequest& request) -> absl::Status {
    const std::string dir = JoinPath(env.ModelsDir(), copy);
    QUANT_RETURN_IF_ERROR(CopyCheckpoint(env.good_checkpoint(), dir));
    const std::string outside = JoinPath(env.temp_dir(), copy + "-outside");
    if (::mkdir(outside.c_str(), 0755) != 0) {
      return absl::InternalError(absl::StrCat("mkdir ", outside));
    }
    const std::string target = JoinPath(outside, file);
    QUANT_ASSIGN_OR_RETURN(std::string bytes,
                           ReadFileToString(JoinPath(dir, file)));
    QUANT_RETURN_IF_ERROR(WriteFileAtomically(target, bytes));
    const std::string link = JoinPath(dir, file);
    if (::unlink(link.c_str()) != 0 ||
        ::symlink(target.c_str(), link.c_str()) != 0) {
      return absl::InternalError(absl::StrCat("symlink ", link));
    }
    request.set_checkpoint_uri("file://" + dir);
    return absl::OkStatus();
  };
}

// A copy of the good checkpoint whose `file` is a FIFO with no writer.
RequestEdit FileReplacedByFifo(std::string copy, std::string file) {
  return [copy = std::move(copy), file = std::move(file)](
             BadInputEnv& env, v1::CreateJobRequest& request) -> absl::Status {
    const std::string dir = JoinPath(env.ModelsDir(), copy);
    QUANT_RETURN_IF_ERROR(CopyCheckpoint(env.good_checkpoint(), dir));
    const std::string path = JoinPath(dir, file);
    if (::unlink(path.c_str()) != 0 || ::mkfifo(path.c_str(), 0600) != 0) {
      return absl::InternalError(absl::StrCat("mkfifo ", path));
    }
    request.set_checkpoint_uri("file://" + dir);
    return absl::OkStatus();
  };
}

RequestEdit ConfigEdit(std::string copy,
                       std::function<void(nlohmann::json&)> edit) {
  return [copy = std::move(copy), edit = std::move(edit)](
             BadInputEnv& env, v1::CreateJobRequest& request) -> absl::Status {
    const std::string dir = JoinPath(env.ModelsDir(), copy);
    QUANT_RETURN_IF_ERROR(CopyCheckpoint(env.good_checkpoint(), dir));
    QUANT_RETURN_IF_ERROR(EditConfig(dir, edit));
    request.set_checkpoint_uri("file://" + dir);
    return absl::OkStatus();
  };
}

}  // namespace

std::vector<BadInputCase> ProbeCases() {
  std::vector<BadInputCase> cases;
  cases.push_back(CreateCase(
      "files/fifo_calibration", "calibration URI naming a FIFO (no writer)",
      {Stage::kCreateJob,
       "INVALID_ARGUMENT",
       {"calibration.uri.uri", "is a FIFO, not a regular file"}},
      CalibrationAt([](BadInputEnv& env) -> absl::StatusOr<std::string> {
        const std::string path = JoinPath(env.temp_dir(), "inputs/calib.fifo");
        if (::mkfifo(path.c_str(), 0600) != 0) {
          return absl::InternalError(absl::StrCat("mkfifo ", path));
        }
        return path;
      })));
  cases.push_back(CreateCase(
      "files/directory_calibration", "calibration URI naming a directory",
      {Stage::kCreateJob,
       "INVALID_ARGUMENT",
       {"calibration.uri.uri", "is a directory, not a regular file"}},
      CalibrationAt([](BadInputEnv& env) -> absl::StatusOr<std::string> {
        const std::string path = JoinPath(env.temp_dir(), "inputs/calib.d");
        if (::mkdir(path.c_str(), 0755) != 0) {
          return absl::InternalError(absl::StrCat("mkdir ", path));
        }
        return path;
      })));
  cases.push_back(
      CreateCase("files/fifo_weights",
                 "a checkpoint whose model.safetensors is a FIFO (no writer)",
                 {Stage::kCreateJob,
                  "INVALID_ARGUMENT",
                  {"model.safetensors", "is a FIFO, not a regular file"}},
                 FileReplacedByFifo("fifo_weights", "model.safetensors")));
  cases.push_back(CreateCase("files/fifo_config",
                             "a checkpoint whose config.json is a FIFO",
                             {Stage::kCreateJob,
                              "INVALID_ARGUMENT",
                              {"config.json", "is a FIFO, not a regular file"}},
                             FileReplacedByFifo("fifo_config", "config.json")));
  cases.push_back(CreateCase(
      "files/config_symlink_out",
      "a checkpoint under a root whose config.json is a symlink out of every "
      "root",
      {Stage::kCreateJob,
       "PERMISSION_DENIED",
       {"checkpoint_uri", "config.json leads outside the allowed roots"}},
      FileLeadingOut("config_link_out", "config.json")));
  cases.push_back(CreateCase(
      "files/weights_symlink_out",
      "a checkpoint under a root whose model.safetensors is a symlink out of "
      "every root",
      {Stage::kCreateJob,
       "PERMISSION_DENIED",
       {"checkpoint_uri", "model.safetensors leads outside the allowed roots"}},
      FileLeadingOut("weights_link_out", "model.safetensors")));
  cases.push_back(CreateCase(
      "config/deep_nesting", "config.json with a value nested 20,000 levels",
      {Stage::kCreateJob,
       "INVALID_ARGUMENT",
       {"config.json", "nested deeper than 64 levels"}},
      [](BadInputEnv& env, v1::CreateJobRequest& request) -> absl::Status {
        // Written as text: 20,000 levels pretty-printed would be 800 MB.
        const std::string dir = JoinPath(env.ModelsDir(), "deep_config");
        QUANT_RETURN_IF_ERROR(CopyCheckpoint(env.good_checkpoint(), dir));
        const std::string path = JoinPath(dir, "config.json");
        QUANT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
        const size_t close = text.rfind('}');
        if (close == std::string::npos) {
          return absl::InternalError("config.json has no closing brace");
        }
        text = absl::StrCat(text.substr(0, close),
                            ", \"extra\": ", std::string(20000, '['), "1",
                            std::string(20000, ']'), "}\n");
        QUANT_RETURN_IF_ERROR(WriteFileAtomically(path, text));
        request.set_checkpoint_uri("file://" + dir);
        return absl::OkStatus();
      }));
  cases.push_back(CreateCase(
      "config/positions_overflow",
      "config.json max_position_embeddings 2^32 + 64 (was read as 64)",
      {Stage::kCreateJob,
       "INVALID_ARGUMENT",
       {"max_position_embeddings", "1..16777216", "4294967360"}},
      ConfigEdit("positions_overflow", [](nlohmann::json& config) {
        config["max_position_embeddings"] = (int64_t{1} << 32) + 64;
      })));
  // Fields that change the forward pass are applied or refused, never
  // read and ignored.
  cases.push_back(CreateCase(
      "config/unapplied_field", "config.json mlp_bias true (a Llama field)",
      {Stage::kCreateJob, "INVALID_ARGUMENT", {"mlp_bias", "is not supported"}},
      ConfigEdit("mlp_bias",
                 [](nlohmann::json& config) { config["mlp_bias"] = true; })));
  cases.push_back(CreateCase(
      "config/unsupported_rope_scaling",
      "config.json rope_scaling of type yarn",
      {Stage::kCreateJob,
       "INVALID_ARGUMENT",
       {"rope_type", "\"yarn\"", "is not supported"}},
      ConfigEdit("rope_yarn", [](nlohmann::json& config) {
        config["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
      })));
  cases.push_back(CreateCase(
      "recipe/seq_len_over_positions",
      "calibration.seq_len 4096 for a model of 512 positions",
      {Stage::kCreateJob,
       "INVALID_ARGUMENT",
       {"calibration.seq_len", "max_position_embeddings (512)"}},
      [](BadInputEnv&, v1::CreateJobRequest& request) {
        request.mutable_recipe()->mutable_calibration()->set_seq_len(4096);
        return absl::OkStatus();
      }));
  cases.push_back(CreateCase(
      "recipe/catastrophic_ignore",
      "ignore pattern that backtracks catastrophically on every layer name",
      {Stage::kCreateJob,
       "INVALID_ARGUMENT",
       {"recipe: ignore[", "gave up matching"}},
      [](BadInputEnv&, v1::CreateJobRequest& request) {
        request.mutable_recipe()->add_ignore(
            "([a-z_.0-9]|[a-z_.0-9])*[^a-z_.0-9]");
        return absl::OkStatus();
      }));
  cases.push_back(CreateCase(
      "tokenizer/catastrophic_split",
      "tokenizer.json whose Split pattern backtracks catastrophically on "
      "the calibration text (used to end the split silently)",
      {Stage::kJob, "FAILED", {"cannot tokenize", "gave up at byte"}},
      [](BadInputEnv& env, v1::CreateJobRequest& request) -> absl::Status {
        const std::string dir = JoinPath(env.ModelsDir(), "catastrophic_split");
        QUANT_RETURN_IF_ERROR(CopyCheckpoint(env.good_checkpoint(), dir));
        const std::string path = JoinPath(dir, "tokenizer.json");
        QUANT_ASSIGN_OR_RETURN(std::string text, ReadFileToString(path));
        nlohmann::json tokenizer = nlohmann::json::parse(text, nullptr, false);
        if (!tokenizer.is_object()) {
          return absl::InternalError("tokenizer.json is not an object");
        }
        // Two ways to take every character, then a class no text has: each
        // split of the text is tried (a class, unlike a literal, is not a
        // "required character" PCRE2 can look for first).
        tokenizer["pre_tokenizer"] = {
            {"type", "Split"},
            {"pattern", {{"Regex", "([^\\x00]|[^\\x00])*[\\x00\\x01]"}}},
            {"behavior", "Isolated"},
            {"invert", false}};
        QUANT_RETURN_IF_ERROR(WriteFileAtomically(path, tokenizer.dump()));
        request.set_checkpoint_uri("file://" + dir);
        return absl::OkStatus();
      }));
  cases.push_back(CreateCase(
      "api/oversized_label", "one label value of 1 MiB",
      {Stage::kCreateJob, "INVALID_ARGUMENT", {"request", "at most 524288"}},
      [](BadInputEnv&, v1::CreateJobRequest& request) {
        (*request.mutable_labels())["team"] = std::string(1 << 20, 'x');
        return absl::OkStatus();
      }));
  cases.push_back(CreateCase(
      "api/long_uri", "a checkpoint URI of 10,000 characters",
      {Stage::kCreateJob,
       "PERMISSION_DENIED",
       {"checkpoint_uri", "10008 characters"}},
      [](BadInputEnv&, v1::CreateJobRequest& request) {
        request.set_checkpoint_uri("file:///" + std::string(10000, 'a'));
        return absl::OkStatus();
      }));
  return cases;
}

}  // namespace quant::reliability
