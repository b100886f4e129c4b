// Level names, feature rules, how a level is resolved from a flag and
// QUANT_ISA, per-thread levels through a ThreadPool, and that Eigen's large
// products really reach the current level's routines.
#include "core/kernels/dispatch.h"

#include <Eigen/Cholesky>
#include <Eigen/Core>
#include <atomic>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/base/thread_pool.h"
#include "core/kernels/isa.h"
#include "core/kernels/kernel_table.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace quant::kernels {
namespace {

using ::testing::HasSubstr;

CpuFeatures V2Cpu() {
  CpuFeatures f;
  f.x86 = true;
  f.cx16 = f.lahf = f.popcnt = f.sse3 = f.ssse3 = f.sse41 = f.sse42 = true;
  return f;
}
CpuFeatures V3Cpu() {
  CpuFeatures f = V2Cpu();
  f.avx = f.avx2 = f.bmi1 = f.bmi2 = f.f16c = f.fma = f.lzcnt = f.movbe = true;
  f.os_saves_ymm = true;
  return f;
}
CpuFeatures V4Cpu() {
  CpuFeatures f = V3Cpu();
  f.avx512f = f.avx512bw = f.avx512cd = f.avx512dq = f.avx512vl = true;
  f.os_saves_zmm = true;
  return f;
}

TEST(IsaTest, NamesRoundTrip) {
  for (IsaLevel level :
       {IsaLevel::kBaseline, IsaLevel::kV2, IsaLevel::kV3, IsaLevel::kV4}) {
    absl::StatusOr<IsaLevel> parsed = ParseIsaName(IsaName(level));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, level);
  }
  EXPECT_EQ(*ParseIsaName("X86-64-V3"), IsaLevel::kV3);
  absl::StatusOr<IsaLevel> bad = ParseIsaName("v5");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("'v5'"));
  EXPECT_THAT(bad.status().message(), HasSubstr("auto, v2, v3, v4"));
}

TEST(IsaTest, LevelsNeedEveryFeatureAndTheOsState) {
  EXPECT_TRUE(Supports(V2Cpu(), IsaLevel::kV2));
  EXPECT_FALSE(Supports(V2Cpu(), IsaLevel::kV3));
  EXPECT_TRUE(Supports(V4Cpu(), IsaLevel::kV4));
  EXPECT_TRUE(Supports(V4Cpu(), IsaLevel::kV2));

  CpuFeatures no_fma = V3Cpu();
  no_fma.fma = false;
  EXPECT_FALSE(Supports(no_fma, IsaLevel::kV3));
  EXPECT_EQ(MissingFeatures(no_fma, IsaLevel::kV3), "FMA");

  // AVX-512 in the CPU but the OS does not save ZMM state: v3 at most.
  CpuFeatures no_zmm_state = V4Cpu();
  no_zmm_state.os_saves_zmm = false;
  EXPECT_TRUE(Supports(no_zmm_state, IsaLevel::kV3));
  EXPECT_FALSE(Supports(no_zmm_state, IsaLevel::kV4));
  EXPECT_THAT(MissingFeatures(no_zmm_state, IsaLevel::kV4),
              HasSubstr("AVX-512 state"));

  CpuFeatures partial_avx512 = V4Cpu();
  partial_avx512.avx512bw = partial_avx512.avx512vl = false;
  EXPECT_EQ(MissingFeatures(partial_avx512, IsaLevel::kV4),
            "AVX512BW, AVX512VL");

  CpuFeatures arm;  // not x86: only the baseline build runs
  EXPECT_TRUE(Supports(arm, IsaLevel::kBaseline));
  EXPECT_FALSE(Supports(arm, IsaLevel::kV2));
  EXPECT_FALSE(Supports(V4Cpu(), IsaLevel::kBaseline));
}

