// Fault soak for the service with real processes: workers SIGKILLed at
// random points (in a block, in finalize, anywhere in the job, between two
// heartbeats), quantd
// SIGKILLed while several jobs run, and a token audit of every log, output
// and /metrics body. Jobs are never lost or duplicated, a killed task runs
// exactly once more, and the packed checkpoint is byte-identical to the
// undisturbed in-process run.
//
// Every run prints its seed; QUANT_SOAK_SEED=S QUANT_SOAK_RUNS=1 replays it.
// QUANT_SOAK_RUNS sets how many worker-kill runs (default 3, 1 under ASan).
#include <dirent.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "core/base/file_util.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "quant/v1/service.grpc.pb.h"
#include "quant/v1/worker.grpc.pb.h"
#include "server/store/job_store.h"
#include "tests/metrics/exposition_test_util.h"
#include "tests/service/child_process.h"
#include "tests/service/service_fixture.h"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::ChildProcess;
using testing::RealPath;
using testing::ServiceHarness;

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kAsan = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kAsan = true;
#else
constexpr bool kAsan = false;
#endif
#else
constexpr bool kAsan = false;
#endif

constexpr int kBlocks = 5;  // stories260K

int SoakRuns() {
  int runs = kAsan ? 1 : 3;
  const char* env = std::getenv("QUANT_SOAK_RUNS");
  if (env != nullptr && !absl::SimpleAtoi(env, &runs)) {
    ADD_FAILURE() << "QUANT_SOAK_RUNS: not an integer: \"" << env << "\"";
  }
  return runs;
}

// QUANT_SOAK_SEED when set (to replay a run), else fresh.
uint64_t BaseSeed() {
  uint64_t seed = 0;
  const char* env = std::getenv("QUANT_SOAK_SEED");
  if (env != nullptr && absl::SimpleAtoi(env, &seed)) return seed;
  if (env != nullptr) {
    ADD_FAILURE() << "QUANT_SOAK_SEED: not an integer: \"" << env << "\"";
  }
  std::random_device device;
  return (uint64_t{device()} << 32) | device();
}

int UniformInt(std::mt19937_64& rng, int lo, int hi) {
  return std::uniform_int_distribution<int>(lo, hi)(rng);
}

double UniformReal(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

int CountOccurrences(const std::string& text, const std::string& what) {
  int count = 0;
  for (size_t at = text.find(what); at != std::string::npos;
       at = text.find(what, at + what.size())) {
    ++count;
  }
  return count;
}

void SleepSeconds(double seconds) {
  std::this_thread::sleep_for(
      std::chrono::microseconds(static_cast<int64_t>(seconds * 1e6)));
}

// How a task is named in worker logs: "block 3" or "finalize".
std::string TaskName(const store::Task& task) {
  return task.kind == store::TaskKind::kFinalize
             ? "finalize"
             : absl::StrCat("block ", task.block);
}

// One worker's log for one job: the tasks it started and finished.
struct WorkerHistory {
  std::vector<std::string> started;  // "block 2", in order
  std::set<std::string> done;
  double last_seconds = 0;  // the latest "done in S s"
};

WorkerHistory ParseWorkerLog(const std::string& log, const std::string& job) {
  WorkerHistory history;
  const std::string running = absl::StrCat("running ", job, " ");
  const std::string finished = absl::StrCat(job, " ");
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    const size_t bracket = line.find("]: ");
    if (bracket == absl::string_view::npos) continue;
    absl::string_view text = line.substr(bracket + 3);
    if (absl::ConsumePrefix(&text, running)) {
      // "block 2 (attempt 1)"
      history.started.emplace_back(text.substr(0, text.find(" (attempt")));
    } else if (absl::ConsumePrefix(&text, finished)) {
      const size_t at = text.find(" done in ");
      if (at == absl::string_view::npos) continue;
      history.done.emplace(text.substr(0, at));
      absl::string_view seconds = text.substr(at + 9);
      seconds = seconds.substr(0, seconds.find(' '));
      absl::SimpleAtod(seconds, &history.last_seconds);
    }
  }
  return history;
}

