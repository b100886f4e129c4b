// Multiple-choice log-likelihoods and greedy generation of tasks on a
// model; see task_evaluation.h.
#include "core/eval/task_evaluation.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace quant {
namespace {

// Called with a sequence's index, its forward call's logits and the row of
// its first position there.
using SequenceVisitor = std::function<void(
    size_t sequence, const RowMatrixF& logits, Eigen::Index first_row)>;

// Runs `sequences` through `model` in the order `order`: batches of
// options.batch_sequences right-padded with `pad_id` to their longest
// sequence, as many batches per LogitsModel::Forward call as
// options.max_hidden_bytes allows.
absl::Status RunSequences(const LogitsModel& model,
                          const std::vector<std::vector<int32_t>>& sequences,
                          const std::vector<size_t>& order, int32_t pad_id,
                          const TaskEvaluationOptions& options,
                          const SequenceVisitor& visit) {
  struct Batch {
    std::vector<size_t> members;
    TokenBatch inputs;
  };
  std::vector<Batch> batches;
  for (size_t start = 0; start < order.size();
       start += options.batch_sequences) {
    const size_t end = std::min(order.size(), start + options.batch_sequences);
    Batch batch;
    size_t length = 0;
    for (size_t k = start; k < end; ++k) {
      batch.members.push_back(order[k]);
      length = std::max(length, sequences[order[k]].size());
    }
    for (size_t s : batch.members) {
      std::vector<int32_t> padded = sequences[s];
      padded.resize(length, pad_id);
      batch.inputs.push_back(std::move(padded));
    }
    batches.push_back(std::move(batch));
  }
  const int64_t row_bytes =
      model.config().hidden_size * static_cast<int64_t>(sizeof(float));
  for (size_t start = 0; start < batches.size();) {
    size_t end = start;
    int64_t bytes = 0;
    std::vector<TokenBatch> inputs;
    while (end < batches.size()) {
      const int64_t batch_bytes =
          static_cast<int64_t>(batches[end].inputs.size() *
                               batches[end].inputs.front().size()) *
          row_bytes;
      if (end > start && bytes + batch_bytes > options.max_hidden_bytes) {
        break;
      }
      bytes += batch_bytes;
      inputs.push_back(batches[end].inputs);
      ++end;
    }
    QUANT_RETURN_IF_ERROR(model.Forward(
        inputs, [&](size_t index, const RowMatrixF& logits) -> absl::Status {
          const Batch& batch = batches[start + index];
          const Eigen::Index length =
              static_cast<Eigen::Index>(batch.inputs.front().size());
          if (logits.rows() !=
              length * static_cast<Eigen::Index>(batch.members.size())) {
            return absl::InternalError(absl::StrCat(
                "task evaluation: a batch of ", batch.members.size(), " x ",
                length, " tokens gave ", logits.rows(), " rows of logits"));
          }
          for (size_t m = 0; m < batch.members.size(); ++m) {
            visit(batch.members[m], logits,
                  static_cast<Eigen::Index>(m) * length);
          }
          return absl::OkStatus();
        }));
    start = end;
  }
  return absl::OkStatus();
}

// log softmax(logits.row(row))[token], in double.
double LogProbability(const RowMatrixF& logits, Eigen::Index row,
                      int32_t token) {
  const float max = logits.row(row).maxCoeff();
  double sum = 0;
  for (Eigen::Index v = 0; v < logits.cols(); ++v) {
    sum += std::exp(static_cast<double>(logits(row, v)) - max);
  }
  return static_cast<double>(logits(row, token)) - max - std::log(sum);
}

// The lowest index of the highest value.
int ArgMax(const std::vector<double>& values) {
  int best = 0;
  for (int i = 1; i < static_cast<int>(values.size()); ++i) {
    if (values[i] > values[best]) best = i;
  }
  return best;
}

absl::Status ScoreMultipleChoice(const LogitsModel& model, const TaskFile& file,
                                 const std::vector<TokenizedTask>& tokens,
                                 int32_t pad_id,
                                 const TaskEvaluationOptions& options,
                                 std::vector<TaskItemResult>* results) {
  // One sequence per choice: context + continuation without its last
  // token (predicted, never fed).
  struct Request {
    size_t item;
    size_t choice;
  };
  std::vector<Request> requests;
  std::vector<std::vector<int32_t>> sequences;
  for (size_t i = 0; i < file.items.size(); ++i) {
    if (file.items[i].kind != TaskKind::kMultipleChoice) continue;
    for (size_t c = 0; c < tokens[i].choices.size(); ++c) {
      std::vector<int32_t> sequence = tokens[i].context;
      sequence.insert(sequence.end(), tokens[i].choices[c].begin(),
                      tokens[i].choices[c].end() - 1);
      sequences.push_back(std::move(sequence));
      requests.push_back({i, c});
    }
  }
  std::vector<size_t> order(sequences.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sequences[a].size() > sequences[b].size();
  });
  std::vector<double> loglikelihoods(sequences.size(), 0);
  QUANT_RETURN_IF_ERROR(RunSequences(
      model, sequences, order, pad_id, options,
      [&](size_t s, const RowMatrixF& logits, Eigen::Index first_row) {
        const TokenizedTask& task = tokens[requests[s].item];
        const std::vector<int32_t>& continuation =
            task.choices[requests[s].choice];
        // Position context.size() - 1 + k predicts continuation[k].
        const Eigen::Index first =
            first_row + static_cast<Eigen::Index>(task.context.size()) - 1;
        double sum = 0;
        for (size_t k = 0; k < continuation.size(); ++k) {
          sum += LogProbability(logits, first + static_cast<Eigen::Index>(k),
                                continuation[k]);
        }
        loglikelihoods[s] = sum;
      }));
  for (size_t s = 0; s < requests.size(); ++s) {
    const TaskItem& item = file.items[requests[s].item];
    ChoiceScore score;
    score.loglikelihood = loglikelihoods[s];
    score.tokens = static_cast<int>(
        tokens[requests[s].item].choices[requests[s].choice].size());
    score.bytes = static_cast<int>(item.choices[requests[s].choice].size());
    (*results)[requests[s].item].choices.push_back(score);
  }
  for (size_t i = 0; i < file.items.size(); ++i) {
    if (file.items[i].kind != TaskKind::kMultipleChoice) continue;
    TaskItemResult& result = (*results)[i];
    std::vector<double> raw, per_byte;
    for (const ChoiceScore& score : result.choices) {
      raw.push_back(score.loglikelihood);
      per_byte.push_back(score.loglikelihood / score.bytes);
    }
    result.predicted = ArgMax(raw);
    result.predicted_norm = ArgMax(per_byte);
    result.correct = result.predicted == result.answer;
    result.correct_norm = result.predicted_norm == result.answer;
  }
  return absl::OkStatus();
}

