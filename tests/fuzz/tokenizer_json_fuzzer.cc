// libFuzzer target: a tokenizer.json of arbitrary bytes loads or is refused
// with an error; one that loads encodes and decodes without crashing, and
// never yields an id outside its vocabulary.
#include <cstddef>
#include <cstdint>
#include <cstdlib>

#include "absl/strings/string_view.h"
#include "core/text/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view json(reinterpret_cast<const char*>(data), size);
  auto tokenizer = quant::Tokenizer::FromJson(json, "");
  if (!tokenizer.ok()) return 0;
  for (absl::string_view text :
       {absl::string_view("Once upon a time, 12345 "),
        absl::string_view("\xF0\x9F\x98\x80 \xE4\xB8\xAD\xFF  \n\t x")}) {
    const auto ids = (*tokenizer)->Encode(text, /*add_special_tokens=*/true);
    // A pattern that gives up is an error, not a crash.
    if (!ids.ok()) continue;
    for (int32_t id : *ids) {
      if (id < 0 || id >= (*tokenizer)->vocab_size()) std::abort();
    }
    (void)(*tokenizer)->Decode(*ids, /*skip_special_tokens=*/false);
  }
  return 0;
}