// The task the worker held when killed: started, never logged done.
std::string InFlight(const WorkerHistory& history) {
  for (const std::string& task : history.started) {
    if (history.done.count(task) == 0) return task;
  }
  return "";
}

class FaultSoakTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
    QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
  }

  // One worker-kill run; records what the kill hit in `summary`.
  void KillOneWorker(uint64_t seed, const testing::Reference& reference,
                     std::string* summary);
};

void FaultSoakTest::KillOneWorker(uint64_t seed,
                                  const testing::Reference& reference,
                                  std::string* summary) {
  std::mt19937_64 rng(seed);
  ServiceHarness service(RealPath(testing::MakeTempDir()));
  std::vector<std::string> args = service.QuantdArgs("127.0.0.1:0");
  // One task per block: the kill points name blocks' tasks.
  args.push_back("--round_tasks=false");
  args.push_back("--lease_seconds=2");
  {
    const absl::Status started = service.StartQuantd(args);
    ASSERT_TRUE(started.ok()) << started;
  }
  // Heartbeats logged, so a kill can land between two of them.
  std::unique_ptr<ChildProcess> doomed =
      service.StartWorker("doomed", {"--log_heartbeats"});
  auto job =
      service.Create(absl::StrCat("soak-", seed), testing::SmallRecipePath());
  ASSERT_TRUE(job.ok()) << job.status();
  const std::string& id = job->id();

  // The kill point: in block k, in finalize, anywhere in the job, or just
  // after the worker's n-th acknowledged heartbeat (before the next).
  const int kind = UniformInt(rng, 0, 3);
  const int block = UniformInt(rng, 0, kBlocks - 1);
  std::string point;
  std::string awaited = "block 0";
  double scale = 0;  // how long the awaited stretch may last, in seconds
  if (kind == 0) {
    point = absl::StrCat("in block ", block);
    awaited = absl::StrCat("block ", block);
  } else if (kind == 1) {
    point = "in finalize";
    awaited = "finalize";
  } else if (kind == 2) {
    point = "into the job";
    scale = reference.seconds;
  }
  const std::string started_line =
      absl::StrCat("running ", id, " ", awaited, " (attempt 1)");
  ASSERT_TRUE(service.WaitForLog("doomed.log", started_line, 900).ok())
      << service.Log("doomed.log");
  double delay = 0;
  if (kind == 3) {
    // quantd asks for a beat every lease / 3 (--lease_seconds=2). Pick one
    // of the beats in the first half of the job, so the job is still
    // running when it comes.
    const double interval_s = 2.0 / 3;
    const int beats =
        std::max(1, static_cast<int>(reference.seconds / 2 / interval_s));
    const int nth = UniformInt(rng, 1, beats);
    const std::string beat = absl::StrCat("]: heartbeat ", id, " ");
    const auto deadline =
        std::chrono::steady_clock::now() + std::chrono::seconds(900);
    std::string log;
    while (CountOccurrences(log = service.Log("doomed.log"), beat) < nth) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << log;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    // Still well before the next beat.
    delay = UniformReal(rng, 0, interval_s / 2);
    point = absl::StrCat("after heartbeat ", nth);
  } else {
    if (scale == 0) {
      // A task lasts about as long as the one before it.
      const WorkerHistory so_far =
          ParseWorkerLog(service.Log("doomed.log"), id);
      scale = so_far.last_seconds > 0 ? so_far.last_seconds
                                      : reference.seconds / (kBlocks + 1);
    }
    delay = UniformReal(rng, 0, scale);
  }
  SleepSeconds(delay);
  doomed->Signal(SIGKILL);
  doomed->Wait(30'000);
  doomed.reset();

  const WorkerHistory history = ParseWorkerLog(service.Log("doomed.log"), id);
  const std::string logged_in_flight = InFlight(history);
  // quantd's view decides which task must be requeued: the one leased (once)
  // and not completed. The worker's log trails it by microseconds, so a kill
  // can land after a lease before "running" is written, or after a
  // completion before "done" is; outside those two windows they agree.
  std::string in_flight;
  {
    auto at_kill = service.ReadStoredTasks(id);
    ASSERT_TRUE(at_kill.ok()) << at_kill.status();
    bool done_on_server = false;  // The task the log says was running.
    for (const store::Task& task : *at_kill) {
      const bool done = task.state == store::TaskState::kDone;
      if (TaskName(task) == logged_in_flight) done_on_server = done;
      if (done || task.attempts == 0) continue;
      EXPECT_TRUE(in_flight.empty())
          << "two tasks held: " << in_flight << ", " << TaskName(task);
      in_flight = TaskName(task);
    }
    const bool leased_before_logged =
        logged_in_flight.empty() && !in_flight.empty() &&
        std::find(history.started.begin(), history.started.end(), in_flight) ==
            history.started.end();
    const bool completed_before_logged =
        !logged_in_flight.empty() && in_flight.empty() && done_on_server;
    EXPECT_TRUE(in_flight == logged_in_flight || leased_before_logged ||
                completed_before_logged)
        << "quantd holds \"" << in_flight
        << "\" for the killed worker, its log "
        << "says \"" << logged_in_flight << "\"\n"
        << service.Log("doomed.log");
  }
  *summary = absl::StrFormat(
      "seed %d: kill %s after %.0f ms -> %s", seed, point, delay * 1000,
      in_flight.empty()
          ? absl::StrCat("nothing in flight (", history.done.size(),
                         " task(s) logged done)")
          : absl::StrCat(in_flight, " was running"));
  std::printf("[soak] %s\n", summary->c_str());
  std::fflush(stdout);

  std::unique_ptr<ChildProcess> rescuer = service.StartWorker("rescuer");
  auto finished = service.WaitForEnd(id, 900);
  ASSERT_TRUE(finished.ok()) << finished.status();
  EXPECT_EQ(finished->state(), v1::JOB_STATE_SUCCEEDED)
      << finished->error() << "\ndoomed:\n"
      << service.Log("doomed.log") << "rescuer:\n"
      << service.Log("rescuer.log");
  auto jobs = service.ListAll();
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), 1u) << "one job created, listed once";
  auto tensors = service.JobTensors(id);
  ASSERT_TRUE(tensors.ok()) << tensors.status();
  EXPECT_TRUE(*tensors == reference.tensors)
      << "model.safetensors differs from the undisturbed run (" << *summary
      << ")";
  {
    const absl::Status stopped = service.StopQuantd();
    ASSERT_TRUE(stopped.ok()) << stopped;
  }
  rescuer->Signal(SIGTERM);
  EXPECT_GE(rescuer->Wait(60'000), 0) << "the rescuer ignored SIGTERM";

  auto tasks = service.StoredTasks(id);
  ASSERT_TRUE(tasks.ok()) << tasks.status();
  ASSERT_EQ(tasks->size(), static_cast<size_t>(kBlocks + 1));
  const std::string rescuer_log = service.Log("rescuer.log");
  for (const store::Task& task : *tasks) {
    const std::string name = TaskName(task);
    EXPECT_EQ(task.state, store::TaskState::kDone) << name;
    // Only the task the killed worker held is requeued, once (lease
    // expiry); a task it logged done is never run again.
    EXPECT_EQ(task.attempts, name == in_flight ? 2 : 1)
        << name << " (" << *summary << ")\ndoomed:\n"
        << service.Log("doomed.log") << "rescuer:\n"
        << rescuer_log;
  }
  if (!in_flight.empty()) {
    EXPECT_NE(rescuer_log.find(
                  absl::StrCat("running ", id, " ", in_flight, " (attempt 2)")),
              std::string::npos)
        << rescuer_log;
  }
}

TEST_F(FaultSoakTest, RandomWorkerKills) {
  const int runs = SoakRuns();
  const uint64_t base = BaseSeed();
  std::printf("[soak] %d run(s)%s, seeds from %llu\n", runs,
              kAsan ? " (ASan build: 1 run unless QUANT_SOAK_RUNS says)" : "",
              static_cast<unsigned long long>(base));
  auto reference = testing::ReferenceRun(testing::SmallRecipePath());
  ASSERT_TRUE(reference.ok()) << reference.status();
  for (int run = 0; run < runs; ++run) {
    const uint64_t seed = base + static_cast<uint64_t>(run);
    std::string summary = absl::StrCat("seed ", seed);
    SCOPED_TRACE(absl::StrCat("run ", run, ", replay with QUANT_SOAK_SEED=",
                              seed, " QUANT_SOAK_RUNS=1"));
    KillOneWorker(seed, *reference, &summary);
    if (HasFatalFailure()) return;
  }
}

TEST_F(FaultSoakTest, CoordinatorKilledWithSeveralJobs) {
  const uint64_t seed = BaseSeed();
  std::mt19937_64 rng(seed);
  auto reference = testing::ReferenceRun(testing::SmallRecipePath());
  ASSERT_TRUE(reference.ok()) << reference.status();
  ServiceHarness service(RealPath(testing::MakeTempDir()));
  const int port = testing::FreeLoopbackPort();
  ASSERT_GT(port, 0);
  std::vector<std::string> args =
      service.QuantdArgs(absl::StrCat("127.0.0.1:", port));
  args.push_back("--round_tasks=false");
  args.push_back("--lease_seconds=3");
  {
    const absl::Status started = service.StartQuantd(args);
    ASSERT_TRUE(started.ok()) << started;
  }
  // Workers of their own, which outlive the coordinator.
  std::unique_ptr<ChildProcess> first = service.StartWorker("first");
  std::unique_ptr<ChildProcess> second = service.StartWorker("second");
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    auto job =
        service.Create(absl::StrCat("several-", i), testing::SmallRecipePath());
    ASSERT_TRUE(job.ok()) << job.status();
    ids.push_back(job->id());
  }
  ASSERT_EQ(std::set<std::string>(ids.begin(), ids.end()).size(), 3u);

  // Kill after a random number of the 15 blocks, plus a random delay.
  const int blocks_before = UniformInt(rng, 0, 3 * kBlocks - 3);
  const double delay = UniformReal(rng, 0, reference->seconds / kBlocks);
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(900);
  while (true) {
    int done = 0;
    for (const std::string& id : ids) {
      auto job = service.Get(id);
      ASSERT_TRUE(job.ok()) << job.status();
      done += job->progress().blocks_done();
    }
    if (done >= blocks_before) break;
    ASSERT_LT(std::chrono::steady_clock::now(), deadline)
        << service.Log("quantd.log");
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  SleepSeconds(delay);
  service.KillQuantd();

  // What had finished when it died, from the store it left.
  std::map<std::string, std::set<int>> done_at_kill;
  int done_count = 0;
  for (const std::string& id : ids) {
    auto tasks = service.StoredTasks(id);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    for (const store::Task& task : *tasks) {
      if (task.state != store::TaskState::kDone) continue;
      EXPECT_EQ(task.attempts, 1) << id << " " << TaskName(task);
      done_at_kill[id].insert(task.index);
      ++done_count;
    }
  }
  std::printf(
      "[soak] seed %llu: quantd killed %.0f ms after %d block(s) done; %d of "
      "18 tasks done then (replay with QUANT_SOAK_SEED=%llu)\n",
      static_cast<unsigned long long>(seed), delay * 1000, blocks_before,
      done_count, static_cast<unsigned long long>(seed));
  std::fflush(stdout);

  {
    const absl::Status started = service.StartQuantd(args);
    ASSERT_TRUE(started.ok()) << started;
  }
  for (const std::string& id : ids) {
    auto finished = service.WaitForEnd(id, 900);
    ASSERT_TRUE(finished.ok()) << finished.status();
    EXPECT_EQ(finished->state(), v1::JOB_STATE_SUCCEEDED)
        << id << ": " << finished->error();
    auto tensors = service.JobTensors(id);
    ASSERT_TRUE(tensors.ok()) << tensors.status();
    EXPECT_TRUE(*tensors == reference->tensors)
        << id << ": model.safetensors differs from the undisturbed run";
  }
  // None lost, none duplicated; a replayed create finds the same job.
  auto listed = service.ListAll();
  ASSERT_TRUE(listed.ok()) << listed.status();
  std::multiset<std::string> listed_ids;
  for (const v1::Job& job : *listed) listed_ids.insert(job.id());
  EXPECT_EQ(listed_ids, std::multiset<std::string>(ids.begin(), ids.end()));
  for (int i = 0; i < 3; ++i) {
    auto replay =
        service.Create(absl::StrCat("several-", i), testing::SmallRecipePath());
    ASSERT_TRUE(replay.ok()) << replay.status();
    EXPECT_EQ(replay->id(), ids[i]);
  }
  ASSERT_TRUE(service.ListAll().ok());
  EXPECT_EQ(service.ListAll()->size(), 3u);
  {
    const absl::Status stopped = service.StopQuantd();
    ASSERT_TRUE(stopped.ok()) << stopped;
  }
  for (ChildProcess* worker : {first.get(), second.get()}) {
    worker->Signal(SIGTERM);
    EXPECT_GE(worker->Wait(60'000), 0) << "a worker ignored SIGTERM";
  }

  for (const std::string& id : ids) {
    auto tasks = service.StoredTasks(id);
    ASSERT_TRUE(tasks.ok()) << tasks.status();
    ASSERT_EQ(tasks->size(), static_cast<size_t>(kBlocks + 1));
    for (const store::Task& task : *tasks) {
      EXPECT_EQ(task.state, store::TaskState::kDone)
          << id << " " << TaskName(task);
      if (done_at_kill[id].count(task.index) > 0) {
        EXPECT_EQ(task.attempts, 1)
            << id << " " << TaskName(task) << " finished before the kill";
      } else {
        // Held across the restart: kept its lease, or ran once more after
        // it expired. Never more.
        EXPECT_LE(task.attempts, 2) << id << " " << TaskName(task);
        EXPECT_GE(task.attempts, 1) << id << " " << TaskName(task);
      }
    }
  }
}

std::string RandomToken() {
  std::random_device device;
  std::string token;
  for (int i = 0; i < 4; ++i) {
    absl::StrAppend(&token, absl::Hex(device(), absl::kZeroPad8));
  }
  return token;
}

// A /proc file (ReadFileToString trusts st_size, which is 0 there).
std::string ReadProcFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in),
                     std::istreambuf_iterator<char>());
}

