// A store::JobStore that hands every call to another store. Tests derive
// from it and override one call to run something in the middle of it (a
// concurrent lease, a failure), so an interleaving that threads produce
// only by chance happens every time.
#ifndef QUANT_TESTS_SUPPORT_FORWARDING_JOB_STORE_H_
#define QUANT_TESTS_SUPPORT_FORWARDING_JOB_STORE_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/store/job_store.h"

namespace quant::testing {

class ForwardingJobStore : public store::JobStore {
 public:
  // `base` must outlive this.
  explicit ForwardingJobStore(store::JobStore* base) : base_(base) {}

  absl::StatusOr<store::CalibrationSet> PutCalibrationSet(
      const std::string& sha256, int64_t size_bytes,
      const std::string& path) override {
    return base_->PutCalibrationSet(sha256, size_bytes, path);
  }
  absl::StatusOr<store::CalibrationSet> GetCalibrationSet(
      const std::string& sha256) override {
    return base_->GetCalibrationSet(sha256);
  }
  absl::StatusOr<store::CreateJobResult> CreateJob(
      const std::string& request_id, const std::string& spec_json,
      const std::map<std::string, std::string>& labels) override {
    return base_->CreateJob(request_id, spec_json, labels);
  }
  absl::StatusOr<store::Job> GetJob(const std::string& job_id) override {
    return base_->GetJob(job_id);
  }
  absl::StatusOr<store::JobPage> ListJobs(
      int page_size, const std::string& page_token,
      const store::JobFilter& filter) override {
    return base_->ListJobs(page_size, page_token, filter);
  }
  absl::StatusOr<std::vector<store::Job>> UnfinishedJobs() override {
    return base_->UnfinishedJobs();
  }
  absl::Status PlanTasks(const std::string& job_id,
                         const std::vector<store::TaskSpec>& tasks) override {
    return base_->PlanTasks(job_id, tasks);
  }
  absl::StatusOr<std::vector<store::Task>> ListTasks(
      const std::string& job_id) override {
    return base_->ListTasks(job_id);
  }
  absl::StatusOr<std::optional<store::Lease>> LeaseTask(
      const std::string& worker_id, int64_t lease_ms,
      const std::vector<std::string>& worker_levels) override {
    return base_->LeaseTask(worker_id, lease_ms, worker_levels);
  }
  absl::StatusOr<store::Task> CurrentLease(
      const std::string& lease_id) override {
    return base_->CurrentLease(lease_id);
  }
  absl::StatusOr<store::HeartbeatResult> Heartbeat(const std::string& lease_id,
                                                   double progress) override {
    return base_->Heartbeat(lease_id, progress);
  }
  absl::StatusOr<store::CompleteTaskResult> CompleteTask(
      const std::string& lease_id, const std::string& output_uri,
      const std::string& output_sha256) override {
    return base_->CompleteTask(lease_id, output_uri, output_sha256);
  }
  absl::StatusOr<store::FailTaskResult> FailTask(
      const std::string& lease_id, const std::string& error,
      const std::vector<int>& rerun) override {
    return base_->FailTask(lease_id, error, rerun);
  }
  absl::StatusOr<store::ExpiredLeases> ExpireLeases() override {
    return base_->ExpireLeases();
  }
  absl::StatusOr<int64_t> LeaseExpiryCount() override {
    return base_->LeaseExpiryCount();
  }
  absl::StatusOr<std::map<store::JobState, int64_t>> CountJobs() override {
    return base_->CountJobs();
  }
  absl::StatusOr<int64_t> CountRunnableTasks() override {
    return base_->CountRunnableTasks();
  }
  absl::StatusOr<store::JobChange> CancelJob(
      const std::string& job_id) override {
    return base_->CancelJob(job_id);
  }
  absl::StatusOr<store::Job> FinishJob(
      const std::string& job_id, store::Verdict verdict,
      const std::string& artifact_uri,
      const std::vector<std::string>& audit_warnings) override {
    return base_->FinishJob(job_id, verdict, artifact_uri, audit_warnings);
  }
  absl::StatusOr<store::Job> FailJob(const std::string& job_id,
                                     const std::string& error) override {
    return base_->FailJob(job_id, error);
  }
  absl::StatusOr<store::RetryJobResult> RetryJob(
      const std::string& job_id) override {
    return base_->RetryJob(job_id);
  }
  absl::StatusOr<int64_t> AppendEvent(
      const std::string& job_id, const std::string& type,
      const std::string& payload_json) override {
    return base_->AppendEvent(job_id, type, payload_json);
  }
  absl::StatusOr<std::vector<store::Event>> ListEvents(
      const std::string& job_id, int64_t after_seq, int limit) override {
    return base_->ListEvents(job_id, after_seq, limit);
  }

 protected:
  store::JobStore& base() { return *base_; }

 private:
  store::JobStore* base_;
};

}  // namespace quant::testing

#endif  // QUANT_TESTS_SUPPORT_FORWARDING_JOB_STORE_H_