// cpuid as this process reads it agrees with the kernel's /proc/cpuinfo.
TEST(IsaTest, DetectionAgreesWithProcCpuinfo) {
  std::ifstream in("/proc/cpuinfo");
  if (!in) GTEST_SKIP() << "no /proc/cpuinfo to compare with";
  std::string line;
  std::set<std::string> flags;
  while (std::getline(in, line)) {
    if (line.rfind("flags", 0) != 0) continue;
    std::istringstream words(line.substr(line.find(':') + 1));
    std::string w;
    while (words >> w) flags.insert(w);
    break;
  }
  if (flags.empty()) GTEST_SKIP() << "/proc/cpuinfo has no flags line";
  const CpuFeatures f = DetectCpuFeatures();
  ASSERT_TRUE(f.x86);
  EXPECT_EQ(f.sse42, flags.count("sse4_2") == 1);
  EXPECT_EQ(f.popcnt, flags.count("popcnt") == 1);
  EXPECT_EQ(f.avx2, flags.count("avx2") == 1);
  EXPECT_EQ(f.fma, flags.count("fma") == 1);
  EXPECT_EQ(f.movbe, flags.count("movbe") == 1);
  // LZCNT is "abm" to Linux; a virtual machine's kernel may leave the name
  // out while cpuid sets the bit (seen in a Firecracker guest), so only a
  // listed flag is compared.
  if (flags.count("abm") == 1 || flags.count("lzcnt") == 1) {
    EXPECT_TRUE(f.lzcnt);
  }
  EXPECT_EQ(f.avx512f, flags.count("avx512f") == 1);
  EXPECT_EQ(f.avx512bw, flags.count("avx512bw") == 1);
  EXPECT_EQ(f.avx512vl, flags.count("avx512vl") == 1);
}

TEST(ResolveIsaTest, FlagThenEnvironmentThenAuto) {
  const CpuFeatures cpu = V4Cpu();
  EXPECT_EQ(*ResolveIsaFor(cpu, nullptr, "", "--isa"), IsaLevel::kV4);
  EXPECT_EQ(*ResolveIsaFor(cpu, "", "", "--isa"), IsaLevel::kV4);
  EXPECT_EQ(*ResolveIsaFor(cpu, "v2", "", "--isa"), IsaLevel::kV2);
  EXPECT_EQ(*ResolveIsaFor(cpu, "v2", "v3", "--isa"), IsaLevel::kV3);
  EXPECT_EQ(*ResolveIsaFor(cpu, "v2", "auto", "--isa"), IsaLevel::kV4);
  EXPECT_EQ(*ResolveIsaFor(V3Cpu(), nullptr, "auto", "--isa"), IsaLevel::kV3);
}

TEST(ResolveIsaTest, ALevelTheCpuLacksIsAnErrorNamingWhy) {
  absl::StatusOr<IsaLevel> flag =
      ResolveIsaFor(V3Cpu(), nullptr, "v4", "--isa");
  ASSERT_FALSE(flag.ok());
  EXPECT_EQ(flag.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(flag.status().message(), HasSubstr("--isa=v4"));
  EXPECT_THAT(flag.status().message(), HasSubstr("AVX512F"));
  EXPECT_THAT(flag.status().message(), HasSubstr("it supports v2, v3"));

  absl::StatusOr<IsaLevel> env = ResolveIsaFor(V2Cpu(), "v3", "", "--isa");
  ASSERT_FALSE(env.ok());
  EXPECT_THAT(env.status().message(), HasSubstr("QUANT_ISA=v3"));
  EXPECT_THAT(env.status().message(), HasSubstr("AVX2"));

  absl::StatusOr<IsaLevel> unknown = ResolveIsaFor(V4Cpu(), "avx9", "", "");
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("QUANT_ISA=avx9"));

  CpuFeatures old_cpu;
  old_cpu.x86 = true;  // x86-64 without SSE4.2
  absl::StatusOr<IsaLevel> floor = ResolveIsaFor(old_cpu, nullptr, "", "--isa");
  ASSERT_FALSE(floor.ok());
  EXPECT_EQ(floor.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(floor.status().message(), HasSubstr("SSE4.2"));
}

TEST(ResolveIsaTest, BaselineIsNotInAnX86Build) {
  absl::StatusOr<IsaLevel> r =
      ResolveIsaFor(V4Cpu(), nullptr, "baseline", "--isa");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("no baseline kernels"));
}

TEST(DispatchTest, ThisMachineRunsItsBestLevelByDefault) {
  const std::vector<IsaLevel> supported = SupportedLevels();
  ASSERT_FALSE(supported.empty());
  if (std::getenv(kIsaEnvironmentVariable) == nullptr) {
    EXPECT_EQ(ProcessIsa(), supported.back());
  } else {
    EXPECT_EQ(ProcessIsa(), *ResolveIsa(""));
  }
}