// The command lines of `pid`'s children, NULs shown as spaces. Scans
// /proc/*/stat for the parent: /proc/PID/task/TID/children is not in every
// kernel.
std::vector<std::string> ChildCommandLines(pid_t pid) {
  std::vector<std::string> lines;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return lines;
  while (const dirent* entry = readdir(proc)) {
    int child = 0;
    if (!absl::SimpleAtoi(entry->d_name, &child)) continue;
    const std::string stat =
        ReadProcFile(absl::StrCat("/proc/", child, "/stat"));
    // "PID (COMM) STATE PPID ...": COMM may hold spaces and parentheses.
    const size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    const std::vector<std::string> fields =
        absl::StrSplit(stat.substr(close + 2), ' ');
    int parent = 0;
    if (fields.size() < 2 || !absl::SimpleAtoi(fields[1], &parent) ||
        parent != pid) {
      continue;
    }
    std::string line = ReadProcFile(absl::StrCat("/proc/", child, "/cmdline"));
    for (char& c : line) {
      if (c == '\0') c = ' ';
    }
    lines.push_back(line);
  }
  closedir(proc);
  return lines;
}

int PortAfter(const std::string& text, const std::string& prefix) {
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return 0;
  const std::string rest = text.substr(at + prefix.size());
  int port = 0;
  return absl::SimpleAtoi(rest.substr(0, rest.find('\n')), &port) ? port : 0;
}

