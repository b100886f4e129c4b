// audit.json and its table.
#include "core/pipeline/audit_report.h"

#include <algorithm>
#include <cmath>
#include <map>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/json_fields.h"
#include "core/base/status_macros.h"
#include "core/pipeline/mixed_precision_selection.h"
#include "core/quant/grid.h"

namespace quant {
namespace {

using nlohmann::json;

std::vector<std::string> Flags(const LayerAudit& a) {
  std::vector<std::string> flags;
  if (a.worse_than_rtn_heldout) flags.push_back("worse_than_rtn");
  if (a.overfit) flags.push_back("overfit");
  if (a.rank_deficient) flags.push_back("rank_deficient");
  if (a.outlier) flags.push_back("outlier");
  return flags;
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

void MarkLayerOutliers(std::vector<LayerResult>* layers) {
  std::vector<LayerAudit> audits;
  for (const LayerResult& l : *layers) {
    if (l.quantized) audits.push_back(l.audit);
  }
  MarkOutliers(&audits);
  size_t at = 0;
  for (LayerResult& l : *layers) {
    if (l.quantized) l.audit.outlier = audits[at++].outlier;
  }
}

json LayerResultToJson(const LayerResult& layer) {
  const LayerSettings& s = layer.settings;
  json j = {{"name", layer.name},
            {"type", LayerTypeName(layer.type)},
            {"input_group", InputGroupName(layer.input_group)},
            {"packed", layer.quantized},
            {"method", QuantMethodName(s.method)},
            {"bits", s.bits},
            {"group_size", s.group_size},
            {"grid", QuantGridName(s.grid)}};
  if (layer.expert >= 0) {
    // The tokens this expert's layer saw (calibration: its Hessian's;
    // held-out: those its audit ran on), and any starved-expert fallback.
    j["expert"] = layer.expert;
    j["calibration_tokens"] = layer.calibration_tokens;
    j["heldout_tokens"] = layer.heldout_tokens;
    if (!layer.fallback.empty()) {
      j["fallback"] = {{"action", layer.fallback},
                       {"reason", layer.fallback_reason}};
    }
  }
  if (!layer.quantized) {
    j["reason"] = layer.reason;
    if (!layer.awq_fold.empty()) j["awq_fold"] = layer.awq_fold;
    if (!layer.absorbed_awq_scales_of.empty()) {
      j["absorbed_awq_scales_of"] = layer.absorbed_awq_scales_of;
    }
    return j;
  }
  const LayerAudit& a = layer.audit;
  const HessianDiagnostics& h = a.hessian;
  j["rel_output_error_cal"] = a.method_calibration.relative_error;
  j["rel_output_error_heldout"] = a.method_heldout.relative_error;
  j["rtn_rel_output_error_cal"] = a.rtn_calibration.relative_error;
  j["rtn_rel_output_error_heldout"] = a.rtn_heldout.relative_error;
  j["output_mse_cal"] = a.method_calibration.output_mse;
  j["output_mse_heldout"] = a.method_heldout.output_mse;
  j["rtn_output_mse_cal"] = a.rtn_calibration.output_mse;
  j["rtn_output_mse_heldout"] = a.rtn_heldout.output_mse;
  j["weight_mse"] = a.method_weight_mse;
  j["rtn_weight_mse"] = a.rtn_weight_mse;
  j["gain_cal"] = a.gain_calibration;
  if (a.heldout_pending) j["heldout_pending"] = true;
  j["gain_heldout"] = a.gain_heldout;
  j["flattery"] = a.flattery;
  j["bits_per_weight"] = a.bits_per_weight;
  j["hessian"] = {{"tokens", h.tokens},
                  {"k", h.k},
                  {"tokens_per_input", h.tokens_per_input},
                  {"dead_channels", h.dead_channels},
                  {"rho_rms", h.rho_rms},
                  {"inv_sqrt_tokens", h.inv_sqrt_tokens}};
  if (s.method == QuantMethod::kGptq) {
    j["damp"] = {{"used", layer.choices.damp_used},
                 {"retries", layer.choices.damp_retries},
                 {"automatic", s.damp.automatic}};
    if (!layer.choices.damp_grid.empty()) {
      j["damp"]["grid"] = layer.choices.damp_grid;
      j["damp"]["validation_error"] = layer.choices.damp_validation_error;
    }
  }
  if (layer.choices.awq_alpha.has_value()) {
    // α comes from a grid of short decimals; print it as one.
    const double alpha =
        std::round(static_cast<double>(*layer.choices.awq_alpha) * 1e6) / 1e6;
    j["awq"] = {{"alpha", alpha}, {"fold", layer.awq_fold}};
  }
  if (!layer.absorbed_awq_scales_of.empty()) {
    j["absorbed_awq_scales_of"] = layer.absorbed_awq_scales_of;
  }
  if (a.previous_heldout.has_value()) {
    j["previous_rel_output_error_heldout"] = a.previous_heldout->relative_error;
    j["previous_output_mse_heldout"] = a.previous_heldout->output_mse;
  }
  j["seconds"] = a.seconds;
  j["flags"] = Flags(a);
  return j;
}

namespace {

// The block of "model.layers.N. ..."; -1 for another name.
int BlockOfLayer(const std::string& name) {
  constexpr absl::string_view kPrefix = "model.layers.";
  if (!absl::StartsWith(name, kPrefix)) return -1;
  const size_t dot = name.find('.', kPrefix.size());
  int block = -1;
  if (dot == std::string::npos ||
      !absl::SimpleAtoi(
          absl::string_view(name).substr(kPrefix.size(), dot - kPrefix.size()),
          &block)) {
    return -1;
  }
  return block;
}

json TokenHistogram(std::vector<int64_t> counts) {
  std::sort(counts.begin(), counts.end());
  const size_t n = counts.size();
  const double median =
      n % 2 == 1 ? static_cast<double>(counts[n / 2])
                 : 0.5 * static_cast<double>(counts[n / 2 - 1] + counts[n / 2]);
  return {{"min", counts.front()}, {"median", median}, {"max", counts.back()}};
}

}  // namespace

json ExpertBlockSummaries(const std::vector<LayerResult>& layers) {
  // Per block, per expert: the tokens its gate (first) layer saw, and
  // whether a starved-expert fallback applied to it.
  std::map<int, std::map<int, std::pair<int64_t, int64_t>>> tokens;
  std::map<int, std::map<int, bool>> starved;
  for (const LayerResult& l : layers) {
    if (l.expert < 0) continue;
    const int block = BlockOfLayer(l.name);
    auto [it, first] = tokens[block].try_emplace(
        l.expert, std::make_pair(l.calibration_tokens, l.heldout_tokens));
    (void)it;
    (void)first;
    starved[block][l.expert] |= !l.fallback.empty();
  }
  json out = json::array();
  for (const auto& [block, experts] : tokens) {
    std::vector<int64_t> calibration, heldout;
    std::vector<int> starved_list;
    for (const auto& [expert, counts] : experts) {
      calibration.push_back(counts.first);
      heldout.push_back(counts.second);
      if (starved[block][expert]) starved_list.push_back(expert);
    }
    out.push_back({{"block", block},
                   {"experts", experts.size()},
                   {"calibration_tokens", TokenHistogram(calibration)},
                   {"heldout_tokens", TokenHistogram(heldout)},
                   {"starved", starved_list.size()},
                   {"starved_experts", starved_list}});
  }
  return out;
}

json BuildAuditJson(const std::vector<LayerResult>& layers, const json& gates) {
  json list = json::array();
  int quantized = 0;
  int better = 0;
  std::vector<double> gains;
  for (const LayerResult& l : layers) {
    list.push_back(LayerResultToJson(l));
    if (!l.quantized) continue;
    ++quantized;
    gains.push_back(l.audit.gain_heldout);
    if (l.audit.method_heldout.relative_error <
        l.audit.rtn_heldout.relative_error) {
      ++better;
    }
  }
  json summary = {{"layers", layers.size()},
                  {"packed", quantized},
                  {"kept", static_cast<int>(layers.size()) - quantized},
                  {"better_than_rtn_heldout", better},
                  {"median_gain_heldout", Median(gains)}};
  json moe = ExpertBlockSummaries(layers);
  if (!moe.empty()) summary["moe_blocks"] = std::move(moe);
  return {{"format_version", 1},
          {"layers", std::move(list)},
          {"summary", std::move(summary)},
          {"gates", gates},
          {"verdict", gates.value("verdict", "FAIL")}};
}

namespace {

// summary.moe_blocks, one line per block, and the experts' layers with the
// highest held-out error.
std::string FormatExpertSummary(const json& audit) {
  std::string out;
  for (const json& b : audit.at("summary").at("moe_blocks")) {
    const json& cal = b.at("calibration_tokens");
    const json& held = b.at("heldout_tokens");
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "experts of block %d: %d experts; calibration tokens per expert "
            "min %d median %.1f max %d; held-out min %d median %.1f max %d; "
            "%d starved\n",
            b.at("block").get<int64_t>(), b.at("experts").get<int64_t>(),
            cal.at("min").get<int64_t>(), cal.at("median").get<double>(),
            cal.at("max").get<int64_t>(), held.at("min").get<int64_t>(),
            held.at("median").get<double>(), held.at("max").get<int64_t>(),
            b.at("starved").get<int64_t>()));
  }
  std::vector<const json*> experts;
  for (const json& l : audit.at("layers")) {
    if (l.contains("expert") && l.at("packed").get<bool>()) {
      experts.push_back(&l);
    }
  }
  std::stable_sort(experts.begin(), experts.end(),
                   [](const json* a, const json* b) {
                     return a->at("rel_output_error_heldout").get<double>() >
                            b->at("rel_output_error_heldout").get<double>();
                   });
  if (!experts.empty()) absl::StrAppend(&out, "worst experts (held-out):\n");
  for (size_t i = 0; i < experts.size() && i < 5; ++i) {
    const json& l = *experts[i];
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "  %s  error %.5f (RTN %.5f), %d calibration / %d "
            "held-out tokens%s\n",
            l.at("name").get<std::string>(),
            l.at("rel_output_error_heldout").get<double>(),
            l.at("rtn_rel_output_error_heldout").get<double>(),
            l.at("calibration_tokens").get<int64_t>(),
            l.at("heldout_tokens").get<int64_t>(),
            l.contains("fallback")
                ? absl::StrCat(", fallback ",
                               l.at("fallback").at("action").get<std::string>())
                : ""));
  }
  return out;
}

}  // namespace

