// SHA-256 through OpenSSL's EVP interface.
#include "core/base/sha256.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

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

absl::StatusOr<std::string> Sha256File(const std::string& path) {
  std::FILE* file = std::fopen(path.c_str(), "rb");
  if (file == nullptr) {
    const std::string message =
        absl::StrCat("cannot open ", path, ": ", std::strerror(errno));
    return errno == ENOENT ? absl::NotFoundError(message)
                           : absl::InternalError(message);
  }
  MdCtx ctx(EVP_MD_CTX_new());
  EVP_DigestInit_ex(ctx.get(), EVP_sha256(), nullptr);
  std::vector<char> buffer(1 << 20);
  size_t n;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), file)) > 0) {
    EVP_DigestUpdate(ctx.get(), buffer.data(), n);
  }
  const bool failed = std::ferror(file) != 0;
  std::fclose(file);
  if (failed) return absl::InternalError(absl::StrCat("cannot read ", path));
  return Finish(ctx.get());
}

}  // namespace quant
