// The service's block and finalize tasks run from files (job_tasks.h), in
// the orders workers may run them: the packed checkpoint equals the local
// pipeline's byte for byte for both propagation modes, independent blocks
// may run in any order (each computes the float states entering it), a
// sequential block refuses to run before its predecessor has published, a
// re-run block publishes the same bytes, a finished finalize is recognised
// by a retry, and a cancelled block stops and publishes nothing. A block
// task reads only the blocks it runs and checks each one it reads.
#include "core/pipeline/job_tasks.h"

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/io/safetensors.h"
#include "core/pipeline/finalize_part_tasks.h"
#include "core/pipeline/local_pipeline.h"
#include "core/pipeline/round_job_tasks.h"
#include "core/pipeline/task_io.h"
#include "core/recipe/recipe.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/pipeline/pipeline_fixture.h"
#include "tests/support/fault_injecting_file_system.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::SmallRecipe;

class JobTasksTest : public testing::SharedModelTest {
 protected:
  JobTaskContext Context(const Recipe& recipe, const std::string& name) {
    JobTaskContext context;
    context.checkpoint_dir = testing::Stories260KDir();
    context.calibration_path = testing::TinyStoriesPath();
    context.recipe = recipe;
    context.work_dir = temp_ + "/" + name + "-work";
    EXPECT_TRUE(MakeDirectory(context.work_dir).ok());
    return context;
  }

  // Runs the tasks of the model's five blocks in order, attempt b under
  // temp_/<prefix>b.
  void RunEveryBlock(const JobTaskContext& context, const std::string& prefix) {
    for (int block = 0; block < 5; ++block) {
      const absl::Status s = RunBlockJobTask(
          context, block, temp_ + "/" + prefix + std::to_string(block),
          TaskControl());
      ASSERT_TRUE(s.ok()) << "block " << block << ": " << s;
    }
  }

  // Job `name` of `recipe` with every block published, its evaluation a
  // batch per held-out window, and its one-piece finalize at
  // temp_/<name>-whole, for the finalize in parts to match.
  void FinalizedJob(const Recipe& recipe, const std::string& name,
                    JobTaskContext* context, FinalizeJobResult* one_piece) {
    *context = Context(recipe, name);
    context->job_id = "job-" + name;
    context->eval_batch_windows = 1;
    ASSERT_NO_FATAL_FAILURE(RunEveryBlock(*context, name + "-attempt-"));
    auto finalized = RunFinalizeJobTask(*context, temp_ + "/" + name + "-whole",
                                        kDefaultMaxShardBytes, TaskControl());
    ASSERT_TRUE(finalized.ok()) << finalized.status();
    *one_piece = *std::move(finalized);
  }

  // `dir` holds the files of `expected`, byte for byte, and no other.
  static void ExpectSameFiles(const std::string& dir,
                              const std::string& expected) {
    const std::vector<std::string> files = testing::DirectoryEntries(expected);
    EXPECT_EQ(testing::DirectoryEntries(dir), files);
    for (const std::string& name : files) {
      EXPECT_EQ(*ReadFileToString(dir + "/" + name),
                *ReadFileToString(expected + "/" + name))
          << name << " differs";
    }
  }

  std::string LocalTensors(const Recipe& recipe, const std::string& name) {
    LocalQuantizeOptions options;
    options.checkpoint_dir = testing::Stories260KDir();
    options.calibration_path = testing::TinyStoriesPath();
    options.out_dir = temp_ + "/" + name + "-local";
    options.recipe = recipe;
    auto result = RunLocalQuantization(options);
    EXPECT_TRUE(result.ok()) << result.status();
    auto bytes = ReadFileToString(options.out_dir + "/model.safetensors");
    EXPECT_TRUE(bytes.ok()) << bytes.status();
    return bytes.ok() ? *bytes : "";
  }
};

