// quant-rounds-simulation's report and self-check, apart from its flags
// (rounds_simulation_main.cc): the model shapes it knows, the table of
// predicted wall times over worker counts, the bytes per block, and the
// hand-checkable cases --self_check runs against the simulator
// (round_schedule.h).
#ifndef QUANT_BENCH_ROUNDS_SIMULATION_ROUNDS_SIMULATION_H_
#define QUANT_BENCH_ROUNDS_SIMULATION_ROUNDS_SIMULATION_H_

#include <cstdio>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "bench/rounds_simulation/round_schedule.h"

namespace quant {
namespace rounds_sim {

// Sets the architecture fields of `shape` for "llama3-8b" or "llama3-70b"
// (the job's fields are left as they are); InvalidArgument otherwise.
absl::Status ApplyModel(absl::string_view model, JobShape* shape);

// "1,2,8" -> {1, 2, 8}; InvalidArgument for anything but positive integers.
absl::StatusOr<std::vector<int>> ParseWorkerCounts(absl::string_view list);

struct SimulationOptions {
  std::string model = "llama3-8b";  // A name for the header.
  JobShape shape;
  Resources resources;
  std::vector<int> workers;
  bool block_tasks = false;  // The old plan: one chained task per block.
  bool task_detail = false;  // Also one line per task of a middle block.
};

// Prints the parameters, one row per worker count and the bytes per block.
absl::Status PrintSimulation(const SimulationOptions& options, std::FILE* out);

// Runs the hand-checkable cases, one line each; Internal naming the first
// mismatch after all have run.
absl::Status SelfCheck(std::FILE* out);

}  // namespace rounds_sim
}  // namespace quant

#endif  // QUANT_BENCH_ROUNDS_SIMULATION_ROUNDS_SIMULATION_H_