// Every iteration of a pool's loop runs at the level of the thread that
// started it, on whichever thread it lands.
TEST(DispatchTest, ThreadPoolIterationsRunAtTheCallersLevel) {
  ThreadPool pool(3);
  for (IsaLevel level : SupportedLevels()) {
    ScopedIsa scoped(level);
    std::vector<IsaLevel> seen(64, IsaLevel::kBaseline);
    std::vector<std::thread::id> threads(64);
    std::atomic<int> started{0};
    pool.ParallelFor(64, [&](int64_t i) {
      if (i < 2) {
        // Iterations 0 and 1 wait for each other: two threads ran them.
        started.fetch_add(1);
        while (started.load() < 2) std::this_thread::yield();
      }
      seen[i] = CurrentIsa();
      threads[i] = std::this_thread::get_id();
    });
    EXPECT_NE(threads[0], threads[1]);
    for (IsaLevel s : seen) EXPECT_EQ(s, level);
  }
  EXPECT_EQ(CurrentIsa(), ProcessIsa());
}

TEST(DispatchTest, ScopedIsaNestsAndRestores) {
  const std::vector<IsaLevel> supported = SupportedLevels();
  {
    ScopedIsa outer(supported.front());
    EXPECT_EQ(CurrentIsa(), supported.front());
    {
      ScopedIsa inner(supported.back());
      EXPECT_EQ(CurrentIsa(), supported.back());
    }
    EXPECT_EQ(CurrentIsa(), supported.front());
  }
  EXPECT_EQ(ThreadOverride(), nullptr);
}

// A table whose routines count their calls and forward to a real level.
struct Spy {
  static inline int gemm_calls = 0, syrk_calls = 0, trsm_calls = 0,
                    gemv_calls = 0;
  static inline const KernelTable* real = nullptr;
  static void Gemm(char ta, char tb, int m, int n, int k, float alpha,
                   const float* a, int lda, const float* b, int ldb, float beta,
                   float* c, int ldc) {
    ++gemm_calls;
    real->s.gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  }
  static void Syrk(char uplo, char trans, int n, int k, float alpha,
                   const float* a, int lda, float beta, float* c, int ldc) {
    ++syrk_calls;
    real->s.syrk(uplo, trans, n, k, alpha, a, lda, beta, c, ldc);
  }
  static void Trsm(char side, char uplo, char transa, char diag, int m, int n,
                   float alpha, const float* a, int lda, float* b, int ldb) {
    ++trsm_calls;
    real->s.trsm(side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb);
  }
  static void Gemv(char trans, int m, int n, float alpha, const float* a,
                   int lda, const float* x, int incx, float beta, float* y,
                   int incy) {
    ++gemv_calls;
    real->s.gemv(trans, m, n, alpha, a, lda, x, incx, beta, y, incy);
  }
};

TEST(DispatchTest, EigenProductsReachTheCurrentKernels) {
  using RowMatrix =
      Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const RowMatrix a = RowMatrix::Random(96, 80);
  const RowMatrix b = RowMatrix::Random(80, 70);
  const RowMatrix expected =
      (a.cast<double>() * b.cast<double>()).cast<float>();

  Spy::real = &CurrentKernels();
  KernelTable spy = CurrentKernels();
  spy.s.gemm = &Spy::Gemm;
  spy.s.syrk = &Spy::Syrk;
  spy.s.trsm = &Spy::Trsm;
  spy.s.gemv = &Spy::Gemv;
  SetThreadOverride(&spy);

  RowMatrix c = a * b;  // GEMM, row-major operands
  Eigen::MatrixXf h = Eigen::MatrixXf::Zero(80, 80);
  h.selfadjointView<Eigen::Lower>().rankUpdate(a.transpose());  // SYRK
  h.diagonal().array() += 1.0f;
  Eigen::MatrixXf rhs = Eigen::MatrixXf::Random(80, 40);
  h.triangularView<Eigen::Lower>().solveInPlace(rhs);       // TRSM
  const Eigen::VectorXf v = a * Eigen::VectorXf::Ones(80);  // GEMV
  SetThreadOverride(nullptr);

  EXPECT_GE(Spy::gemm_calls, 1);
  EXPECT_GE(Spy::syrk_calls, 1);
  EXPECT_GE(Spy::trsm_calls, 1);
  EXPECT_GE(Spy::gemv_calls, 1);
  EXPECT_TRUE(c.isApprox(expected, 1e-5f));
  EXPECT_NEAR(v(3), a.row(3).sum(), 1e-4f);
}

}  // namespace
}  // namespace quant::kernels