TEST_F(JobTasksTest, IndependentBlocksInAnyOrderEqualTheLocalRun) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kIndependent);
  JobTaskContext context = Context(recipe, "independent");
  context.job_id = "job-independent";
  TaskControl control;
  int layers = 0;
  control.on_layer = [&](const LayerResult&) { ++layers; };
  // Last block first: it computes the float states from the embeddings;
  // block 2 then starts from block 1's published output, and so on.
  for (int block : {4, 1, 3, 0, 2}) {
    const absl::Status s = RunBlockJobTask(
        context, block, temp_ + "/attempt-" + std::to_string(block), control);
    ASSERT_TRUE(s.ok()) << "block " << block << ": " << s;
  }
  EXPECT_EQ(layers, 35);
  auto finalized = RunFinalizeJobTask(context, temp_ + "/independent-out",
                                      kDefaultMaxShardBytes, control);
  ASSERT_TRUE(finalized.ok()) << finalized.status();
  EXPECT_FALSE(finalized->already_done);
  auto service = ReadFileToString(temp_ + "/independent-out/model.safetensors");
  ASSERT_TRUE(service.ok());
  EXPECT_TRUE(*service == LocalTensors(recipe, "independent"));

  // A retry of a finalize that had published returns its verdict.
  auto again = RunFinalizeJobTask(context, temp_ + "/independent-out",
                                  kDefaultMaxShardBytes, control);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->already_done);
  EXPECT_EQ(again->passed, finalized->passed);

  // The manifest names the job and its recipe; a finalize of another job
  // (an id reused onto a kept artifact) or recipe refuses what is there
  // instead of reporting it as its own.
  auto manifest_text =
      ReadFileToString(temp_ + "/independent-out/manifest.json");
  ASSERT_TRUE(manifest_text.ok());
  const nlohmann::json manifest = nlohmann::json::parse(*manifest_text);
  EXPECT_EQ(manifest["job"]["id"], "job-independent");
  EXPECT_EQ(manifest["job"]["recipe_sha256"], RecipeSha256(recipe));
  JobTaskContext other_job = context;
  other_job.job_id = "job-other";
  auto refused = RunFinalizeJobTask(other_job, temp_ + "/independent-out",
                                    kDefaultMaxShardBytes, control);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsDataLoss(refused.status())) << refused.status();
  EXPECT_NE(refused.status().message().find(
                "is the checkpoint of job job-independent, not of job "
                "job-other"),
            std::string::npos)
      << refused.status();
  JobTaskContext other_recipe = context;
  other_recipe.recipe.bits = 8;
  refused = RunFinalizeJobTask(other_recipe, temp_ + "/independent-out",
                               kDefaultMaxShardBytes, control);
  ASSERT_FALSE(refused.ok());
  EXPECT_TRUE(absl::IsDataLoss(refused.status())) << refused.status();
}

TEST_F(JobTasksTest, SequentialBlocksNeedTheirPredecessorAndRerunsMatch) {
  const Recipe recipe = SmallRecipe(QuantMethod::kGptq, 32, OutputFormat::kGptq,
                                    Propagation::kSequential);
  const JobTaskContext context = Context(recipe, "sequential");
  const absl::Status early =
      RunBlockJobTask(context, 1, temp_ + "/early", TaskControl());
  EXPECT_TRUE(absl::IsFailedPrecondition(early)) << early;
  EXPECT_NE(early.message().find("block 0"), std::string::npos) << early;
  EXPECT_FALSE(
      FileExists(BlockOutputPrefix(context.work_dir, 1) + ".layers.json"));
  ASSERT_NO_FATAL_FAILURE(RunEveryBlock(context, "s-"));
  // A second attempt of block 2 (its lease expired while it ran) writes
  // and publishes the same bytes.
  const std::string published = BlockOutputPrefix(context.work_dir, 2);
  auto first = ReadFileToString(published + ".safetensors");
  auto first_states = ReadFileToString(published + ".cal.safetensors");
  ASSERT_TRUE(
      RunBlockJobTask(context, 2, temp_ + "/s-2-again", TaskControl()).ok());
  EXPECT_EQ(*ReadFileToString(published + ".safetensors"), *first);
  EXPECT_EQ(*ReadFileToString(published + ".cal.safetensors"), *first_states);

  auto finalized = RunFinalizeJobTask(context, temp_ + "/sequential-out",
                                      kDefaultMaxShardBytes, TaskControl());
  ASSERT_TRUE(finalized.ok()) << finalized.status();
  auto service = ReadFileToString(temp_ + "/sequential-out/model.safetensors");
  ASSERT_TRUE(service.ok());
  EXPECT_TRUE(*service == LocalTensors(recipe, "sequential"));
}

// Flips the last byte of `path` (tensor data, not the header).
void FlipLastByte(const std::string& path) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  ASSERT_TRUE(file.good()) << path;
  file.seekg(-1, std::ios::end);
  char byte = 0;
  file.get(byte);
  file.seekp(-1, std::ios::end);
  file.put(static_cast<char>(byte ^ 0x5A));
}

// A block output changed on disk between tasks used to end up in the
// published checkpoint with a PASS. Each block's layers.json records the
// sha256 of its other files; the next block and the finalize check them.
// The files a recipe names by path (gates.tasks, a chat template file) are
// pinned by content at submit: a task that finds other bytes refuses to run
// (DataLoss) and writes nothing.
TEST_F(JobTasksTest, PinnedRecipeFilesChangedSinceSubmitAreRefused) {
  Recipe recipe = SmallRecipe(QuantMethod::kRtn, 0, OutputFormat::kGptq,
                              Propagation::kSequential);
  const std::string tasks = temp_ + "/tasks.jsonl";
  const std::string task_text =
      "{\"prompt\": \"Once upon\", \"target\": \"a time\"}\n";
  ASSERT_TRUE(WriteFileAtomically(tasks, task_text).ok());
  const std::string chat = temp_ + "/chat.jinja";
  const std::string chat_text =
      "{% for m in messages %}{{ m.content }}{% endfor %}";
  ASSERT_TRUE(WriteFileAtomically(chat, chat_text).ok());
  recipe.gates.tasks = tasks;
  recipe.calibration.chat_template = chat;
  JobTaskContext context = Context(recipe, "pinned");
  context.tasks_sha256 = Sha256Hex(task_text);
  context.chat_template_sha256 = Sha256Hex(chat_text);
  ASSERT_TRUE(RunBlockJobTask(context, 0, temp_ + "/p-0", TaskControl()).ok());

  ASSERT_TRUE(WriteFileAtomically(tasks, task_text + "\n").ok());
  absl::Status changed =
      RunBlockJobTask(context, 1, temp_ + "/p-1", TaskControl());
  EXPECT_TRUE(absl::IsDataLoss(changed)) << changed;
  EXPECT_NE(changed.message().find("gates.tasks: " + tasks), std::string::npos)
      << changed;
  EXPECT_FALSE(
      FileExists(BlockOutputPrefix(context.work_dir, 1) + ".layers.json"));

  ASSERT_TRUE(WriteFileAtomically(tasks, task_text).ok());
  ASSERT_TRUE(WriteFileAtomically(chat, chat_text + " ").ok());
  changed = RunBlockJobTask(context, 1, temp_ + "/p-1b", TaskControl());
  EXPECT_TRUE(absl::IsDataLoss(changed)) << changed;
  EXPECT_NE(changed.message().find("calibration.chat_template: " + chat),
            std::string::npos)
      << changed;
  ASSERT_TRUE(WriteFileAtomically(chat, chat_text).ok());
  EXPECT_TRUE(RunBlockJobTask(context, 1, temp_ + "/p-1c", TaskControl()).ok());
}

