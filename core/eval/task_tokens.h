// The token ids a task is scored on, shared by the reference and the
// candidate so that both see exactly the same sequences.
//
// Context: the tokenizer's BOS (when it has one) + tokens(prompt).
// Continuation of a text t (a choice, or a generation target):
// tokens(prompt + t) with tokens(prompt) cut off its front when
// tokens(prompt) is a prefix of it, the usual case, since a choice usually
// starts with a space and a tokenizer's pieces rarely cross one; otherwise
// (a piece merges across the join) tokens(t) encoded on its own, so that the
// context stays the prompt's own tokens for every choice. lm-eval instead
// encodes the whole string and splits it at the context's length, which
// moves the merged piece into the continuation; the two agree whenever the
// prefix holds. TokenizedTask::separately_encoded counts the fallbacks.
#ifndef QUANT_CORE_EVAL_TASK_TOKENS_H_
#define QUANT_CORE_EVAL_TASK_TOKENS_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "core/eval/task_file.h"
#include "core/text/tokenizer.h"

namespace quant {

struct TokenizedTask {
  std::vector<int32_t> context;
  // Multiple choice: the continuation of each choice, none empty.
  std::vector<std::vector<int32_t>> choices;
  // Generation: the target's continuation; its length (plus
  // extra_generation_tokens) bounds the greedy decoding.
  std::vector<int32_t> target;
  int separately_encoded = 0;  // Continuations encoded on their own.
};

// Tokenizes every task of `file`. Errors name the task's line: a text the
// tokenizer refuses, a continuation with no token, a sequence longer than
// `max_positions` (for generation: context + target tokens +
// `extra_generation_tokens`).
absl::StatusOr<std::vector<TokenizedTask>> TokenizeTasks(
    const TaskFile& file, const Tokenizer& tokenizer, int64_t max_positions,
    int extra_generation_tokens);

}  // namespace quant

#endif  // QUANT_CORE_EVAL_TASK_TOKENS_H_
