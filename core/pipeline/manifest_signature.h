// Signed provenance: an Ed25519 signature (through OpenSSL) over the exact
// bytes of a packed checkpoint's manifest.json, kept beside it as
// manifest.json.sig. The manifest names every file's sha256, the tool
// version, the kernel level, the recipe and every input's hash, so a valid
// signature vouches for the whole checkpoint. quantd signs with
// --signing_key; `quantctl verify --public_key` checks.
//
// manifest.json.sig is JSON: {"algorithm": "ed25519", "public_key_sha256":
// hex sha256 of the raw 32-byte public key (which key signed), "signature":
// base64 of the 64-byte signature}.
#ifndef QUANT_CORE_PIPELINE_MANIFEST_SIGNATURE_H_
#define QUANT_CORE_PIPELINE_MANIFEST_SIGNATURE_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace quant {

inline constexpr char kManifestSignatureFileName[] = "manifest.json.sig";

// An Ed25519 private key, loaded once (quantd --signing_key).
class ManifestSigner {
 public:
  // `pem`: a PKCS#8 "PRIVATE KEY" PEM (`openssl genpkey -algorithm
  // ed25519`). InvalidArgument naming `source` when it is not one, or is a
  // key of another algorithm.
  static absl::StatusOr<std::unique_ptr<ManifestSigner>> FromPem(
      const std::string& pem, const std::string& source);
  ~ManifestSigner();

  // manifest.json.sig's text for `manifest_bytes`.
  absl::StatusOr<std::string> Sign(const std::string& manifest_bytes) const;

  // The matching public key as a "PUBLIC KEY" PEM, for `verify`.
  absl::StatusOr<std::string> PublicKeyPem() const;

 private:
  struct Key;
  explicit ManifestSigner(std::unique_ptr<Key> key);
  std::unique_ptr<Key> key_;
};

// OK when `signature_text` (manifest.json.sig) is a valid Ed25519 signature
// of `manifest_bytes` by `public_key_pem`. InvalidArgument for a key or
// signature file that does not parse; PermissionDenied ("signature does not
// verify", or signed by another key) otherwise.
absl::Status VerifyManifestSignature(const std::string& manifest_bytes,
                                     const std::string& signature_text,
                                     const std::string& public_key_pem);

// A new Ed25519 key pair as PEM (private, public); for tests and key setup.
absl::StatusOr<std::pair<std::string, std::string>> GenerateSigningKeyPem();

}  // namespace quant

#endif  // QUANT_CORE_PIPELINE_MANIFEST_SIGNATURE_H_
