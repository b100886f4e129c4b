// Task results as JSON for audit.json and the report. nlohmann::json keeps
// object keys sorted, so the key order is stable (alphabetical). Layout:
//
// TaskEvaluationToJson:
//   {"file_sha256": str,
//    "groups": {NAME: GROUP, ...},     // by task group name
//    "items": [ITEM, ...],             // file order
//    "overall": GROUP,
//    "separately_encoded": int}        // see task_tokens.h
//   GROUP: {"acc_norm": num (only when multiple_choice > 0),
//           "accuracy": num, "correct": int, "correct_norm": int,
//           "count": int, "multiple_choice": int}
//   ITEM, multiple choice:
//     {"answer": int, "choices": [{"bytes": int, "loglikelihood": num,
//      "tokens": int}, ...], "correct": bool, "correct_norm": bool,
//      "id": str, "index": int, "kind": "multiple_choice", "line": int,
//      "predicted": int, "predicted_norm": int, "task": str}
//   ITEM, generation:
//     {"correct": bool, "generated": str, "id": str, "index": int,
//      "kind": "generation", "line": int, "target": str, "task": str}
//   ("id" is "" when the task has none; "generated" is the decoded text as
//   generated, before stripping.)
//
// TaskComparisonToJson:
//   {"candidate": EVALUATION, "file_sha256": str,
//    "groups": {NAME: RATIO, ...}, "min_ratio": num, "overall": RATIO,
//    "reference": EVALUATION}
//   RATIO: {"candidate_accuracy": num, "count": int, "ratio": num,
//           "reference_accuracy": num, "reference_zero": bool}
#ifndef QUANT_CORE_EVAL_TASK_RESULTS_JSON_H_
#define QUANT_CORE_EVAL_TASK_RESULTS_JSON_H_

#include "core/eval/task_comparison.h"
#include "core/eval/task_evaluation.h"
#include "nlohmann/json.hpp"

namespace quant {

nlohmann::json TaskEvaluationToJson(const TaskEvaluation& evaluation);
nlohmann::json TaskComparisonToJson(const TaskComparison& comparison);

}  // namespace quant

#endif  // QUANT_CORE_EVAL_TASK_RESULTS_JSON_H_
