// Scoring the tasks of a task file (task_file.h) on one model, with the
// conventions of lm-evaluation-harness:
//
// Multiple choice: each choice's continuation (task_tokens.h) is scored
//   given the context: its log-likelihood is the sum over its tokens of
//   log softmax(logits)[token], computed in double from the float logits.
//   `acc` picks the choice of highest log-likelihood; `acc_norm` the one of
//   highest log-likelihood per byte of the choice text as written (UTF-8
//   bytes, leading space included; lm-eval divides by Python characters,
//   the same for ASCII). Ties go to the lowest index.
// Generation: greedy (argmax, ties to the lowest id) decoding after the
//   context. It stops after the tokenizer's EOS, once the decoded new text
//   stripped of leading whitespace is at least as long as the stripped
//   target (it could only differ from then on), or after the target's token
//   count + extra_generation_tokens new tokens. Correct when the decoded
//   text (special tokens skipped) stripped of surrounding ASCII whitespace
//   equals the target stripped the same way: an exact match.
//
// Batching: sequences are right-padded to the longest of their forward
// call, as core/eval pads windows: attention is causal, so padding after a
// sequence's end never changes its real positions. Multiple-choice
// sequences are sorted by length (longest first) so that a call's
// sequences are of similar length; generation runs every unfinished task
// one step per pass. Batched scores equal one-at-a-time scores up to float
// rounding of the matrix products (tests/eval/task_evaluation_test.cc).
#ifndef QUANT_CORE_EVAL_TASK_EVALUATION_H_
#define QUANT_CORE_EVAL_TASK_EVALUATION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "core/eval/logits_model.h"
#include "core/eval/task_file.h"
#include "core/eval/task_tokens.h"
#include "core/text/tokenizer.h"

namespace quant {

struct TaskEvaluationOptions {
  // Sequences per batch (one forward of a LlamaModel).
  int batch_sequences = 8;
  // Bound on the hidden states of the batches passed to one
  // LogitsModel::Forward call (rows * hidden_size floats): a streamed model
  // holds them all while it reads each block once. At least one batch.
  int64_t max_hidden_bytes = int64_t{256} << 20;
  // New tokens a generation task may take beyond its target's count.
  int extra_generation_tokens = 4;
};

struct ChoiceScore {
  double loglikelihood = 0;  // Sum over the continuation's tokens.
  int tokens = 0;            // Continuation tokens.
  int bytes = 0;             // UTF-8 bytes of the choice text.
};

struct TaskItemResult {
  int index = 0;  // In the file's tasks, from 0.
  int line = 0;
  std::string id;
  std::string task;
  TaskKind kind = TaskKind::kMultipleChoice;
  bool correct = false;  // acc for multiple choice, exact match otherwise.
  // Multiple choice.
  std::vector<ChoiceScore> choices;
  int answer = -1;
  int predicted = -1;       // argmax of loglikelihood.
  int predicted_norm = -1;  // argmax of loglikelihood / bytes.
  bool correct_norm = false;
  // Generation.
  std::string target;
  std::string generated;  // Decoded, as generated (not stripped).
  std::vector<int32_t> generated_ids;
};

struct TaskGroupResult {
  std::string task;  // The group's name; "all" for the file overall.
  int count = 0;
  int correct = 0;
  double accuracy = 0;  // correct / count.
  // Multiple-choice tasks of the group and their acc_norm (0 when none).
  int multiple_choice = 0;
  int correct_norm = 0;
  double acc_norm = 0;
};

struct TaskEvaluation {
  std::string file_sha256;
  std::vector<TaskItemResult> items;    // In file order.
  std::vector<TaskGroupResult> groups;  // Sorted by name.
  TaskGroupResult overall;              // Every task; task = "all".
  int separately_encoded = 0;           // See task_tokens.h.
};

// Scores `file`'s tasks, tokenized as `tokens` (TokenizeTasks of the same
// file and tokenizer), on `model`. Errors: bad options, a tokens list that
// does not match the file, the model's (ids outside its vocabulary, too
// many positions, unreadable weights).
absl::StatusOr<TaskEvaluation> EvaluateTasks(
    const LogitsModel& model, const Tokenizer& tokenizer, const TaskFile& file,
    const std::vector<TokenizedTask>& tokens,
    const TaskEvaluationOptions& options = {});

// TokenizeTasks (for the model's positions) + EvaluateTasks.
absl::StatusOr<TaskEvaluation> EvaluateTaskFile(
    const LogitsModel& model, const Tokenizer& tokenizer, const TaskFile& file,
    const TaskEvaluationOptions& options = {});

}  // namespace quant

#endif  // QUANT_CORE_EVAL_TASK_EVALUATION_H_
