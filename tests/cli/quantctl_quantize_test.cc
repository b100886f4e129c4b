// `quantctl quantize --local` end to end as a user runs it: exit codes (0
// PASS, 3 gates FAIL, 1 error, 2 usage), the audit table, --json, and the
// packed checkpoint read back by `quantctl eval`.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::quant::testing::Quote;
using ::quant::testing::RunQuantctl;
using ::quant::testing::RunResult;
using ::testing::HasSubstr;

constexpr char kRecipe[] = R"(method: gptq
bits: 4
group_size: 32
act_order: true
calibration:
  samples: 8
  seq_len: 128
  heldout_fraction: 0.1
format: gptq
)";

class QuantizeCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = testing::SharedPath("models/stories260K/hf-f32");
    text_ = testing::SharedPath("data/tinystories_val.txt");
    QUANT_REQUIRE_SHARED(model_);
    QUANT_REQUIRE_SHARED(text_);
    temp_ = testing::MakeTempDir();
  }

  std::string WriteRecipe(const std::string& name, const std::string& text) {
    const std::string path = temp_ + "/" + name;
    EXPECT_TRUE(WriteFileAtomically(path, text).ok());
    return path;
  }

  RunResult Quantize(const std::string& recipe, const std::string& out,
                     const std::string& extra = "") {
    return RunQuantctl("quantize --local --checkpoint " + Quote(model_) +
                       " --calibration " + Quote(text_) + " --recipe " +
                       Quote(recipe) + " --out " + Quote(out) + " " + extra);
  }

  std::string model_;
  std::string text_;
  std::string temp_;
};

// gates.compare_to from the command line: the previous release's numbers
// per layer (stderr) and end to end (stdout), and a regression against it
// exits 3 like any failed gate.
TEST_F(QuantizeCommandTest, ComparesWithThePreviousRelease) {
  const std::string previous = temp_ + "/previous";
  const RunResult first = Quantize(WriteRecipe("r.yaml", kRecipe), previous);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string recipe = WriteRecipe(
      "vs.yaml", absl::StrCat(kRecipe, "gates:\n  compare_to: ", previous,
                              "\n  max_ppl_ratio_vs_previous: 0.999\n"));
  const RunResult run = Quantize(recipe, temp_ + "/again");
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_THAT(run.err, HasSubstr(", previous release 0."));
  EXPECT_THAT(run.out, HasSubstr("previous release " + previous));
  EXPECT_THAT(run.out, HasSubstr("this / previous 1.0000"));
  EXPECT_THAT(run.out, HasSubstr("gate max_ppl_ratio_vs_previous"));
  EXPECT_THAT(run.out, HasSubstr("verdict: FAIL"));

  // `report DIR` prints the same, and a damaged previous block is named.
  const std::string again = temp_ + "/again";
  RunResult report = RunQuantctl("report " + Quote(again));
  EXPECT_EQ(report.exit_code, 3) << report.err;
  EXPECT_THAT(report.out, HasSubstr("this / previous 1.0000"));
  auto text = ReadFileToString(again + "/audit.json");
  ASSERT_TRUE(text.ok());
  nlohmann::json audit = nlohmann::json::parse(*text);
  audit["gates"]["previous"]["perplexity"] = "6.5";
  ASSERT_TRUE(WriteFileAtomically(again + "/audit.json", audit.dump()).ok());
  report = RunQuantctl("report " + Quote(again));
  EXPECT_EQ(report.exit_code, 1) << report.out;
  EXPECT_THAT(report.err, HasSubstr("gates.previous.perplexity"));
}

