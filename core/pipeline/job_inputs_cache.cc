// JobInputsCache: one job's opened inputs kept between its tasks.
#include "core/pipeline/job_inputs_cache.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/pipeline/internal/job_inputs.h"
#include "core/recipe/recipe.h"

namespace quant {
namespace {

// Everything OpenJobInputs reads from `context`, as one string.
std::string InputsKey(const JobTaskContext& context) {
  std::string key = absl::StrCat(
      context.job_id, "\n", context.checkpoint_dir, "\n", context.tokenizer_dir,
      "\n", context.calibration_path, "\n", context.chat_template_sha256, "\n",
      context.tasks_sha256, "\n", context.previous_dir, "\n",
      context.verify_previous_at_open, "\n", RecipeToJson(context.recipe));
  for (const CalibrationSourceFile& source : context.calibration_sources) {
    absl::StrAppend(&key, "\n", source.path, " ", source.sha256, " ",
                    source.weight);
  }
  return key;
}

}  // namespace

JobInputsCache::JobInputsCache() = default;
JobInputsCache::~JobInputsCache() = default;

absl::StatusOr<std::shared_ptr<const pipeline_internal::JobInputs>>
JobInputsCache::Open(const JobTaskContext& context,
                     const TaskControl& control) {
  const std::string key = InputsKey(context);
  MutexLock lock(&mu_);
  if (inputs_ != nullptr && key == key_) return inputs_;
  // The previous job's inputs go before this job's are opened.
  inputs_.reset();
  key_.clear();
  QUANT_ASSIGN_OR_RETURN(pipeline_internal::JobInputs inputs,
                         pipeline_internal::OpenJobInputs(context, control));
  ++opens_;
  inputs_ =
      std::make_shared<const pipeline_internal::JobInputs>(std::move(inputs));
  key_ = key;
  return inputs_;
}

int JobInputsCache::opens() const {
  MutexLock lock(&mu_);
  return opens_;
}

}  // namespace quant
