// JSON of task results; the layout is in task_results_json.h.
#include "core/eval/task_results_json.h"

#include <string>

namespace quant {
namespace {

using nlohmann::json;

json GroupToJson(const TaskGroupResult& group) {
  json out = {{"accuracy", group.accuracy},
              {"correct", group.correct},
              {"correct_norm", group.correct_norm},
              {"count", group.count},
              {"multiple_choice", group.multiple_choice}};
  if (group.multiple_choice > 0) out["acc_norm"] = group.acc_norm;
  return out;
}

json ItemToJson(const TaskItemResult& item) {
  json out = {
      {"correct", item.correct}, {"id", item.id},
      {"index", item.index},     {"kind", std::string(TaskKindName(item.kind))},
      {"line", item.line},       {"task", item.task}};
  if (item.kind == TaskKind::kMultipleChoice) {
    json choices = json::array();
    for (const ChoiceScore& choice : item.choices) {
      choices.push_back({{"bytes", choice.bytes},
                         {"loglikelihood", choice.loglikelihood},
                         {"tokens", choice.tokens}});
    }
    out["answer"] = item.answer;
    out["choices"] = std::move(choices);
    out["correct_norm"] = item.correct_norm;
    out["predicted"] = item.predicted;
    out["predicted_norm"] = item.predicted_norm;
  } else {
    out["generated"] = item.generated;
    out["target"] = item.target;
  }
  return out;
}

json RatioToJson(const TaskAccuracyRatio& ratio) {
  return {{"candidate_accuracy", ratio.candidate_accuracy},
          {"count", ratio.count},
          {"ratio", ratio.ratio},
          {"reference_accuracy", ratio.reference_accuracy},
          {"reference_zero", ratio.reference_zero}};
}

}  // namespace

json TaskEvaluationToJson(const TaskEvaluation& evaluation) {
  json groups = json::object();
  for (const TaskGroupResult& group : evaluation.groups) {
    groups[group.task] = GroupToJson(group);
  }
  json items = json::array();
  for (const TaskItemResult& item : evaluation.items) {
    items.push_back(ItemToJson(item));
  }
  return {{"file_sha256", evaluation.file_sha256},
          {"groups", std::move(groups)},
          {"items", std::move(items)},
          {"overall", GroupToJson(evaluation.overall)},
          {"separately_encoded", evaluation.separately_encoded}};
}

json TaskComparisonToJson(const TaskComparison& comparison) {
  json groups = json::object();
  for (const TaskAccuracyRatio& group : comparison.groups) {
    groups[group.task] = RatioToJson(group);
  }
  return {{"candidate", TaskEvaluationToJson(comparison.candidate)},
          {"file_sha256", comparison.reference.file_sha256},
          {"groups", std::move(groups)},
          {"min_ratio", comparison.min_ratio},
          {"overall", RatioToJson(comparison.overall)},
          {"reference", TaskEvaluationToJson(comparison.reference)}};
}

}  // namespace quant
