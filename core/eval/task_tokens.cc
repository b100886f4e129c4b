// Tokenizing tasks into a context and continuations; see task_tokens.h.
#include "core/eval/task_tokens.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace quant {
namespace {

absl::Status LineError(int line, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat("line ", line, ": ", problem));
}

absl::StatusOr<std::vector<int32_t>> EncodeText(const Tokenizer& tokenizer,
                                                absl::string_view text,
                                                int line) {
  absl::StatusOr<std::vector<int32_t>> ids =
      tokenizer.Encode(text, /*add_special_tokens=*/false);
  if (!ids.ok()) {
    return absl::Status(ids.status().code(),
                        absl::StrCat("line ", line, ": cannot tokenize: ",
                                     ids.status().message()));
  }
  return ids;
}

// The continuation of `text` after the prompt whose tokens are
// `prompt_ids` (see the top of task_tokens.h); counts a fallback in
// `separately_encoded`.
absl::StatusOr<std::vector<int32_t>> Continuation(
    const Tokenizer& tokenizer, const std::string& prompt,
    const std::vector<int32_t>& prompt_ids, const std::string& text,
    absl::string_view field, int line, int* separately_encoded) {
  QUANT_ASSIGN_OR_RETURN(const std::vector<int32_t> whole,
                         EncodeText(tokenizer, prompt + text, line));
  std::vector<int32_t> continuation;
  if (whole.size() > prompt_ids.size() &&
      std::equal(prompt_ids.begin(), prompt_ids.end(), whole.begin())) {
    continuation.assign(whole.begin() + prompt_ids.size(), whole.end());
  } else {
    QUANT_ASSIGN_OR_RETURN(continuation, EncodeText(tokenizer, text, line));
    ++*separately_encoded;
  }
  if (continuation.empty()) {
    return LineError(line, absl::StrCat(field, " has no token"));
  }
  return continuation;
}

absl::Status CheckLength(size_t tokens, int64_t max_positions, int line,
                         absl::string_view what) {
  if (static_cast<int64_t>(tokens) > max_positions) {
    return LineError(line,
                     absl::StrCat(what, " needs ", tokens,
                                  " positions; the model has ", max_positions));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TokenizedTask>> TokenizeTasks(
    const TaskFile& file, const Tokenizer& tokenizer, int64_t max_positions,
    int extra_generation_tokens) {
  if (extra_generation_tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("extra_generation_tokens must not be negative, got ",
                     extra_generation_tokens));
  }
  std::vector<TokenizedTask> tokenized;
  tokenized.reserve(file.items.size());
  for (const TaskItem& item : file.items) {
    TokenizedTask task;
    QUANT_ASSIGN_OR_RETURN(const std::vector<int32_t> prompt_ids,
                           EncodeText(tokenizer, item.prompt, item.line));
    if (tokenizer.bos_id().has_value()) {
      task.context.push_back(*tokenizer.bos_id());
    }
    task.context.insert(task.context.end(), prompt_ids.begin(),
                        prompt_ids.end());
    if (item.kind == TaskKind::kMultipleChoice) {
      for (size_t c = 0; c < item.choices.size(); ++c) {
        QUANT_ASSIGN_OR_RETURN(
            std::vector<int32_t> choice,
            Continuation(tokenizer, item.prompt, prompt_ids, item.choices[c],
                         absl::StrCat("\"choices\"[", c, "]"), item.line,
                         &task.separately_encoded));
        // The last token is predicted, never fed.
        QUANT_RETURN_IF_ERROR(CheckLength(
            task.context.size() + choice.size() - 1, max_positions, item.line,
            absl::StrCat("prompt + \"choices\"[", c, "]")));
        task.choices.push_back(std::move(choice));
      }
    } else {
      QUANT_ASSIGN_OR_RETURN(
          task.target,
          Continuation(tokenizer, item.prompt, prompt_ids, item.target,
                       "\"target\"", item.line, &task.separately_encoded));
      QUANT_RETURN_IF_ERROR(CheckLength(
          task.context.size() + task.target.size() + extra_generation_tokens,
          max_positions, item.line,
          absl::StrCat("prompt + \"target\" + ", extra_generation_tokens,
                       " extra tokens")));
    }
    tokenized.push_back(std::move(task));
  }
  return tokenized;
}

}  // namespace quant