absl::Status GenerateAll(const LogitsModel& model, const Tokenizer& tokenizer,
                         const TaskFile& file,
                         const std::vector<TokenizedTask>& tokens,
                         int32_t pad_id, const TaskEvaluationOptions& options,
                         std::vector<TaskItemResult>* results) {
  std::vector<size_t> active;
  std::vector<std::vector<int32_t>> sequences(file.items.size());
  for (size_t i = 0; i < file.items.size(); ++i) {
    if (file.items[i].kind != TaskKind::kGeneration) continue;
    active.push_back(i);
    sequences[i] = tokens[i].context;
  }
  // Every unfinished task advances one token per pass.
  while (!active.empty()) {
    std::vector<int32_t> next(file.items.size(), -1);
    QUANT_RETURN_IF_ERROR(RunSequences(
        model, sequences, active, pad_id, options,
        [&](size_t s, const RowMatrixF& logits, Eigen::Index first_row) {
          Eigen::Index best = 0;
          // Eigen's maxCoeff keeps the first of equal values.
          logits
              .row(first_row + static_cast<Eigen::Index>(sequences[s].size()) -
                   1)
              .maxCoeff(&best);
          next[s] = static_cast<int32_t>(best);
        }));
    std::vector<size_t> still_active;
    for (size_t i : active) {
      TaskItemResult& result = (*results)[i];
      sequences[i].push_back(next[i]);
      result.generated_ids.push_back(next[i]);
      QUANT_ASSIGN_OR_RETURN(
          result.generated,
          tokenizer.Decode(result.generated_ids, /*skip_special_tokens=*/true));
      const absl::string_view target =
          absl::StripAsciiWhitespace(result.target);
      const bool done =
          (tokenizer.eos_id().has_value() && next[i] == *tokenizer.eos_id()) ||
          absl::StripLeadingAsciiWhitespace(result.generated).size() >=
              target.size() ||
          result.generated_ids.size() >=
              tokens[i].target.size() + options.extra_generation_tokens;
      if (done) {
        result.correct = absl::StripAsciiWhitespace(result.generated) == target;
      } else {
        still_active.push_back(i);
      }
    }
    active = std::move(still_active);
  }
  return absl::OkStatus();
}

