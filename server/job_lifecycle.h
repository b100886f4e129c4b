// The coordinator's job transitions that more than one caller makes: a
// job's API view, finishing a job once its last task is done (the verdict
// comes from the audit its finalize task published), failing one, retrying
// a failed one, progress events, and the upkeep pass the scheduler runs
// (expire leases, plan a job whose planning was interrupted, finish a job
// whose finishing was). Every transition appends its event and wakes
// waiters.
#ifndef QUANT_SERVER_JOB_LIFECYCLE_H_
#define QUANT_SERVER_JOB_LIFECYCLE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "quant/v1/service.pb.h"
#include "server/artifact_store.h"
#include "server/audit_reader.h"
#include "server/change_signal.h"
#include "server/job_observer.h"
#include "server/store/job_store.h"

namespace quant {
class ManifestSigner;
}  // namespace quant

namespace quant::server {

class JobEta;

struct UpkeepResult {
  int expired_leases = 0;
  int planned_jobs = 0;
  int finished_jobs = 0;
};

class JobLifecycle {
 public:
  // The pointers must outlive this.
  JobLifecycle(store::JobStore* store, ArtifactStore* artifacts,
               ChangeSignal* signal)
      : store_(store), artifacts_(artifacts), signal_(signal) {}

  absl::StatusOr<v1::Job> JobProto(const std::string& job_id);
  absl::StatusOr<v1::Job> JobProto(const store::Job& job);

  // Every task DONE: SUCCEEDED with the published audit's verdict.
  absl::Status FinishJob(const std::string& job_id);
  absl::Status FailJob(const std::string& job_id, const std::string& error);
  // Runs a FAILED job again (store::JobStore::RetryJob): records the retry
  // in the event log, tells the observer and wakes the workers' long polls.
  absl::StatusOr<store::Job> RetryJob(const std::string& job_id);
  // A state change made elsewhere (store::LeaseTask, CancelJob).
  absl::Status StateChanged(const std::string& job_id, store::JobState state);
  // A progress event with the job's block counts and `current`.
  absl::Status Progress(const std::string& job_id, const std::string& current);

  absl::StatusOr<UpkeepResult> Upkeep();

  // Not owned; must outlive this. Null: nobody watches.
  void set_observer(JobObserver* observer) {
    observer_ = observer != nullptr ? observer : &no_observer_;
  }
  JobObserver& observer() { return *observer_; }
  // Not owned; must outlive this. Null: jobs show no elapsed time or ETA.
  void set_eta(const JobEta* eta) { eta_ = eta; }
  // Not owned; must outlive this. Set: every finished job's manifest.json
  // is signed (manifest.json.sig) before the job is SUCCEEDED.
  void set_signer(const ManifestSigner* signer) { signer_ = signer; }
  const JobEta* eta() const { return eta_; }

  ChangeSignal& signal() { return *signal_; }
  store::JobStore& store() { return *store_; }
  ArtifactStore& artifacts() { return *artifacts_; }

 private:
  // OK when the published manifest names this job and its recipe.
  absl::Status CheckManifestNamesJob(const std::string& job_id);

  store::JobStore* store_;
  ArtifactStore* artifacts_;
  ChangeSignal* signal_;
  JobObserver no_observer_;
  JobObserver* observer_ = &no_observer_;
  const JobEta* eta_ = nullptr;
  const ManifestSigner* signer_ = nullptr;
};

// What the job should warn about from its audit.json (each line begins
// with common::kAuditWarningPrefix): one line per
// (tokens, inputs) pair of the layers flagged rank_deficient (T < K), whose
// count only the run knows (the submit-time warning is a bound). Empty for
// an audit without such layers.
std::vector<std::string> AuditWarnings(const PublishedAudit& audit);

}  // namespace quant::server

#endif  // QUANT_SERVER_JOB_LIFECYCLE_H_
