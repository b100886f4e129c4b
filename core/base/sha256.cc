// SHA-256 through OpenSSL's EVP interface.
#include "core/base/sha256.h"

#include <openssl/evp.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/escaping.h"

namespace quant {
namespace {

struct MdCtxDeleter {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtx = std::unique_ptr<EVP_MD_CTX, MdCtxDeleter>;

std::string Finish(EVP_MD_CTX* ctx) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int length = 0;
  EVP_DigestFinal_ex(ctx, digest, &length);
  return absl::BytesToHexString(absl::string_view(
      reinterpret_cast<const char*>(digest), static_cast<size_t>(length)));
}

}  // namespace

std::string Sha256Hex(absl::string_view data) {
  MdCtx ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  EVP_DigestUpdate(ctx.get(), data.data(), data.size());
  return Finish(ctx.get());
}

absl::StatusOr<std::string> Sha256File(const std::string& path,
                                       FileSystem* fs) {
  absl::StatusOr<std::unique_ptr<SequentialFile>> file =
      fs->NewSequentialFile(path);
  if (!file.ok()) return file.status();
  MdCtx ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buffer(1 << 20);
  for (;;) {
    absl::StatusOr<size_t> n = (*file)->Read(buffer.data(), buffer.size());
    if (!n.ok()) return n.status();
    if (*n == 0) break;
    EVP_DigestUpdate(ctx.get(), buffer.data(), *n);
  }
  return Finish(ctx.get());
}

bool IsSha256Hex(absl::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

}  // namespace quant
