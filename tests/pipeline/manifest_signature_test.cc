// Ed25519 manifest signatures (manifest_signature.h): a signature verifies
// with its key only, over the exact manifest bytes, and every malformed key
// or signature file is refused by name.
#include "core/pipeline/manifest_signature.h"

#include <string>

#include "absl/strings/escaping.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace quant {
namespace {

using ::testing::HasSubstr;

constexpr char kManifest[] =
    "{\n  \"format_version\": 1,\n  \"output\": {\"files\": []}\n}\n";

TEST(ManifestSignatureTest, SignedManifestVerifiesWithItsKeyOnly) {
  auto pair = GenerateSigningKeyPem();
  ASSERT_TRUE(pair.ok()) << pair.status();
  auto signer = ManifestSigner::FromPem(pair->first, "key.pem");
  ASSERT_TRUE(signer.ok()) << signer.status();
  auto public_pem = (*signer)->PublicKeyPem();
  ASSERT_TRUE(public_pem.ok());
  EXPECT_EQ(*public_pem, pair->second);

  auto signature = (*signer)->Sign(kManifest);
  ASSERT_TRUE(signature.ok()) << signature.status();
  const nlohmann::json file = nlohmann::json::parse(*signature);
  EXPECT_EQ(file["algorithm"], "ed25519");
  EXPECT_EQ(file["public_key_sha256"].get<std::string>().size(), 64u);
  std::string raw;
  ASSERT_TRUE(absl::Base64Unescape(file["signature"].get<std::string>(), &raw));
  EXPECT_EQ(raw.size(), 64u);
  EXPECT_TRUE(
      VerifyManifestSignature(kManifest, *signature, pair->second).ok());

  // One byte of the manifest changed.
  std::string changed = kManifest;
  changed[changed.find('1')] = '2';
  absl::Status status =
      VerifyManifestSignature(changed, *signature, pair->second);
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("does not verify"));

  // Another key.
  auto other = GenerateSigningKeyPem();
  ASSERT_TRUE(other.ok());
  status = VerifyManifestSignature(kManifest, *signature, other->second);
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(status.message(), HasSubstr("another key"));
  // ...even when the signature file does not say which key signed.
  nlohmann::json anonymous = file;
  anonymous.erase("public_key_sha256");
  status = VerifyManifestSignature(kManifest, anonymous.dump(), other->second);
  EXPECT_EQ(status.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(
      VerifyManifestSignature(kManifest, anonymous.dump(), pair->second).ok());

  // A signature byte flipped.
  raw[5] ^= 1;
  nlohmann::json flipped = file;
  flipped["signature"] = absl::Base64Escape(raw);
  EXPECT_EQ(
      VerifyManifestSignature(kManifest, flipped.dump(), pair->second).code(),
      absl::StatusCode::kPermissionDenied);
}

TEST(ManifestSignatureTest, MalformedKeysAndSignatureFilesAreNamed) {
  auto bad = ManifestSigner::FromPem("not a key", "/etc/quantd/key.pem");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("/etc/quantd/key.pem"));
  // A public key is not a signing key.
  auto pair = GenerateSigningKeyPem();
  ASSERT_TRUE(pair.ok());
  EXPECT_FALSE(ManifestSigner::FromPem(pair->second, "pub.pem").ok());

  auto signer = ManifestSigner::FromPem(pair->first, "key.pem");
  ASSERT_TRUE(signer.ok());
  auto signature = (*signer)->Sign(kManifest);
  ASSERT_TRUE(signature.ok());
  EXPECT_EQ(VerifyManifestSignature(kManifest, *signature, "garbage").code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(VerifyManifestSignature(kManifest, *signature, pair->first).code(),
            absl::StatusCode::kInvalidArgument)
      << "a private key PEM is not a public key";
  for (const char* file :
       {"", "[]", "{\"algorithm\": \"rsa\", \"signature\": \"AAAA\"}",
        "{\"algorithm\": \"ed25519\"}",
        "{\"algorithm\": \"ed25519\", \"signature\": \"!!!\"}",
        "{\"algorithm\": \"ed25519\", \"signature\": \"AAAA\"}"}) {
    const absl::Status status =
        VerifyManifestSignature(kManifest, file, pair->second);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << file;
    EXPECT_THAT(status.message(), HasSubstr("manifest.json.sig")) << file;
  }
}

}  // namespace
}  // namespace quant