TEST_F(JobTasksTest, BlockFilesChangedOnDiskAreRefused) {
  const Recipe recipe = SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kGptq,
                                    Propagation::kSequential);
  const JobTaskContext context = Context(recipe, "changed");
  for (int block = 0; block < 2; ++block) {
    ASSERT_TRUE(RunBlockJobTask(context, block,
                                temp_ + "/c-" + std::to_string(block),
                                TaskControl())
                    .ok());
  }
  ASSERT_TRUE(ReadBlockOutput(context.work_dir, 1).ok());
  for (const char* suffix : {".cal.safetensors", ".heldout.safetensors"}) {
    SCOPED_TRACE(suffix);
    const std::string states = BlockOutputPrefix(context.work_dir, 1) + suffix;
    auto before = ReadFileToString(states);
    ASSERT_TRUE(before.ok());
    FlipLastByte(states);
    const absl::Status next =
        RunBlockJobTask(context, 2, temp_ + "/c-2", TaskControl());
    EXPECT_TRUE(absl::IsDataLoss(next)) << next;
    // Named so that the coordinator runs block 1 again.
    EXPECT_EQ(ChangedBlockOutput(next), 1);
    EXPECT_NE(next.message().find(std::string("block-00001") + suffix +
                                  ": sha256 is "),
              std::string::npos)
        << next;
    EXPECT_FALSE(
        FileExists(BlockOutputPrefix(context.work_dir, 2) + ".layers.json"));
    ASSERT_TRUE(WriteFileAtomically(states, *before).ok());
  }
  // Files consistent with each other but not what the coordinator recorded
  // at block 1's completion (another run's output copied in, say): the
  // layers.json hash sent with the task catches them.
  JobTaskContext recorded = context;
  recorded.block_output_sha256[1] = std::string(64, '0');
  const absl::Status replaced =
      RunBlockJobTask(recorded, 2, temp_ + "/c-2r", TaskControl());
  EXPECT_EQ(ChangedBlockOutput(replaced), 1) << replaced;
  EXPECT_NE(replaced.message().find("the coordinator recorded"),
            std::string::npos)
      << replaced;
  recorded.block_output_sha256[1] = Sha256Hex(*ReadFileToString(
      BlockOutputPrefix(context.work_dir, 1) + ".layers.json"));
  EXPECT_TRUE(
      ReadBlockOutput(recorded.work_dir, 1, recorded.block_output_sha256[1])
          .ok());
  const std::string tensors =
      BlockOutputPrefix(context.work_dir, 1) + ".safetensors";
  FlipLastByte(tensors);
  auto read = ReadBlockOutput(context.work_dir, 1);
  ASSERT_FALSE(read.ok());
  EXPECT_TRUE(absl::IsDataLoss(read.status())) << read.status();
  EXPECT_EQ(ChangedBlockOutput(read.status()), 1);
  EXPECT_EQ(ChangedBlockOutput(absl::DataLossError("other")), std::nullopt);
  EXPECT_NE(read.status().message().find("the file changed on disk since"),
            std::string::npos)
      << read.status();
}

