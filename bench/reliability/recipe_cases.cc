// The recipe rows (field errors, an override that matches nothing, a
// conflict between overrides) and the calibration-rank row (T < K).
#include <string>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "bench/reliability/bad_input_cases.h"
#include "bench/reliability/case_actions.h"
#include "common/job_constants.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"

namespace quant::reliability {
namespace {

// The good request's recipe in YAML, for the rows that go through quantctl
// (a recipe file is what a user writes); `extra` is appended.
std::string RecipeYaml(const std::string& extra) {
  return absl::StrCat(
      "method: rtn\nbits: 8\ngroup_size: 0\npropagation: independent\n"
      "format: compressed-tensors\ncalibration:\n  samples: 2\n"
      "  seq_len: 32\n  heldout_fraction: 0.25\n",
      extra);
}

BadInputCase RecipeCase(std::string name, std::string input, Expectation expect,
                        std::function<void(v1::Recipe&)> edit) {
  BadInputCase c;
  c.name = std::move(name);
  c.input = std::move(input);
  c.expect = std::move(expect);
  c.act = [edit = std::move(edit)](BadInputEnv& env) {
    return CreateWith(env, [&](BadInputEnv&, v1::CreateJobRequest& request) {
      edit(*request.mutable_recipe());
      return absl::OkStatus();
    });
  };
  return c;
}

// quantctl submit with a recipe file; `calibration` is a local file or a
// sha256. Exit 0 with a job id on stdout is a created job (kJob).
Observation Submit(BadInputEnv& env, const std::string& name,
                   const std::string& recipe_yaml,
                   const std::string& calibration) {
  const std::string recipe =
      JoinPath(env.temp_dir(), absl::StrCat("inputs/", name, ".yaml"));
  if (absl::Status s = WriteFileAtomically(recipe, recipe_yaml); !s.ok()) {
    return SetupFailed(s);
  }
  absl::StatusOr<ProgramResult> run = env.RunQuantctl(
      {"submit", "--checkpoint=" + env.good_checkpoint(), "--recipe=" + recipe,
       "--calibration=" + calibration, "--label=suite=bad-input"});
  if (!run.ok()) return SetupFailed(run.status());
  Observation observed;
  observed.status = absl::StrCat("exit ", run->exit_code);
  // Everything quantctl said: a warning may be on either stream.
  observed.message = absl::StrCat(run->err, run->out);
  if (run->exit_code != 0) {
    observed.stage = Stage::kQuantctl;
    return observed;
  }
  observed.stage = Stage::kJob;
  const std::string first_line(absl::StripAsciiWhitespace(
      absl::string_view(run->out).substr(0, run->out.find('\n'))));
  observed.job_id = first_line;
  if (first_line.empty()) {
    observed.problems.push_back("quantctl submit printed no job id");
  }
  return observed;
}

// Rank: T < K layers must be flagged, the others not, and there must be
// some (one 32-token window against K = 64 and 172).
std::vector<std::string> CheckRankFlags(BadInputEnv& env, const v1::Job& job,
                                        std::string* summary) {
  std::vector<std::string> problems;
  absl::StatusOr<v1::JobReport> report = env.GetJobReport(job.id());
  if (!report.ok()) {
    problems.push_back(std::string(report.status().message()));
    return problems;
  }
  int flagged = 0;
  int measured = 0;
  for (const v1::LayerAudit& layer : report->layers()) {
    const v1::HessianDiagnostics& h = layer.hessian();
    if (h.k() <= 0) continue;
    ++measured;
    bool has_flag = false;
    for (const std::string& flag : layer.flags()) {
      has_flag = has_flag || flag == "rank_deficient";
    }
    flagged += has_flag ? 1 : 0;
    if (has_flag != (h.tokens() < h.k())) {
      problems.push_back(absl::StrCat(
          layer.name(), ": T=", h.tokens(), ", K=", h.k(),
          has_flag ? " flagged" : " not flagged", " rank_deficient"));
    }
  }
  if (flagged == 0) {
    problems.push_back(absl::StrCat("no layer flagged rank_deficient (of ",
                                    measured, " with a Hessian)"));
  }
  // The job says so too: from submit on, one warning per input width; once
  // finished, the audit's, which together count the flagged layers.
  int rank_warnings = 0;
  int audit_warned_layers = 0;
  for (const std::string& warning : job.warnings()) {
    if (absl::StartsWith(warning, "calibration: ") &&
        absl::StrContains(warning, "rank-deficient (T < K)")) {
      ++rank_warnings;
    }
    int layers = 0;
    const absl::string_view rest =
        absl::StripPrefix(warning, common::kAuditWarningPrefix);
    if (rest.size() != warning.size() &&
        absl::StrContains(warning, "(T < K)") &&
        absl::SimpleAtoi(rest.substr(0, rest.find(' ')), &layers)) {
      audit_warned_layers += layers;
    }
  }
  if (rank_warnings != 2) {
    problems.push_back(absl::StrCat("the job has ", rank_warnings,
                                    " rank warnings, want 2 (K=64 and 172): ",
                                    absl::StrJoin(job.warnings(), "; ")));
  }
  if (audit_warned_layers != flagged) {
    problems.push_back(
        absl::StrCat("the job's audit warnings count ", audit_warned_layers,
                     " rank-deficient layers, the report flags ", flagged, ": ",
                     absl::StrJoin(job.warnings(), "; ")));
  }
  *summary = absl::StrCat(flagged, " of ", measured,
                          " layers flagged rank_deficient (T < K), ",
                          rank_warnings, " warnings on the job at submit, ",
                          audit_warned_layers, " layers in its audit warnings");
  return problems;
}

}  // namespace

std::vector<BadInputCase> RecipeCases() {
  std::vector<BadInputCase> cases;
  {
    BadInputCase c;
    c.name = "recipe/unknown_field";
    c.input = "recipe file with \"bitz: 4\" (quantctl submit)";
    c.expect = {Stage::kQuantctl, "exit 1", {"bitz", "unknown field"}};
    c.act = [](BadInputEnv& env) {
      // A calibration file not uploaded before: a refused recipe must not
      // cost an upload.
      const std::string calibration =
          JoinPath(env.temp_dir(), "inputs/calib/unknown_field.txt");
      const std::string text =
          env.good_calibration_text() + "A story for the unknown field.\n";
      if (absl::Status s = WriteFileAtomically(calibration, text); !s.ok()) {
        return SetupFailed(s);
      }
      Observation observed =
          Submit(env, "unknown_field", RecipeYaml("bitz: 4\n"), calibration);
      observed.unstored_sha256 = Sha256Hex(text);
      return observed;
    };
    cases.push_back(std::move(c));
  }
  cases.push_back(
      RecipeCase("recipe/bits_5", "recipe.bits = 5",
                 {Stage::kCreateJob, "INVALID_ARGUMENT", {"recipe.bits"}},
                 [](v1::Recipe& r) { r.set_bits(5); }));
  cases.push_back(
      RecipeCase("recipe/group_size_not_allowed", "recipe.group_size = 100",
                 {Stage::kCreateJob, "INVALID_ARGUMENT", {"recipe.group_size"}},
                 [](v1::Recipe& r) { r.set_group_size(100); }));
  cases.push_back(RecipeCase(
      "recipe/gate_out_of_range", "recipe.gates.min_top1_agreement = 1.5",
      {Stage::kCreateJob,
       "INVALID_ARGUMENT",
       {"recipe.gates.min_top1_agreement"}},
      [](v1::Recipe& r) { r.mutable_gates()->set_min_top1_agreement(1.5); }));
  cases.push_back(RecipeCase(
      "recipe/gate_vs_previous_alone",
      "recipe.gates.max_ppl_ratio_vs_previous = 1.0 without compare_to",
      {Stage::kCreateJob,
       "INVALID_ARGUMENT",
       {"recipe.gates.max_ppl_ratio_vs_previous", "compare_to"}},
      [](v1::Recipe& r) {
        r.mutable_gates()->set_max_ppl_ratio_vs_previous(1.0);
      }));
  cases.push_back(RecipeCase(
      "recipe/compare_to_unknown_job", "recipe.gates.compare_to = job-999999",
      {Stage::kCreateJob,
       "INVALID_ARGUMENT",
       {"recipe.gates.compare_to", "no such job"}},
      [](v1::Recipe& r) { r.mutable_gates()->set_compare_to("job-999999"); }));
  cases.push_back(RecipeCase(
      "recipe/compare_to_outside_roots",
      "recipe.gates.compare_to = file:///etc (outside the allowed roots)",
      {Stage::kCreateJob, "PERMISSION_DENIED", {"recipe.gates.compare_to"}},
      [](v1::Recipe& r) { r.mutable_gates()->set_compare_to("file:///etc"); }));
  {
    BadInputCase c;
    c.name = "recipe/override_matches_nothing";
    c.input =
        "override match 'model\\.layers\\.99\\..*' bits 4 (quantctl submit)";
    // A warning, not an error: the job is created and runs.
    c.expect = {Stage::kJob, "SUCCEEDED", {"overrides[0]", "matches no layer"}};
    c.act = [](BadInputEnv& env) {
      return Submit(env, "override_matches_nothing",
                    RecipeYaml("overrides:\n"
                               "  - match: 'model\\.layers\\.99\\..*'\n"
                               "    bits: 4\n"),
                    env.good_calibration_sha256());
    };
    cases.push_back(std::move(c));
  }
  cases.push_back(
      RecipeCase("recipe/conflicting_overrides",
                 "overrides[0] layer 0 bits 4, overrides[1] .*q_proj bits 8",
                 {Stage::kCreateJob,
                  "INVALID_ARGUMENT",
                  {"overrides[0]", "overrides[1]", "bits"}},
                 [](v1::Recipe& r) {
                   v1::LayerOverride* first = r.add_overrides();
                   first->set_match("model\\.layers\\.0\\..*");
                   first->set_bits(4);
                   v1::LayerOverride* second = r.add_overrides();
                   second->set_match(".*q_proj");
                   second->set_bits(8);
                 }));
  {
    BadInputCase c;
    c.name = "calibration_rank/tokens_below_k";
    c.input = "GPTQ, 1 calibration window of 32 tokens (T=32 < K=64, 172)";
    c.expect = {Stage::kJob, "SUCCEEDED", {"rank_deficient"}};
    c.act = [](BadInputEnv& env) {
      return CreateWith(env, [](BadInputEnv&, v1::CreateJobRequest& request) {
        v1::Recipe& r = *request.mutable_recipe();
        r.set_method(v1::METHOD_GPTQ);
        r.set_bits(4);
        r.mutable_calibration()->set_samples(1);
        r.mutable_calibration()->set_seq_len(32);
        return absl::OkStatus();
      });
    };
    c.check_job = CheckRankFlags;
    cases.push_back(std::move(c));
  }
  return cases;
}

}  // namespace quant::reliability
