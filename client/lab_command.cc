// `quantctl lab`: load W, the activations and/or H from .npy files, run the
// chosen methods, audit each against RTN with AuditLayer, print a table or
// JSON, and optionally save each method's dequantized weight.
#include "client/lab_command.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "client/common_flags.h"
#include "core/base/status_macros.h"
#include "core/base/tensor.h"
#include "core/io/npy.h"
#include "core/kernels/dispatch.h"
#include "core/quant/audit.h"
#include "core/quant/awq.h"
#include "core/quant/gptq.h"
#include "core/quant/grid.h"
#include "core/quant/hessian.h"
#include "core/quant/layer_checks.h"
#include "core/quant/matrix_types.h"
#include "core/quant/output_error.h"
#include "core/quant/rtn.h"
#include "nlohmann/json.hpp"

ABSL_FLAG(std::string, weight, "",
          "Weight matrix [N, K] as a float32 (or float16) .npy. Required.");
ABSL_FLAG(std::string, cal, "",
          "Calibration activations [T, K] .npy: GPTQ's Hessian XᵀX, AWQ's "
          "statistic and search, and the calibration-split errors.");
ABSL_FLAG(std::string, heldout, "",
          "Held-out activations [T', K] .npy for the held-out errors, gains "
          "and flattery (reported as null / \"-\" without it).");
ABSL_FLAG(std::string, hessian, "",
          "Hessian [K, K] .npy that replaces XᵀX of --cal for GPTQ. Without "
          "--cal it also gives the calibration-split errors.");
ABSL_FLAG(int64_t, hessian_tokens, 0,
          "Tokens T behind --hessian (unnormalised XᵀX), for the diagnostics "
          "and calibration output MSE when --cal is absent; 0 = unknown.");
ABSL_FLAG(std::string, method, "all", "rtn, gptq, awq or all.");
ABSL_FLAG(int32_t, bits, 4, "Bits per weight: 2, 3, 4 or 8.");
ABSL_FLAG(int64_t, group, 0,
          "Input columns per group; 0 = one group per output row.");
ABSL_FLAG(std::string, grid, "sym", "Grid: sym, sym-restricted or asym.");
ABSL_FLAG(std::string, damp, "0.01",
          "GPTQ damping γ (a fraction of mean diag H), or \"auto\" to pick "
          "it from the default grid on a train/validation split.");
ABSL_FLAG(bool, act_order, false,
          "GPTQ: quantize columns by descending diag H.");
ABSL_FLAG(bool, static_groups, false,
          "GPTQ with --act_order: fix group parameters up front in storage "
          "order.");
ABSL_FLAG(std::string, awq_grid, "",
          "AWQ alpha grid, comma-separated (e.g. 0,0.1,0.25); empty = "
          "0, 0.05, ..., 0.95.");
ABSL_FLAG(std::string, save_dequantized, "",
          "Write each method's dequantized weight to PREFIX.<method>.npy "
          "([N, K] float32; AWQ's in W's units, 1/s folded back).");

namespace quant {
namespace {

using nlohmann::json;

using ConstMap = Eigen::Map<const RowMatrixF>;

ConstMap AsMatrix(const FloatTensor& t) {
  return ConstMap(t.data.data(), t.shape[0], t.shape[1]);
}

FloatTensor ToTensor(const RowMatrixF& m) {
  FloatTensor t;
  t.shape = {m.rows(), m.cols()};
  t.data.assign(m.data(), m.data() + m.size());
  return t;
}

struct LabInputs {
  std::string weight_path;
  std::string cal_path;
  std::string heldout_path;
  std::string hessian_path;
  FloatTensor weight;
  std::optional<FloatTensor> cal;
  std::optional<FloatTensor> heldout;
  std::optional<FloatTensor> hessian;
};

// Loads a 2-D .npy; errors name the flag and the file.
absl::StatusOr<FloatTensor> LoadMatrix(absl::string_view flag,
                                       const std::string& path) {
  absl::StatusOr<FloatTensor> tensor = ReadNpy(path);
  if (!tensor.ok()) {
    return absl::Status(
        tensor.status().code(),
        absl::StrCat("--", flag, ": ", tensor.status().message()));
  }
  if (tensor->shape.size() != 2 || tensor->NumElements() == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--", flag, " ", path, ": expected a non-empty 2-D array, got shape ",
        tensor->ShapeString()));
  }
  if (!AllFinite(AsMatrix(*tensor))) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", flag, " ", path, ": contains NaN or infinity"));
  }
  return tensor;
}