// The reads that decide what a block task does (the previous block's
// layers.json) go through the task's FileSystem: an I/O error, a file gone
// and a short read each fail the next task naming the file, and publish
// nothing. A short read is a changed file: block 0 is named for rerunning.
TEST_F(JobTasksTest, FailedReadsOfThePreviousBlockFailTheNextTaskByName) {
  const Recipe recipe = SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kGptq,
                                    Propagation::kSequential);
  JobTaskContext context = Context(recipe, "read-faults");
  ASSERT_TRUE(RunBlockJobTask(context, 0, temp_ + "/r-0", TaskControl()).ok());
  const std::string layers =
      BlockOutputPrefix(context.work_dir, 0) + ".layers.json";
  auto recorded = ReadFileToString(layers);
  ASSERT_TRUE(recorded.ok());
  context.block_output_sha256[0] = Sha256Hex(*recorded);
  const std::string next_layers =
      BlockOutputPrefix(context.work_dir, 1) + ".layers.json";

  quant::testing::FaultInjectingFileSystem fs;
  context.file_system = &fs;
  fs.FailReadsOf(layers, EIO);
  absl::Status failed =
      RunBlockJobTask(context, 1, temp_ + "/r-1a", TaskControl());
  EXPECT_TRUE(absl::IsInternal(failed)) << failed;
  EXPECT_NE(failed.message().find(layers), std::string::npos) << failed;
  EXPECT_NE(failed.message().find(std::strerror(EIO)), std::string::npos)
      << failed;
  EXPECT_FALSE(FileExists(next_layers));

  fs.ClearFaults();
  fs.FailReadsOf(layers, ENOENT);
  failed = RunBlockJobTask(context, 1, temp_ + "/r-1b", TaskControl());
  EXPECT_TRUE(absl::IsNotFound(failed)) << failed;
  EXPECT_NE(failed.message().find(layers), std::string::npos) << failed;
  EXPECT_FALSE(FileExists(next_layers));

  fs.ClearFaults();
  fs.ShortReadsOf(layers, static_cast<int64_t>(recorded->size() / 2));
  failed = RunBlockJobTask(context, 1, temp_ + "/r-1c", TaskControl());
  EXPECT_TRUE(absl::IsDataLoss(failed)) << failed;
  EXPECT_EQ(ChangedBlockOutput(failed), 0) << failed;
  EXPECT_FALSE(FileExists(next_layers));
  EXPECT_GE(fs.faults_injected(), 3);

  fs.ClearFaults();
  EXPECT_TRUE(RunBlockJobTask(context, 1, temp_ + "/r-1d", TaskControl()).ok());
  EXPECT_TRUE(FileExists(next_layers));
}

// Tensor files are read through the task's FileSystem too: the checkpoint's
// safetensors (mapped), the previous block's hidden states (hashed as a
// stream, then mapped) and the spill files a task reads back. An I/O error,
// a vanished file or a short read fails the task naming the file, and the
// next block publishes nothing; once the fault is gone the task succeeds.
TEST_F(JobTasksTest, FailedTensorReadsFailTheTaskByName) {
  const Recipe recipe = SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kGptq,
                                    Propagation::kSequential);
  JobTaskContext context = Context(recipe, "tensor-read-faults");
  ASSERT_TRUE(RunBlockJobTask(context, 0, temp_ + "/t-0", TaskControl()).ok());
  auto recorded =
      ReadFileToString(BlockOutputPrefix(context.work_dir, 0) + ".layers.json");
  ASSERT_TRUE(recorded.ok());
  context.block_output_sha256[0] = Sha256Hex(*recorded);
  const std::string next_layers =
      BlockOutputPrefix(context.work_dir, 1) + ".layers.json";
  const std::string weights =
      JoinPath(context.checkpoint_dir, "model.safetensors");
  const std::string states =
      BlockOutputPrefix(context.work_dir, 0) + ".cal.safetensors";
  auto weights_bytes = ReadFileToString(weights);
  ASSERT_TRUE(weights_bytes.ok());

  testing::FaultInjectingFileSystem fs;
  context.file_system = &fs;
  int attempts = 0;
  auto run_block_1 = [&] {
    return RunBlockJobTask(context, 1,
                           temp_ + "/t-1-" + std::to_string(attempts++),
                           TaskControl());
  };
  auto expect_failed_naming = [&](const absl::Status& failed,
                                  const std::string& path) {
    EXPECT_FALSE(failed.ok());
    EXPECT_NE(failed.message().find(path), std::string::npos) << failed;
    EXPECT_FALSE(FileExists(next_layers));
  };

  // The checkpoint's weights: unreadable, vanished, cut short.
  fs.FailReadsOf(weights, EIO);
  absl::Status failed = run_block_1();
  EXPECT_TRUE(absl::IsInternal(failed)) << failed;
  EXPECT_NE(failed.message().find(std::strerror(EIO)), std::string::npos)
      << failed;
  expect_failed_naming(failed, weights);
  fs.ClearFaults();
  fs.FailReadsOf(weights, ENOENT);
  failed = run_block_1();
  EXPECT_TRUE(absl::IsNotFound(failed)) << failed;
  expect_failed_naming(failed, weights);
  fs.ClearFaults();
  fs.ShortReadsOf(weights, static_cast<int64_t>(weights_bytes->size() / 2));
  expect_failed_naming(run_block_1(), weights);

  // Block 0's hidden states: an I/O error while hashing them, a vanished
  // file, and a short read, whose hash no longer matches what block 0
  // recorded, so block 0 is named to be computed again.
  fs.ClearFaults();
  fs.FailReadsOf(states, EIO);
  failed = run_block_1();
  EXPECT_TRUE(absl::IsInternal(failed)) << failed;
  expect_failed_naming(failed, states);
  fs.ClearFaults();
  fs.FailReadsOf(states, ENOENT);
  failed = run_block_1();
  EXPECT_TRUE(absl::IsNotFound(failed)) << failed;
  expect_failed_naming(failed, states);
  fs.ClearFaults();
  fs.ShortReadsOf(states, 1000);
  failed = run_block_1();
  EXPECT_TRUE(absl::IsDataLoss(failed)) << failed;
  EXPECT_EQ(ChangedBlockOutput(failed), 0) << failed;
  expect_failed_naming(failed, states);

  // Spill files read back inside the task's attempt directory.
  fs.ClearFaults();
  context.max_activation_bytes = 0;
  const std::string spilling_attempt = temp_ + "/t-1-spill";
  fs.FailReadsOf(spilling_attempt, EIO);
  failed = RunBlockJobTask(context, 1, spilling_attempt, TaskControl());
  EXPECT_TRUE(absl::IsInternal(failed)) << failed;
  expect_failed_naming(failed, spilling_attempt);
  EXPECT_TRUE(testing::DirectoryEntries(spilling_attempt).empty());
  EXPECT_GE(fs.faults_injected(), 7);

  fs.ClearFaults();
  EXPECT_TRUE(run_block_1().ok());
  EXPECT_TRUE(FileExists(next_layers));
}

