// A sequential job's blocks as rounds of small tasks (docs/DATA_PARALLEL.md)
// through the real service: quantd, quant-worker processes, gRPC over
// loopback, the SQLite file. The packed checkpoint is the local run's, byte
// for byte, on 1 and 3 workers (service_e2e_test covers 2), and when a
// worker is killed in the middle of a shard task, of a reduce and of a
// gate part: the killed tasks run again after their leases expire and
// nothing else does. With --gate_parts the finalize's held-out evaluation
// runs as parts on several workers, and the audit's gates are those of
// the finalize in one task.
#include <signal.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/store/job_store.h"
#include "tests/service/child_process.h"
#include "tests/service/service_fixture.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::ChildProcess;
using testing::RealPath;
using testing::ServiceHarness;

// 64 windows of 128 tokens: more shards and longer tasks than the small
// recipe's, so that a worker spends much of its time inside each kind.
std::string MediumRecipePath() {
  return testing::FixturesDir() + "/service/stories260k-gptq-medium.yaml";
}

class RoundsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
    QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
  }
};

// The "gates" section of the job's audit.json.
nlohmann::json JobGates(const ServiceHarness& service,
                        const std::string& job_id) {
  const nlohmann::json audit = nlohmann::json::parse(
      testing::ValueOrFailure(service.JobFile(job_id, "audit.json")), nullptr,
      /*allow_exceptions=*/false);
  EXPECT_TRUE(audit.is_object() && audit.contains("gates"));
  return audit.is_object() ? audit.value("gates", nlohmann::json()) : nullptr;
}

TEST_F(RoundsE2eTest, OneAndThreeWorkersGiveTheLocalRunsBytes) {
  auto reference = testing::ReferenceRun(testing::SmallRecipePath());
  ASSERT_TRUE(reference.ok()) << reference.status();
  nlohmann::json one_task_gates;
  for (const int workers : {1, 3}) {
    SCOPED_TRACE(absl::StrCat(workers, " workers"));
    // On 3 workers the finalize's evaluation runs as 3 gate parts.
    const int gate_parts = workers == 1 ? 0 : 3;
    ServiceHarness service(RealPath(testing::MakeTempDir()));
    std::vector<std::string> args = service.QuantdArgs("127.0.0.1:0");
    args.push_back(absl::StrCat("--local-workers=", workers));
    args.push_back("--round_tasks");
    args.push_back(absl::StrCat("--gate_parts=", gate_parts));
    const absl::Status started = service.StartQuantd(args);
    ASSERT_TRUE(started.ok()) << started;
    const v1::Job job = testing::ValueOrFailure(service.Create(
        absl::StrCat("rounds-", workers), testing::SmallRecipePath()));
    ASSERT_FALSE(job.id().empty());
    const v1::Job done =
        testing::ValueOrFailure(service.WaitForEnd(job.id(), 1200));
    ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED)
        << done.error() << "\n"
        << service.Log("quantd.log");
    EXPECT_EQ(done.progress().blocks_done(), 5);
    EXPECT_EQ(done.progress().layers_done(), 35);
    const std::string tensors =
        testing::ValueOrFailure(service.JobTensors(job.id()));
    EXPECT_TRUE(tensors == reference->tensors)
        << "the packed tensors differ from the local run's";
    const nlohmann::json gates = JobGates(service, job.id());
    ASSERT_TRUE(gates.is_object());
    if (gate_parts == 0) {
      one_task_gates = gates;
    } else {
      EXPECT_EQ(gates, one_task_gates)
          << "the gates from parts differ from the one-task finalize's";
    }
    ASSERT_TRUE(service.StopQuantd().ok());
    // It ran as rounds: shard tasks, reduces and shard outputs, each once,
    // and the finalize as a pack and its parts when split.
    int shard_tasks = 0, reduces = 0, outputs = 0, packs = 0, parts = 0;
    for (const store::Task& task :
         testing::ValueOrFailure(service.StoredTasks(job.id()))) {
      shard_tasks += task.kind == store::TaskKind::kShardStats;
      reduces += task.kind == store::TaskKind::kReduce;
      outputs += task.kind == store::TaskKind::kShardOutput;
      packs += task.kind == store::TaskKind::kFinalizePack;
      parts += task.kind == store::TaskKind::kGatePart;
      EXPECT_EQ(task.attempts, 1) << store::DescribeTaskWork(task);
    }
    EXPECT_EQ(packs, gate_parts > 0 ? 1 : 0);
    EXPECT_EQ(parts, gate_parts);
    EXPECT_EQ(shard_tasks, 5 * 4 * 2);
    // A GPTQ job reduces q, k, v and gate, up a layer at a time: 7 reduces
    // a block.
    EXPECT_EQ(reduces, 5 * 7);
    EXPECT_EQ(outputs, 4 * 2);
  }
}

