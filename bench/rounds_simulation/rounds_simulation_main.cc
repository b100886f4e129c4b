// quant-rounds-simulation: predicts the wall time of one data-parallel
// sequential quantization job (docs/DATA_PARALLEL.md) on W workers, from
// per-worker compute rates, the job's data volumes, the network bandwidth
// per worker and the shared storage throughput. A deterministic
// discrete-event simulation of quantd's scheduler over the rounds' task DAG
// (or, with --block_tasks, over the old one-task-per-block chain).
//
//   quant-rounds-simulation --model=llama3-70b --workers=1,8,32,128
//   quant-rounds-simulation --self_check
#include <cstdio>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "bench/rounds_simulation/rounds_simulation.h"
#include "core/base/status_macros.h"

ABSL_FLAG(std::string, model, "llama3-8b",
          "llama3-8b, llama3-70b or custom (then --blocks, --hidden, "
          "--intermediate, --heads, --kv_heads, --vocab).");
ABSL_FLAG(int, blocks, 0, "custom: decoder blocks.");
ABSL_FLAG(int, hidden, 0, "custom: hidden size.");
ABSL_FLAG(int, intermediate, 0, "custom: MLP intermediate size.");
ABSL_FLAG(int, heads, 0, "custom: attention (query) heads.");
ABSL_FLAG(int, kv_heads, 0, "custom: key/value heads.");
ABSL_FLAG(int, vocab, 128256, "custom: vocabulary (the finalize's lm_head).");
ABSL_FLAG(int, calibration_sequences, 128, "Calibration sequences.");
ABSL_FLAG(int, heldout_sequences, 16, "Held-out sequences.");
ABSL_FLAG(int, seq_len, 2048, "Tokens per sequence.");
ABSL_FLAG(std::string, workers, "1,2,8,32,128",
          "Worker counts to simulate, comma-separated.");
ABSL_FLAG(double, forward_gflops, 500.0,
          "Per worker: forward (GEMM) rate, GFLOP/s.");
ABSL_FLAG(double, hessian_gflops, 800.0,
          "Per worker: Hessian rank-update rate, GFLOP/s.");
ABSL_FLAG(double, gptq_gflops, 300.0, "Per worker: GPTQ solve rate, GFLOP/s.");
ABSL_FLAG(double, network_gbps, 10.0,
          "Per worker link, Gbit/s (each transfer is also capped by its "
          "share of the storage).");
ABSL_FLAG(double, storage_gbps, 10.0,
          "Artifact store throughput, Gbit/s, shared fairly by every "
          "transfer in flight; 0 = unlimited.");
ABSL_FLAG(double, task_overhead_s, 1.0,
          "Fixed seconds per task (opening the job's inputs).");
ABSL_FLAG(double, finalize_s, -1.0,
          "The finalize's evaluation, seconds; < 0: work_model's gate flops "
          "at the forward rate.");
ABSL_FLAG(int, gate_parts, 0,
          "The finalize's evaluation as this many gate_part tasks side by "
          "side (quantd's --gate_parts); 0: one finalize task.");
ABSL_FLAG(bool, damp_auto, false,
          "damp: auto (calibration shards write 3 triangles; GPTQ solves "
          "once per grid point).");
ABSL_FLAG(bool, shard_stash, true,
          "Workers keep each shard's states between rounds, so a round runs "
          "only its group's ops (as quant-worker does when it ran the "
          "shard's previous round); false: each round runs the block from "
          "the shard's entering states.");
ABSL_FLAG(bool, layer_reduces, true,
          "Groups of several layers (q, k, v; gate, up) are reduced one task "
          "per layer, side by side, as quantd plans a GPTQ job; false: one "
          "reduce per group.");
ABSL_FLAG(
    bool, heldout_later, true,
    "Reduces wait for their round's calibration shards only; the "
    "block's last reduce also for every round's held-out shards (quantd's "
    "--round_heldout_later). false: each reduce waits for both splits.");
ABSL_FLAG(int, group_size, 128, "GPTQ group size (scales and zeros).");
ABSL_FLAG(int, bits, 4, "GPTQ bits (the packed block's size).");
ABSL_FLAG(double, checkpoint_bytes_per_weight, 2.0,
          "Bytes per weight of the checkpoint, which every round task reads "
          "for its block (2: bf16); 0 leaves the block reads out.");
ABSL_FLAG(bool, block_tasks, false,
          "Simulate the old plan: one task per block, chained.");
ABSL_FLAG(bool, task_detail, false,
          "Also print each kind of task of one block: compute, bytes, time.");
ABSL_FLAG(bool, self_check, false,
          "Run the hand-checkable cases and exit non-zero on a mismatch.");