// The finalize reads every block's tensors through its FileSystem: an I/O
// error on one block's file fails it naming the file, with no checkpoint.
TEST_F(JobTasksTest, FinalizeFailsNamingAnUnreadableBlockFile) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kRtn, 0, OutputFormat::kCompressedTensors,
                  Propagation::kIndependent);
  JobTaskContext context = Context(recipe, "finalize-read-fault");
  context.job_id = "job-finalize-read-fault";
  ASSERT_NO_FATAL_FAILURE(RunEveryBlock(context, "f-"));
  testing::FaultInjectingFileSystem fs;
  context.file_system = &fs;
  const std::string tensors =
      BlockOutputPrefix(context.work_dir, 3) + ".safetensors";
  fs.FailReadsOf(tensors, EIO);
  const std::string out = temp_ + "/finalize-read-fault-out";
  auto failed =
      RunFinalizeJobTask(context, out, kDefaultMaxShardBytes, TaskControl());
  ASSERT_FALSE(failed.ok());
  EXPECT_TRUE(absl::IsInternal(failed.status())) << failed.status();
  EXPECT_NE(failed.status().message().find(tensors), std::string::npos)
      << failed.status();
  EXPECT_FALSE(FileExists(out + "/model.safetensors"));

  fs.ClearFaults();
  auto finalized =
      RunFinalizeJobTask(context, out, kDefaultMaxShardBytes, TaskControl());
  ASSERT_TRUE(finalized.ok()) << finalized.status();
  EXPECT_TRUE(FileExists(out + "/model.safetensors"));
}

