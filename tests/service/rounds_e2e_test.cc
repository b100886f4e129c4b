// A sequential job's blocks as rounds of small tasks (docs/DATA_PARALLEL.md)
// through the real service: quantd, quant-worker processes, gRPC over
// loopback, the SQLite file. The packed checkpoint is the local run's, byte
// for byte, on 1 and 3 workers (service_e2e_test covers 2), and when a
// worker is killed in the middle of a shard task and of a reduce: the
// killed tasks run again after their leases expire and nothing else does.
#include <signal.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/pipeline/block_task.h"
#include "gtest/gtest.h"
#include "server/store/job_store.h"
#include "tests/service/child_process.h"
#include "tests/service/service_fixture.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::ChildProcess;
using testing::RealPath;
using testing::ServiceHarness;

// Tasks of a second or more (64 windows of 128 tokens), so that a worker
// can be stopped inside one.
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

TEST_F(RoundsE2eTest, OneAndThreeWorkersGiveTheLocalRunsBytes) {
  auto reference = testing::ReferenceRun(testing::SmallRecipePath());
  ASSERT_TRUE(reference.ok()) << reference.status();
  for (const int workers : {1, 3}) {
    SCOPED_TRACE(absl::StrCat(workers, " workers"));
    ServiceHarness service(RealPath(testing::MakeTempDir()));
    std::vector<std::string> args = service.QuantdArgs("127.0.0.1:0");
    args.push_back(absl::StrCat("--local-workers=", workers));
    args.push_back("--round_tasks");
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
    ASSERT_TRUE(service.StopQuantd().ok());
    // It ran as rounds: shard tasks, reduces and shard outputs, each once.
    int shard_tasks = 0, reduces = 0, outputs = 0;
    for (const store::Task& task :
         testing::ValueOrFailure(service.StoredTasks(job.id()))) {
      shard_tasks += task.kind == store::TaskKind::kShardStats;
      reduces += task.kind == store::TaskKind::kReduce;
      outputs += task.kind == store::TaskKind::kShardOutput;
      EXPECT_EQ(task.attempts, 1) << store::DescribeTaskWork(task);
    }
    EXPECT_EQ(shard_tasks, 5 * 4 * 2);
    // A GPTQ job reduces q, k, v and gate, up a layer at a time: 7 reduces
    // a block.
    EXPECT_EQ(reduces, 5 * 7);
    EXPECT_EQ(outputs, 4 * 2);
  }
}

// Stops `worker` (SIGSTOP) at the first of `lines` it logs while it holds a
// task of `kind` (a stopped worker holds its lease, so the task it is
// inside is the one the store shows LEASED), then kills it. The task it
// held, or -1.
int KillInside(ServiceHarness& service, const std::string& job_id,
               std::unique_ptr<ChildProcess> worker, const std::string& log,
               const std::vector<std::string>& lines, store::TaskKind kind) {
  int held = -1;
  for (const std::string& line : lines) {
    const absl::Status seen = service.WaitForLog(
        log, absl::StrCat("running ", job_id, " ", line), 900);
    if (!seen.ok()) {
      ADD_FAILURE() << seen;
      break;
    }
    worker->Signal(SIGSTOP);
    for (const store::Task& task :
         testing::ValueOrFailure(service.ReadStoredTasks(job_id))) {
      if (task.state == store::TaskState::kLeased && task.kind == kind) {
        held = task.index;
      }
    }
    if (held >= 0) break;
    worker->Signal(SIGCONT);  // It had finished that one: try the next.
  }
  worker->Signal(SIGKILL);
  worker->Wait(10'000);
  return held;
}

TEST_F(RoundsE2eTest, WorkersKilledInAShardTaskAndInAReduceAreTakenOver) {
  auto reference = testing::ReferenceRun(MediumRecipePath());
  ASSERT_TRUE(reference.ok()) << reference.status();
  ServiceHarness service(RealPath(testing::MakeTempDir()));
  std::vector<std::string> args = service.QuantdArgs("127.0.0.1:0");
  args.push_back("--lease_seconds=2");
  args.push_back("--round_tasks");
  ASSERT_TRUE(service.StartQuantd(args).ok());
  const v1::Job job = testing::ValueOrFailure(
      service.Create("rounds-kill", MediumRecipePath()));
  ASSERT_FALSE(job.id().empty());

  // One worker killed inside a shard task of block 1, the next inside a
  // reduce of block 2.
  std::vector<std::string> shard_lines, reduce_lines;
  for (int g = 0; g < 4; ++g) {
    shard_lines.push_back(
        absl::StrCat("block 1 group ", g, ": calibration shard 0 (attempt 1)"));
    // A GPTQ job's groups of several layers are reduced a layer at a time.
    for (const std::optional<LayerType>& layer :
         RoundGroupReduces(g, /*by_layer=*/true)) {
      reduce_lines.push_back(absl::StrCat(
          "block 2 group ", g, ": reduce",
          layer.has_value() ? absl::StrCat(" ", LayerTypeName(*layer)) : "",
          " (attempt 1)"));
    }
  }
  const int shard_task =
      KillInside(service, job.id(), service.StartWorker("shard-victim"),
                 "shard-victim.log", shard_lines, store::TaskKind::kShardStats);
  const int reduce_task =
      KillInside(service, job.id(), service.StartWorker("reduce-victim"),
                 "reduce-victim.log", reduce_lines, store::TaskKind::kReduce);
  ASSERT_GE(shard_task, 0) << service.Log("shard-victim.log");
  ASSERT_GE(reduce_task, 0) << service.Log("reduce-victim.log");

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
  // The two tasks killed midway ran again; every other task ran once
  // (a rescuer that misses a 2 s lease on a loaded machine may add one).
  int reran = 0;
  for (const store::Task& task :
       testing::ValueOrFailure(service.StoredTasks(job.id()))) {
    EXPECT_EQ(task.state, store::TaskState::kDone) << task.index;
    if (task.index == shard_task || task.index == reduce_task) {
      EXPECT_GE(task.attempts, 2) << store::DescribeTaskWork(task);
    } else {
      reran += task.attempts > 1;
    }
  }
  EXPECT_LE(reran, 1) << service.Log("quantd.log");
}

}  // namespace
}  // namespace quant
