// Authenticator: constant-time bearer token checks per service.
#include "server/auth.h"

#include <openssl/crypto.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"

namespace quant::server {
namespace {

constexpr absl::string_view kBearer = "Bearer ";

bool SameToken(const std::string& a, const std::string& b) {
  return a.size() == b.size() && !a.empty() &&
         CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

const char* ServiceName(CallerRole role) {
  return role == CallerRole::kClient ? "client" : "worker";
}

}  // namespace

bool Authenticator::open(CallerRole role) const {
  return role == CallerRole::kClient ? tokens_.client.empty()
                                     : tokens_.worker.empty();
}

absl::Status Authenticator::CheckHeader(const std::string* header,
                                        CallerRole role) const {
  if (open(role)) return absl::OkStatus();
  const std::string& expected =
      role == CallerRole::kClient ? tokens_.client : tokens_.worker;
  const std::string& other =
      role == CallerRole::kClient ? tokens_.worker : tokens_.client;
  // The scheme is case-insensitive (RFC 6750 via RFC 7235).
  if (header == nullptr || !absl::StartsWithIgnoreCase(*header, kBearer)) {
    return absl::UnauthenticatedError(
        absl::StrCat("authorization: a \"Bearer <token>\" header with the ",
                     ServiceName(role), " token is required"));
  }
  const std::string token = header->substr(kBearer.size());
  if (SameToken(token, expected)) return absl::OkStatus();
  if (SameToken(token, other)) {
    return absl::PermissionDeniedError(absl::StrCat(
        "authorization: the ",
        ServiceName(role == CallerRole::kClient ? CallerRole::kWorker
                                                : CallerRole::kClient),
        " token does not grant the ", ServiceName(role), " service"));
  }
  return absl::UnauthenticatedError(absl::StrCat(
      "authorization: the token is not the ", ServiceName(role), " token"));
}

absl::Status Authenticator::Check(const grpc::ServerContext& context,
                                  CallerRole role) const {
  if (open(role)) return absl::OkStatus();
  const auto& metadata = context.client_metadata();
  auto it = metadata.find("authorization");
  if (it == metadata.end()) return CheckHeader(nullptr, role);
  const std::string header(it->second.data(), it->second.size());
  return CheckHeader(&header, role);
}

}  // namespace quant::server