// The finalize as separate tasks (docs/DATA_PARALLEL.md, step 8): a stage,
// parts of the held-out evaluation scored apart and in any order, through
// their files, and a completion publish the one-piece finalize's files
// byte for byte. A completion missing a part, or given a part of another
// evaluation, fails naming the batches, publishes nothing and leaves the
// staged checkpoint for the next try.
TEST_F(JobTasksTest, FinalizeInPartsPublishesTheOnePieceFinalizesFiles) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kRtn, 0, OutputFormat::kCompressedTensors,
                  Propagation::kIndependent);
  JobTaskContext context;
  FinalizeJobResult one_piece;
  ASSERT_NO_FATAL_FAILURE(
      FinalizedJob(recipe, "finalize-parts", &context, &one_piece));
  const std::string whole = temp_ + "/finalize-parts-whole";

  const std::string staged = temp_ + "/finalize-staged";
  {
    // A full disk while staging leaves neither the directory nor a record.
    testing::FaultInjectingFileSystem fs;
    fs.SetDiskFullAfter(4096);
    JobTaskContext full = context;
    full.file_system = &fs;
    const absl::Status failed = StageFinalizeJobTask(
        full, staged, kDefaultMaxShardBytes, TaskControl());
    EXPECT_FALSE(failed.ok());
    EXPECT_GE(fs.faults_injected(), 1);
    EXPECT_FALSE(FileExists(staged)) << failed;
    EXPECT_FALSE(FileExists(staged + ".staged.json"));
  }
  const absl::Status stage_status = StageFinalizeJobTask(
      context, staged, kDefaultMaxShardBytes, TaskControl());
  ASSERT_TRUE(stage_status.ok()) << stage_status;
  EXPECT_EQ(StageFinalizeJobTask(context, staged, kDefaultMaxShardBytes,
                                 TaskControl())
                .code(),
            absl::StatusCode::kAlreadyExists);
  const absl::StatusOr<int64_t> batches =
      FinalizeJobEvaluationBatches(context, TaskControl());
  ASSERT_TRUE(batches.ok()) << batches.status();
  ASSERT_GE(*batches, 3);
  // Three uneven parts, scored last first.
  const std::vector<std::pair<int64_t, int64_t>> ranges = {
      {*batches - 1, 1}, {1, *batches - 2}, {0, 1}};
  std::vector<std::string> parts;
  for (const auto& [first, count] : ranges) {
    parts.push_back(absl::StrCat(temp_, "/part-", first, ".safetensors"));
    const absl::Status scored = ScoreFinalizeJobPart(
        context, staged, first, count, parts.back(), TaskControl());
    ASSERT_TRUE(scored.ok()) << scored;
  }

  // Refused: a part missing, and a part of an evaluation cut otherwise.
  const std::string out = temp_ + "/finalize-parts";
  auto missing = CompleteFinalizeJobTask(context, staged, {parts[0], parts[2]},
                                         out, TaskControl());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(missing.status().message().find(
                absl::StrCat("batches [1, ", *batches - 1, ") are missing")),
            std::string::npos)
      << missing.status();
  JobTaskContext other_cut = context;
  other_cut.eval_batch_windows = 2;
  auto other =
      CompleteFinalizeJobTask(other_cut, staged, parts, out, TaskControl());
  EXPECT_EQ(other.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(other.status().message().find(
                absl::StrCat("is of an evaluation in ", *batches, " batches")),
            std::string::npos)
      << other.status();
  EXPECT_FALSE(FileExists(out)) << "a refused completion published";
  EXPECT_TRUE(FileExists(staged + "/config.json"));

  // The blocks' tensors are packed already: the completion reads only
  // their layers, so unreadable tensor files do not stop it.
  testing::FaultInjectingFileSystem no_tensors;
  for (int block = 0; block < 5; ++block) {
    no_tensors.FailReadsOf(
        BlockOutputPrefix(context.work_dir, block) + ".safetensors", EIO);
  }
  JobTaskContext layers_only = context;
  layers_only.file_system = &no_tensors;
  auto completed =
      CompleteFinalizeJobTask(layers_only, staged, parts, out, TaskControl());
  ASSERT_TRUE(completed.ok()) << completed.status();
  EXPECT_EQ(no_tensors.faults_injected(), 0);
  EXPECT_EQ(completed->passed, one_piece.passed);
  EXPECT_EQ(completed->audit, one_piece.audit);
  EXPECT_EQ(completed->manifest, one_piece.manifest);
  EXPECT_FALSE(FileExists(staged)) << "the staged checkpoint was moved";
  EXPECT_FALSE(FileExists(staged + ".staged.json"));
  ExpectSameFiles(out, whole);
  // A staged directory without its record is not a staged checkpoint.
  auto gone = CompleteFinalizeJobTask(context, staged, parts,
                                      temp_ + "/finalize-again", TaskControl());
  EXPECT_FALSE(gone.ok());
  EXPECT_NE(gone.status().message().find("finalize-staged.staged.json"),
            std::string::npos)
      << gone.status();
}

// The same finalize as the service's tasks (finalize_part_tasks.h): the
// pack task replaces the debris of an attempt killed while publishing and
// what an earlier attempt published; parts, one of them empty, publish files a
// completion checks against what the coordinator recorded; the result is
// the one-piece finalize's, and a retry of the completion reports it.
TEST_F(JobTasksTest, FinalizePartTasksRetryAndCheckWhatTheyRead) {
  const Recipe recipe = SmallRecipe(QuantMethod::kRtn, 0, OutputFormat::kGptq,
                                    Propagation::kIndependent);
  JobTaskContext context;
  FinalizeJobResult one_piece;
  ASSERT_NO_FATAL_FAILURE(
      FinalizedJob(recipe, "part-tasks", &context, &one_piece));
  const std::string whole = temp_ + "/part-tasks-whole";

  // An attempt killed between its two renames left a directory alone.
  const std::string staged = JoinPath(context.work_dir, StagedFinalizeDir());
  ASSERT_TRUE(MakeDirectory(staged).ok());
  ASSERT_TRUE(WriteFileAtomically(staged + "/model.safetensors", "torn").ok());
  const std::string attempt = temp_ + "/pack-1";
  ASSERT_TRUE(MakeDirectory(attempt).ok());
  absl::StatusOr<std::string> record = RunFinalizePackJobTask(
      context, attempt, kDefaultMaxShardBytes, TaskControl());
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(*record, JoinPath(context.work_dir, StagedFinalizeRecordFile()));
  EXPECT_EQ(*ReadFileToString(staged + "/model.safetensors"),
            *ReadFileToString(whole + "/model.safetensors"));
  // A second attempt (its record found changed) publishes the same bytes
  // again, leaving nothing in its attempt area.
  const std::string record_sha256 = *Sha256File(*record);
  ASSERT_TRUE(WriteFileAtomically(*record, "{}").ok());
  ASSERT_TRUE(MakeDirectory(temp_ + "/pack-2").ok());
  EXPECT_EQ(*RunFinalizePackJobTask(context, temp_ + "/pack-2",
                                    kDefaultMaxShardBytes, TaskControl()),
            *record);
  EXPECT_EQ(*Sha256File(*record), record_sha256);
  EXPECT_TRUE(testing::DirectoryEntries(temp_ + "/pack-2").empty());

  const absl::StatusOr<int64_t> batches =
      FinalizeJobEvaluationBatches(context, TaskControl());
  ASSERT_TRUE(batches.ok()) << batches.status();
  const int parts = static_cast<int>(*batches) + 1;  // One part is empty.
  int64_t covered = 0;
  for (int part = 0; part < parts; ++part) {
    const auto [first, count] = GatePartBatches(*batches, part, parts);
    EXPECT_EQ(first, covered) << part;
    covered += count;
  }
  EXPECT_EQ(covered, *batches);
  context.round_file_sha256[StagedFinalizeRecordFile()] = record_sha256;
  for (int part = parts - 1; part >= 0; --part) {
    absl::StatusOr<std::string> path =
        RunGatePartJobTask(context, part, parts, TaskControl());
    ASSERT_TRUE(path.ok()) << "part " << part << ": " << path.status();
    context.round_file_sha256[GatePartFile(part)] = *Sha256File(*path);
  }
  EXPECT_FALSE(RunGatePartJobTask(context, parts, parts, TaskControl()).ok());

  // A part changed on disk since its task completed names itself.
  const std::string out = temp_ + "/part-tasks-out";
  JobTaskContext changed = context;
  changed.round_file_sha256[GatePartFile(1)] = std::string(64, '0');
  absl::StatusOr<FinalizeJobResult> refused =
      RunFinalizeFromPartsJobTask(changed, parts, out, TaskControl());
  EXPECT_TRUE(absl::IsDataLoss(refused.status())) << refused.status();
  EXPECT_EQ(ChangedRoundFile(refused.status()), GatePartFile(1));
  EXPECT_FALSE(FileExists(out));

  absl::StatusOr<FinalizeJobResult> done =
      RunFinalizeFromPartsJobTask(context, parts, out, TaskControl());
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_FALSE(done->already_done);
  EXPECT_EQ(done->audit, one_piece.audit);
  ExpectSameFiles(out, whole);
  // A retry after a lost answer: the staged files are gone, the published
  // verdict stands.
  absl::StatusOr<FinalizeJobResult> again =
      RunFinalizeFromPartsJobTask(context, parts, out, TaskControl());
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_TRUE(again->already_done);
  EXPECT_EQ(again->passed, done->passed);
}

