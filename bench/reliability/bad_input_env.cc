// BadInputEnv: temporary folder, good inputs, quantd, and client calls.
#include "bench/reliability/bad_input_env.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/load/load_client.h"
#include "bench/load/small_recipe.h"
#include "bench/load/temp_dir.h"
#include "bench/reliability/bad_input_files.h"
#include "client/health_probe.h"
#include "common/recipe_convert.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/base/status_macros.h"
#include "grpcpp/client_context.h"

extern char** environ;

namespace quant::reliability {
namespace {

constexpr char kModel[] = "models/stories260K/hf-f32";
constexpr char kText[] = "data/tinystories_val.txt";
constexpr int kGoodParagraphs = 200;
constexpr size_t kChunkBytes = 64 << 10;

void SetDeadline(grpc::ClientContext* context) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(30)));
}

bool IsTerminal(v1::JobState state) {
  return state == v1::JOB_STATE_SUCCEEDED || state == v1::JOB_STATE_FAILED ||
         state == v1::JOB_STATE_CANCELLED;
}

absl::Status FromGrpc(const grpc::Status& status, absl::string_view call) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      absl::StrCat(call, ": ", status.error_message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<BadInputEnv>> BadInputEnv::Start(
    const EnvOptions& options) {
  std::unique_ptr<BadInputEnv> env(new BadInputEnv());
  env->options_ = options;
  absl::StatusOr<std::string> shared = load::RealPath(options.shared_dir);
  if (!shared.ok()) {
    return absl::NotFoundError(
        absl::StrCat("shared_dir: no such folder: ", options.shared_dir));
  }
  env->shared_ = *shared;
  QUANT_ASSIGN_OR_RETURN(env->temp_, load::MakeTempDir("quant-bad-input"));
  QUANT_RETURN_IF_ERROR(env->PrepareInputs());

  load::LoopbackQuantdOptions quantd_options;
  quantd_options.quantd_path = options.quantd_path;
  quantd_options.temp_dir = env->temp_;
  quantd_options.allowed_roots = absl::StrCat(env->temp_, "/inputs");
  quantd_options.max_upload_mb = options.max_upload_mb;
  quantd_options.local_workers = 1;
  QUANT_ASSIGN_OR_RETURN(env->quantd_,
                         load::StartLoopbackQuantd(quantd_options));
  env->channel_ = load::MakeClientChannel(env->quantd_->address());
  env->stub_ = v1::QuantService::NewStub(env->channel_);

  v1::UploadCalibrationResponse uploaded;
  const grpc::Status status =
      env->Upload("good.txt", env->good_text_, &uploaded);
  if (!status.ok()) return FromGrpc(status, "uploading the good set");
  env->good_sha_ = uploaded.sha256();
  return env;
}

absl::Status BadInputEnv::PrepareInputs() {
  const std::string inputs = JoinPath(temp_, "inputs");
  std::error_code error;
  std::filesystem::create_directories(JoinPath(inputs, "models"), error);
  std::filesystem::create_directories(JoinPath(inputs, "calib"), error);
  if (error) {
    return absl::InternalError(
        absl::StrCat("cannot create ", inputs, ": ", error.message()));
  }
  good_checkpoint_ = JoinPath(ModelsDir(), "good");
  QUANT_RETURN_IF_ERROR(CopyCheckpoint(SharedCheckpoint(), good_checkpoint_));
  QUANT_ASSIGN_OR_RETURN(const std::string text,
                         ReadFileToString(JoinPath(shared_, kText)));
  good_text_ = FirstParagraphs(text, kGoodParagraphs);
  return absl::OkStatus();
}

BadInputEnv::~BadInputEnv() {
  quantd_.reset();
  if (!options_.keep_temp && !temp_.empty()) {
    std::error_code ignored;
    std::filesystem::remove_all(temp_, ignored);
  }
}

absl::Status BadInputEnv::Stop() {
  if (quantd_ == nullptr) return absl::FailedPreconditionError("not started");
  return quantd_->Stop(absl::Seconds(60));
}

std::string BadInputEnv::SharedCheckpoint() const {
  return JoinPath(shared_, kModel);
}

std::string BadInputEnv::ModelsDir() const {
  return JoinPath(JoinPath(temp_, "inputs"), "models");
}

bool BadInputEnv::CalibrationStored(const std::string& sha256) const {
  return FileExists(absl::StrCat(temp_, "/artifacts/calib/", sha256, ".jsonl"));
}

bool BadInputEnv::CheckpointPublished(const std::string& job_id) const {
  return FileExists(
      absl::StrCat(temp_, "/artifacts/jobs/", job_id, "/checkpoint"));
}

v1::CreateJobRequest BadInputEnv::GoodRequest() const {
  v1::CreateJobRequest request;
  request.set_checkpoint_uri("file://" + good_checkpoint_);
  *request.mutable_recipe() = common::RecipeToProto(load::SmallRtnRecipe(2));
  request.mutable_calibration()->set_sha256(good_sha_);
  (*request.mutable_labels())["suite"] = "bad-input";
  return request;
}

grpc::Status BadInputEnv::CreateJob(const v1::CreateJobRequest& request,
                                    v1::Job* job) {
  grpc::ClientContext context;
  SetDeadline(&context);
  return stub_->CreateJob(&context, request, job);
}

grpc::Status BadInputEnv::Upload(const std::string& filename,
                                 const std::string& bytes,
                                 v1::UploadCalibrationResponse* response) {
  grpc::ClientContext context;
  SetDeadline(&context);
  std::unique_ptr<grpc::ClientWriter<v1::UploadCalibrationRequest>> writer =
      stub_->UploadCalibration(&context, response);
  v1::UploadCalibrationRequest message;
  message.set_filename(filename);
  // A refused write means the server has ended the call; Finish says why.
  bool open = writer->Write(message);
  for (size_t at = 0; open && at < bytes.size(); at += kChunkBytes) {
    message.set_chunk(bytes.substr(at, kChunkBytes));
    open = writer->Write(message);
  }
  if (open) writer->WritesDone();
  return writer->Finish();
}

absl::StatusOr<v1::Job> BadInputEnv::GetJob(const std::string& id) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::GetJobRequest request;
  request.set_id(id);
  v1::Job job;
  const grpc::Status status = stub_->GetJob(&context, request, &job);
  if (!status.ok()) return FromGrpc(status, "GetJob");
  return job;
}