// Kills `worker`, the only live worker of the job, while it holds a task
// of `kind` in block `min_block` or later; the task it held, or -1. It
// stops the worker (SIGSTOP), reads the store (a stopped worker holds its
// lease, so the task it is inside is the one the store shows LEASED) and
// lets it go on (SIGCONT) until it is caught inside such a task. Waiting
// for the task's log line and stopping the worker then, as this did
// before, missed tasks that end within milliseconds: with the shard stash
// and the block cache a round task is that short, and on a loaded host the
// worker finished every candidate before it was stopped.
int KillInside(ServiceHarness& service, const std::string& job_id,
               std::unique_ptr<ChildProcess> worker, store::TaskKind kind,
               int min_block) {
  int held = -1;
  const auto deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(900);
  while (held < 0 && std::chrono::steady_clock::now() < deadline) {
    worker->Signal(SIGSTOP);
    const absl::StatusOr<std::vector<store::Task>> tasks =
        service.ReadStoredTasks(job_id);
    if (!tasks.ok()) {
      ADD_FAILURE() << tasks.status();
      break;
    }
    bool finished = !tasks->empty();
    for (const store::Task& task : *tasks) {
      finished = finished && task.state == store::TaskState::kDone;
      if (task.state == store::TaskState::kLeased && task.kind == kind &&
          task.block >= min_block) {
        held = task.index;
      }
    }
    if (held >= 0) break;
    worker->Signal(SIGCONT);
    if (finished) {
      ADD_FAILURE() << "the job ended before the worker was caught inside "
                       "a task of kind "
                    << static_cast<int>(kind);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  worker->Signal(SIGKILL);
  worker->Wait(10'000);
  return held;
}

TEST_F(RoundsE2eTest,
       WorkersKilledInAShardTaskAReduceAndAGatePartAreTakenOver) {
  auto reference = testing::ReferenceRun(MediumRecipePath());
  ASSERT_TRUE(reference.ok()) << reference.status();
  ServiceHarness service(RealPath(testing::MakeTempDir()));
  std::vector<std::string> args = service.QuantdArgs("127.0.0.1:0");
  // Short enough that the killed workers' tasks come back soon, long
  // enough that a live worker on a loaded CI host keeps its leases.
  args.push_back("--lease_seconds=3");
  args.push_back("--round_tasks");
  args.push_back("--gate_parts=4");
  ASSERT_TRUE(service.StartQuantd(args).ok());
  const v1::Job job = testing::ValueOrFailure(
      service.Create("rounds-kill", MediumRecipePath()));
  ASSERT_FALSE(job.id().empty());

  // One worker killed inside a shard task of block 1 or later, the next
  // inside a reduce of block 2 or later, the third inside a gate part
  // (which has no block).
  const int shard_task =
      KillInside(service, job.id(), service.StartWorker("shard-victim"),
                 store::TaskKind::kShardStats, /*min_block=*/1);
  const int reduce_task =
      KillInside(service, job.id(), service.StartWorker("reduce-victim"),
                 store::TaskKind::kReduce, /*min_block=*/2);
  const int gate_task =
      KillInside(service, job.id(), service.StartWorker("gate-victim"),
                 store::TaskKind::kGatePart, /*min_block=*/-1);
  ASSERT_GE(shard_task, 0) << service.Log("shard-victim.log");
  ASSERT_GE(reduce_task, 0) << service.Log("reduce-victim.log");
  ASSERT_GE(gate_task, 0) << service.Log("gate-victim.log");

  std::unique_ptr<ChildProcess> rescuer = service.StartWorker("rescuer");
  const v1::Job done =
      testing::ValueOrFailure(service.WaitForEnd(job.id(), 1800));
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED)
      << done.error() << "\n"
      << service.Log("rescuer.log") << service.Log("quantd.log");
  const std::string tensors =
      testing::ValueOrFailure(service.JobTensors(job.id()));
  EXPECT_TRUE(tensors == reference->tensors)
      << "the packed tensors differ from the local run's";
  ASSERT_TRUE(service.StopQuantd().ok());
  rescuer->Signal(SIGTERM);
  rescuer->Wait(30'000);
  // The three tasks killed midway ran again; every other task ran once
  // (a rescuer that misses a 3 s lease on a loaded machine may add one).
  int reran = 0;
  for (const store::Task& task :
       testing::ValueOrFailure(service.StoredTasks(job.id()))) {
    EXPECT_EQ(task.state, store::TaskState::kDone) << task.index;
    if (task.index == shard_task || task.index == reduce_task ||
        task.index == gate_task) {
      EXPECT_GE(task.attempts, 2) << store::DescribeTaskWork(task);
    } else {
      reran += task.attempts > 1;
    }
  }
  EXPECT_LE(reran, 1) << service.Log("quantd.log");
}

}  // namespace
}  // namespace quant
