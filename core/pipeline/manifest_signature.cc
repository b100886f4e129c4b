// ManifestSigner and VerifyManifestSignature through OpenSSL's EVP
// interface (Ed25519 signs the message itself: no digest is set).
#include "core/pipeline/manifest_signature.h"

#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "core/base/sha256.h"
#include "core/base/strict_json.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

constexpr size_t kPublicKeyBytes = 32;
constexpr size_t kSignatureBytes = 64;
constexpr size_t kMaxPemBytes = 16 << 10;

struct PkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using PkeyPtr = std::unique_ptr<EVP_PKEY, PkeyFree>;
struct MdCtxFree {
  void operator()(EVP_MD_CTX* ctx) const { EVP_MD_CTX_free(ctx); }
};
using MdCtxPtr = std::unique_ptr<EVP_MD_CTX, MdCtxFree>;
struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

PkeyPtr ReadPem(const std::string& pem, bool is_private) {
  if (pem.size() > kMaxPemBytes) return nullptr;
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
  if (bio == nullptr) return nullptr;
  return PkeyPtr(
      is_private ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr)
                 : PEM_read_bio_PUBKEY(bio.get(), nullptr, nullptr, nullptr));
}

absl::StatusOr<std::string> RawPublicKey(EVP_PKEY* key) {
  unsigned char raw[kPublicKeyBytes];
  size_t length = sizeof(raw);
  if (EVP_PKEY_get_raw_public_key(key, raw, &length) != 1 ||
      length != kPublicKeyBytes) {
    return absl::InternalError("cannot read the Ed25519 public key");
  }
  return std::string(reinterpret_cast<const char*>(raw), length);
}

absl::StatusOr<std::string> PemOf(EVP_PKEY* key, bool is_private) {
  BioPtr bio(BIO_new(BIO_s_mem()));
  if (bio == nullptr ||
      (is_private ? PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr,
                                             0, nullptr, nullptr)
                  : PEM_write_bio_PUBKEY(bio.get(), key)) != 1) {
    return absl::InternalError("cannot write the key as PEM");
  }
  char* data = nullptr;
  const long length = BIO_get_mem_data(bio.get(), &data);
  return std::string(data, static_cast<size_t>(length));
}

}  // namespace

struct ManifestSigner::Key {
  PkeyPtr pkey;
};

ManifestSigner::ManifestSigner(std::unique_ptr<Key> key)
    : key_(std::move(key)) {}
ManifestSigner::~ManifestSigner() = default;

absl::StatusOr<std::unique_ptr<ManifestSigner>> ManifestSigner::FromPem(
    const std::string& pem, const std::string& source) {
  PkeyPtr pkey = ReadPem(pem, /*is_private=*/true);
  if (pkey == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat(source,
                     ": not a PEM private key (make one with `openssl genpkey "
                     "-algorithm ed25519`)"));
  }
  if (EVP_PKEY_id(pkey.get()) != EVP_PKEY_ED25519) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not an Ed25519 key (",
                     OBJ_nid2sn(EVP_PKEY_id(pkey.get())), ")"));
  }
  auto key = std::make_unique<Key>();
  key->pkey = std::move(pkey);
  return std::unique_ptr<ManifestSigner>(new ManifestSigner(std::move(key)));
}

absl::StatusOr<std::string> ManifestSigner::Sign(
    const std::string& manifest_bytes) const {
  MdCtxPtr ctx(EVP_MD_CTX_new());
  unsigned char signature[kSignatureBytes];
  size_t length = sizeof(signature);
  if (ctx == nullptr ||
      EVP_DigestSignInit(ctx.get(), nullptr, nullptr, nullptr,
                         key_->pkey.get()) != 1 ||
      EVP_DigestSign(
          ctx.get(), signature, &length,
          reinterpret_cast<const unsigned char*>(manifest_bytes.data()),
          manifest_bytes.size()) != 1 ||
      length != kSignatureBytes) {
    return absl::InternalError("signing manifest.json failed");
  }
  absl::StatusOr<std::string> raw = RawPublicKey(key_->pkey.get());
  if (!raw.ok()) return raw.status();
  const nlohmann::json file = {
      {"algorithm", "ed25519"},
      {"public_key_sha256", Sha256Hex(*raw)},
      {"signature", absl::Base64Escape(absl::string_view(
                        reinterpret_cast<const char*>(signature), length))}};
  return file.dump(2) + "\n";
}