absl::Status CheckActivationWidth(absl::string_view flag,
                                  const std::string& path,
                                  const FloatTensor& activations,
                                  const LabInputs& in) {
  if (activations.shape[1] == in.weight.shape[1]) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "K mismatch: --weight ", in.weight_path, " has shape ",
      in.weight.ShapeString(), " but --", flag, " ", path, " has shape ",
      activations.ShapeString(), " (expected [T, ", in.weight.shape[1], "])"));
}

absl::StatusOr<LabInputs> LoadInputs() {
  LabInputs in;
  in.weight_path = absl::GetFlag(FLAGS_weight);
  in.cal_path = absl::GetFlag(FLAGS_cal);
  in.heldout_path = absl::GetFlag(FLAGS_heldout);
  in.hessian_path = absl::GetFlag(FLAGS_hessian);
  QUANT_ASSIGN_OR_RETURN(in.weight, LoadMatrix("weight", in.weight_path));
  const int64_t k = in.weight.shape[1];
  if (!in.cal_path.empty()) {
    QUANT_ASSIGN_OR_RETURN(in.cal, LoadMatrix("cal", in.cal_path));
    QUANT_RETURN_IF_ERROR(
        CheckActivationWidth("cal", in.cal_path, *in.cal, in));
  }
  if (!in.heldout_path.empty()) {
    QUANT_ASSIGN_OR_RETURN(in.heldout, LoadMatrix("heldout", in.heldout_path));
    QUANT_RETURN_IF_ERROR(
        CheckActivationWidth("heldout", in.heldout_path, *in.heldout, in));
  }
  if (!in.hessian_path.empty()) {
    QUANT_ASSIGN_OR_RETURN(in.hessian, LoadMatrix("hessian", in.hessian_path));
    if (in.hessian->shape[0] != k || in.hessian->shape[1] != k) {
      return absl::InvalidArgumentError(absl::StrCat(
          "shape mismatch: --hessian ", in.hessian_path, " has shape ",
          in.hessian->ShapeString(), " but --weight ", in.weight_path,
          " has shape ", in.weight.ShapeString(), " (expected [", k, ", ", k,
          "])"));
    }
  }
  return in;
}

// The parsed, validated command line (usage errors only).
struct LabSettings {
  std::vector<std::string> methods;
  bool method_all = false;
  GridSpec grid;
  bool damp_auto = false;
  double damp = 0.01;
  bool act_order = false;
  bool static_groups = false;
  std::vector<float> awq_grid = AwqOptions::DefaultAlphaGrid();
  int64_t hessian_tokens = 0;
  std::string save_prefix;
};