// Over the activation bound a block task keeps its hidden states in spill
// files in its attempt area (the embeddings, the float blocks an
// independent block runs through, the previous block's output read a chunk
// at a time) and publishes the same bytes as a task holding them in memory.
// 40 windows of 64 tokens make two 2048-token chunks.
TEST_F(JobTasksTest, SpilledActivationsPublishTheSameBytes) {
  for (Propagation propagation :
       {Propagation::kIndependent, Propagation::kSequential}) {
    const Recipe recipe =
        SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                    propagation, /*samples=*/40, /*seq_len=*/64);
    const std::string name = PropagationName(propagation);
    SCOPED_TRACE(name);
    const JobTaskContext in_memory = Context(recipe, name + "-memory");
    JobTaskContext spilled = Context(recipe, name + "-spilled");
    testing::FaultInjectingFileSystem counting;
    spilled.file_system = &counting;
    spilled.max_activation_bytes = 0;
    // Independent: block 2 first runs float blocks 0 and 1 itself.
    const std::vector<int> order = propagation == Propagation::kIndependent
                                       ? std::vector<int>{2, 0}
                                       : std::vector<int>{0, 1, 2};
    int64_t spilled_bytes = 0;
    for (int block : order) {
      const std::string tag = name + "-" + std::to_string(block);
      ASSERT_TRUE(
          RunBlockJobTask(in_memory, block, temp_ + "/m-" + tag, TaskControl())
              .ok());
      const int64_t before = counting.bytes_written();
      const std::string attempt = temp_ + "/s-" + tag;
      const absl::Status s =
          RunBlockJobTask(spilled, block, attempt, TaskControl());
      ASSERT_TRUE(s.ok()) << s;
      spilled_bytes += counting.bytes_written() - before;
      // Published, and the spill files went with the task.
      EXPECT_TRUE(testing::DirectoryEntries(attempt).empty()) << attempt;
      for (const char* suffix :
           {".safetensors", ".cal.safetensors", ".heldout.safetensors"}) {
        EXPECT_EQ(*ReadFileToString(BlockOutputPrefix(spilled.work_dir, block) +
                                    suffix),
                  *ReadFileToString(
                      BlockOutputPrefix(in_memory.work_dir, block) + suffix))
            << "block " << block << suffix;
      }
      EXPECT_EQ(testing::LayersWithoutTimes(spilled.work_dir, block),
                testing::LayersWithoutTimes(in_memory.work_dir, block));
    }
    // The spilled run wrote more than its outputs: its spill files.
    int64_t published = 0;
    for (const std::string& file :
         testing::DirectoryEntries(spilled.work_dir)) {
      published += static_cast<int64_t>(
          ReadFileToString(spilled.work_dir + "/" + file)->size());
    }
    EXPECT_GT(spilled_bytes, published + 2 * 2560 * 64 * 4);
  }
}

