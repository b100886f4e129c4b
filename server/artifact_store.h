// Where quantd keeps calibration sets and job artifacts: behind an
// interface so another backend can follow the file:// one. Workers read and
// write the job locations directly, so a file:// root must be shared by the
// coordinator and its workers (one machine, or a shared volume).
#ifndef QUANT_SERVER_ARTIFACT_STORE_H_
#define QUANT_SERVER_ARTIFACT_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace quant::server {

class ArtifactStore {
 public:
  virtual ~ArtifactStore() = default;

  // Stores a calibration set content-addressed by its sha256 (lowercase
  // hex), which it returns. Storing the same bytes again is a no-op.
  // ResourceExhausted when `bytes` exceeds the store's bound.
  virtual absl::StatusOr<std::string> PutCalibration(
      absl::string_view bytes) = 0;
  // Where the set with this hash lives (whether or not it exists).
  virtual std::string CalibrationPath(const std::string& sha256) const = 0;
  // The store's root, e.g. "file:///var/lib/quantd/artifacts".
  virtual std::string root_uri() const = 0;

  // A job's locations: its work area (block outputs exchanged between
  // tasks), the private area of one task attempt (written there, then
  // published into the work area), and its packed checkpoint.
  virtual std::string JobWorkUri(const std::string& job_id) const = 0;
  virtual std::string AttemptUri(const std::string& job_id, int task_index,
                                 int attempt) const = 0;
  virtual std::string CheckpointUri(const std::string& job_id) const = 0;
  // The audit.json of the job's published checkpoint; NotFound before the
  // finalize task has published it.
  virtual absl::StatusOr<std::string> ReadAudit(
      const std::string& job_id) const = 0;
  // Its manifest.json, likewise.
  virtual absl::StatusOr<std::string> ReadManifest(
      const std::string& job_id) const = 0;
  // Writes manifest.json.sig (core/pipeline/manifest_signature.h) beside
  // the published manifest, atomically.
  virtual absl::Status WriteManifestSignature(const std::string& job_id,
                                              const std::string& text) = 0;
};

// Files under a directory: calib/<sha256>.jsonl, written atomically
// (temporary file, fsync, rename; the extension is a name only: the bytes
// are the upload's, JSONL or plain text), and per job
// jobs/<id>/work/ (attempts/<task>-<attempt>/ inside) and
// jobs/<id>/checkpoint/.
class FileArtifactStore : public ArtifactStore {
 public:
  // `root_uri` is "file:///DIR"; DIR and DIR/calib are created if missing.
  static absl::StatusOr<std::unique_ptr<FileArtifactStore>> Open(
      const std::string& root_uri, int64_t max_calibration_bytes);

  absl::StatusOr<std::string> PutCalibration(absl::string_view bytes) override;
  std::string CalibrationPath(const std::string& sha256) const override;
  std::string root_uri() const override { return root_uri_; }
  std::string JobWorkUri(const std::string& job_id) const override;
  std::string AttemptUri(const std::string& job_id, int task_index,
                         int attempt) const override;
  std::string CheckpointUri(const std::string& job_id) const override;
  absl::StatusOr<std::string> ReadAudit(
      const std::string& job_id) const override;
  absl::StatusOr<std::string> ReadManifest(
      const std::string& job_id) const override;
  absl::Status WriteManifestSignature(const std::string& job_id,
                                      const std::string& text) override;
  const std::string& root_dir() const { return root_dir_; }

 private:
  FileArtifactStore(std::string root_uri, std::string root_dir,
                    int64_t max_calibration_bytes)
      : root_uri_(std::move(root_uri)),
        root_dir_(std::move(root_dir)),
        max_calibration_bytes_(max_calibration_bytes) {}
  // A file of the job's published checkpoint; NotFound before it exists.
  absl::StatusOr<std::string> ReadPublished(const std::string& job_id,
                                            const std::string& name) const;

  std::string root_uri_;
  std::string root_dir_;
  int64_t max_calibration_bytes_;
};

}  // namespace quant::server

#endif  // QUANT_SERVER_ARTIFACT_STORE_H_
