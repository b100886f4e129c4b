// quant-mixed-precision-bench: mixed precision against uniform bits at the
// same stored size. For each model it runs the whole local pipeline (the
// packed checkpoint written, read back and evaluated by the gates) with
// uniform 3- and 4-bit recipes and with mixed_precision over {3, 4, 8} bits
// at three budgets: halfway between uniform 3 and 4 bits, exactly uniform
// 4-bit's stored average, and a quarter of the way from 4 to 8 bits. It
// prints one markdown table (docs/MIXED_PRECISION.md keeps the latest).
//
//   quant-mixed-precision-bench --checkpoint
//   ../shared/models/stories260K/hf-f32
//     --calibration ../shared/data/tinystories_val.txt --synth
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/synth/synth_checkpoint.h"
#include "core/base/file_system.h"
#include "core/base/file_util.h"
#include "core/model/checkpoint.h"
#include "core/pipeline/local_pipeline.h"
#include "core/pipeline/mixed_precision_selection.h"
#include "core/pipeline/quantization_plan.h"

ABSL_FLAG(std::string, checkpoint, "../shared/models/stories260K/hf-f32",
          "The model to quantize (also lends its tokenizer to --synth).");
ABSL_FLAG(std::string, calibration, "../shared/data/tinystories_val.txt",
          "Calibration text.");
ABSL_FLAG(bool, synth, false,
          "Also run a synthetic model (hidden 256, MLP 704, 4 layers).");
ABSL_FLAG(std::string, method, "gptq", "gptq or rtn.");
ABSL_FLAG(std::string, format, "compressed-tensors",
          "compressed-tensors or gptq.");
ABSL_FLAG(int, group_size, 32, "The recipe's group size.");
ABSL_FLAG(int, samples, 64, "Calibration windows.");
ABSL_FLAG(int, seq_len, 128, "Tokens per window.");
ABSL_FLAG(int, threads, 2, "Threads per block task.");