// A disk that fills while a spill file is written fails the task with the
// cause, publishes nothing and leaves no spill file behind.
TEST_F(JobTasksTest, FullDiskWhileSpillingPublishesNothing) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kIndependent, /*samples=*/40, /*seq_len=*/64);
  JobTaskContext context = Context(recipe, "spill-full");
  testing::FaultInjectingFileSystem disk;
  context.file_system = &disk;
  context.max_activation_bytes = 0;
  disk.SetDiskFullAfter(1 << 20);  // Within the second spill file.
  const std::string attempt = temp_ + "/spill-full-attempt";
  const absl::Status s = RunBlockJobTask(context, 3, attempt, TaskControl());
  EXPECT_TRUE(absl::IsResourceExhausted(s)) << s;
  EXPECT_GT(disk.faults_injected(), 0);
  EXPECT_TRUE(testing::DirectoryEntries(attempt).empty());
  EXPECT_FALSE(
      FileExists(BlockOutputPrefix(context.work_dir, 3) + ".layers.json"));
}

TEST_F(JobTasksTest, CancelledBlockStopsAndPublishesNothing) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kSequential);
  const JobTaskContext context = Context(recipe, "cancel");
  std::atomic<bool> cancelled{false};
  TaskControl control;
  control.cancelled = &cancelled;
  int layers = 0;
  control.on_layer = [&](const LayerResult&) {
    if (++layers == 3) cancelled = true;  // After [q, k, v].
  };
  const absl::Status s =
      RunBlockJobTask(context, 0, temp_ + "/cancel-attempt", control);
  EXPECT_TRUE(absl::IsCancelled(s)) << s;
  EXPECT_EQ(layers, 3);
  EXPECT_FALSE(
      FileExists(BlockOutputPrefix(context.work_dir, 0) + ".layers.json"));
  const absl::Status bad_block =
      RunBlockJobTask(context, 5, temp_ + "/bad", TaskControl());
  EXPECT_TRUE(absl::IsInvalidArgument(bad_block)) << bad_block;
}

// A copy of stories260K whose `tensor` holds a NaN at element 7.
std::string PoisonedCopy(const std::string& dir, const std::string& tensor) {
  EXPECT_TRUE(MakeDirectory(dir).ok());
  for (const char* name :
       {"config.json", "model.safetensors", "tokenizer.json",
        "tokenizer_config.json", "special_tokens_map.json"}) {
    auto bytes = ReadFileToString(testing::Stories260KDir() + "/" + name);
    EXPECT_TRUE(bytes.ok()) << name;
    EXPECT_TRUE(WriteFileAtomically(dir + "/" + name, *bytes).ok());
  }
  const std::string model = dir + "/model.safetensors";
  uint64_t offset = 0;
  {
    auto file = SafetensorsFile::Open(model);
    EXPECT_TRUE(file.ok()) << file.status();
    const TensorInfo* info = (*file)->Find(tensor);
    EXPECT_NE(info, nullptr) << tensor;
    EXPECT_EQ(info->dtype, DType::kF32);
    std::ifstream in(model, std::ios::binary);
    uint64_t header_bytes = 0;
    in.read(reinterpret_cast<char*>(&header_bytes), sizeof(header_bytes));
    offset = 8 + header_bytes + info->data_begin + 7 * sizeof(float);
  }
  std::fstream out(model, std::ios::in | std::ios::out | std::ios::binary);
  out.seekp(static_cast<std::streamoff>(offset));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  out.write(reinterpret_cast<const char*>(&nan), sizeof(nan));
  EXPECT_TRUE(out.good());
  return dir;
}

TEST_F(JobTasksTest, BlockTasksCheckTheWeightsTheyRead) {
  const Recipe recipe =
      SmallRecipe(QuantMethod::kGptq, 0, OutputFormat::kCompressedTensors,
                  Propagation::kIndependent);
  JobTaskContext context = Context(recipe, "poisoned");
  context.checkpoint_dir = PoisonedCopy(temp_ + "/poisoned-model",
                                        "model.layers.3.mlp.up_proj.weight");
  // Block 2 runs the float blocks 0 and 1 and quantizes block 2: it never
  // reads block 3, so the NaN there does not concern it.
  const absl::Status block2 =
      RunBlockJobTask(context, 2, temp_ + "/p-2", TaskControl());
  EXPECT_TRUE(block2.ok()) << block2;
  // Block 4 runs block 3 in float to reach its input: refused, naming it.
  const absl::Status block4 =
      RunBlockJobTask(context, 4, temp_ + "/p-4", TaskControl());
  EXPECT_TRUE(absl::IsInvalidArgument(block4)) << block4;
  EXPECT_NE(block4.message().find(
                "tensor \"model.layers.3.mlp.up_proj.weight\" has NaN"),
            std::string::npos)
      << block4;
  EXPECT_FALSE(
      FileExists(BlockOutputPrefix(context.work_dir, 4) + ".layers.json"));
  // Block 0 checks the whole checkpoint first, so a job fails at its
  // first task rather than at the bad block.
  const absl::Status block0 =
      RunBlockJobTask(context, 0, temp_ + "/p-0", TaskControl());
  EXPECT_TRUE(absl::IsInvalidArgument(block0)) << block0;
  EXPECT_NE(block0.message().find("model.layers.3.mlp.up_proj.weight"),
            std::string::npos)
      << block0;
}

}  // namespace
}  // namespace quant