TEST_F(FaultSoakTest, TokensNeverAppearInLogsOrMetrics) {
  ServiceHarness service(RealPath(testing::MakeTempDir()));
  const std::string dir = service.dir();
  const std::string client_token = RandomToken();
  const std::string worker_token = RandomToken();
  const std::string wrong_token = RandomToken();
  ASSERT_NE(client_token, worker_token);
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/client.token", client_token + "\n").ok());
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/worker.token", worker_token + "\n").ok());
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/wrong.token", wrong_token + "\n").ok());

  std::vector<std::string> args = service.QuantdArgs("127.0.0.1:0");
  args.push_back("--client_token_file=" + dir + "/client.token");
  args.push_back("--worker_token_file=" + dir + "/worker.token");
  args.push_back("--metrics_listen=127.0.0.1:0");
  args.push_back("--local_workers=1");
  args.push_back("--lease_seconds=3");
  {
    const absl::Status started = service.StartQuantd(args);
    ASSERT_TRUE(started.ok()) << started;
  }
  const std::string metrics_line = service.quantd()->ReadLine(30'000);
  const int quantd_metrics =
      PortAfter(metrics_line, "quantd: metrics on port ");
  ASSERT_GT(quantd_metrics, 0) << metrics_line;

  std::unique_ptr<ChildProcess> outside =
      service.StartWorker("outside", {"--token_file=" + dir + "/worker.token",
                                      "--metrics_listen=127.0.0.1:0"});
  ASSERT_TRUE(service.WaitForLog("outside.log", "registered as", 120).ok());
  const int worker_metrics =
      PortAfter(service.Log("outside.log"), "metrics on port ");
  ASSERT_GT(worker_metrics, 0) << service.Log("outside.log");

  // Refused workers: a wrong token, and the client's token.
  for (const auto& [name, file] :
       std::vector<std::pair<std::string, std::string>>{
           {"intruder", "wrong.token"}, {"confused", "client.token"}}) {
    std::unique_ptr<ChildProcess> refused =
        service.StartWorker(name, {"--token_file=" + dir + "/" + file});
    const int status = refused->Wait(60'000);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) != 0)
        << name << " exited with " << status << "\n"
        << service.Log(name + ".log");
    EXPECT_NE(service.Log(name + ".log").find("cannot register"),
              std::string::npos)
        << service.Log(name + ".log");
  }
  // Refused calls straight over gRPC.
  auto channel = grpc::CreateChannel(service.address(),
                                     grpc::InsecureChannelCredentials());
  {
    auto stub = v1::WorkerService::NewStub(channel);
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + wrong_token);
    v1::RegisterWorkerRequest request;
    request.set_name("direct");
    request.set_slots(1);
    v1::RegisterWorkerResponse response;
    EXPECT_EQ(stub->RegisterWorker(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    auto stub = v1::QuantService::NewStub(channel);
    grpc::ClientContext context;
    context.AddMetadata("authorization", "Bearer " + wrong_token);
    v1::ListJobsRequest request;
    v1::ListJobsResponse response;
    EXPECT_EQ(stub->ListJobs(&context, request, &response).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }

  // Local workers get the token by environment, not on the command line.
  const std::vector<std::string> children =
      ChildCommandLines(service.quantd()->pid());
  ASSERT_FALSE(children.empty()) << "no local worker under quantd\n"
                                 << service.Log("quantd.log");
  for (const std::string& line : children) {
    EXPECT_TRUE(absl::StrContains(line, "quant-worker")) << line;
    EXPECT_FALSE(absl::StrContains(line, worker_token)) << line;
    EXPECT_FALSE(absl::StrContains(line, client_token)) << line;
  }

  std::vector<std::pair<std::string, std::string>> texts;  // {what, text}
  const std::string addr = " --addr " + service.address();
  const testing::RunResult submit = testing::RunQuantctl(
      "submit --checkpoint " +
      testing::Quote(
          RealPath(testing::SharedPath("models/stories260K/hf-f32"))) +
      " --recipe " + testing::Quote(testing::SmallRecipePath()) +
      " --calibration " +
      testing::Quote(
          RealPath(testing::SharedPath("data/tinystories_val.txt"))) +
      " --request_id tokens-1 --wait --token_file " +
      testing::Quote(dir + "/client.token") + addr);
  EXPECT_TRUE(submit.exit_code == 0 || submit.exit_code == 3)
      << submit.out << submit.err << service.Log("quantd.log");
  EXPECT_TRUE(absl::StrContains(submit.out, "SUCCEEDED")) << submit.out;
  texts.emplace_back("quantctl submit stdout", submit.out);
  texts.emplace_back("quantctl submit stderr", submit.err);
  for (const auto& [what, auth] :
       std::vector<std::pair<std::string, std::string>>{
           {"wrong token", " --token " + wrong_token},
           {"worker token", " --token_file " + dir + "/worker.token"},
           {"no token", ""}}) {
    const testing::RunResult refused =
        testing::RunQuantctl("list" + auth + addr);
    EXPECT_EQ(refused.exit_code, 1)
        << what << ": " << refused.out << refused.err;
    EXPECT_FALSE(refused.err.empty()) << what;
    texts.emplace_back("quantctl list (" + what + ") stdout", refused.out);
    texts.emplace_back("quantctl list (" + what + ") stderr", refused.err);
  }

  for (const auto& [what, port] : std::vector<std::pair<std::string, int>>{
           {"quantd /metrics", quantd_metrics},
           {"worker /metrics", worker_metrics}}) {
    auto response = metrics::testing::HttpGet(port, "/metrics");
    ASSERT_TRUE(response.ok()) << what << ": " << response.status();
    EXPECT_EQ(response->status, 200) << what;
    EXPECT_TRUE(absl::StrContains(response->body, "quant_")) << what;
    texts.emplace_back(what, response->body);
  }

  {
    const absl::Status stopped = service.StopQuantd();
    ASSERT_TRUE(stopped.ok()) << stopped;
  }
  outside->Signal(SIGTERM);
  EXPECT_GE(outside->Wait(60'000), 0);
  texts.emplace_back("quantd stdout",
                     service.quantd_stdout() + metrics_line + "\n");
  for (const char* log :
       {"quantd.log", "outside.log", "intruder.log", "confused.log"}) {
    texts.emplace_back(log, service.Log(log));
  }
  // The local worker logs into quantd's stderr: it ran the job.
  EXPECT_TRUE(absl::StrContains(service.Log("quantd.log"), "done in") ||
              absl::StrContains(service.Log("outside.log"), "done in"));
  for (const auto& [what, text] : texts) {
    for (const auto& [name, token] :
         std::vector<std::pair<std::string, std::string>>{
             {"client token", client_token},
             {"worker token", worker_token},
             {"wrong token", wrong_token}}) {
      EXPECT_FALSE(absl::StrContains(text, token))
          << "the " << name << " appears in " << what << ":\n"
          << text;
    }
  }
}

}  // namespace
}  // namespace quant