absl::StatusOr<LabSettings> ParseSettings() {
  LabSettings s;
  if (absl::GetFlag(FLAGS_weight).empty()) {
    return UsageError("--weight W.npy is required");
  }
  if (absl::GetFlag(FLAGS_cal).empty() &&
      absl::GetFlag(FLAGS_hessian).empty()) {
    return UsageError("--cal XCAL.npy or --hessian H.npy is required");
  }
  const std::string method = absl::GetFlag(FLAGS_method);
  if (method == "all") {
    s.method_all = true;
    s.methods = {"rtn", "gptq", "awq"};
  } else if (method == "rtn" || method == "gptq" || method == "awq") {
    s.methods = {method};
  } else {
    return UsageError(absl::StrCat(
        "--method must be rtn, gptq, awq or all, got \"", method, "\""));
  }
  s.grid.bits = absl::GetFlag(FLAGS_bits);
  if (s.grid.bits != 2 && s.grid.bits != 3 && s.grid.bits != 4 &&
      s.grid.bits != 8) {
    return UsageError(
        absl::StrCat("--bits must be 2, 3, 4 or 8, got ", s.grid.bits));
  }
  s.grid.group_size = absl::GetFlag(FLAGS_group);
  if (s.grid.group_size < 0) {
    return UsageError(absl::StrCat(
        "--group must be 0 (per row) or positive, got ", s.grid.group_size));
  }
  absl::StatusOr<GridKind> kind = ParseGridKind(absl::GetFlag(FLAGS_grid));
  if (!kind.ok()) {
    return UsageError(
        absl::StrCat("--grid must be sym, sym-restricted or asym, got \"",
                     absl::GetFlag(FLAGS_grid), "\""));
  }
  s.grid.kind = *kind;
  const std::string damp = absl::GetFlag(FLAGS_damp);
  if (damp == "auto") {
    s.damp_auto = true;
  } else if (!absl::SimpleAtod(damp, &s.damp) || !std::isfinite(s.damp) ||
             s.damp < 0.0) {
    return UsageError(
        absl::StrCat("--damp must be a non-negative number or \"auto\", got \"",
                     damp, "\""));
  }
  if (s.damp_auto && absl::GetFlag(FLAGS_cal).empty()) {
    return UsageError(
        "--damp auto needs --cal activations for its validation split "
        "(with --hessian alone there is nothing to validate on)");
  }
  s.act_order = absl::GetFlag(FLAGS_act_order);
  s.static_groups = absl::GetFlag(FLAGS_static_groups);
  const std::string awq_grid = absl::GetFlag(FLAGS_awq_grid);
  if (!awq_grid.empty()) {
    s.awq_grid.clear();
    for (absl::string_view part : absl::StrSplit(awq_grid, ',')) {
      float alpha = 0.0f;
      if (!absl::SimpleAtof(part, &alpha) || !std::isfinite(alpha) ||
          alpha < 0.0f || alpha > 1.0f) {
        return UsageError(absl::StrCat(
            "--awq_grid must be comma-separated numbers in [0, 1], got \"",
            awq_grid, "\""));
      }
      s.awq_grid.push_back(alpha);
    }
  }
  // Under "all", AWQ without --cal is skipped with a note instead.
  if (method == "awq" && absl::GetFlag(FLAGS_cal).empty()) {
    return UsageError("--method awq needs --cal (its per-channel mean |x|)");
  }
  s.hessian_tokens = absl::GetFlag(FLAGS_hessian_tokens);
  if (s.hessian_tokens < 0) {
    return UsageError(absl::StrCat(
        "--hessian_tokens must not be negative, got ", s.hessian_tokens));
  }
  s.save_prefix = absl::GetFlag(FLAGS_save_dequantized);
  return s;
}

// Everything one method reports beyond the audit.
struct MethodRun {
  std::string name;
  RowMatrixF dequantized;
  double seconds = 0.0;
  LayerAudit audit;
  // GPTQ.
  double damp_used = 0.0;
  int damp_retries = 0;
  std::optional<DampSearchResult>
      damp_search;  // --damp auto (result moved out).
  HessianDiagnostics diagnostics;
  bool tokens_known = false;
  // AWQ.
  float alpha = 0.0f;
  std::vector<float> alpha_grid;
  std::vector<double> alpha_errors;
};

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
      .count();
}

absl::StatusOr<RowMatrixF> CalibrationHessian(const FloatTensor& cal) {
  HessianAccumulator acc(cal.shape[1]);
  QUANT_RETURN_IF_ERROR(acc.Add(AsMatrix(cal)));
  return acc.Finish();
}