absl::StatusOr<std::string> ManifestSigner::PublicKeyPem() const {
  return PemOf(key_->pkey.get(), /*is_private=*/false);
}

absl::Status VerifyManifestSignature(const std::string& manifest_bytes,
                                     const std::string& signature_text,
                                     const std::string& public_key_pem) {
  PkeyPtr key = ReadPem(public_key_pem, /*is_private=*/false);
  if (key == nullptr || EVP_PKEY_id(key.get()) != EVP_PKEY_ED25519) {
    return absl::InvalidArgumentError(
        "public key: not an Ed25519 PEM public key");
  }
  const nlohmann::json file = ParseJsonOrDiscarded(signature_text);
  if (!file.is_object() || file.value("algorithm", "") != "ed25519" ||
      !file.contains("signature") || !file["signature"].is_string()) {
    return absl::InvalidArgumentError(absl::StrCat(
        kManifestSignatureFileName,
        ": not an ed25519 signature file ({\"algorithm\": \"ed25519\", "
        "\"signature\": BASE64, ...})"));
  }
  std::string signature;
  if (!absl::Base64Unescape(file["signature"].get<std::string>(), &signature) ||
      signature.size() != kSignatureBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        kManifestSignatureFileName, ": signature: not 64 bytes of base64"));
  }
  absl::StatusOr<std::string> raw = RawPublicKey(key.get());
  if (!raw.ok()) return raw.status();
  if (file.contains("public_key_sha256") &&
      file["public_key_sha256"] != Sha256Hex(*raw)) {
    return absl::PermissionDeniedError(
        "manifest.json was signed by another key (public_key_sha256 "
        "differs)");
  }
  MdCtxPtr ctx(EVP_MD_CTX_new());
  if (ctx == nullptr || EVP_DigestVerifyInit(ctx.get(), nullptr, nullptr,
                                             nullptr, key.get()) != 1) {
    return absl::InternalError("cannot set up the signature check");
  }
  const int verified = EVP_DigestVerify(
      ctx.get(), reinterpret_cast<const unsigned char*>(signature.data()),
      signature.size(),
      reinterpret_cast<const unsigned char*>(manifest_bytes.data()),
      manifest_bytes.size());
  if (verified != 1) {
    return absl::PermissionDeniedError(
        "the signature does not verify: manifest.json was changed after it "
        "was signed, or the signature is not this key's");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::pair<std::string, std::string>> GenerateSigningKeyPem() {
  EVP_PKEY* raw = nullptr;
  std::unique_ptr<EVP_PKEY_CTX, void (*)(EVP_PKEY_CTX*)> ctx(
      EVP_PKEY_CTX_new_id(EVP_PKEY_ED25519, nullptr), EVP_PKEY_CTX_free);
  if (ctx == nullptr || EVP_PKEY_keygen_init(ctx.get()) != 1 ||
      EVP_PKEY_keygen(ctx.get(), &raw) != 1) {
    return absl::InternalError("cannot generate an Ed25519 key");
  }
  PkeyPtr key(raw);
  absl::StatusOr<std::string> private_pem = PemOf(key.get(), true);
  if (!private_pem.ok()) return private_pem.status();
  absl::StatusOr<std::string> public_pem = PemOf(key.get(), false);
  if (!public_pem.ok()) return public_pem.status();
  return std::make_pair(*std::move(private_pem), *std::move(public_pem));
}

}  // namespace quant