std::string FormatAuditTable(const json& audit) {
  std::string out = absl::StrFormat(
      "%-36s %-6s %4s %10s %10s %7s %8s  %s\n", "layer", "method", "bits",
      "rtn_held", "meth_held", "gain", "flattery", "flags / note");
  for (const json& l : audit.at("layers")) {
    const std::string name = l.at("name").get<std::string>();
    if (!l.at("packed").get<bool>()) {
      absl::StrAppend(
          &out, absl::StrFormat("%-36s %-6s %4s %10s %10s %7s %8s  %s\n", name,
                                "-", "-", "-", "-", "-", "-",
                                "kept: " + l.value("reason", "")));
      continue;
    }
    std::vector<std::string> flags = l.at("flags");
    absl::StrAppend(
        &out, absl::StrFormat(
                  "%-36s %-6s %4d %10.5f %10.5f %7.3f %8.3f  %s\n", name,
                  l.at("method").get<std::string>(), l.at("bits").get<int>(),
                  l.at("rtn_rel_output_error_heldout").get<double>(),
                  l.at("rel_output_error_heldout").get<double>(),
                  l.at("gain_heldout").get<double>(),
                  l.at("flattery").get<double>(), absl::StrJoin(flags, ",")));
  }
  const json& g = audit.at("gates");
  absl::StrAppend(
      &out,
      absl::StrFormat(
          "held-out: perplexity %.4f (unquantized %.4f, ratio "
          "%.4f), mean KL %.5f, top-1 agreement %.4f over %d "
          "tokens\n",
          g.at("perplexity").get<double>(),
          g.at("reference_perplexity").get<double>(),
          g.at("ppl_ratio").get<double>(), g.at("mean_kl").get<double>(),
          g.at("top1_agreement").get<double>(), g.at("tokens").get<int64_t>()));
  // Checked by CheckAuditTableFields when present.
  if (const auto p = g.find("previous"); p != g.end() && p->is_object()) {
    absl::StrAppend(
        &out,
        absl::StrFormat(
            "previous release %s: perplexity %.4f (ratio %.4f), mean KL "
            "%.5f, top-1 agreement %.4f on the same windows; this / "
            "previous %.4f\n",
            p->at("compare_to").get<std::string>(),
            p->at("perplexity").get<double>(), p->at("ppl_ratio").get<double>(),
            p->at("mean_kl").get<double>(),
            p->at("top1_agreement").get<double>(),
            g.at("ppl_ratio_vs_previous").get<double>()));
  }
  // Checked by CheckAuditTableFields when present.
  if (const auto t = g.find("tasks"); t != g.end() && t->is_object()) {
    const json& overall = t->at("overall");
    absl::StrAppend(
        &out,
        absl::StrFormat("tasks %s: %d tasks, accuracy %.4f unquantized, %.4f "
                        "packed, ratio %.4f\n",
                        t->at("file").get<std::string>(),
                        overall.at("count").get<int>(),
                        overall.at("reference_accuracy").get<double>(),
                        overall.at("candidate_accuracy").get<double>(),
                        overall.at("ratio").get<double>()));
    for (const auto& [name, group] : t->at("groups").items()) {
      absl::StrAppend(
          &out,
          absl::StrFormat(
              "  task group %-20s %5d tasks  %.4f -> %.4f  ratio %.4f%s\n",
              name, group.at("count").get<int>(),
              group.at("reference_accuracy").get<double>(),
              group.at("candidate_accuracy").get<double>(),
              group.at("ratio").get<double>(),
              group.value("reference_zero", false)
                  ? " (unquantized scored 0: no bound)"
                  : ""));
    }
  }
  // Checked by CheckAuditTableFields when present.
  if (const auto r = g.find("runtime"); r != g.end() && r->is_array()) {
    for (const json& check : *r) {
      const std::vector<std::string> problems =
          check.at("problems").get<std::vector<std::string>>();
      std::vector<std::string> kernels;
      for (const auto& [kernel, count] : check.at("kernels").items()) {
        kernels.push_back(absl::StrCat(kernel, " ", count.get<int64_t>()));
      }
      absl::StrAppend(&out, "runtime ", check.at("runtime").get<std::string>(),
                      " (", check.at("method").get<std::string>(),
                      "): ", problems.empty() ? "loads" : "would NOT load",
                      "; layers on ", absl::StrJoin(kernels, ", "), "\n");
      for (size_t i = 0; i < problems.size() && i < 5; ++i) {
        absl::StrAppend(&out, "  ! ", problems[i], "\n");
      }
      if (problems.size() > 5) {
        absl::StrAppend(&out, "  ! ... ", problems.size() - 5,
                        " more in audit.json\n");
      }
    }
  }
  // Checked by CheckAuditTableFields when present.
  if (const auto m = audit.find("mixed_precision");
      m != audit.end() && !m->is_null()) {
    absl::StatusOr<MixedPrecisionSelection> selection =
        MixedPrecisionFromJson(*m);
    if (selection.ok()) absl::StrAppend(&out, FormatMixedPrecision(*selection));
  }
  // Checked by CheckAuditTableFields when present.
  if (const auto s = audit.find("summary");
      s != audit.end() && s->is_object() && s->contains("moe_blocks")) {
    absl::StrAppend(&out, FormatExpertSummary(audit));
  }
  for (const json& c : g.at("checks")) {
    absl::StrAppend(
        &out, absl::StrFormat("gate %-25s value %.5f threshold %.5f  %s\n",
                              c.at("gate").get<std::string>(),
                              c.at("value").get<double>(),
                              c.at("threshold").get<double>(),
                              c.at("passed").get<bool>() ? "pass" : "FAIL"));
  }
  absl::StrAppend(&out, "verdict: ", g.at("verdict").get<std::string>(), "\n");
  return out;
}