absl::Status RunGptq(const LabInputs& in, const LabSettings& s,
                     MethodRun& run) {
  const ConstMap w = AsMatrix(in.weight);
  GptqOptions options;
  options.grid = s.grid;
  options.damp_percent = s.damp;
  options.act_order = s.act_order;
  options.static_groups = s.static_groups;
  options.layer_name = in.weight_path;

  // H_gptq: what GPTQ factorizes (H_train for auto); tokens behind it.
  RowMatrixF h;
  int64_t tokens = 0;
  if (!s.damp_auto) {
    if (in.hessian.has_value()) {
      h = AsMatrix(*in.hessian);
      tokens = s.hessian_tokens;
    } else {
      QUANT_ASSIGN_OR_RETURN(h, CalibrationHessian(*in.cal));
      tokens = in.cal->shape[0];
    }
    const auto start = std::chrono::steady_clock::now();
    QUANT_ASSIGN_OR_RETURN(GptqResult result, QuantizeGptq(w, h, options));
    run.seconds = SecondsSince(start);
    run.dequantized = std::move(result.layer.dequantized);
    run.damp_used = result.damp_used;
    run.damp_retries = result.damp_retries;
  } else {
    RowMatrixF h_validation;
    if (in.hessian.has_value()) {
      // The given H trains; all of --cal validates.
      h = AsMatrix(*in.hessian);
      tokens = s.hessian_tokens;
      QUANT_ASSIGN_OR_RETURN(h_validation, CalibrationHessian(*in.cal));
    } else {
      SplitHessianAccumulator split(in.weight.shape[1],
                                    kAutoDampValidationFraction);
      QUANT_RETURN_IF_ERROR(split.Add(AsMatrix(*in.cal)));
      h = split.train().Finish();
      h_validation = split.validation().Finish();
      tokens = split.train().token_count();
    }
    const auto start = std::chrono::steady_clock::now();
    QUANT_ASSIGN_OR_RETURN(
        DampSearchResult search,
        QuantizeGptqAutoDamp(w, h, h_validation, DefaultDampGrid(), options));
    run.seconds = SecondsSince(start);
    run.dequantized = std::move(search.result.layer.dequantized);
    run.damp_used = search.result.damp_used;
    run.damp_retries = search.result.damp_retries;
    search.result = GptqResult();
    run.damp_search = std::move(search);
  }
  run.tokens_known = tokens > 0;
  HessianDiagnostics& d = run.diagnostics;
  d = DiagnoseHessian(h, tokens);
  d.damp_used = run.damp_used;
  d.damp_retries = run.damp_retries;
  return absl::OkStatus();
}

absl::Status RunAwq(const LabInputs& in, const LabSettings& s,
                    const OutputErrorEvaluator& calibration, MethodRun& run) {
  ActivationStatsAccumulator stats(in.weight.shape[1]);
  QUANT_RETURN_IF_ERROR(stats.Add(AsMatrix(*in.cal)));
  AwqOptions options;
  options.grid = s.grid;
  options.alpha_grid = s.awq_grid;
  options.layer_name = in.weight_path;
  const auto start = std::chrono::steady_clock::now();
  QUANT_ASSIGN_OR_RETURN(
      AwqResult result,
      QuantizeAwq(AsMatrix(in.weight), stats.MeanAbs(), calibration, options));
  run.seconds = SecondsSince(start);
  run.dequantized = std::move(result.effective);
  run.alpha = result.alpha;
  run.alpha_grid = s.awq_grid;
  run.alpha_errors = std::move(result.alpha_errors);
  return absl::OkStatus();
}

json Nullable(bool present, double value) {
  return present ? json(value) : json(nullptr);
}