absl::StatusOr<v1::JobReport> BadInputEnv::GetJobReport(const std::string& id) {
  grpc::ClientContext context;
  SetDeadline(&context);
  v1::GetJobReportRequest request;
  request.set_id(id);
  v1::JobReport report;
  const grpc::Status status = stub_->GetJobReport(&context, request, &report);
  if (!status.ok()) return FromGrpc(status, "GetJobReport");
  return report;
}

absl::StatusOr<int> BadInputEnv::CountJobs() {
  int count = 0;
  std::string token;
  for (int page = 0; page < 10'000; ++page) {
    grpc::ClientContext context;
    SetDeadline(&context);
    v1::ListJobsRequest request;
    request.set_page_size(1000);
    request.set_page_token(token);
    v1::ListJobsResponse response;
    const grpc::Status status = stub_->ListJobs(&context, request, &response);
    if (!status.ok()) return FromGrpc(status, "ListJobs");
    count += response.jobs_size();
    token = response.next_page_token();
    if (token.empty()) return count;
  }
  return absl::InternalError("ListJobs: more than 10000 pages");
}

absl::StatusOr<v1::Job> BadInputEnv::WaitForJob(const std::string& id) {
  const absl::Time deadline = absl::Now() + options_.job_timeout;
  while (true) {
    QUANT_ASSIGN_OR_RETURN(v1::Job job, GetJob(id));
    if (IsTerminal(job.state())) return job;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("job ", id, " still ", v1::JobState_Name(job.state()),
                       " after ", absl::FormatDuration(options_.job_timeout)));
    }
    absl::SleepFor(absl::Milliseconds(200));
  }
}

absl::Status BadInputEnv::StillServing() {
  for (const std::string service : {"", "quant.v1.QuantService"}) {
    QUANT_ASSIGN_OR_RETURN(const int serving, CheckHealth(channel_, service));
    if (serving != 1) {
      return absl::UnavailableError(absl::StrCat(
          "health of \"", service, "\" is ", serving, ", not SERVING (1)"));
    }
  }
  QUANT_RETURN_IF_ERROR(CountJobs().status());
  if (!known_job_.empty()) return GetJob(known_job_).status();
  const absl::Status unknown = GetJob("no-such-job").status();
  if (absl::IsNotFound(unknown)) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(
      "GetJob of an unknown id: expected NOT_FOUND, got ", unknown.ToString()));
}

absl::StatusOr<ProgramResult> BadInputEnv::RunQuantctl(
    std::vector<std::string> args) {
  args.insert(args.begin(), options_.quantctl_path);
  args.push_back(absl::StrCat("--addr=", address()));
  const std::string out_path = JoinPath(temp_, "quantctl.out");
  const std::string err_path = JoinPath(temp_, "quantctl.err");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    const int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) _exit(126);
    dup2(out, STDOUT_FILENO);
    dup2(err, STDERR_FILENO);
    execve(argv[0], argv.data(), environ);
    _exit(127);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) {
    return absl::InternalError("waitpid failed");
  }
  ProgramResult result;
  if (WIFEXITED(status)) result.exit_code = WEXITSTATUS(status);
  if (result.exit_code == 127) {
    return absl::NotFoundError(
        absl::StrCat("quantctl: cannot run ", options_.quantctl_path));
  }
  QUANT_ASSIGN_OR_RETURN(result.out, ReadFileToString(out_path));
  QUANT_ASSIGN_OR_RETURN(result.err, ReadFileToString(err_path));
  return result;
}

}  // namespace quant::reliability