namespace quant {
namespace {

struct Row {
  std::string model;
  std::string assignment;
  double stored_bits = 0;
  double ppl_ratio = 0;
  double mean_kl = 0;
  double predicted_kl = -1;  // The selection's; -1 for uniform rows.
  double top1 = 0;
  double seconds = 0;
};

Recipe BaseRecipe() {
  Recipe recipe;
  recipe.method = absl::GetFlag(FLAGS_method) == "rtn" ? QuantMethod::kRtn
                                                       : QuantMethod::kGptq;
  recipe.format = absl::GetFlag(FLAGS_format) == "gptq"
                      ? OutputFormat::kGptq
                      : OutputFormat::kCompressedTensors;
  recipe.group_size = absl::GetFlag(FLAGS_group_size);
  recipe.calibration.samples = absl::GetFlag(FLAGS_samples);
  recipe.calibration.seq_len = absl::GetFlag(FLAGS_seq_len);
  recipe.calibration.heldout_fraction = 0.1;
  return recipe;
}

// Stored bits per weight of `bits` everywhere (the format's accounting,
// which the packed files match: mixed_precision_pipeline_test).
absl::StatusOr<double> UniformAverage(const ModelConfig& config,
                                      const Recipe& base, int bits) {
  Recipe recipe = base;
  MixedPrecision m;
  m.bits = {bits};
  m.average_bits = 32;
  recipe.mixed_precision = m;
  auto plan = PlanQuantization(config, recipe);
  if (!plan.ok()) return plan.status();
  auto selection = PlanMixedPrecision(config, recipe, *plan);
  if (!selection.ok()) return selection.status();
  int64_t cost = 0;
  for (const auto& g : selection->groups) cost += g.candidates[0].cost_bits;
  return static_cast<double>(cost) /
         static_cast<double>(selection->quantized_weights);
}

absl::StatusOr<Row> RunOne(const std::string& model, const std::string& dir,
                           const std::string& assignment, const Recipe& recipe,
                           const std::string& out_dir, double stored_bits) {
  LocalQuantizeOptions options;
  options.checkpoint_dir = dir;
  options.calibration_path = absl::GetFlag(FLAGS_calibration);
  options.out_dir = out_dir;
  options.recipe = recipe;
  options.threads = absl::GetFlag(FLAGS_threads);
  const auto start = std::chrono::steady_clock::now();
  auto result = RunLocalQuantization(options);
  if (!result.ok()) return result.status();
  Row row;
  row.model = model;
  row.assignment = assignment;
  row.seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  const auto& gates = result->audit["gates"];
  row.ppl_ratio = gates["ppl_ratio"].get<double>();
  row.mean_kl = gates["mean_kl"].get<double>();
  row.top1 = gates["top1_agreement"].get<double>();
  row.stored_bits = stored_bits;
  if (result->audit.contains("mixed_precision")) {
    row.stored_bits =
        result->audit["mixed_precision"]["chosen_average_bits"].get<double>();
    row.predicted_kl =
        result->audit["mixed_precision"]["predicted_kl"].get<double>();
  }
  return row;
}

absl::Status RunModel(const std::string& model, const std::string& dir,
                      const std::string& temp, std::vector<Row>* rows) {
  std::unique_ptr<Checkpoint> checkpoint;
  {
    auto opened = Checkpoint::Open(dir);
    if (!opened.ok()) return opened.status();
    checkpoint = *std::move(opened);
  }
  const ModelConfig config = checkpoint->config();
  const Recipe base = BaseRecipe();
  auto three = UniformAverage(config, base, 3);
  auto four = UniformAverage(config, base, 4);
  auto eight = UniformAverage(config, base, 8);
  if (!three.ok()) return three.status();
  if (!four.ok()) return four.status();
  if (!eight.ok()) return eight.status();
  const size_t first = rows->size();
  int n = 0;
  auto out = [&] { return absl::StrCat(temp, "/", model, "-", n++); };
  for (int bits : {3, 4}) {
    Recipe recipe = base;
    recipe.bits = bits;
    auto row = RunOne(model, dir, absl::StrCat("uniform ", bits, "-bit"),
                      recipe, out(), bits == 3 ? *three : *four);
    if (!row.ok()) return row.status();
    rows->push_back(*row);
  }
  const double budgets[] = {(*three + *four) / 2, *four,
                            *four + (*eight - *four) / 4};
  const char* names[] = {"mixed {3,4,8}, halfway 3-4", "mixed {3,4,8} = 4-bit",
                         "mixed {3,4,8}, +1/4 to 8"};
  for (int i = 0; i < 3; ++i) {
    Recipe recipe = base;
    MixedPrecision m;
    m.bits = {3, 4, 8};
    m.average_bits = budgets[i];
    recipe.mixed_precision = m;
    auto row = RunOne(model, dir, names[i], recipe, out(), 0);
    if (!row.ok()) return row.status();
    rows->push_back(*row);
  }
  // The same budget with per-row as well as the recipe's group size: a
  // per-row 4-bit layer stores less, which can pay for 8 bits elsewhere.
  // Only where the format stores the same layers both ways (per-row also
  // fits widths the group size does not divide, which uniform 4-bit then
  // keeps in 16 bits: not the same comparison).
  Recipe with_rows = base;
  MixedPrecision both;
  both.bits = {3, 4, 8};
  both.group_sizes = {base.group_size, 0};
  both.average_bits = *four;
  with_rows.mixed_precision = both;
  Recipe grouped = with_rows;
  grouped.mixed_precision->group_sizes = {base.group_size};
  auto plan = PlanQuantization(config, with_rows);
  if (!plan.ok()) return plan.status();
  auto rows_plan = PlanMixedPrecision(config, with_rows, *plan);
  auto grouped_plan = PlanMixedPrecision(config, grouped, *plan);
  if (!rows_plan.ok()) return rows_plan.status();
  if (!grouped_plan.ok()) return grouped_plan.status();
  if (rows_plan->quantized_weights != grouped_plan->quantized_weights) {
    std::fprintf(stderr,
                 "%s: per-row would quantize layers group size %d cannot "
                 "hold; skipping the x {g, row} row\n",
                 model.c_str(), base.group_size);
  } else {
    Recipe recipe = with_rows;
    auto row = RunOne(
        model, dir,
        absl::StrCat("mixed {3,4,8} x {g", base.group_size, ", row} = 4-bit"),
        recipe, out(), 0);
    if (!row.ok()) return row.status();
    rows->push_back(*row);
  }
  std::fprintf(stderr, "%s done (%zu runs)\n", model.c_str(),
               rows->size() - first);
  return absl::OkStatus();
}

int Main() {
  auto temp = FileSystem::Default()->MakeTemporaryDirectory("/tmp/mp-bench-");
  if (!temp.ok()) {
    std::fprintf(stderr, "%s\n", temp.status().ToString().c_str());
    return 1;
  }
  std::vector<Row> rows;
  absl::Status status =
      RunModel("stories260K", absl::GetFlag(FLAGS_checkpoint), *temp, &rows);
  if (status.ok() && absl::GetFlag(FLAGS_synth)) {
    synth::SynthOptions options;
    options.out_dir = *temp + "/synth";
    options.vocab_from = absl::GetFlag(FLAGS_checkpoint);
    // Every width a multiple of 32 and 64, so groups of either hold every
    // layer (stories260K's 172-wide MLP does not).
    options.intermediate = 704;
    auto written = synth::WriteSynthCheckpoint(options);
    status = written.ok()
                 ? RunModel("synth-h256-i704-l4", options.out_dir, *temp, &rows)
                 : written.status();
  }
  (void)FileSystem::Default()->RemoveTree(*temp);
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.ToString().c_str());
    return 1;
  }
  std::printf(
      "| model | assignment | stored bits/weight | ppl ratio | mean KL | KL / "
      "uniform 4-bit | predicted KL | top-1 | seconds |\n|---|---|---:|---:|"
      "---:|---:|---:|---:|---:|\n");
  for (const Row& r : rows) {
    double uniform_kl = 0;
    for (const Row& u : rows) {
      if (u.model == r.model && u.assignment == "uniform 4-bit") {
        uniform_kl = u.mean_kl;
      }
    }
    const std::string predicted = r.predicted_kl < 0
                                      ? std::string("-")
                                      : absl::StrFormat("%.5f", r.predicted_kl);
    std::printf("| %s | %s | %.4f | %.4f | %.5f | %.3f | %s | %.4f | %.1f |\n",
                r.model.c_str(), r.assignment.c_str(), r.stored_bits,
                r.ppl_ratio, r.mean_kl,
                uniform_kl > 0 ? r.mean_kl / uniform_kl : 0.0,
                predicted.c_str(), r.top1, r.seconds);
  }
  return 0;
}

}  // namespace
}  // namespace quant

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "quant-mixed-precision-bench: mixed precision against uniform bits at "
      "the same stored size, read back from the packed checkpoints.\n"
      "Example: quant-mixed-precision-bench --synth");
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "/mixed_precision_bench.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  absl::ParseCommandLine(argc, argv);
  return quant::Main();
}