namespace quant {
namespace rounds_sim {
namespace {

absl::StatusOr<SimulationOptions> OptionsFromFlags() {
  SimulationOptions options;
  options.model = absl::GetFlag(FLAGS_model);
  JobShape& shape = options.shape;
  if (options.model == "custom") {
    shape.blocks = absl::GetFlag(FLAGS_blocks);
    shape.hidden = absl::GetFlag(FLAGS_hidden);
    shape.intermediate = absl::GetFlag(FLAGS_intermediate);
    shape.heads = absl::GetFlag(FLAGS_heads);
    shape.kv_heads = absl::GetFlag(FLAGS_kv_heads);
    shape.vocab = absl::GetFlag(FLAGS_vocab);
  } else {
    QUANT_RETURN_IF_ERROR(ApplyModel(options.model, &shape));
  }
  shape.calibration_sequences = absl::GetFlag(FLAGS_calibration_sequences);
  shape.heldout_sequences = absl::GetFlag(FLAGS_heldout_sequences);
  shape.seq_len = absl::GetFlag(FLAGS_seq_len);
  shape.group_size = absl::GetFlag(FLAGS_group_size);
  shape.bits = absl::GetFlag(FLAGS_bits);
  shape.damp_auto = absl::GetFlag(FLAGS_damp_auto);
  shape.shard_stash = absl::GetFlag(FLAGS_shard_stash);
  shape.layer_reduces = absl::GetFlag(FLAGS_layer_reduces);
  shape.heldout_later = absl::GetFlag(FLAGS_heldout_later);
  shape.checkpoint_bytes_per_weight =
      absl::GetFlag(FLAGS_checkpoint_bytes_per_weight);
  shape.finalize_seconds = absl::GetFlag(FLAGS_finalize_s);
  shape.gate_parts = absl::GetFlag(FLAGS_gate_parts);
  QUANT_RETURN_IF_ERROR(CheckJobShape(shape));
  Resources& r = options.resources;
  r.rates.forward_flops_per_second = absl::GetFlag(FLAGS_forward_gflops) * 1e9;
  r.rates.hessian_flops_per_second = absl::GetFlag(FLAGS_hessian_gflops) * 1e9;
  r.rates.gptq_flops_per_second = absl::GetFlag(FLAGS_gptq_gflops) * 1e9;
  r.network_bytes_per_second = absl::GetFlag(FLAGS_network_gbps) * 1e9 / 8.0;
  r.storage_bytes_per_second = absl::GetFlag(FLAGS_storage_gbps) * 1e9 / 8.0;
  r.task_overhead_seconds = absl::GetFlag(FLAGS_task_overhead_s);
  QUANT_RETURN_IF_ERROR(CheckResources(r));
  QUANT_ASSIGN_OR_RETURN(options.workers,
                         ParseWorkerCounts(absl::GetFlag(FLAGS_workers)));
  options.block_tasks = absl::GetFlag(FLAGS_block_tasks);
  options.task_detail = absl::GetFlag(FLAGS_task_detail);
  return options;
}

int Main() {
  if (absl::GetFlag(FLAGS_self_check)) {
    const absl::Status status = SelfCheck(stdout);
    if (!status.ok()) {
      absl::FPrintF(stderr, "%s\n", status.ToString());
      return 1;
    }
    absl::PrintF("self-check passed\n");
    return 0;
  }
  absl::StatusOr<SimulationOptions> options = OptionsFromFlags();
  absl::Status status = options.status();
  if (status.ok()) status = PrintSimulation(*options, stdout);
  if (!status.ok()) {
    absl::FPrintF(stderr, "quant-rounds-simulation: %s\n", status.ToString());
    return 1;
  }
  return 0;
}

}  // namespace
}  // namespace rounds_sim
}  // namespace quant

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "quant-rounds-simulation: the predicted wall time of a data-parallel "
      "sequential quantization job on W workers.\n"
      "Example: quant-rounds-simulation --model=llama3-70b --workers=1,8,128");
  absl::FlagsUsageConfig usage;
  usage.contains_help_flags = [](absl::string_view path) {
    return absl::EndsWith(path, "/rounds_simulation_main.cc");
  };
  usage.contains_helpshort_flags = usage.contains_help_flags;
  absl::SetFlagsUsageConfig(usage);
  std::vector<char*> positional = absl::ParseCommandLine(argc, argv);
  if (positional.size() > 1) {
    absl::FPrintF(stderr, "quant-rounds-simulation: unexpected argument %s\n",
                  positional[1]);
    return 1;
  }
  return quant::rounds_sim::Main();
}