json MethodToJson(const MethodRun& run, bool has_heldout, bool cal_mse_known) {
  const LayerAudit& a = run.audit;
  json m = json::object();
  m["weight_mse"] = a.method_weight_mse;
  m["output_mse_cal"] =
      Nullable(cal_mse_known, a.method_calibration.output_mse);
  m["output_mse_heldout"] = Nullable(has_heldout, a.method_heldout.output_mse);
  m["rel_output_error_cal"] = a.method_calibration.relative_error;
  m["rel_output_error_heldout"] =
      Nullable(has_heldout, a.method_heldout.relative_error);
  m["gain_cal"] = a.gain_calibration;
  m["gain_heldout"] = Nullable(has_heldout, a.gain_heldout);
  m["flattery"] = Nullable(has_heldout, a.flattery);
  m["bits_per_weight"] = a.bits_per_weight;
  m["seconds"] = run.seconds;
  if (run.name == "gptq") {
    const HessianDiagnostics& d = run.diagnostics;
    m["damp"] = run.damp_used;
    m["damp_retries"] = d.damp_retries;
    if (run.damp_search.has_value()) {
      m["damp_auto"] = {{"grid", run.damp_search->damp_grid},
                        {"validation_error", run.damp_search->validation_error},
                        {"chosen", run.damp_search->chosen_damp}};
    }
    m["tokens"] = run.tokens_known ? json(d.tokens) : json(nullptr);
    m["k"] = d.k;
    m["tokens_per_k"] = Nullable(run.tokens_known, d.tokens_per_input);
    m["dead_channels"] = d.dead_channels;
    m["rms_offdiag_corr"] = d.rho_rms;
    m["inv_sqrt_t"] = Nullable(run.tokens_known, d.inv_sqrt_tokens);
  }
  if (run.name == "awq") {
    m["alpha"] = run.alpha;
    m["alpha_grid"] = run.alpha_grid;
    m["alpha_errors"] = run.alpha_errors;
  }
  return m;
}

// A table cell: the value with `precision` decimals, or "-" when absent.
std::string Cell(bool present, double value, int precision) {
  return present ? absl::StrFormat("%.*f", precision, value) : "-";
}

std::string RenderTable(const std::vector<MethodRun>& runs, bool has_heldout,
                        const GridSpec& grid, int64_t n, int64_t k) {
  std::string text =
      absl::StrFormat("layer [%d, %d], grid %s, %d bits, group %d\n\n", n, k,
                      GridKindName(grid.kind), grid.bits, grid.group_size);
  absl::StrAppendFormat(&text, "%-6s %12s %10s %10s %9s %9s %9s %8s %9s\n",
                        "method", "weight_mse", "rel_cal", "rel_held",
                        "gain_cal", "gain_held", "flattery", "bits/w",
                        "seconds");
  for (const MethodRun& run : runs) {
    const LayerAudit& a = run.audit;
    absl::StrAppendFormat(
        &text, "%-6s %12.4e %10.5f %10s %9.4f %9s %9s %8.3f %9.4f\n", run.name,
        a.method_weight_mse, a.method_calibration.relative_error,
        Cell(has_heldout, a.method_heldout.relative_error, 5),
        a.gain_calibration, Cell(has_heldout, a.gain_heldout, 4),
        Cell(has_heldout, a.flattery, 4), a.bits_per_weight, run.seconds);
  }
  for (const MethodRun& run : runs) {
    if (run.name == "gptq") {
      const HessianDiagnostics& d = run.diagnostics;
      absl::StrAppendFormat(&text, "\ngptq: damp %g (%d retries)",
                            run.damp_used, d.damp_retries);
      if (run.damp_search.has_value()) {
        std::vector<std::string> pairs;
        for (size_t i = 0; i < run.damp_search->damp_grid.size(); ++i) {
          pairs.push_back(
              absl::StrFormat("%g: %.4e", run.damp_search->damp_grid[i],
                              run.damp_search->validation_error[i]));
        }
        absl::StrAppend(&text, ", auto from validation error {",
                        absl::StrJoin(pairs, ", "), "}");
      }
      absl::StrAppendFormat(
          &text,
          "\ngptq: Hessian T %s, K %d, T/K %s, dead channels %d, rms off-diag "
          "corr %.4f, 1/sqrt(T) %s\n",
          run.tokens_known ? absl::StrCat(d.tokens) : "-", d.k,
          Cell(run.tokens_known, d.tokens_per_input, 3), d.dead_channels,
          d.rho_rms, Cell(run.tokens_known, d.inv_sqrt_tokens, 4));
    }
    if (run.name == "awq") {
      std::vector<std::string> pairs;
      for (size_t i = 0;
           i < run.alpha_grid.size() && i < run.alpha_errors.size(); ++i) {
        pairs.push_back(absl::StrFormat("%g: %.4e", run.alpha_grid[i],
                                        run.alpha_errors[i]));
      }
      absl::StrAppendFormat(&text, "\nawq: alpha %g (calibration error {%s})\n",
                            run.alpha, absl::StrJoin(pairs, ", "));
    }
  }
  return text;
}