void Tally(const TaskItemResult& item, TaskGroupResult* group) {
  ++group->count;
  group->correct += item.correct;
  if (item.kind == TaskKind::kMultipleChoice) {
    ++group->multiple_choice;
    group->correct_norm += item.correct_norm;
  }
}

void Finish(TaskGroupResult* group) {
  group->accuracy = group->count == 0
                        ? 0
                        : static_cast<double>(group->correct) / group->count;
  group->acc_norm =
      group->multiple_choice == 0
          ? 0
          : static_cast<double>(group->correct_norm) / group->multiple_choice;
}

}  // namespace

absl::StatusOr<TaskEvaluation> EvaluateTasks(
    const LogitsModel& model, const Tokenizer& tokenizer, const TaskFile& file,
    const std::vector<TokenizedTask>& tokens,
    const TaskEvaluationOptions& options) {
  if (options.batch_sequences < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "batch_sequences must be positive, got ", options.batch_sequences));
  }
  if (options.max_hidden_bytes < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_hidden_bytes must be positive, got ", options.max_hidden_bytes));
  }
  if (tokens.size() != file.items.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("task evaluation: ", tokens.size(),
                     " tokenized tasks for ", file.items.size(), " tasks"));
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    const bool choice = file.items[i].kind == TaskKind::kMultipleChoice;
    if ((choice && tokens[i].choices.size() != file.items[i].choices.size()) ||
        (!choice && tokens[i].target.empty()) || tokens[i].context.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("task evaluation: the tokens of task ", i, " (line ",
                       file.items[i].line, ") do not match it"));
    }
  }
  TaskEvaluation evaluation;
  evaluation.file_sha256 = file.sha256;
  evaluation.items.resize(file.items.size());
  for (size_t i = 0; i < file.items.size(); ++i) {
    const TaskItem& item = file.items[i];
    TaskItemResult& result = evaluation.items[i];
    result.index = static_cast<int>(i);
    result.line = item.line;
    result.id = item.id;
    result.task = item.task;
    result.kind = item.kind;
    result.answer = item.answer;
    result.target = item.target;
    evaluation.separately_encoded += tokens[i].separately_encoded;
  }
  const int32_t pad_id = tokenizer.eos_id().value_or(0);
  QUANT_RETURN_IF_ERROR(ScoreMultipleChoice(model, file, tokens, pad_id,
                                            options, &evaluation.items));
  QUANT_RETURN_IF_ERROR(GenerateAll(model, tokenizer, file, tokens, pad_id,
                                    options, &evaluation.items));
  std::map<std::string, TaskGroupResult> groups;
  evaluation.overall.task = "all";
  for (const TaskItemResult& item : evaluation.items) {
    TaskGroupResult& group = groups[item.task];
    group.task = item.task;
    Tally(item, &group);
    Tally(item, &evaluation.overall);
  }
  for (auto& [name, group] : groups) {
    Finish(&group);
    evaluation.groups.push_back(std::move(group));
  }
  Finish(&evaluation.overall);
  return evaluation;
}

absl::StatusOr<TaskEvaluation> EvaluateTaskFile(
    const LogitsModel& model, const Tokenizer& tokenizer, const TaskFile& file,
    const TaskEvaluationOptions& options) {
  QUANT_ASSIGN_OR_RETURN(
      const std::vector<TokenizedTask> tokens,
      TokenizeTasks(file, tokenizer, MaxPositions(model.config()),
                    options.extra_generation_tokens));
  return EvaluateTasks(model, tokenizer, file, tokens, options);
}

}  // namespace quant