absl::Status CheckAuditTableFields(const json& audit) {
  namespace jf = json_fields;
  const std::string root = "audit.json";
  QUANT_RETURN_IF_ERROR(jf::ExpectObject(audit, root));
  QUANT_ASSIGN_OR_RETURN(const json* layers,
                         jf::GetArray(audit, "layers", root));
  for (size_t i = 0; i < layers->size(); ++i) {
    const std::string at = jf::IndexPath(root + ": layers", i);
    const json& l = (*layers)[i];
    QUANT_RETURN_IF_ERROR(jf::ExpectObject(l, at));
    QUANT_RETURN_IF_ERROR(jf::GetString(l, "name", at).status());
    QUANT_ASSIGN_OR_RETURN(const bool packed,
                           jf::GetBoolOr(l, "packed", false, at));
    if (l.contains("expert")) {  // What FormatExpertSummary prints of it.
      for (const char* key : {"calibration_tokens", "heldout_tokens"}) {
        QUANT_RETURN_IF_ERROR(jf::GetInt(l, key, at).status());
      }
      if (const auto f = l.find("fallback"); f != l.end()) {
        QUANT_RETURN_IF_ERROR(jf::ExpectObject(*f, at + ".fallback"));
        QUANT_RETURN_IF_ERROR(
            jf::GetString(*f, "action", at + ".fallback").status());
      }
    }
    if (l.find("packed") == l.end()) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".packed: missing"));
    }
    if (!packed) {
      QUANT_RETURN_IF_ERROR(jf::GetStringOr(l, "reason", "", at).status());
      continue;
    }
    QUANT_RETURN_IF_ERROR(jf::GetStringArrayOr(l, "flags", at).status());
    if (l.find("flags") == l.end()) {
      return absl::InvalidArgumentError(absl::StrCat(at, ".flags: missing"));
    }
    QUANT_RETURN_IF_ERROR(jf::GetString(l, "method", at).status());
    QUANT_RETURN_IF_ERROR(jf::GetInt(l, "bits", at).status());
    for (const char* key :
         {"rtn_rel_output_error_heldout", "rel_output_error_heldout",
          "gain_heldout", "flattery"}) {
      QUANT_RETURN_IF_ERROR(jf::GetNumber(l, key, at).status());
    }
  }
  if (const auto s = audit.find("summary");
      s != audit.end() && s->is_object() && s->contains("moe_blocks")) {
    const std::string at = root + ": summary";
    QUANT_ASSIGN_OR_RETURN(const json* blocks,
                           jf::GetArray(*s, "moe_blocks", at));
    for (size_t i = 0; i < blocks->size(); ++i) {
      const std::string b_at = jf::IndexPath(at + ".moe_blocks", i);
      const json& b = (*blocks)[i];
      QUANT_RETURN_IF_ERROR(jf::ExpectObject(b, b_at));
      for (const char* key : {"block", "experts", "starved"}) {
        QUANT_RETURN_IF_ERROR(jf::GetInt(b, key, b_at).status());
      }
      for (const char* split : {"calibration_tokens", "heldout_tokens"}) {
        QUANT_ASSIGN_OR_RETURN(const json* h, jf::GetObject(b, split, b_at));
        const std::string h_at = b_at + "." + split;
        QUANT_RETURN_IF_ERROR(jf::GetInt(*h, "min", h_at).status());
        QUANT_RETURN_IF_ERROR(jf::GetNumber(*h, "median", h_at).status());
        QUANT_RETURN_IF_ERROR(jf::GetInt(*h, "max", h_at).status());
      }
    }
  }
  const std::string gates_at = root + ": gates";
  QUANT_ASSIGN_OR_RETURN(const json* gates,
                         jf::GetObject(audit, "gates", root));
  for (const char* key : {"perplexity", "reference_perplexity", "ppl_ratio",
                          "mean_kl", "top1_agreement"}) {
    QUANT_RETURN_IF_ERROR(jf::GetNumber(*gates, key, gates_at).status());
  }
  QUANT_RETURN_IF_ERROR(jf::GetInt(*gates, "tokens", gates_at).status());
  QUANT_RETURN_IF_ERROR(jf::GetString(*gates, "verdict", gates_at).status());
  // The previous release (gates.compare_to), when compared: all of what
  // FormatAuditTable prints of it.
  if (const auto previous = gates->find("previous");
      previous != gates->end() && !previous->is_null()) {
    const std::string at = gates_at + ".previous";
    QUANT_RETURN_IF_ERROR(jf::ExpectObject(*previous, at));
    QUANT_RETURN_IF_ERROR(jf::GetString(*previous, "compare_to", at).status());
    for (const char* key :
         {"perplexity", "ppl_ratio", "mean_kl", "top1_agreement"}) {
      QUANT_RETURN_IF_ERROR(jf::GetNumber(*previous, key, at).status());
    }
    QUANT_RETURN_IF_ERROR(
        jf::GetNumber(*gates, "ppl_ratio_vs_previous", gates_at).status());
  }
  // The task gate's file (gates.tasks), when scored: what FormatAuditTable
  // prints of it.
  if (const auto tasks = gates->find("tasks");
      tasks != gates->end() && !tasks->is_null()) {
    const std::string at = gates_at + ".tasks";
    QUANT_RETURN_IF_ERROR(jf::ExpectObject(*tasks, at));
    QUANT_RETURN_IF_ERROR(jf::GetString(*tasks, "file", at).status());
    auto check_ratio = [](const json& ratio, const std::string& where) {
      QUANT_RETURN_IF_ERROR(jf::ExpectObject(ratio, where));
      QUANT_RETURN_IF_ERROR(jf::GetInt(ratio, "count", where).status());
      for (const char* key :
           {"reference_accuracy", "candidate_accuracy", "ratio"}) {
        QUANT_RETURN_IF_ERROR(jf::GetNumber(ratio, key, where).status());
      }
      return jf::GetBoolOr(ratio, "reference_zero", false, where).status();
    };
    QUANT_ASSIGN_OR_RETURN(const json* overall,
                           jf::GetObject(*tasks, "overall", at));
    QUANT_RETURN_IF_ERROR(check_ratio(*overall, at + ".overall"));
    QUANT_ASSIGN_OR_RETURN(const json* groups,
                           jf::GetObject(*tasks, "groups", at));
    for (const auto& [name, group] : groups->items()) {
      QUANT_RETURN_IF_ERROR(check_ratio(group, at + ".groups." + name));
    }
  }
  // The runtime conformance checks, when run: what FormatAuditTable prints.
  if (const auto runtime = gates->find("runtime");
      runtime != gates->end() && !runtime->is_null()) {
    QUANT_ASSIGN_OR_RETURN(const json* checks,
                           jf::GetArray(*gates, "runtime", gates_at));
    for (size_t i = 0; i < checks->size(); ++i) {
      const std::string at = jf::IndexPath(gates_at + ".runtime", i);
      const json& c = (*checks)[i];
      QUANT_RETURN_IF_ERROR(jf::ExpectObject(c, at));
      QUANT_RETURN_IF_ERROR(jf::GetString(c, "runtime", at).status());
      QUANT_RETURN_IF_ERROR(jf::GetString(c, "method", at).status());
      QUANT_RETURN_IF_ERROR(jf::GetStringArrayOr(c, "problems", at).status());
      if (!c.contains("problems")) {
        return absl::InvalidArgumentError(
            absl::StrCat(at, ".problems: missing"));
      }
      QUANT_ASSIGN_OR_RETURN(const json* kernels,
                             jf::GetObject(c, "kernels", at));
      for (const auto& [kernel, count] : kernels->items()) {
        QUANT_RETURN_IF_ERROR(
            jf::GetInt(*kernels, kernel, at + ".kernels").status());
      }
    }
  }
  // The mixed-precision selection, when the recipe asked for one.
  if (const auto m = audit.find("mixed_precision");
      m != audit.end() && !m->is_null()) {
    absl::Status parsed = MixedPrecisionFromJson(*m).status();
    if (!parsed.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat(root, ": ", parsed.message()));
    }
  }
  QUANT_ASSIGN_OR_RETURN(const json* checks,
                         jf::GetArray(*gates, "checks", gates_at));
  for (size_t i = 0; i < checks->size(); ++i) {
    const std::string at = jf::IndexPath(gates_at + ".checks", i);
    const json& c = (*checks)[i];
    QUANT_RETURN_IF_ERROR(jf::ExpectObject(c, at));
    QUANT_RETURN_IF_ERROR(jf::GetString(c, "gate", at).status());
    QUANT_RETURN_IF_ERROR(jf::GetNumber(c, "value", at).status());
    QUANT_RETURN_IF_ERROR(jf::GetNumber(c, "threshold", at).status());
    if (!c.contains("passed") || !c["passed"].is_boolean()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ".passed: expected true or false"));
    }
  }
  return absl::OkStatus();
}

}  // namespace quant