absl::Status RunLab(const CommandInvocation& invocation) {
  QUANT_RETURN_IF_ERROR(ApplyIsaFlag());
  QUANT_ASSIGN_OR_RETURN(const LabSettings settings, ParseSettings());
  QUANT_ASSIGN_OR_RETURN(const LabInputs in, LoadInputs());
  const ConstMap w = AsMatrix(in.weight);

  // Calibration split: the activations when given, else H itself.
  const bool has_cal = in.cal.has_value();
  const bool cal_mse_known = has_cal || settings.hessian_tokens > 0;
  std::optional<OutputErrorEvaluator> calibration;
  if (has_cal) {
    QUANT_ASSIGN_OR_RETURN(
        calibration, OutputErrorEvaluator::FromActivations(AsMatrix(*in.cal)));
  } else {
    // With T unknown, 1 keeps the gains (ratios) right; the MSE is then
    // reported as null.
    QUANT_ASSIGN_OR_RETURN(
        calibration,
        OutputErrorEvaluator::FromHessian(
            AsMatrix(*in.hessian),
            settings.hessian_tokens > 0 ? settings.hessian_tokens : 1));
  }
  std::optional<OutputErrorEvaluator> heldout;
  if (in.heldout.has_value()) {
    QUANT_ASSIGN_OR_RETURN(
        heldout, OutputErrorEvaluator::FromActivations(AsMatrix(*in.heldout)));
  }
  const bool has_heldout = heldout.has_value();

  std::vector<MethodRun> runs;
  for (const std::string& name : settings.methods) {
    if (name == "awq" && !has_cal) {
      *invocation.err << "quantctl lab: skipping awq: it needs --cal\n";
      continue;
    }
    MethodRun run;
    run.name = name;
    if (name == "rtn") {
      const auto start = std::chrono::steady_clock::now();
      QUANT_ASSIGN_OR_RETURN(QuantizedLayer layer,
                             QuantizeRtn(w, settings.grid, in.weight_path));
      run.seconds = SecondsSince(start);
      run.dequantized = std::move(layer.dequantized);
    } else if (name == "gptq") {
      QUANT_RETURN_IF_ERROR(RunGptq(in, settings, run));
    } else {
      QUANT_RETURN_IF_ERROR(RunAwq(in, settings, *calibration, run));
    }
    // AuditLayer needs a held-out split; without one its held-out numbers
    // repeat the calibration ones and are not reported.
    const AuditInputs audit_in{in.weight_path,
                               name,
                               settings.grid,
                               w,
                               run.dequantized,
                               &*calibration,
                               has_heldout ? &*heldout : &*calibration,
                               run.damp_used,
                               run.damp_retries};
    QUANT_ASSIGN_OR_RETURN(run.audit, AuditLayer(audit_in));
    run.audit.seconds = run.seconds;
    if (!settings.save_prefix.empty()) {
      const std::string path =
          absl::StrCat(settings.save_prefix, ".", name, ".npy");
      QUANT_RETURN_IF_ERROR(WriteNpy(path, ToTensor(run.dequantized)));
    }
    runs.push_back(std::move(run));
  }

  if (absl::GetFlag(FLAGS_json)) {
    json methods = json::object();
    for (const MethodRun& run : runs) {
      methods[run.name] = MethodToJson(run, has_heldout, cal_mse_known);
    }
    json result = {{"methods", methods},
                   {"grid", GridKindName(settings.grid.kind)},
                   {"bits", settings.grid.bits},
                   {"group", settings.grid.group_size},
                   {"n", in.weight.shape[0]},
                   {"k", in.weight.shape[1]},
                   {"kernels", KernelsJson()}};
    *invocation.out << result.dump(2) << "\n";
  } else {
    *invocation.out << RenderTable(runs, has_heldout, settings.grid,
                                   in.weight.shape[0], in.weight.shape[1])
                    << "kernels: "
                    << kernels::DescribeIsa(kernels::ProcessIsa()) << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

Command LabCommand() {
  Command command;
  command.name = "lab";
  command.summary =
      "Quantize one weight matrix with RTN, GPTQ and AWQ and compare their "
      "output errors against RTN (calibration and held-out).";
  command.usage =
      "lab --weight W.npy (--cal XCAL.npy | --hessian H.npy) "
      "[--heldout XHELD.npy] [--method rtn|gptq|awq|all] [--bits 4] "
      "[--group 0] [--grid sym|sym-restricted|asym] [--damp 0.01|auto] "
      "[--act_order] [--static_groups] [--awq_grid 0,0.1,0.25] "
      "[--save_dequantized PREFIX] [--hessian_tokens T] [--json]";
  command.description =
      "W is [N, K] float32 (.npy), activations are [T, K]. Each method's\n"
      "effective weight Q is audited against RTN on the same grid: weight\n"
      "MSE, output MSE (mean over T x N of (X(W-Q)^T)^2), relative output\n"
      "error ||X(W-Q)^T|| / ||XW^T||, gain = RTN's output MSE / the method's\n"
      "(RTN's own is 1), flattery = calibration gain / held-out gain, and\n"
      "bits per weight (fp16 scales, zeros at the grid's width). Without\n"
      "--heldout the held-out numbers are null (JSON) or \"-\" (table).\n"
      "GPTQ factorizes XCAL^T XCAL, or --hessian when given (which then\n"
      "replaces it; without --cal, H also gives the calibration errors and\n"
      "--hessian_tokens its T, else the calibration MSE and T are unknown).\n"
      "--damp auto tries the default grid of gamma on a 75/25 train/\n"
      "validation split of --cal (with --hessian: H trains, all of --cal\n"
      "validates) and reports the choice and per-gamma errors. AWQ needs\n"
      "--cal (skipped under --method all without it); its effective weight\n"
      "is Q_s diag(1/s). --save_dequantized P writes P.<method>.npy.\n"
      "Flag names use underscores (--act_order); the dashed spellings\n"
      "(--act-order, --static-groups, --awq-grid, --save-dequantized,\n"
      "--hessian-tokens) are accepted too. --json prints\n"
      "{\"methods\": {\"rtn\": {...}, \"gptq\": {...}, \"awq\": {...}}, ...}.";
  command.example =
      "quantctl lab --weight w.npy --cal xcal.npy --heldout xheld.npy "
      "--bits 4 --group 32 --damp auto --awq_grid 0,0.25,0.5 --json";
  command.flags = {&absl::GetFlagReflectionHandle(FLAGS_isa),
                   &absl::GetFlagReflectionHandle(FLAGS_weight),
                   &absl::GetFlagReflectionHandle(FLAGS_cal),
                   &absl::GetFlagReflectionHandle(FLAGS_heldout),
                   &absl::GetFlagReflectionHandle(FLAGS_hessian),
                   &absl::GetFlagReflectionHandle(FLAGS_hessian_tokens),
                   &absl::GetFlagReflectionHandle(FLAGS_method),
                   &absl::GetFlagReflectionHandle(FLAGS_bits),
                   &absl::GetFlagReflectionHandle(FLAGS_group),
                   &absl::GetFlagReflectionHandle(FLAGS_grid),
                   &absl::GetFlagReflectionHandle(FLAGS_damp),
                   &absl::GetFlagReflectionHandle(FLAGS_act_order),
                   &absl::GetFlagReflectionHandle(FLAGS_static_groups),
                   &absl::GetFlagReflectionHandle(FLAGS_awq_grid),
                   &absl::GetFlagReflectionHandle(FLAGS_save_dequantized),
                   &absl::GetFlagReflectionHandle(FLAGS_json)};
  command.min_args = 0;
  command.max_args = 0;
  command.run = RunLab;
  return command;
}

}  // namespace quant
