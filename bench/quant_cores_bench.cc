// Throughput of the quantization cores: Hessian accumulation, blocked GPTQ,
// the column-by-column reference GPTQ, and AWQ's α search, as GFLOP/s, next
// to this machine's real single-precision GEMM ceiling measured in the same
// run: Eigen compiled for this CPU (-march=native) and OpenBLAS when
// installed (bench/ceiling), neither of them the project's own kernels.
// The project's SGEMM at every kernel level this CPU runs is measured too
// (Sgemm/v2 is the baseline, x86-64-v2). The cores run at the level --isa
// (or QUANT_ISA, else auto) selects, printed in the header. After the usual
// benchmark output it prints a table: core, shape, seconds, GFLOP/s, share
// of the native ceiling, and for GPTQ the speed-up over the reference with
// the largest difference between their dequantized weights.
//
// Every core runs on one thread; Hessian accumulation and blocked GPTQ then
// run again with their tiles on a pool of one thread and of every core,
// timed by the wall clock, with the speed-up in the last column ("thr"). (A
// block task's other parallel work, chunks through the forward pass and a
// group's layers side by side, is measured end to end by scripts/bench.sh
// --threads.) GPTQ's factorization of a 2816 x 2816 Hessian (down_proj's
// K in the 2-layer job) runs as Eigen's one-threaded LLT ("Cholesky/K/0")
// beside the pooled CholeskyLowerInPlace on 1 and on every core.
//
// Default sizes fit a small CPU; `--large` adds 7B-shaped layers (4096 x
// 4096, 11008 x 4096, 4096 x 11008) with 2048 and 8192 tokens, the
// reference GPTQ on each shape, and the agreement check at 4096 x 4096. Flop
// counts are nominal:
//   Hessian  T·K²            (one triangle of XᵀX, 2 flops per multiply-add)
//   GPTQ     N·K² + K³       (error propagation; Cholesky K³/3 and the rows
//                            of U by triangular solves 2K³/3)
//   AWQ      20 · 2·T·K·R    (output error of each α candidate on R rows,
//                            T < K; R = N, or 512 for AwqRowSubset)
// Packing (GPTQ's qweight of a 4096 x 11008 layer, 4- and 3-bit) has no
// flops: its rows show seconds and the speed-up over the one-code-at-a-time
// reference packer.
#include <benchmark/benchmark.h>

#include <Eigen/Cholesky>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "bench/ceiling/reference_gemm.h"
#include "core/base/thread_pool.h"
#include "core/forward/block_forward.h"
#include "core/forward/moe_mlp.h"
#include "core/kernels/dispatch.h"
#include "core/kernels/isa.h"
#include "core/kernels/kernel_table.h"
#include "core/pack/bit_packing.h"
#include "core/quant/awq.h"
#include "core/quant/cholesky.h"
#include "core/quant/gptq.h"
#include "core/quant/gptq_reference.h"
#include "core/quant/hessian.h"
#include "core/quant/output_error.h"