TEST_F(QuantizeCommandTest, PassPrintsTheAuditTableAndExitsZero) {
  const std::string recipe = WriteRecipe(
      "r.yaml", std::string(kRecipe) + "gates:\n  max_ppl_ratio: 1.5\n");
  const std::string out = temp_ + "/w4";
  const RunResult run = Quantize(recipe, out);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("model.layers.0.self_attn.q_proj"));
  EXPECT_THAT(run.out, HasSubstr("kept: format gptq cannot hold it"));
  EXPECT_THAT(run.out, HasSubstr("gate max_ppl_ratio"));
  EXPECT_THAT(run.out, HasSubstr("verdict: PASS"));
  // Progress per block and layer on stderr.
  EXPECT_THAT(run.err, HasSubstr("block 5/5 done"));
  EXPECT_THAT(run.err, HasSubstr("held-out rel. error"));
  // Blocks are announced once, numbered from 1 (the tasks' own 0-based
  // step lines are for the service's logs).
  EXPECT_THAT(run.err, ::testing::Not(HasSubstr("quantizing block")));

  // `quantctl eval` reads the packed checkpoint back from disk and, on the
  // job's held-out windows, gets exactly the gate values of audit.json.
  const RunResult eval = RunQuantctl(
      "eval --checkpoint " + Quote(out) + " --reference " + Quote(model_) +
      " --text " + Quote(text_) + " --heldout_of " + Quote(out) + " --json");
  ASSERT_EQ(eval.exit_code, 0) << eval.err;
  const auto metrics = nlohmann::json::parse(eval.out, nullptr, false);
  ASSERT_FALSE(metrics.is_discarded()) << eval.out;
  auto audit_text = ReadFileToString(out + "/audit.json");
  ASSERT_TRUE(audit_text.ok());
  const auto audit = nlohmann::json::parse(*audit_text, nullptr, false);
  const auto& gates = audit["gates"];
  EXPECT_EQ(metrics["quantization"], "gptq");
  EXPECT_EQ(metrics["perplexity"].get<double>(),
            gates["perplexity"].get<double>());
  EXPECT_EQ(metrics["ppl_ratio"].get<double>(),
            gates["ppl_ratio"].get<double>());
  EXPECT_EQ(metrics["mean_kl"].get<double>(), gates["mean_kl"].get<double>());
  EXPECT_EQ(metrics["top1_agreement"].get<double>(),
            gates["top1_agreement"].get<double>());
  EXPECT_EQ(metrics["tokens"], gates["tokens"]);

  // `quantctl verify` checks the directory against its manifest; a changed
  // byte, an unlisted file, a missing one and a manifest naming a file
  // outside the directory are each caught.
  const RunResult verified = RunQuantctl("verify " + Quote(out) + " --json");
  ASSERT_EQ(verified.exit_code, 0) << verified.err;
  const auto verification = nlohmann::json::parse(verified.out, nullptr, false);
  EXPECT_EQ(verification["ok"], true);
  // Weights, config, quantize_config, 4 tokenizer files, audit, report.
  EXPECT_EQ(verification["verified"].size(), 9u) << verified.out;
  struct Damage {
    std::string what;
    std::function<void(const std::string& dir)> apply;
    int exit_code;
    std::string says;
  };
  const std::vector<Damage> damages = {
      {"a changed byte",
       [](const std::string& dir) {
         std::fstream f(dir + "/config.json",
                        std::ios::in | std::ios::out | std::ios::binary);
         f.seekp(1);
         f.put('#');
       },
       1, "MISMATCH config.json: sha256 "},
      {"an unlisted file",
       [](const std::string& dir) {
         ASSERT_TRUE(WriteFileAtomically(dir + "/extra.bin", "x").ok());
       },
       1, "MISMATCH extra.bin: not in the manifest"},
      {"a missing file",
       [](const std::string& dir) {
         std::filesystem::remove(dir + "/tokenizer.json");
       },
       1, "MISMATCH tokenizer.json: missing"},
      {"a manifest pointing outside",
       [](const std::string& dir) {
         auto text = ReadFileToString(dir + "/manifest.json");
         ASSERT_TRUE(text.ok());
         auto manifest = nlohmann::json::parse(*text);
         manifest["output"]["files"][0]["name"] = "../audit.json";
         ASSERT_TRUE(
             WriteFileAtomically(dir + "/manifest.json", manifest.dump()).ok());
       },
       1, "is not a file of the checkpoint"},
  };
  for (const Damage& damage : damages) {
    SCOPED_TRACE(damage.what);
    const std::string copy = temp_ + "/damaged";
    std::filesystem::remove_all(copy);
    std::filesystem::copy(out, copy, std::filesystem::copy_options::recursive);
    damage.apply(copy);
    const RunResult run = RunQuantctl("verify " + Quote(copy));
    EXPECT_EQ(run.exit_code, damage.exit_code) << run.out << run.err;
    EXPECT_THAT(run.out + run.err, HasSubstr(damage.says));
  }

  // `quantctl inspect` shows what was packed.
  const RunResult inspect = RunQuantctl("inspect " + Quote(out) + " --json");
  ASSERT_EQ(inspect.exit_code, 0) << inspect.err;
  const auto report = nlohmann::json::parse(inspect.out, nullptr, false);
  EXPECT_EQ(report["quantization"], "gptq");
  EXPECT_EQ(report["packed_layers"].size(), 20u);  // q/k/v/o of 5 blocks.

  // Another calibration file cannot stand in for the job's.
  const std::string other = temp_ + "/other.txt";
  ASSERT_TRUE(WriteFileAtomically(other, "A different story.\n").ok());
  const RunResult wrong =
      RunQuantctl("eval --checkpoint " + Quote(out) + " --text " +
                  Quote(other) + " --heldout_of " + Quote(out));
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_THAT(wrong.err, HasSubstr("sha256"));

  // A manifest whose recipe nests 100,000 deep (the job's own calibration
  // record beside it) is refused by name, not walked.
  auto manifest = ReadFileToString(out + "/manifest.json");
  ASSERT_TRUE(manifest.ok()) << manifest.status();
  const auto real = nlohmann::json::parse(*manifest, nullptr, false);
  ASSERT_TRUE(real.contains("calibration")) << *manifest;
  const std::string deep = temp_ + "/deep.json";
  ASSERT_TRUE(WriteFileAtomically(
                  deep, "{\"calibration\": " + real["calibration"].dump() +
                            ", \"recipe\": " + std::string(100'000, '[') +
                            std::string(100'000, ']') + "}")
                  .ok());
  const RunResult nested =
      RunQuantctl("eval --checkpoint " + Quote(out) + " --text " +
                  Quote(text_) + " --heldout_of " + Quote(deep));
  EXPECT_EQ(nested.exit_code, 1) << nested.err;
  EXPECT_THAT(nested.err, HasSubstr(deep + ": not a manifest"));
}

TEST_F(QuantizeCommandTest, FailedGatesExitThreeAndKeepTheCheckpoint) {
  const std::string recipe = WriteRecipe(
      "fail.yaml", std::string(kRecipe) + "gates:\n  min_top1_agreement: 1\n");
  const std::string out = temp_ + "/fail";
  const RunResult run = Quantize(recipe, out, "--json");
  EXPECT_EQ(run.exit_code, 3) << run.err;
  EXPECT_THAT(run.err, HasSubstr("verdict FAIL"));
  const auto audit = nlohmann::json::parse(run.out, nullptr, false);
  ASSERT_FALSE(audit.is_discarded()) << run.out;
  EXPECT_EQ(audit["verdict"], "FAIL");
  EXPECT_EQ(audit["output"], out);
  // --json: no progress on stderr.
  EXPECT_THAT(run.err, ::testing::Not(HasSubstr("block 1/5")));
  EXPECT_TRUE(FileExists(out + "/audit.json"));

  // `quantctl report DIR` reads the checkpoint without a service, exits 3
  // for its FAIL and writes the page the checkpoint carries.
  const std::string page = temp_ + "/page.html";
  const RunResult report =
      RunQuantctl("report " + Quote(out) + " --html " + Quote(page));
  EXPECT_EQ(report.exit_code, 3) << report.err;
  EXPECT_THAT(report.out, HasSubstr("verdict: FAIL"));
  auto written = ReadFileToString(page);
  auto carried = ReadFileToString(out + "/report.html");
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_TRUE(carried.ok()) << carried.status();
  EXPECT_TRUE(*written == *carried) << "the pages differ";
  EXPECT_THAT(*written, HasSubstr("data-verdict=\"FAIL\""));
  // A directory that is not a checkpoint, a page path that is a folder.
  const RunResult not_checkpoint =
      RunQuantctl("report " + Quote(temp_) + " --html " + Quote(page));
  EXPECT_EQ(not_checkpoint.exit_code, 1);
  EXPECT_THAT(not_checkpoint.err, HasSubstr(temp_ + "/audit.json"));
  // A damaged audit.json is an error naming the field (it used to abort
  // quantctl with an uncaught exception), and no page is written.
  for (const auto& [field, says] :
       std::vector<std::pair<std::string, std::string>>{
           {"verdict", "gates.verdict: missing"},
           {"tokens", "gates.tokens: missing"}}) {
    SCOPED_TRACE(field);
    const std::string damaged = temp_ + "/damaged-audit";
    std::filesystem::remove_all(damaged);
    std::filesystem::copy(out, damaged,
                          std::filesystem::copy_options::recursive);
    auto audit_text = ReadFileToString(damaged + "/audit.json");
    ASSERT_TRUE(audit_text.ok());
    auto damaged_audit = nlohmann::json::parse(*audit_text);
    damaged_audit["gates"].erase(field);
    ASSERT_TRUE(
        WriteFileAtomically(damaged + "/audit.json", damaged_audit.dump())
            .ok());
    const std::string no_page = temp_ + "/no-page.html";
    const RunResult refused =
        RunQuantctl("report " + Quote(damaged) + " --html " + Quote(no_page));
    EXPECT_EQ(refused.exit_code, 1) << refused.err;
    EXPECT_THAT(refused.err, HasSubstr(says));
    EXPECT_FALSE(FileExists(no_page));
  }
  const RunResult into_folder =
      RunQuantctl("report " + Quote(out) + " --html " + Quote(temp_));
  EXPECT_EQ(into_folder.exit_code, 1);
  EXPECT_THAT(into_folder.err,
              HasSubstr("--html: " + temp_ + " is a directory"));
}

// gates.tasks: the shipped task file scored on both models, the gate
// passing at the ratio measured and failing just above it; the per-task
// results in audit.json, the file's hash in the manifest, the groups in
// the table and the page; a bad task file fails before any work.
TEST_F(QuantizeCommandTest, TaskGatePassesAndFailsByItsThreshold) {
  const std::string tasks =
      testing::FixturesDir() + "/../../recipes/tasks/stories260k_endings.jsonl";
  // Relative to the recipe file, as the demo recipe names it.
  ASSERT_TRUE(
      WriteFileAtomically(temp_ + "/tasks.jsonl", *ReadFileToString(tasks))
          .ok());
  auto recipe_with = [&](const std::string& name, double ratio) {
    return WriteRecipe(name, absl::StrCat(kRecipe,
                                          "gates:\n  tasks: tasks.jsonl\n"
                                          "  min_task_accuracy_ratio: ",
                                          ratio, "\n"));
  };
  const std::string out = temp_ + "/scored";
  const RunResult run = Quantize(recipe_with("t0.yaml", 0), out);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("tasks " + temp_ + "/tasks.jsonl: 70 tasks"));
  EXPECT_THAT(run.out, HasSubstr("task group story_endings"));
  EXPECT_THAT(run.out, HasSubstr("task group story_words"));
  EXPECT_THAT(run.out, HasSubstr("gate min_task_accuracy_ratio"));
  EXPECT_THAT(run.err, HasSubstr("with the task file"));

  auto audit_text = ReadFileToString(out + "/audit.json");
  ASSERT_TRUE(audit_text.ok()) << audit_text.status();
  const nlohmann::json audit = nlohmann::json::parse(*audit_text);
  const nlohmann::json& scored = audit["gates"]["tasks"];
  EXPECT_EQ(scored["file"], temp_ + "/tasks.jsonl");
  ASSERT_EQ(scored["reference"]["items"].size(), 70u);
  ASSERT_EQ(scored["candidate"]["items"].size(), 70u);
  EXPECT_EQ(scored["overall"]["count"], 70);
  // The unquantized model's accuracy is the float model's, whatever the
  // recipe (tests/eval/task_eval_test.cc counts it: 31/60 endings, 10/10
  // words).
  EXPECT_NEAR(
      scored["groups"]["story_endings"]["reference_accuracy"].get<double>(),
      31.0 / 60, 1e-12);
  EXPECT_EQ(scored["groups"]["story_words"]["reference_accuracy"], 1.0);
  const double min_ratio = scored["min_ratio"].get<double>();
  ASSERT_LT(min_ratio, 1.0) << "4-bit g32 on 8 windows changes some answer";
  ASSERT_GT(min_ratio, 0.0);
  auto manifest_text = ReadFileToString(out + "/manifest.json");
  ASSERT_TRUE(manifest_text.ok());
  const nlohmann::json manifest = nlohmann::json::parse(*manifest_text);
  EXPECT_EQ(manifest["tasks"]["sha256"], *Sha256File(tasks));
  EXPECT_EQ(manifest["tasks"]["count"], 70);
  EXPECT_EQ(scored["file_sha256"], manifest["tasks"]["sha256"]);
  auto page = ReadFileToString(out + "/report.html");
  ASSERT_TRUE(page.ok());
  EXPECT_THAT(*page, HasSubstr("id=\"tasks-section\""));

  // At the measured ratio it passes; just above, it fails (exit 3).
  const RunResult at =
      Quantize(recipe_with("at.yaml", min_ratio), temp_ + "/at");
  EXPECT_EQ(at.exit_code, 0) << at.err << at.out;
  const RunResult above =
      Quantize(recipe_with("above.yaml", std::min(1.0, min_ratio + 0.01)),
               temp_ + "/above");
  EXPECT_EQ(above.exit_code, 3) << above.err << above.out;
  EXPECT_THAT(above.out, ::testing::ContainsRegex(
                             "gate min_task_accuracy_ratio +value [0-9.]+ "
                             "threshold [0-9.]+  FAIL"));

  // A task file that does not parse, or that does not exist: exit 1, named
  // by line, nothing written.
  ASSERT_TRUE(
      WriteFileAtomically(temp_ + "/tasks.jsonl",
                          "{\"prompt\": \"a\", \"choices\": [\" b\"]}\n")
          .ok());
  const RunResult bad = Quantize(recipe_with("bad.yaml", 0.5), temp_ + "/bad");
  EXPECT_EQ(bad.exit_code, 1) << bad.err;
  EXPECT_THAT(bad.err, HasSubstr("gates.tasks: "));
  EXPECT_THAT(bad.err, HasSubstr("line 1"));
  EXPECT_FALSE(FileExists(temp_ + "/bad"));
  std::filesystem::remove(temp_ + "/tasks.jsonl");
  const RunResult missing =
      Quantize(recipe_with("missing.yaml", 0.5), temp_ + "/missing");
  EXPECT_EQ(missing.exit_code, 1) << missing.err;
  EXPECT_THAT(missing.err, HasSubstr(temp_ + "/tasks.jsonl"));
  EXPECT_FALSE(FileExists(temp_ + "/missing"));
}

TEST_F(QuantizeCommandTest, BadInputsExitOneOrTwoAndWriteNothing) {
  const std::string out = temp_ + "/never";
  const std::string typo =
      WriteRecipe("typo.yaml", std::string(kRecipe) + "damping: 0.1\n");
  RunResult run = Quantize(typo, out);
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_THAT(run.err, HasSubstr("damping"));
  EXPECT_FALSE(FileExists(out));

  run = RunQuantctl("quantize --local --checkpoint " + Quote(model_) +
                    " --calibration " + Quote(text_) + " --out " + Quote(out));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--recipe"));

  run = RunQuantctl("quantize --checkpoint " + Quote(model_));
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_THAT(run.err, HasSubstr("--local"));
  // Pointing at the service commands that exist, not at a future one.
  EXPECT_THAT(run.err, HasSubstr("quantctl submit"));
  EXPECT_FALSE(FileExists(out));

  const RunResult help = RunQuantctl("quantize --help");
  EXPECT_EQ(help.exit_code, 0);
  EXPECT_THAT(help.out, HasSubstr("--calibration"));
  EXPECT_THAT(help.out, HasSubstr("3 gates FAIL"));
}

}  // namespace
}  // namespace quant