namespace quant {
namespace {

RowMatrixF RandomMatrix(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  RowMatrixF m(rows, cols);
  for (int64_t i = 0; i < m.size(); ++i) m.data()[i] = normal(rng);
  return m;
}

// Activations with some channel coupling so GPTQ has real work.
RowMatrixF Activations(int64_t t, int64_t k) {
  RowMatrixF x = RandomMatrix(t, k, 2);
  x.rightCols(k - 1) += 0.5f * x.leftCols(k - 1);
  return x;
}

void SetRate(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(
      flops_per_iteration * 1e-9 * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
}

// C = A·B with A [m, k], B [k, n] row-major: 2·m·n·k flops, by a
// reference SGEMM (the ceiling every core is compared with).
void BM_ReferenceSgemm(benchmark::State& state, bench::RowMajorSgemm sgemm) {
  const int64_t m = state.range(0);
  const int64_t n = state.range(1);
  const int64_t k = state.range(2);
  const RowMatrixF a = RandomMatrix(m, k, 3);
  const RowMatrixF b = RandomMatrix(k, n, 4);
  RowMatrixF c(m, n);
  for (auto _ : state) {
    sgemm(static_cast<int>(m), static_cast<int>(n), static_cast<int>(k),
          a.data(), b.data(), c.data());
    benchmark::DoNotOptimize(c.data());
  }
  SetRate(state, 2.0 * m * n * k);
}

// The same product by the project's SGEMM at one kernel level, called
// through that level's table: row-major C = A·B is column-major
// Cᵀ = Bᵀ·Aᵀ.
void BM_LevelSgemm(benchmark::State& state, kernels::IsaLevel level) {
  const int m = static_cast<int>(state.range(0));
  const int n = static_cast<int>(state.range(1));
  const int k = static_cast<int>(state.range(2));
  const RowMatrixF a = RandomMatrix(m, k, 3);
  const RowMatrixF b = RandomMatrix(k, n, 4);
  RowMatrixF c(m, n);
  const kernels::KernelTable& table = kernels::KernelsFor(level);
  for (auto _ : state) {
    table.s.gemm('N', 'N', n, m, k, 1.0f, b.data(), n, a.data(), k, 0.0f,
                 c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  SetRate(state, 2.0 * m * n * k);
}

// Blocked against reference GPTQ on one layer: the share of weights whose
// code differs (float rounding of the lazy updates can flip a tie, which
// then propagates) and the ratio of their output errors tr(E H Eᵀ).
struct GptqAgreement {
  double differing = NAN;
  double error_ratio = NAN;
};

GptqAgreement CompareGptq(int64_t n, int64_t k, int64_t t) {
  const RowMatrixF w = RandomMatrix(n, k, 1) * 0.02f;
  HessianAccumulator acc(k);
  if (!acc.Add(Activations(t, k)).ok()) return {};
  const RowMatrixF h = acc.Finish();
  GptqOptions options;
  options.grid = {GridKind::kSym, 4, 128};
  options.act_order = true;
  auto blocked = QuantizeGptq(w, h, options);
  auto reference = QuantizeGptqReference(w, h, options);
  if (!blocked.ok() || !reference.ok()) return {};
  auto evaluator = OutputErrorEvaluator::FromHessian(h, t);
  if (!evaluator.ok()) return {};
  GptqAgreement agreement;
  agreement.differing =
      (blocked->layer.codes.array() != reference->layer.codes.array())
          .cast<double>()
          .mean();
  agreement.error_ratio =
      evaluator->SquaredError(w, blocked->layer.dequantized) /
      evaluator->SquaredError(w, reference->layer.dequantized);
  return agreement;
}

// Threads for the "all threads" rows.
int AllThreads() { return ThreadPool::AvailableCores(); }

// Flops per iteration, for rates over wall time: the rate counter divides
// by the main thread's CPU time, which misses the other threads' work.
void SetWallFlops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP"] = benchmark::Counter(
      flops_per_iteration * 1e-9 * static_cast<double>(state.iterations()),
      benchmark::Counter::kAvgIterations);
}

// Batches of 512 tokens; the tiles of each on a pool of `threads`.
void HessianAccumulateOn(benchmark::State& state, int threads) {
  const int64_t k = state.range(0);
  const int64_t t = state.range(1);
  const int64_t batch = 512;
  const RowMatrixF x = Activations(t, k);
  ThreadPool pool(threads);
  for (auto _ : state) {
    HessianAccumulator acc(k);
    for (int64_t b = 0; b < t; b += batch) {
      if (!acc.Add(x.middleRows(b, std::min(batch, t - b)), &pool).ok()) {
        state.SkipWithError("Add failed");
      }
    }
    benchmark::DoNotOptimize(acc.Finish().data());
  }
  SetRate(state, static_cast<double>(t) * k * k);
}

void BM_HessianAccumulate(benchmark::State& state) {
  HessianAccumulateOn(state, 1);
}

// Hessian accumulation with its tiles on range(2) threads.
void BM_HessianAccumulateThreads(benchmark::State& state) {
  HessianAccumulateOn(state, static_cast<int>(state.range(2)));
  SetWallFlops(state, static_cast<double>(state.range(1)) * state.range(0) *
                          state.range(0));
}

// GPTQ's factorization of a damped K x K Hessian (T = 2K tokens), args {K,
// threads}: threads 0 is Eigen's LLT (one thread), what PrepareGptqFactor
// used before; otherwise CholeskyLowerInPlace on a pool of that many.
void BM_Cholesky(benchmark::State& state) {
  const int64_t k = state.range(0);
  const int threads = static_cast<int>(state.range(1));
  HessianAccumulator acc(k);
  if (!acc.Add(Activations(2 * k, k)).ok()) state.SkipWithError("Add failed");
  Eigen::MatrixXf h = acc.Finish();
  h.diagonal().array() += 0.01f * h.diagonal().mean();
  ThreadPool pool(std::max(threads, 1));
  for (auto _ : state) {
    Eigen::MatrixXf a = h;
    bool ok = true;
    if (threads == 0) {
      Eigen::LLT<Eigen::Ref<Eigen::MatrixXf>> llt(a);
      ok = llt.info() == Eigen::Success;
    } else {
      ok = CholeskyLowerInPlace(&a, &pool);
    }
    if (!ok) state.SkipWithError("not positive definite");
    benchmark::DoNotOptimize(a.data());
  }
  const double kd = static_cast<double>(k);
  SetWallFlops(state, kd * kd * kd / 3.0);
}

// Blocked (or reference) GPTQ, its solves and later-column updates on a
// pool of `threads`.
void GptqOn(benchmark::State& state, bool reference, int threads) {
  ThreadPool pool(threads);
  const int64_t n = state.range(0);
  const int64_t k = state.range(1);
  const int64_t t = state.range(2);
  const RowMatrixF w = RandomMatrix(n, k, 1) * 0.02f;
  HessianAccumulator acc(k);
  if (!acc.Add(Activations(t, k)).ok()) state.SkipWithError("Add failed");
  const RowMatrixF h = acc.Finish();
  GptqOptions options;
  options.grid = {GridKind::kSym, 4, 128};
  options.act_order = true;
  options.pool = &pool;
  for (auto _ : state) {
    auto r = reference ? QuantizeGptqReference(w, h, options)
                       : QuantizeGptq(w, h, options);
    if (!r.ok()) state.SkipWithError("GPTQ failed");
    benchmark::DoNotOptimize(r->layer.dequantized.data());
  }
  const double kd = static_cast<double>(k);
  SetRate(state, static_cast<double>(n) * kd * kd + kd * kd * kd);
}

template <bool kReference>
void BM_Gptq(benchmark::State& state) {
  GptqOn(state, kReference, 1);
}

void BM_GptqThreads(benchmark::State& state) {
  GptqOn(state, false, static_cast<int>(state.range(3)));
  const double n = static_cast<double>(state.range(0));
  const double k = static_cast<double>(state.range(1));
  SetWallFlops(state, n * k * k + k * k * k);
}

void BM_Awq(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int64_t search_rows = state.range(3);
  const int64_t k = state.range(1);
  const int64_t t = state.range(2);
  const RowMatrixF w = RandomMatrix(n, k, 1) * 0.02f;
  const RowMatrixF x = Activations(t, k);
  const Eigen::VectorXf stat = x.cwiseAbs().colwise().mean().transpose();
  auto cal = OutputErrorEvaluator::FromActivations(x);
  if (!cal.ok()) state.SkipWithError("evaluator failed");
  AwqOptions options;
  options.grid = {GridKind::kAsym, 4, 128};
  options.search_rows = search_rows;
  for (auto _ : state) {
    auto r = QuantizeAwq(w, stat, *cal, options);
    if (!r.ok()) state.SkipWithError("AWQ failed");
    benchmark::DoNotOptimize(r->effective.data());
  }
  const double rows = search_rows > 0 ? search_rows : n;
  const double per_alpha = cal->uses_hessian()
                               ? 2.0 * rows * k * static_cast<double>(k)
                               : 2.0 * t * k * rows;
  SetRate(state, per_alpha * options.alpha_grid.size());
}

// A mixture-of-experts MLP on T tokens, args {hidden, experts, top-k,
// expert intermediate, T}: RunMoeMlp (each expert on the rows routed to it)
// or, as the reference, every expert on every token with the routing
// weights then picking each token's k outputs, as a dense implementation
// computes it. Both are rated on the routed work (2·T·k·3·hidden·inter plus
// the router), so the reference's rate shows what the dense compute wastes.
template <bool kReference>
void BM_MoeMlp(benchmark::State& state) {
  const int64_t hidden = state.range(0);
  const int experts = static_cast<int>(state.range(1));
  const int top_k = static_cast<int>(state.range(2));
  const int64_t inter = state.range(3);
  const int64_t t = state.range(4);
  MoeConfig moe;
  moe.num_experts = experts;
  moe.experts_per_token = top_k;
  moe.expert_intermediate_size = inter;
  moe.norm_topk_prob = true;
  MoeMlpWeights weights;
  weights.router = RandomMatrix(experts, hidden, 3) * 0.1f;
  for (int e = 0; e < experts; ++e) {
    ExpertWeights expert;
    expert.gate.weight = RandomMatrix(inter, hidden, 10 + e) * 0.02f;
    expert.up.weight = RandomMatrix(inter, hidden, 1000 + e) * 0.02f;
    expert.down.weight = RandomMatrix(hidden, inter, 2000 + e) * 0.02f;
    weights.experts.push_back(std::move(expert));
  }
  const RowMatrixF x = RandomMatrix(t, hidden, 4);
  for (auto _ : state) {
    if (!kReference) {
      RowMatrixF out = RunMoeMlp(moe, weights, x);
      benchmark::DoNotOptimize(out.data());
      continue;
    }
    const MoeRouting routing = RouteTokens(moe, weights.router, x);
    RowMatrixF out = RowMatrixF::Zero(t, hidden);
    for (int e = 0; e < experts; ++e) {
      const RowMatrixF all = RunExpert(weights.experts[e], x);
      for (size_t i = 0; i < routing.rows[e].size(); ++i) {
        out.row(routing.rows[e][i]) +=
            routing.weights[e][i] * all.row(routing.rows[e][i]);
      }
    }
    benchmark::DoNotOptimize(out.data());
  }
  const double d = static_cast<double>(hidden);
  SetRate(state, 2.0 * t * top_k * 3.0 * d * inter + 2.0 * t * experts * d);
}

// GPTQ's qweight for an [N, K] layer of 4-bit codes (rows packed along K,
// stored transposed), by the fast packer or one code at a time. Rated in
// Gcodes/s (no flops; no share of the GEMM rate).
template <bool kReference>
void BM_PackRowsTransposed(benchmark::State& state) {
  const int64_t n = state.range(0);
  const int64_t k = state.range(1);
  const int bits = static_cast<int>(state.range(2));
  std::vector<uint8_t> codes(static_cast<size_t>(n * k));
  std::mt19937 rng(5);
  for (uint8_t& c : codes) c = static_cast<uint8_t>(rng() & ((1u << bits) - 1));
  const int64_t words = PackedWordCount(k, bits, PackLayout::kBitstream);
  for (auto _ : state) {
    std::vector<uint32_t> packed;
    if (kReference) {
      packed.resize(static_cast<size_t>(words * n));
      for (int64_t r = 0; r < n; ++r) {
        PackLineReference(codes.data() + r * k, k, 1, bits,
                          PackLayout::kBitstream, packed.data() + r, n);
      }
    } else {
      packed =
          PackRowsTransposed(codes.data(), n, k, bits, PackLayout::kBitstream);
    }
    benchmark::DoNotOptimize(packed.data());
  }
  state.counters["Gcodes/s"] =
      benchmark::Counter(static_cast<double>(n * k) * 1e-9 *
                             static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
}

void Register(bool large) {
  // The ceiling: Eigen for this CPU and OpenBLAS; then the project's SGEMM
  // at every level this CPU runs. Same shapes for all.
  std::vector<benchmark::internal::Benchmark*> gemms;
  if (bench::RowMajorSgemm native = bench::NativeEigenSgemm()) {
    gemms.push_back(benchmark::RegisterBenchmark("SgemmNativeEigen",
                                                 BM_ReferenceSgemm, native));
  }
  std::string openblas_core;
  if (bench::RowMajorSgemm openblas = bench::OpenBlasSgemm(&openblas_core)) {
    benchmark::AddCustomContext("openblas_core", openblas_core);
    gemms.push_back(benchmark::RegisterBenchmark("SgemmOpenBLAS",
                                                 BM_ReferenceSgemm, openblas));
  }
  for (kernels::IsaLevel level : kernels::SupportedLevels()) {
    gemms.push_back(benchmark::RegisterBenchmark(
        ("Sgemm_" + std::string(kernels::IsaName(level))).c_str(),
        BM_LevelSgemm, level));
  }
  for (auto* gemm : gemms) {
    gemm->Args({1024, 1024, 1024})->Unit(benchmark::kMillisecond);
  }
  auto* hessian =
      benchmark::RegisterBenchmark("HessianAccumulate", BM_HessianAccumulate);
  hessian->Args({1024, 2048})->Unit(benchmark::kMillisecond);
  auto* gptq = benchmark::RegisterBenchmark("Gptq", BM_Gptq<false>);
  gptq->Args({1024, 1024, 2048})->Unit(benchmark::kMillisecond);
  auto* reference =
      benchmark::RegisterBenchmark("GptqReference", BM_Gptq<true>);
  reference->Args({1024, 1024, 2048})->Unit(benchmark::kMillisecond);
  auto* awq = benchmark::RegisterBenchmark("Awq", BM_Awq);
  awq->Args({1024, 1024, 512, 0})->Unit(benchmark::kMillisecond);
  auto* awq_subset = benchmark::RegisterBenchmark("AwqRowSubset", BM_Awq);
  awq_subset->Args({1024, 1024, 512, 256})->Unit(benchmark::kMillisecond);
  // Qwen3-30B-A3B's MoE MLP (hidden 2048, 128 experts, top-8, expert
  // intermediate 768) on 512 tokens, and Mixtral-8x7B's shape at a tenth of
  // its widths (8 experts, top-2).
  for (const bool reference : {false, true}) {
    auto* moe = benchmark::RegisterBenchmark(
        reference ? "MoeMlpReference" : "MoeMlp",
        reference ? BM_MoeMlp<true> : BM_MoeMlp<false>);
    moe->Args({2048, 128, 8, 768, 512})->Unit(benchmark::kMillisecond);
    moe->Args({410, 8, 2, 1434, 2048})->Unit(benchmark::kMillisecond);
    if (reference) moe->Iterations(1);
  }
  for (const int bits : {4, 3}) {
    benchmark::RegisterBenchmark("PackRowsTransposed",
                                 BM_PackRowsTransposed<false>)
        ->Args({4096, 11008, bits})
        ->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("PackRowsTransposedReference",
                                 BM_PackRowsTransposed<true>)
        ->Args({4096, 11008, bits})
        ->Unit(benchmark::kMillisecond);
  }
  // Wall-clock time: CPU time of the main thread misses the others' work.
  std::vector<int> thread_counts = {1};
  if (AllThreads() > 1) thread_counts.push_back(AllThreads());
  for (int threads : {0, 1, AllThreads()}) {
    if (threads == 1 && AllThreads() == 1) continue;
    benchmark::RegisterBenchmark("Cholesky", BM_Cholesky)
        ->Args({2816, threads})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
  }
  for (int threads : thread_counts) {
    benchmark::RegisterBenchmark("HessianAccumulateThreads",
                                 BM_HessianAccumulateThreads)
        ->Args({2048, 4096, threads})
        ->Unit(benchmark::kMillisecond)
        ->UseRealTime();
    auto* gptq_threads =
        benchmark::RegisterBenchmark("GptqThreads", BM_GptqThreads)
            ->Args({1024, 1024, 2048, threads})
            ->Unit(benchmark::kMillisecond)
            ->UseRealTime();
    if (large) gptq_threads->Args({4096, 11008, 2048, threads})->Iterations(1);
  }
  if (large) {
    // A 7B model's layers, [N, K]: q/k/v/o 4096 x 4096, gate/up
    // 11008 x 4096, down 4096 x 11008; 2048 and 8192 calibration tokens.
    const std::vector<std::pair<int64_t, int64_t>> shapes = {
        {4096, 4096}, {11008, 4096}, {4096, 11008}};
    for (auto* gemm : gemms) {
      gemm->Args({2048, 4096, 4096})->Iterations(1);
      gemm->Args({4096, 4096, 4096})->Iterations(1);
    }
    for (const int64_t t : {2048, 8192}) {
      hessian->Args({4096, t})->Iterations(1);
      hessian->Args({11008, t})->Iterations(1);
      for (const auto& [n, k] : shapes) {
        gptq->Args({n, k, t})->Iterations(1);
        awq_subset->Args({n, k, t, 512})->Iterations(1);
      }
      awq->Args({4096, 4096, t, 0})->Iterations(1);
    }
    for (const auto& [n, k] : shapes) {
      reference->Args({n, k, 2048})->Iterations(1);
    }
  }
}

// Keeps every run for the closing table while printing as usual.
class TableReporter : public benchmark::ConsoleReporter {
 public:
  // `large`: the agreement check also runs at 4096 x 4096.
  explicit TableReporter(bool large) : large_(large) {}

  struct Row {
    std::string name;
    double seconds = 0.0;
    double gflops = 0.0;
  };

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      Row row;
      row.name = run.benchmark_name();
      // "/iterations:1" (the --large rows) is not part of a row's shape.
      if (const size_t at = row.name.find("/iterations:");
          at != std::string::npos) {
        const size_t end = row.name.find('/', at + 1);
        row.name.erase(at,
                       end == std::string::npos ? std::string::npos : end - at);
      }
      row.seconds = run.GetAdjustedRealTime() /
                    benchmark::GetTimeUnitMultiplier(run.time_unit);
      auto it = run.counters.find("GFLOP/s");
      if (it != run.counters.end()) row.gflops = it->second.value;
      // Threaded rows: flops over wall time.
      auto wall = run.counters.find("GFLOP");
      if (wall != run.counters.end() && row.seconds > 0.0) {
        row.gflops = wall->second.value / row.seconds;
      }
      rows_.push_back(row);
    }
  }

  void PrintTable() const {
    // The ceiling: the best reference SGEMM of this run (Eigen for this CPU,
    // OpenBLAS); the project's own per level, beside it.
    double ceiling = 0.0;
    std::map<std::string, double> level_gemm;
    std::map<std::string, double> gptq_seconds;
    for (const Row& row : rows_) {
      if (row.name.rfind("SgemmNativeEigen/", 0) == 0 ||
          row.name.rfind("SgemmOpenBLAS/", 0) == 0) {
        ceiling = std::max(ceiling, row.gflops);
      }
      if (row.name.rfind("Sgemm_", 0) == 0) {
        const std::string level = row.name.substr(6, row.name.find('/') - 6);
        level_gemm[level] = std::max(level_gemm[level], row.gflops);
      }
      gptq_seconds[row.name] = row.seconds;
    }
    std::printf("\n%-44s %10s %9s %9s %10s\n", "core/args", "seconds",
                "GFLOP/s", "of native", "speed-up");
    // Rates are per CPU second of the benchmark thread; seconds are wall.
    for (const Row& row : rows_) {
      std::string speedup = "";
      // "X/.../N/real_time" against "X/.../1/real_time": threads speed-up.
      const std::string suffix = "/real_time";
      const size_t threads_at =
          row.name.rfind('/', row.name.size() - suffix.size() - 1);
      if (row.name.find("Threads/") != std::string::npos &&
          threads_at != std::string::npos) {
        const std::string one = row.name.substr(0, threads_at) + "/1" + suffix;
        auto base = gptq_seconds.find(one);
        if (one != row.name && base != gptq_seconds.end() &&
            row.seconds > 0.0) {
          char text[32];
          std::snprintf(text, sizeof(text), "%.2fx thr",
                        base->second / row.seconds);
          speedup = text;
        }
      }
      // "X/args" against "XReference/args": speed-up over the reference.
      const size_t slash = row.name.find('/');
      if (slash != std::string::npos &&
          row.name.find("Reference") == std::string::npos) {
        auto ref = gptq_seconds.find(row.name.substr(0, slash) + "Reference" +
                                     row.name.substr(slash));
        if (ref != gptq_seconds.end() && row.seconds > 0.0) {
          char text[32];
          std::snprintf(text, sizeof(text), "%.2fx", ref->second / row.seconds);
          speedup = text;
        }
      }
      // Threaded rows are per wall second: no share of the CPU-time ceiling.
      const bool wall_rate = row.name.find("Threads/") != std::string::npos;
      char share[16] = "-";
      if (!wall_rate && ceiling > 0.0 && row.gflops > 0.0) {
        std::snprintf(share, sizeof(share), "%.0f%%",
                      100.0 * row.gflops / ceiling);
      }
      // Packing rows have no flops.
      char rate[16] = "-";
      if (row.gflops > 0.0) {
        std::snprintf(rate, sizeof(rate), "%.2f", row.gflops);
      }
      std::printf("%-44s %10.4f %9s %9s %10s\n", row.name.c_str(), row.seconds,
                  rate, share, speedup.c_str());
    }
    std::printf(
        "native SGEMM ceiling (best of Eigen -march=native and OpenBLAS, same "
        "run): %.2f GFLOP/s\n",
        ceiling);
    for (const auto& [level, rate] : level_gemm) {
      std::printf("project SGEMM at %s: %.2f GFLOP/s (%.0f%% of native)%s\n",
                  level.c_str(), rate, ceiling > 0 ? 100.0 * rate / ceiling : 0,
                  level == kernels::IsaName(kernels::CurrentIsa())
                      ? "  <- the cores above ran at this level"
                      : "");
    }
    // The goal of GPTQ on a 4096 x 4096 layer: within 2x one 4096^3 SGEMM.
    const auto gptq = gptq_seconds.find("Gptq/4096/4096/2048");
    for (const char* name :
         {"SgemmNativeEigen/4096/4096/4096", "SgemmOpenBLAS/4096/4096/4096"}) {
      const auto gemm = gptq_seconds.find(name);
      if (gptq != gptq_seconds.end() && gemm != gptq_seconds.end() &&
          gemm->second > 0) {
        std::printf(
            "GPTQ 4096x4096 (T=2048, g128, act-order) takes %.2fx the "
            "time of %s\n",
            gptq->second / gemm->second, name);
      }
    }
    std::printf(
        "Threads rows: wall time, the Hessian's tiles and GPTQ's solves and "
        "updates on a pool of 1 and of %d thread(s); their rates are flops "
        "per wall second\n",
        AllThreads());
    for (const int64_t size : {int64_t{1024}, int64_t{4096}}) {
      if (size > 1024 && !large_) break;
      const GptqAgreement agreement = CompareGptq(size, size, 2048);
      std::printf(
          "blocked vs reference GPTQ, %lldx%lld, T=2048: %.4f%% of codes "
          "differ; output error ratio %.6f\n",
          static_cast<long long>(size), static_cast<long long>(size),
          100.0 * agreement.differing, agreement.error_ratio);
    }
  }

 private:
  bool large_;
  std::vector<Row> rows_;
};

}  // namespace
}  // namespace quant

int main(int argc, char** argv) {
  bool large = false;
  std::string isa;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--large") == 0) {
      large = true;
    } else if (std::strncmp(argv[i], "--isa=", 6) == 0) {
      isa = argv[i] + 6;
    } else {
      args.push_back(argv[i]);
    }
  }
  if (absl::Status s = quant::kernels::InitProcessIsa(isa); !s.ok()) {
    std::fprintf(stderr, "quant_cores_bench: %s\n",
                 std::string(s.message()).c_str());
    return 2;
  }
  const std::string kernels =
      quant::kernels::DescribeIsa(quant::kernels::ProcessIsa());
  std::printf("kernels: %s\n", kernels.c_str());
  benchmark::AddCustomContext("kernels", kernels);
  benchmark::AddCustomContext("native_sgemm",
                              quant::bench::NativeEigenDescription());
  int count = static_cast<int>(args.size());
  // Every other row runs on one thread, so its rate per CPU second is
  // comparable with the single-threaded GEMM ceiling.
  quant::Register(large);
  benchmark::Initialize(&count, args.data());
  quant::TableReporter reporter(large);
  benchmark::RunSpecifiedBenchmarks(&reporter);
  reporter.PrintTable();
  benchmark::Shutdown();
  return 0;
}
