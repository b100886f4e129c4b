// RenderReportHtml; see report_html.h.
#include "core/report/report_html.h"

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/json_fields.h"
#include "core/base/status_macros.h"
#include "core/report/html_escape.h"
#include "core/report/svg_line_plot.h"

namespace quant::report {
namespace {

using json_fields::FieldPath;
using json_fields::IndexPath;
using json_fields::MemberOrNull;
using json_fields::StringOrEmpty;
using nlohmann::json;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One row of audit.json's "layers", as the page shows it.
struct Layer {
  std::string name;
  std::string type;
  std::string input_group;
  int block = -1;  // from the name ("...layers.N..."), -1 outside blocks
  bool packed = false;
  std::string reason;  // why it was kept, when not packed
  std::string method;
  std::string grid;
  int64_t bits = 0;
  int64_t group_size = 0;
  double bits_per_weight = kNaN;
  double error_heldout = kNaN;
  double rtn_error_heldout = kNaN;
  double error_cal = kNaN;
  double rtn_error_cal = kNaN;
  double gain_heldout = kNaN;
  double flattery = kNaN;
  double tokens = kNaN;
  double inputs = kNaN;
  double tokens_per_input = kNaN;
  double rho_rms = kNaN;
  double inv_sqrt_tokens = kNaN;
  int64_t dead_channels = 0;
  double damp = kNaN;
  double seconds = kNaN;
  double previous_error_heldout = kNaN;  // gates.compare_to's layer
  std::vector<std::string> flags;

  bool HasFlag(const std::string& flag) const {
    for (const std::string& f : flags) {
      if (f == flag) return true;
    }
    return false;
  }
};

// The decoder block a tensor name belongs to: N in "model.layers.N.…" (any
// prefix before "layers."), -1 for none.
int BlockOf(const std::string& name) {
  size_t at = 0;
  while ((at = name.find("layers.", at)) != std::string::npos) {
    if (at == 0 || name[at - 1] == '.') {
      size_t i = at + 7;
      int block = 0;
      size_t digits = 0;
      while (i < name.size() && absl::ascii_isdigit(name[i]) && digits < 7) {
        block = block * 10 + (name[i] - '0');
        ++i;
        ++digits;
      }
      if (digits > 0 && (i == name.size() || name[i] == '.')) return block;
    }
    at += 7;
  }
  return -1;
}

struct NumberField {
  const char* key;
  double* value;
};

// Each field of `object` (at `path`) into its double: NaN when absent, an
// error naming the field when it is not a number.
absl::Status ReadNumbers(const json& object, const std::string& path,
                         std::initializer_list<NumberField> fields) {
  for (const NumberField& f : fields) {
    QUANT_ASSIGN_OR_RETURN(*f.value,
                           json_fields::GetNumberOr(object, f.key, kNaN, path));
  }
  return absl::OkStatus();
}

// row[key] when it is an object, nullptr when absent or null, an error
// naming the field otherwise.
absl::StatusOr<const json*> OptionalObject(const json& row, const char* key,
                                           const std::string& path) {
  const auto it = row.find(key);
  if (it == row.end() || it->is_null()) return nullptr;
  QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(*it, FieldPath(path, key)));
  return &*it;
}

absl::StatusOr<Layer> ReadLayer(const json& row, const std::string& path) {
  QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(row, path));
  Layer l;
  QUANT_ASSIGN_OR_RETURN(l.name, json_fields::GetString(row, "name", path));
  QUANT_ASSIGN_OR_RETURN(l.type,
                         json_fields::GetStringOr(row, "type", "", path));
  QUANT_ASSIGN_OR_RETURN(
      l.input_group, json_fields::GetStringOr(row, "input_group", "", path));
  QUANT_ASSIGN_OR_RETURN(l.packed,
                         json_fields::GetBoolOr(row, "packed", false, path));
  QUANT_ASSIGN_OR_RETURN(l.reason,
                         json_fields::GetStringOr(row, "reason", "", path));
  QUANT_ASSIGN_OR_RETURN(l.method,
                         json_fields::GetStringOr(row, "method", "", path));
  QUANT_ASSIGN_OR_RETURN(l.grid,
                         json_fields::GetStringOr(row, "grid", "", path));
  QUANT_ASSIGN_OR_RETURN(l.bits, json_fields::GetIntOr(row, "bits", 0, path));
  QUANT_ASSIGN_OR_RETURN(l.group_size,
                         json_fields::GetIntOr(row, "group_size", 0, path));
  QUANT_RETURN_IF_ERROR(ReadNumbers(
      row, path,
      {{"bits_per_weight", &l.bits_per_weight},
       {"rel_output_error_heldout", &l.error_heldout},
       {"rtn_rel_output_error_heldout", &l.rtn_error_heldout},
       {"rel_output_error_cal", &l.error_cal},
       {"rtn_rel_output_error_cal", &l.rtn_error_cal},
       {"gain_heldout", &l.gain_heldout},
       {"flattery", &l.flattery},
       {"seconds", &l.seconds},
       {"previous_rel_output_error_heldout", &l.previous_error_heldout}}));
  QUANT_ASSIGN_OR_RETURN(const json* hessian,
                         OptionalObject(row, "hessian", path));
  if (hessian != nullptr) {
    const std::string at = FieldPath(path, "hessian");
    QUANT_RETURN_IF_ERROR(
        ReadNumbers(*hessian, at,
                    {{"tokens", &l.tokens},
                     {"k", &l.inputs},
                     {"tokens_per_input", &l.tokens_per_input},
                     {"rho_rms", &l.rho_rms},
                     {"inv_sqrt_tokens", &l.inv_sqrt_tokens}}));
    QUANT_ASSIGN_OR_RETURN(
        l.dead_channels,
        json_fields::GetIntOr(*hessian, "dead_channels", 0, at));
  }
  QUANT_ASSIGN_OR_RETURN(const json* damp, OptionalObject(row, "damp", path));
  if (damp != nullptr) {
    QUANT_RETURN_IF_ERROR(
        ReadNumbers(*damp, FieldPath(path, "damp"), {{"used", &l.damp}}));
  }
  QUANT_ASSIGN_OR_RETURN(l.flags,
                         json_fields::GetStringArrayOr(row, "flags", path));
  l.block = BlockOf(l.name);
  return l;
}

struct GateCheck {
  std::string gate;
  double value = kNaN;
  double threshold = kNaN;
  bool passed = false;
};

// The previous release (gates.compare_to) on the same held-out windows.
struct Previous {
  std::string compare_to;
  std::string job_id;
  std::string manifest_sha256;
  std::string verdict;
  std::string method;
  double perplexity = kNaN;
  double ppl_ratio = kNaN;
  double mean_kl = kNaN;
  double top1_agreement = kNaN;
  double ppl_ratio_vs_previous = kNaN;
};

// A task group's (or every task's) accuracy, unquantized and packed.
struct TaskRatio {
  std::string name;
  int64_t count = 0;
  double reference_accuracy = kNaN;
  double candidate_accuracy = kNaN;
  double ratio = kNaN;
  bool reference_zero = false;
};

// A task the two models scored differently.
struct TaskFlip {
  int64_t line = 0;
  std::string id;
  std::string task;
  bool reference_correct = false;
  bool candidate_correct = false;
  std::string reference_answer;  // The predicted choice or generated text.
  std::string candidate_answer;
};

// The task gate's file (gates.tasks) scored on both models.
struct Tasks {
  std::string file;
  std::string file_sha256;
  double min_ratio = kNaN;
  TaskRatio overall;
  std::vector<TaskRatio> groups;
  std::vector<TaskFlip> flips;  // In file order.
};

// Whether a runtime would load the checkpoint (gates.runtime[i]).
struct RuntimeLoad {
  std::string runtime;
  std::string method;
  bool loads = false;
  std::vector<std::pair<std::string, int64_t>> kernels;  // Layers each.
  std::vector<std::string> problems;
};

struct Gates {
  std::string verdict;
  std::vector<RuntimeLoad> runtime;
  std::optional<Previous> previous;
  std::optional<Tasks> tasks;
  std::vector<GateCheck> checks;
  double perplexity = kNaN;
  double reference_perplexity = kNaN;
  double ppl_ratio = kNaN;
  double mean_kl = kNaN;
  double top1_agreement = kNaN;
  int64_t tokens = 0;
};

absl::StatusOr<TaskRatio> ReadTaskRatio(const json& ratio,
                                        const std::string& path) {
  QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(ratio, path));
  TaskRatio r;
  QUANT_ASSIGN_OR_RETURN(r.count,
                         json_fields::GetIntOr(ratio, "count", 0, path));
  QUANT_RETURN_IF_ERROR(
      ReadNumbers(ratio, path,
                  {{"reference_accuracy", &r.reference_accuracy},
                   {"candidate_accuracy", &r.candidate_accuracy},
                   {"ratio", &r.ratio}}));
  QUANT_ASSIGN_OR_RETURN(
      r.reference_zero,
      json_fields::GetBoolOr(ratio, "reference_zero", false, path));
  return r;
}

// What a task item answered: its predicted choice's index, or the text it
// generated.
std::string TaskAnswer(const json& item) {
  if (const auto it = item.find("generated");
      it != item.end() && it->is_string()) {
    return it->get<std::string>();
  }
  if (const auto it = item.find("predicted");
      it != item.end() && it->is_number_integer()) {
    return absl::StrCat("choice ", it->get<int64_t>());
  }
  return "";
}

// The tasks the two evaluations scored differently; none when audit.json
// holds no per-task results (a report rebuilt from GetJobReport).
absl::StatusOr<std::vector<TaskFlip>> ReadTaskFlips(const json& tasks,
                                                    const std::string& path) {
  const json& reference_items =
      MemberOrNull(MemberOrNull(tasks, "reference"), "items");
  const json& candidate_items =
      MemberOrNull(MemberOrNull(tasks, "candidate"), "items");
  std::vector<TaskFlip> flips;
  if (reference_items.is_null() || candidate_items.is_null()) return flips;
  if (!reference_items.is_array() || !candidate_items.is_array() ||
      reference_items.size() != candidate_items.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        path,
        ": reference.items and candidate.items must be arrays of the "
        "same length"));
  }
  for (size_t i = 0; i < reference_items.size(); ++i) {
    const json& r = reference_items[i];
    const json& c = candidate_items[i];
    const std::string at = IndexPath(FieldPath(path, "candidate.items"), i);
    QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(r, at));
    QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(c, at));
    QUANT_ASSIGN_OR_RETURN(const bool r_correct,
                           json_fields::GetBoolOr(r, "correct", false, at));
    QUANT_ASSIGN_OR_RETURN(const bool c_correct,
                           json_fields::GetBoolOr(c, "correct", false, at));
    if (r_correct == c_correct) continue;
    TaskFlip flip;
    flip.reference_correct = r_correct;
    flip.candidate_correct = c_correct;
    QUANT_ASSIGN_OR_RETURN(flip.line, json_fields::GetIntOr(c, "line", 0, at));
    QUANT_ASSIGN_OR_RETURN(flip.id, json_fields::GetStringOr(c, "id", "", at));
    QUANT_ASSIGN_OR_RETURN(flip.task,
                           json_fields::GetStringOr(c, "task", "", at));
    flip.reference_answer = TaskAnswer(r);
    flip.candidate_answer = TaskAnswer(c);
    flips.push_back(std::move(flip));
  }
  return flips;
}

absl::StatusOr<Tasks> ReadTasks(const json& tasks, const std::string& path) {
  QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(tasks, path));
  Tasks t;
  QUANT_ASSIGN_OR_RETURN(t.file,
                         json_fields::GetStringOr(tasks, "file", "", path));
  QUANT_ASSIGN_OR_RETURN(
      t.file_sha256, json_fields::GetStringOr(tasks, "file_sha256", "", path));
  QUANT_ASSIGN_OR_RETURN(
      t.min_ratio, json_fields::GetNumberOr(tasks, "min_ratio", kNaN, path));
  if (const json& overall = MemberOrNull(tasks, "overall");
      !overall.is_null()) {
    QUANT_ASSIGN_OR_RETURN(t.overall,
                           ReadTaskRatio(overall, FieldPath(path, "overall")));
  }
  t.overall.name = "all";
  if (const json& groups = MemberOrNull(tasks, "groups"); !groups.is_null()) {
    const std::string at = FieldPath(path, "groups");
    QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(groups, at));
    for (const auto& [name, group] : groups.items()) {
      QUANT_ASSIGN_OR_RETURN(TaskRatio r,
                             ReadTaskRatio(group, FieldPath(at, name)));
      r.name = name;
      t.groups.push_back(std::move(r));
    }
  }
  QUANT_ASSIGN_OR_RETURN(t.flips, ReadTaskFlips(tasks, path));
  return t;
}

absl::StatusOr<Gates> ReadGates(const json& audit) {
  Gates g;
  QUANT_ASSIGN_OR_RETURN(
      g.verdict, json_fields::GetString(audit, "verdict", "audit.json"));
  if (g.verdict != "PASS" && g.verdict != "FAIL") {
    return absl::InvalidArgumentError(absl::StrCat(
        "audit.json: verdict: expected \"PASS\" or \"FAIL\", got \"",
        g.verdict.substr(0, 40), "\""));
  }
  QUANT_ASSIGN_OR_RETURN(const json* gates,
                         json_fields::GetObject(audit, "gates", "audit.json"));
  const std::string path = "audit.json: gates";
  for (auto [key, value] : std::map<const char*, double*>{
           {"perplexity", &g.perplexity},
           {"reference_perplexity", &g.reference_perplexity},
           {"ppl_ratio", &g.ppl_ratio},
           {"mean_kl", &g.mean_kl},
           {"top1_agreement", &g.top1_agreement}}) {
    QUANT_ASSIGN_OR_RETURN(*value,
                           json_fields::GetNumberOr(*gates, key, kNaN, path));
  }
  QUANT_ASSIGN_OR_RETURN(g.tokens,
                         json_fields::GetIntOr(*gates, "tokens", 0, path));
  if (const auto it = gates->find("previous");
      it != gates->end() && !it->is_null()) {
    const std::string at = FieldPath(path, "previous");
    QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(*it, at));
    Previous p;
    for (auto [key, value] : std::map<const char*, std::string*>{
             {"compare_to", &p.compare_to},
             {"job_id", &p.job_id},
             {"manifest_sha256", &p.manifest_sha256},
             {"verdict", &p.verdict},
             {"method", &p.method}}) {
      QUANT_ASSIGN_OR_RETURN(*value,
                             json_fields::GetStringOr(*it, key, "", at));
    }
    for (auto [key, value] : std::map<const char*, double*>{
             {"perplexity", &p.perplexity},
             {"ppl_ratio", &p.ppl_ratio},
             {"mean_kl", &p.mean_kl},
             {"top1_agreement", &p.top1_agreement}}) {
      QUANT_ASSIGN_OR_RETURN(*value,
                             json_fields::GetNumberOr(*it, key, kNaN, at));
    }
    QUANT_ASSIGN_OR_RETURN(
        p.ppl_ratio_vs_previous,
        json_fields::GetNumberOr(*gates, "ppl_ratio_vs_previous", kNaN, path));
    g.previous = std::move(p);
  }
  if (const auto it = gates->find("tasks");
      it != gates->end() && !it->is_null()) {
    QUANT_ASSIGN_OR_RETURN(g.tasks, ReadTasks(*it, FieldPath(path, "tasks")));
  }
  if (const auto it = gates->find("runtime");
      it != gates->end() && !it->is_null()) {
    const std::string at = FieldPath(path, "runtime");
    if (!it->is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": expected an array"));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const std::string item = IndexPath(at, i);
      const json& r = (*it)[i];
      QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(r, item));
      RuntimeLoad load;
      QUANT_ASSIGN_OR_RETURN(load.runtime,
                             json_fields::GetString(r, "runtime", item));
      QUANT_ASSIGN_OR_RETURN(load.method,
                             json_fields::GetStringOr(r, "method", "", item));
      QUANT_ASSIGN_OR_RETURN(load.loads,
                             json_fields::GetBoolOr(r, "loads", false, item));
      QUANT_ASSIGN_OR_RETURN(
          load.problems, json_fields::GetStringArrayOr(r, "problems", item));
      if (const auto k = r.find("kernels"); k != r.end() && k->is_object()) {
        for (const auto& [kernel, count] : k->items()) {
          QUANT_ASSIGN_OR_RETURN(
              const int64_t n,
              json_fields::GetIntOr(*k, kernel, 0, FieldPath(item, "kernels")));
          load.kernels.emplace_back(kernel, n);
        }
      }
      g.runtime.push_back(std::move(load));
    }
  }
  const auto checks = gates->find("checks");
  if (checks != gates->end() && !checks->is_null()) {
    const std::string at = FieldPath(path, "checks");
    if (!checks->is_array()) {
      return absl::InvalidArgumentError(
          absl::StrCat(at, ": expected an array"));
    }
    for (size_t i = 0; i < checks->size(); ++i) {
      const std::string item = IndexPath(at, i);
      const json& c = (*checks)[i];
      QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(c, item));
      GateCheck check;
      QUANT_ASSIGN_OR_RETURN(check.gate,
                             json_fields::GetString(c, "gate", item));
      QUANT_ASSIGN_OR_RETURN(check.value,
                             json_fields::GetNumberOr(c, "value", kNaN, item));
      QUANT_ASSIGN_OR_RETURN(check.threshold, json_fields::GetNumberOr(
                                                  c, "threshold", kNaN, item));
      QUANT_ASSIGN_OR_RETURN(check.passed,
                             json_fields::GetBoolOr(c, "passed", false, item));
      g.checks.push_back(std::move(check));
    }
  }
  return g;
}

// The format is checked at compile time (absl::FormatSpec), so clang accepts
// it like a literal.
std::string Fmt(double v, const absl::FormatSpec<double>& format = "%.4g") {
  return std::isfinite(v) ? absl::StrFormat(format, v) : std::string("—");
}

// For data-v: the value a sort compares ("" sorts last).
std::string SortValue(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.9g", v) : std::string();
}

std::string RowId(const std::string& name) {
  return absl::StrCat("layer-", name);
}

std::string LayerLink(const Layer& l) {
  return absl::StrCat("<a href=\"#", HtmlEscape(RowId(l.name)), "\">",
                      HtmlEscape(l.name), "</a>");
}

// A fixed color per layer type (and per input group), so a type keeps its
// color across plots; others take the rest of the palette in order.
class Palette {
 public:
  std::string ColorOf(const std::string& key) {
    static const std::map<std::string, std::string> kFixed = {
        {"q_proj", "#1f77b4"},    {"k_proj", "#ff7f0e"},
        {"v_proj", "#2ca02c"},    {"o_proj", "#d62728"},
        {"gate_proj", "#9467bd"}, {"up_proj", "#8c564b"},
        {"down_proj", "#e377c2"}, {"attn_in", "#1f77b4"},
        {"attn_out", "#d62728"},  {"mlp_in", "#9467bd"},
        {"mlp_out", "#e377c2"}};
    static const char* const kOthers[] = {"#7f7f7f", "#bcbd22", "#17becf",
                                          "#393b79", "#637939", "#8c6d31"};
    auto fixed = kFixed.find(key);
    if (fixed != kFixed.end()) return fixed->second;
    auto seen = assigned_.find(key);
    if (seen != assigned_.end()) return seen->second;
    const std::string color = kOthers[assigned_.size() % 6];
    assigned_[key] = color;
    return color;
  }

 private:
  std::map<std::string, std::string> assigned_;
};

// The packed layers by a key (type or input group), in order of first
// appearance, each by block. Layers outside decoder blocks are left out.
using ByBlock = std::map<int, std::vector<const Layer*>>;
std::vector<std::pair<std::string, ByBlock>> GroupPacked(
    const std::vector<Layer>& layers, const std::string& (*key)(const Layer&)) {
  std::vector<std::pair<std::string, ByBlock>> groups;
  for (const Layer& l : layers) {
    if (!l.packed || l.block < 0) continue;
    const std::string& k = key(l);
    auto it = groups.begin();
    while (it != groups.end() && it->first != k) ++it;
    if (it == groups.end()) {
      groups.emplace_back(k, ByBlock());
      it = groups.end() - 1;
    }
    it->second[l.block].push_back(&l);
  }
  return groups;
}

const std::string& TypeOf(const Layer& l) { return l.type; }
const std::string& InputGroupOf(const Layer& l) { return l.input_group; }

// One point per block: the value of its layer, or the mean over several
// (an MoE block's experts), linked to the first.
PlotSeries Series(const std::string& key, const std::string& label,
                  const std::string& color, bool dashed, const ByBlock& blocks,
                  double Layer::*field) {
  PlotSeries s;
  s.key = key;
  s.label = label;
  s.color = color;
  s.dashed = dashed;
  for (const auto& [block, members] : blocks) {
    double sum = 0.0;
    int count = 0;
    bool marked = false;
    for (const Layer* l : members) {
      if (std::isfinite(l->*field)) {
        sum += l->*field;
        ++count;
      }
      marked = marked || l->HasFlag("rank_deficient");
    }
    PlotPoint p;
    p.x = block;
    p.y = count > 0 ? sum / count : kNaN;
    p.link = absl::StrCat("#", RowId(members.front()->name));
    p.marked = marked;
    p.tooltip = members.size() == 1
                    ? absl::StrCat(members.front()->name, ": ", Fmt(p.y))
                    : absl::StrCat("block ", block, " ", key, ": mean ",
                                   Fmt(p.y), " of ", members.size(), " layers");
    s.points.push_back(std::move(p));
  }
  return s;
}

constexpr char kStyle[] = R"css(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 24px auto; max-width: 1180px; color: #1b1b1b; padding: 0 16px; }
h1 { font-size: 22px; margin: 0 0 4px; } h2 { font-size: 18px; margin: 28px 0 8px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
h3 { font-size: 15px; margin: 14px 0 4px; }
.verdict { display: inline-block; font-weight: 700; font-size: 18px; padding: 4px 14px; border-radius: 4px; color: white; }
.verdict.pass { background: #1a7f37; } .verdict.fail { background: #cf222e; }
.sub { color: #555; }
table { border-collapse: collapse; margin: 6px 0; }
th, td { border: 1px solid #ddd; padding: 3px 7px; text-align: left; vertical-align: top; }
td.n { text-align: right; font-variant-numeric: tabular-nums; }
tr.fail td { background: #fde8e8; } tr.pass td.result { color: #1a7f37; } tr.fail td.result { color: #cf222e; font-weight: 600; }
table.sortable th { cursor: pointer; background: #f4f4f4; position: sticky; top: 0; }
table.sortable th[data-order="asc"]::after { content: " \25B2"; } table.sortable th[data-order="desc"]::after { content: " \25BC"; }
#layers { font-size: 12.5px; } #layers tr:target td { background: #fff3b0; }
tr.kept td { color: #777; }
.flag { display: inline-block; background: #eee; border-radius: 3px; padding: 0 5px; margin: 0 2px 0 0; font-size: 12px; }
.flag.rank_deficient, .flag.worse_than_rtn { background: #fde8e8; } .flag.outlier, .flag.overfit { background: #fff3cd; }
svg.plot { display: block; margin: 8px 0 16px; font-size: 11px; }
svg.plot .frame { fill: none; stroke: #999; } svg.plot .grid { stroke: #eee; }
svg.plot .title { font-size: 13px; font-weight: 600; } svg.plot .empty { fill: #888; text-anchor: middle; }
svg.plot .reference line { stroke: #555; stroke-dasharray: 2,3; } svg.plot .reference text { fill: #555; }
pre { background: #f6f8fa; padding: 8px; overflow: auto; max-height: 420px; font-size: 12px; }
code { font-size: 12.5px; }
)css";

// Sorting the table by a clicked header; numbers by data-v.
constexpr char kScript[] = R"js(
document.querySelectorAll('table.sortable').forEach(function (table) {
  table.querySelectorAll('th').forEach(function (th, column) {
    th.addEventListener('click', function () {
      var ascending = th.getAttribute('data-order') !== 'asc';
      table.querySelectorAll('th').forEach(function (o) { o.removeAttribute('data-order'); });
      th.setAttribute('data-order', ascending ? 'asc' : 'desc');
      var numeric = th.getAttribute('data-type') === 'number';
      var body = table.tBodies[0];
      var rows = Array.prototype.slice.call(body.rows);
      function key(row) {
        var cell = row.cells[column];
        var v = cell.getAttribute('data-v');
        return v === null ? cell.textContent : v;
      }
      rows.sort(function (a, b) {
        var x = key(a), y = key(b);
        if (numeric) {
          x = x === '' ? NaN : parseFloat(x); y = y === '' ? NaN : parseFloat(y);
          if (isNaN(x) || isNaN(y)) return isNaN(x) - isNaN(y);
          return ascending ? x - y : y - x;
        }
        return ascending ? x.localeCompare(y) : y.localeCompare(x);
      });
      rows.forEach(function (row) { body.appendChild(row); });
    });
  });
});
)js";

// A scalar field of a manifest object as text, "—" when absent.
std::string ScalarText(const json& object, const char* key) {
  if (!object.is_object()) return "—";
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return "—";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_number_float()) return Fmt(it->get<double>(), "%.6g");
  if (it->is_primitive()) return it->dump();
  return "—";
}

void AppendHeader(std::string* html, const json& manifest, const Gates& g) {
  const json source = MemberOrNull(manifest, "source");
  const std::string model = StringOrEmpty(source, "path");
  const json job = MemberOrNull(manifest, "job");
  const std::string lower = g.verdict == "PASS" ? "pass" : "fail";
  absl::StrAppend(
      html, "<header>\n<h1>Quantization report</h1>\n<p class=\"sub\">",
      model.empty() ? std::string("checkpoint") : HtmlEscape(model),
      StringOrEmpty(job, "id").empty()
          ? std::string()
          : absl::StrCat(" · job <code>", HtmlEscape(StringOrEmpty(job, "id")),
                         "</code>"),
      " · ", HtmlEscape(StringOrEmpty(manifest, "tool")), "</p>\n",
      "<p>Verdict: <span id=\"verdict\" class=\"verdict ", lower,
      "\" data-verdict=\"", g.verdict, "\">", g.verdict, "</span> ",
      g.verdict == "PASS"
          ? "every release gate passed: the checkpoint may ship."
          : "a release gate failed: the checkpoint must not ship.",
      "</p>\n</header>\n");
}

void AppendGates(std::string* html, const Gates& g) {
  absl::StrAppend(html,
                  "<section id=\"gates-section\">\n<h2>Release gates</h2>\n"
                  "<table id=\"gates\"><thead><tr><th>gate</th><th>value</th>"
                  "<th>threshold</th><th>result</th></tr></thead><tbody>\n");
  for (const GateCheck& c : g.checks) {
    absl::StrAppend(html, "<tr class=\"", c.passed ? "pass" : "fail",
                    "\" data-gate=\"", HtmlEscape(c.gate), "\"><td>",
                    HtmlEscape(c.gate), "</td><td class=\"n\">",
                    Fmt(c.value, "%.5g"), "</td><td class=\"n\">",
                    Fmt(c.threshold, "%.5g"), "</td><td class=\"result\">",
                    c.passed ? "pass" : "FAIL", "</td></tr>\n");
  }
  absl::StrAppend(
      html, "</tbody></table>\n<p class=\"sub\">Held-out perplexity ",
      Fmt(g.perplexity, "%.5g"), " quantized against ",
      Fmt(g.reference_perplexity, "%.5g"), " unquantized (ratio ",
      Fmt(g.ppl_ratio, "%.5g"), "), mean KL ", Fmt(g.mean_kl, "%.5g"),
      ", top-1 agreement ", Fmt(g.top1_agreement, "%.5g"), ", over ", g.tokens,
      " held-out tokens, evaluated on the packed checkpoint as read back "
      "from disk.</p>\n</section>\n");
}

void AppendSummary(std::string* html, const std::vector<Layer>& layers) {
  int packed = 0;
  int better = 0;
  std::vector<double> gains;
  for (const Layer& l : layers) {
    if (!l.packed) continue;
    ++packed;
    if (std::isfinite(l.gain_heldout)) {
      gains.push_back(l.gain_heldout);
      if (l.gain_heldout > 1.0) ++better;
    }
  }
  std::sort(gains.begin(), gains.end());
  const double median =
      gains.empty() ? kNaN
      : gains.size() % 2
          ? gains[gains.size() / 2]
          : 0.5 * (gains[gains.size() / 2 - 1] + gains[gains.size() / 2]);
  absl::StrAppend(
      html, "<p id=\"summary\">", layers.size(), " layers: ", packed,
      " quantized, ", layers.size() - packed, " kept unquantized. ", better,
      " of ", packed,
      " have a lower held-out output error than round-to-nearest; the median "
      "gain over RTN is ",
      Fmt(median, "%.3f"), ".</p>\n");
}

// A plot of one value by decoder block.
LinePlotOptions ByDepthPlot(const char* id, const char* title,
                            const char* y_label, bool log_y = false) {
  LinePlotOptions options;
  options.id = id;
  options.title = title;
  options.x_label = "decoder block";
  options.y_label = y_label;
  options.log_y = log_y;
  return options;
}

void AppendErrorPlots(std::string* html, const std::vector<Layer>& layers,
                      Palette* palette) {
  const auto by_type = GroupPacked(layers, TypeOf);
  std::vector<PlotSeries> errors;
  std::vector<PlotSeries> gains;
  std::vector<PlotSeries> flattery;
  for (const auto& [type, blocks] : by_type) {
    const std::string color = palette->ColorOf(type);
    const std::string method = blocks.begin()->second.front()->method;
    errors.push_back(Series(type + "/method", type + " " + method, color, false,
                            blocks, &Layer::error_heldout));
    errors.push_back(Series(type + "/rtn", type + " RTN", color, true, blocks,
                            &Layer::rtn_error_heldout));
    gains.push_back(
        Series(type, type, color, false, blocks, &Layer::gain_heldout));
    flattery.push_back(
        Series(type, type, color, false, blocks, &Layer::flattery));
  }
  absl::StrAppend(
      html,
      "<section id=\"error-section\">\n<h2>Held-out output error by "
      "depth</h2>\n"
      "<p class=\"sub\">Relative output error ‖X(W−Q)ᵀ‖/‖XWᵀ‖ of each layer "
      "on the held-out split, one line per layer type: the method solid, "
      "round-to-nearest on the same grid dashed. A healthy checkpoint shows "
      "a smooth profile per type; a spike is a layer to look at. Points ringed "
      "in red are rank-deficient (fewer calibration tokens than inputs); a "
      "point links to its row.</p>\n");
  absl::StrAppend(
      html,
      RenderLinePlot(ByDepthPlot("rel_error", "Held-out relative output error",
                                 "relative output error"),
                     errors),
      RenderLinePlot(ByDepthPlot("gain", "Gain over RTN (held-out)",
                                 "RTN error / method error"),
                     gains, {{1.0, "RTN"}}));
  absl::StrAppend(
      html,
      "<p class=\"sub\">Flattery above 1 means the calibration "
      "split made the method look better than held-out text "
      "does: the layer fitted its calibration set.</p>\n",
      RenderLinePlot(
          ByDepthPlot("flattery", "Flattery (calibration gain / held-out gain)",
                      "flattery"),
          flattery, {{1.0, "no flattery"}}),
      "</section>\n");
}

// This checkpoint and the previous release side by side, both measured
// against the unquantized model on this job's held-out windows.
void AppendPrevious(std::string* html, const Gates& g,
                    const std::vector<Layer>& layers, Palette* palette) {
  if (!g.previous.has_value()) return;
  const Previous& p = *g.previous;
  const auto row = [&](const char* id, const char* name, double ours,
                       double theirs) {
    absl::StrAppend(html, "<tr data-metric=\"", id, "\"><td>", name,
                    "</td><td class=\"n\">", Fmt(ours, "%.5g"),
                    "</td><td class=\"n\">", Fmt(theirs, "%.5g"),
                    "</td></tr>\n");
  };
  std::string source =
      absl::StrCat("<code>", HtmlEscape(p.compare_to), "</code>");
  if (!p.job_id.empty() && p.job_id != p.compare_to) {
    absl::StrAppend(&source, " (job ", HtmlEscape(p.job_id), ")");
  }
  std::string facts;
  if (!p.method.empty()) {
    absl::StrAppend(&facts, " Its method: ", HtmlEscape(p.method), ".");
  }
  if (!p.verdict.empty()) {
    absl::StrAppend(&facts, " Its own verdict: ", HtmlEscape(p.verdict), ".");
  }
  absl::StrAppend(
      &facts,
      p.manifest_sha256.empty()
          ? std::string(" It has no manifest.json: its files were not checked.")
          : absl::StrCat(" Its manifest.json (sha256 <code>",
                         HtmlEscape(p.manifest_sha256),
                         "</code>) verified every file."));
  absl::StrAppend(
      html,
      "<section id=\"previous-section\">\n<h2>Against the previous "
      "release</h2>\n<p class=\"sub\">The previous release ",
      source,
      ", evaluated on this job's held-out windows with the same "
      "arithmetic.",
      facts,
      " Held-out perplexity this checkpoint / the previous release: <b "
      "id=\"ppl-ratio-vs-previous\">",
      Fmt(p.ppl_ratio_vs_previous, "%.5g"),
      "</b>.</p>\n<table id=\"previous\"><thead><tr><th>held-out "
      "metric</th><th>this checkpoint</th><th>previous "
      "release</th></tr></thead><tbody>\n");
  row("perplexity", "perplexity", g.perplexity, p.perplexity);
  row("ppl_ratio", "perplexity / unquantized", g.ppl_ratio, p.ppl_ratio);
  row("mean_kl", "mean KL to unquantized", g.mean_kl, p.mean_kl);
  row("top1_agreement", "top-1 agreement with unquantized", g.top1_agreement,
      p.top1_agreement);
  absl::StrAppend(html, "</tbody></table>\n");
  // Layer by layer, on this job's held-out inputs to each layer.
  std::vector<PlotSeries> errors;
  for (const auto& [type, blocks] : GroupPacked(layers, TypeOf)) {
    PlotSeries theirs = Series(type + "/previous", type + " previous", "", true,
                               blocks, &Layer::previous_error_heldout);
    bool any = false;
    for (const PlotPoint& point : theirs.points) {
      any = any || std::isfinite(point.y);
    }
    if (!any) continue;
    const std::string color = palette->ColorOf(type);
    theirs.color = color;
    errors.push_back(Series(type + "/this", type + " this", color, false,
                            blocks, &Layer::error_heldout));
    errors.push_back(std::move(theirs));
  }
  if (!errors.empty()) {
    absl::StrAppend(
        html,
        "<p class=\"sub\">Held-out relative output error of each layer, "
        "this checkpoint solid and the previous release dashed, both on the "
        "inputs this job's layers saw. Layers that read a norm are compared "
        "in the source's units (an AWQ release's folded scales undone); "
        "o_proj and down_proj of an AWQ release are left out (their scales "
        "live in v_proj and up_proj).</p>\n",
        RenderLinePlot(ByDepthPlot("rel_error_vs_previous",
                                   "Held-out relative output error: this "
                                   "checkpoint and the previous release",
                                   "relative output error"),
                       errors));
  }
  absl::StrAppend(html, "</section>\n");
}

void AppendTasks(std::string* html, const Gates& g) {
  if (!g.tasks.has_value()) return;
  const Tasks& t = *g.tasks;
  constexpr size_t kMaxFlipsShown = 100;
  absl::StrAppend(
      html,
      "<section id=\"tasks-section\">\n<h2>Tasks</h2>\n<p class=\"sub\">The "
      "task file <code>",
      HtmlEscape(t.file), "</code>",
      t.file_sha256.empty()
          ? std::string()
          : absl::StrCat(" (sha256 <code>", HtmlEscape(t.file_sha256),
                         "</code>)"),
      ", scored on the unquantized and the packed model: multiple choice by "
      "the log-likelihood of each choice, generation by greedy exact match. "
      "Ratio: packed accuracy over unquantized (1 where the unquantized "
      "model scored 0). The gate min_task_accuracy_ratio reads the lowest, "
      "<b id=\"task-min-ratio\">",
      Fmt(t.min_ratio, "%.4g"),
      "</b>.</p>\n<table id=\"tasks\"><thead><tr><th>task "
      "group</th><th>tasks</th><th>unquantized</th><th>packed</th>"
      "<th>ratio</th></tr></thead><tbody>\n");
  std::vector<const TaskRatio*> rows;
  for (const TaskRatio& r : t.groups) rows.push_back(&r);
  rows.push_back(&t.overall);
  for (const TaskRatio* r : rows) {
    absl::StrAppend(
        html, "<tr data-task=\"", HtmlEscape(r->name), "\"><td>",
        r == &t.overall ? "<b>all</b>" : HtmlEscape(r->name), "</td><td>",
        r->count, "</td><td>", Fmt(r->reference_accuracy, "%.4f"), "</td><td>",
        Fmt(r->candidate_accuracy, "%.4f"), "</td><td>", Fmt(r->ratio, "%.4f"),
        r->reference_zero ? " (no bound)" : "", "</td></tr>\n");
  }
  absl::StrAppend(html, "</tbody></table>\n");
  if (!t.flips.empty()) {
    absl::StrAppend(
        html, "<p class=\"sub\">", t.flips.size(),
        " task(s) scored differently by the two models",
        t.flips.size() > kMaxFlipsShown
            ? absl::StrCat(" (the first ", kMaxFlipsShown, " shown)")
            : std::string(),
        ":</p>\n<table id=\"task-flips\"><thead><tr><th>line</th><th>id"
        "</th><th>group</th><th>unquantized</th><th>packed</th></tr>"
        "</thead><tbody>\n");
    for (size_t i = 0; i < t.flips.size() && i < kMaxFlipsShown; ++i) {
      const TaskFlip& f = t.flips[i];
      auto answer = [](bool correct, const std::string& text) {
        return absl::StrCat(correct ? "right" : "wrong",
                            text.empty() ? "" : ": ", HtmlEscape(text));
      };
      absl::StrAppend(
          html, "<tr><td>", f.line, "</td><td>", HtmlEscape(f.id), "</td><td>",
          HtmlEscape(f.task), "</td><td>",
          answer(f.reference_correct, f.reference_answer), "</td><td>",
          answer(f.candidate_correct, f.candidate_answer), "</td></tr>\n");
    }
    absl::StrAppend(html, "</tbody></table>\n");
  }
  absl::StrAppend(html, "</section>\n");
}

void AppendRuntime(std::string* html, const Gates& g) {
  if (g.runtime.empty()) return;
  constexpr size_t kMaxProblemsShown = 50;
  absl::StrAppend(
      html,
      "<section id=\"runtime-section\">\n<h2>Runtimes</h2>\n<p "
      "class=\"sub\">Whether each runtime would load this checkpoint, "
      "predicted from its config.json and tensor headers by vLLM's and "
      "transformers' rules (docs/RUNTIME_CONFORMANCE.md; <code>quantctl "
      "check</code> runs the same), and the kernel each layer would run on "
      "(vLLM fuses q/k/v and gate/up).</p>\n<table id=\"runtimes\"><thead>"
      "<tr><th>runtime</th><th>method</th><th>loads</th><th>layers per "
      "kernel</th></tr></thead><tbody>\n");
  for (const RuntimeLoad& r : g.runtime) {
    std::vector<std::string> kernels;
    for (const auto& [kernel, count] : r.kernels) {
      kernels.push_back(absl::StrCat(HtmlEscape(kernel), " ", count));
    }
    absl::StrAppend(html, "<tr", r.loads ? "" : " class=\"fail\"",
                    " data-runtime=\"", HtmlEscape(r.runtime), "\"><td>",
                    HtmlEscape(r.runtime), "</td><td>", HtmlEscape(r.method),
                    "</td><td class=\"result\">", r.loads ? "yes" : "no",
                    "</td><td>", absl::StrJoin(kernels, ", "), "</td></tr>\n");
  }
  absl::StrAppend(html, "</tbody></table>\n");
  for (const RuntimeLoad& r : g.runtime) {
    if (r.problems.empty()) continue;
    absl::StrAppend(
        html, "<p class=\"sub\">Why ", HtmlEscape(r.runtime),
        " would not load it (", r.problems.size(), " problem(s)",
        r.problems.size() > kMaxProblemsShown
            ? absl::StrCat(", the first ", kMaxProblemsShown, " shown")
            : std::string(),
        "):</p>\n<ul class=\"runtime-problems\">\n");
    for (size_t i = 0; i < r.problems.size() && i < kMaxProblemsShown; ++i) {
      absl::StrAppend(html, "<li>", HtmlEscape(r.problems[i]), "</li>\n");
    }
    absl::StrAppend(html, "</ul>\n");
  }
  absl::StrAppend(html, "</section>\n");
}

void AppendHessian(std::string* html, const std::vector<Layer>& layers,
                   Palette* palette) {
  const auto by_group = GroupPacked(layers, InputGroupOf);
  std::vector<PlotSeries> ratio;
  std::vector<PlotSeries> rho;
  for (const auto& [group, blocks] : by_group) {
    const std::string color = palette->ColorOf(group);
    ratio.push_back(
        Series(group, group, color, false, blocks, &Layer::tokens_per_input));
    rho.push_back(Series(group + "/rho_rms", group + " rho_rms", color, false,
                         blocks, &Layer::rho_rms));
    rho.push_back(Series(group + "/inv_sqrt_tokens", group + " 1/√T", color,
                         true, blocks, &Layer::inv_sqrt_tokens));
  }
  absl::StrAppend(
      html,
      "<section id=\"hessian-section\">\n<h2>Hessian diagnostics</h2>\n"
      "<p class=\"sub\">Calibration tokens per input channel (T/K), one line "
      "per input the layers share. Below 1 the Hessian is rank-deficient and "
      "damping, not data, decides the result. rho_rms is the rms "
      "off-diagonal correlation of H; near 1/√T it is mostly sampling "
      "noise (phantom coupling a finite calibration set invents).</p>\n");
  absl::StrAppend(
      html,
      RenderLinePlot(
          ByDepthPlot("tokens_per_input",
                      "Calibration tokens per input channel (T/K)", "T/K",
                      /*log_y=*/true),
          ratio, {{1.0, "T = K"}}),
      RenderLinePlot(
          ByDepthPlot("rho_rms", "rho_rms against 1/√T", "correlation"), rho));

  std::vector<const Layer*> deficient;
  std::vector<const Layer*> dead;
  for (const Layer& l : layers) {
    if (l.HasFlag("rank_deficient")) deficient.push_back(&l);
    if (l.dead_channels > 0) dead.push_back(&l);
  }
  absl::StrAppend(html,
                  "<h3>Rank-deficient layers (T &lt; K): ", deficient.size(),
                  "</h3>\n<ul id=\"rank-deficient\">\n");
  for (const Layer* l : deficient) {
    absl::StrAppend(html, "<li>", LayerLink(*l), ": T = ", Fmt(l->tokens),
                    ", K = ", Fmt(l->inputs), "</li>\n");
  }
  absl::StrAppend(html,
                  "</ul>\n<h3>Layers with dead input channels: ", dead.size(),
                  "</h3>\n<ul id=\"dead-channels\">\n");
  for (const Layer* l : dead) {
    absl::StrAppend(html, "<li>", LayerLink(*l), ": ", l->dead_channels, " of ",
                    Fmt(l->inputs), " inputs never active</li>\n");
  }
  absl::StrAppend(html, "</ul>\n</section>\n");
}

void AppendFlags(std::string* html, const std::vector<Layer>& layers) {
  // The audit's flags in order of concern, then any other.
  std::vector<std::string> order = {"worse_than_rtn", "outlier", "overfit",
                                    "rank_deficient"};
  for (const Layer& l : layers) {
    for (const std::string& f : l.flags) {
      if (std::find(order.begin(), order.end(), f) == order.end()) {
        order.push_back(f);
      }
    }
  }
  absl::StrAppend(html, "<section id=\"flags\">\n<h2>Flagged layers</h2>\n");
  int listed = 0;
  for (const std::string& flag : order) {
    std::vector<const Layer*> flagged;
    for (const Layer& l : layers) {
      if (l.HasFlag(flag)) flagged.push_back(&l);
    }
    if (flagged.empty()) continue;
    ++listed;
    absl::StrAppend(html, "<h3><span class=\"flag ", HtmlEscape(flag), "\">",
                    HtmlEscape(flag), "</span> ", flagged.size(),
                    "</h3>\n<ul data-flag=\"", HtmlEscape(flag), "\">\n");
    for (const Layer* l : flagged) {
      absl::StrAppend(html, "<li>", LayerLink(*l), ": held-out error ",
                      Fmt(l->error_heldout), " (RTN ",
                      Fmt(l->rtn_error_heldout), "), gain ",
                      Fmt(l->gain_heldout, "%.3f"), ", flattery ",
                      Fmt(l->flattery, "%.3f"), "</li>\n");
    }
    absl::StrAppend(html, "</ul>\n");
  }
  if (listed == 0) absl::StrAppend(html, "<p>No layer is flagged.</p>\n");
  absl::StrAppend(html, "</section>\n");

  absl::StrAppend(html, "<section id=\"kept\">\n<h2>Kept unquantized</h2>\n");
  std::string kept;
  for (const Layer& l : layers) {
    if (l.packed) continue;
    absl::StrAppend(&kept, "<li>", LayerLink(l), ": ", HtmlEscape(l.reason),
                    "</li>\n");
  }
  absl::StrAppend(html,
                  kept.empty()
                      ? std::string("<p>Every layer was quantized.</p>\n")
                      : absl::StrCat("<ul>\n", kept, "</ul>\n"),
                  "</section>\n");
}

void AppendProvenance(std::string* html, const json& manifest) {
  const json calibration = MemberOrNull(manifest, "calibration");
  const json source = MemberOrNull(manifest, "source");
  const json kernels = MemberOrNull(manifest, "kernels");
  const json output = MemberOrNull(manifest, "output");
  absl::StrAppend(
      html,
      "<section id=\"provenance\">\n<h2>Recipe, calibration and provenance"
      "</h2>\n<table id=\"calibration\"><tbody>\n");
  const std::vector<std::pair<const char*, const char*>> rows = {
      {"sha256", "calibration set sha256"},
      {"calibration_tokens", "calibration tokens"},
      {"calibration_windows", "calibration windows"},
      {"heldout_tokens", "held-out tokens"},
      {"heldout_windows", "held-out windows"},
      {"seq_len", "window length"},
      {"packing", "packing"},
      {"seed", "split seed"},
      {"heldout_fraction", "held-out fraction"}};
  for (const auto& [key, label] : rows) {
    absl::StrAppend(html, "<tr><th>", label, "</th><td><code>",
                    HtmlEscape(ScalarText(calibration, key)),
                    "</code></td></tr>\n");
  }
  absl::StrAppend(html, "<tr><th>source checkpoint</th><td><code>",
                  HtmlEscape(StringOrEmpty(source, "path")),
                  "</code></td></tr>\n",
                  "<tr><th>source fingerprint</th><td><code>",
                  HtmlEscape(StringOrEmpty(source, "fingerprint")),
                  "</code></td></tr>\n", "<tr><th>kernels</th><td>",
                  HtmlEscape(StringOrEmpty(kernels, "description")),
                  "</td></tr>\n<tr><th>tool</th><td>",
                  HtmlEscape(StringOrEmpty(manifest, "tool")),
                  "</td></tr>\n<tr><th>output format</th><td>",
                  HtmlEscape(StringOrEmpty(output, "format")), "</td></tr>\n");
  const json job = MemberOrNull(manifest, "job");
  if (!StringOrEmpty(job, "id").empty()) {
    absl::StrAppend(html, "<tr><th>job</th><td><code>",
                    HtmlEscape(StringOrEmpty(job, "id")),
                    "</code> (recipe sha256 <code>",
                    HtmlEscape(StringOrEmpty(job, "recipe_sha256")),
                    "</code>)</td></tr>\n");
  }
  absl::StrAppend(html, "</tbody></table>\n");

  const auto file_table = [&](const char* id, const json& files) {
    absl::StrAppend(html, "<table id=\"", id,
                    "\"><thead><tr><th>file</th><th>bytes</th><th>sha256</th>"
                    "</tr></thead><tbody>\n");
    if (files.is_array()) {
      for (const json& f : files) {
        const std::string name = StringOrEmpty(f, "name");
        // The page does not list itself: it is rendered before its own
        // hash exists, and re-rendering from the final manifest must give
        // the same bytes.
        if (name == kReportFileName) continue;
        absl::StrAppend(html, "<tr><td><code>", HtmlEscape(name),
                        "</code></td><td class=\"n\">",
                        HtmlEscape(ScalarText(f, "bytes")), "</td><td><code>",
                        HtmlEscape(StringOrEmpty(f, "sha256")),
                        "</code></td></tr>\n");
      }
    }
    absl::StrAppend(html, "</tbody></table>\n");
  };
  absl::StrAppend(html, "<h3>Source files</h3>\n");
  file_table("source-files", MemberOrNull(source, "files"));
  absl::StrAppend(html, "<h3>Packed files</h3>\n");
  file_table("output-files", MemberOrNull(output, "files"));
  absl::StrAppend(html, "<h3>Recipe</h3>\n<pre id=\"recipe\">",
                  HtmlEscape(MemberOrNull(manifest, "recipe").dump(2)),
                  "</pre>\n</section>\n");
}

void AppendTable(std::string* html, const std::vector<Layer>& layers) {
  struct Column {
    const char* title;
    bool number;
  };
  const Column columns[] = {{"#", true},         {"layer", false},
                            {"type", false},     {"block", true},
                            {"method", false},   {"bits", true},
                            {"group", true},     {"bits/weight", true},
                            {"RTN err", true},   {"err", true},
                            {"gain", true},      {"flattery", true},
                            {"err (cal)", true}, {"T/K", true},
                            {"rho_rms", true},   {"1/√T", true},
                            {"dead", true},      {"damp", true},
                            {"seconds", true},   {"flags / reason", false}};
  absl::StrAppend(
      html,
      "<section id=\"table-section\">\n<h2>Every layer</h2>\n<p class=\"sub\">"
      "Errors are held-out relative output errors unless marked (cal). "
      "Click a header to sort.</p>\n<table id=\"layers\" class=\"sortable\">"
      "<thead><tr>");
  for (const Column& c : columns) {
    absl::StrAppend(html, "<th data-type=\"", c.number ? "number" : "text",
                    "\">", HtmlEscape(c.title), "</th>");
  }
  absl::StrAppend(html, "</tr></thead>\n<tbody>\n");
  const auto num = [](double v,
                      const absl::FormatSpec<double>& format = "%.4g") {
    return absl::StrCat("<td class=\"n\" data-v=\"", SortValue(v), "\">",
                        Fmt(v, format), "</td>");
  };
  for (size_t i = 0; i < layers.size(); ++i) {
    const Layer& l = layers[i];
    std::string flags;
    if (!l.packed) {
      flags = HtmlEscape(l.reason);
    } else {
      for (const std::string& f : l.flags) {
        absl::StrAppend(&flags, "<span class=\"flag ", HtmlEscape(f), "\">",
                        HtmlEscape(f), "</span>");
      }
    }
    absl::StrAppend(
        html, "<tr id=\"", HtmlEscape(RowId(l.name)), "\" class=\"",
        l.packed ? "packed" : "kept", "\" data-layer=\"", HtmlEscape(l.name),
        "\">", num(i, "%.0f"), "<td>", HtmlEscape(l.name), "</td><td>",
        HtmlEscape(l.type), "</td>", num(l.block >= 0 ? l.block : kNaN, "%.0f"),
        "<td>", l.packed ? HtmlEscape(l.method) : std::string("kept"), "</td>",
        num(l.packed ? static_cast<double>(l.bits) : kNaN, "%.0f"),
        num(l.packed ? static_cast<double>(l.group_size) : kNaN, "%.0f"),
        num(l.bits_per_weight, "%.3f"), num(l.rtn_error_heldout),
        num(l.error_heldout), num(l.gain_heldout, "%.3f"),
        num(l.flattery, "%.3f"), num(l.error_cal),
        num(l.tokens_per_input, "%.3g"), num(l.rho_rms), num(l.inv_sqrt_tokens),
        num(l.packed ? static_cast<double>(l.dead_channels) : kNaN, "%.0f"),
        num(l.damp), num(l.seconds, "%.3f"), "<td>", flags, "</td></tr>\n");
  }
  absl::StrAppend(html, "</tbody></table>\n</section>\n");
}

}  // namespace

namespace {

// audit.json "mixed_precision" (the selection the recipe asked for): the
// budget, and per setting group its choice and every candidate's cost,
// error and predicted KL, so a reader sees why each group got its bits.
absl::Status AppendMixedPrecision(std::string* html, const json& audit) {
  const auto m = audit.find("mixed_precision");
  if (m == audit.end() || m->is_null()) return absl::OkStatus();
  const std::string at = "audit.json: mixed_precision";
  QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(*m, at));
  double budget = kNaN, chosen = kNaN, predicted = kNaN;
  QUANT_RETURN_IF_ERROR(ReadNumbers(*m, at,
                                    {{"budget_average_bits", &budget},
                                     {"chosen_average_bits", &chosen},
                                     {"predicted_kl", &predicted}}));
  QUANT_ASSIGN_OR_RETURN(const int64_t under,
                         json_fields::GetInt(*m, "under_budget_bits", at));
  QUANT_ASSIGN_OR_RETURN(const int64_t windows,
                         json_fields::GetInt(*m, "probe_windows", at));
  QUANT_ASSIGN_OR_RETURN(const json* groups,
                         json_fields::GetArray(*m, "groups", at));
  absl::StrAppend(
      html,
      "<section id=\"mixed-precision-section\">\n<h2>Mixed precision</h2>\n"
      "<p class=\"sub\">Each group of layers a runtime fuses got the setting "
      "with the least predicted KL the budget allowed: ",
      Fmt(chosen, "%.4f"), " bits per weight stored for a budget of ",
      Fmt(budget, "%g"), " (", under, " bits under it), predicted KL ",
      Fmt(predicted, "%.5f"),
      ". A candidate's error is its held-out output error measured on the "
      "unquantized model's activations; its predicted KL is that error times "
      "the group's sensitivity, the held-out KL per unit of error measured "
      "by quantizing that group alone (",
      windows,
      " held-out windows; docs/MIXED_PRECISION.md).</p>\n"
      "<table id=\"mixed-precision\"><thead><tr><th>block</th><th>group</th>"
      "<th>chosen</th><th>sensitivity</th><th>candidates: setting, bits "
      "stored, error, predicted KL</th></tr></thead><tbody>\n");
  for (size_t i = 0; i < groups->size(); ++i) {
    const std::string item = IndexPath(at + ".groups", i);
    const json& g = (*groups)[i];
    QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(g, item));
    QUANT_ASSIGN_OR_RETURN(const int64_t block,
                           json_fields::GetInt(g, "block", item));
    QUANT_ASSIGN_OR_RETURN(const std::string group,
                           json_fields::GetString(g, "group", item));
    QUANT_ASSIGN_OR_RETURN(
        const std::string setting,
        json_fields::GetStringOr(g, "chosen_setting", "-", item));
    QUANT_ASSIGN_OR_RETURN(const int64_t chosen_index,
                           json_fields::GetInt(g, "chosen", item));
    double sensitivity = kNaN;
    QUANT_RETURN_IF_ERROR(
        ReadNumbers(g, item, {{"sensitivity", &sensitivity}}));
    QUANT_ASSIGN_OR_RETURN(const json* candidates,
                           json_fields::GetArray(g, "candidates", item));
    std::vector<std::string> cells;
    for (size_t c = 0; c < candidates->size(); ++c) {
      const std::string citem = IndexPath(item + ".candidates", c);
      const json& cand = (*candidates)[c];
      QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(cand, citem));
      QUANT_ASSIGN_OR_RETURN(const int64_t bits,
                             json_fields::GetInt(cand, "bits", citem));
      QUANT_ASSIGN_OR_RETURN(const int64_t group_size,
                             json_fields::GetInt(cand, "group_size", citem));
      QUANT_ASSIGN_OR_RETURN(
          const bool keep,
          json_fields::GetBoolOr(cand, "keep_float", false, citem));
      QUANT_ASSIGN_OR_RETURN(const int64_t cost,
                             json_fields::GetInt(cand, "cost_bits", citem));
      double error = kNaN, weighted = kNaN;
      QUANT_RETURN_IF_ERROR(ReadNumbers(
          cand, citem, {{"error", &error}, {"weighted_error", &weighted}}));
      const std::string name =
          keep ? std::string("kept")
               : absl::StrCat(bits, "-bit ",
                              group_size == 0 ? std::string("per-row")
                                              : absl::StrCat("g", group_size));
      const bool is_chosen = static_cast<int64_t>(c) == chosen_index;
      cells.push_back(absl::StrCat(
          is_chosen ? "<b>" : "", name, ", ", cost, ", ", Fmt(error, "%.3g"),
          ", ", Fmt(weighted, "%.3g"), is_chosen ? "</b>" : ""));
    }
    absl::StrAppend(html, "<tr><td>", block, "</td><td>", HtmlEscape(group),
                    "</td><td>", HtmlEscape(setting), "</td><td>",
                    Fmt(sensitivity, "%.3g"), "</td><td>",
                    absl::StrJoin(cells, "; "), "</td></tr>\n");
  }
  absl::StrAppend(html, "</tbody></table>\n</section>\n");
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> RenderReportHtml(const json& audit,
                                             const json& manifest) {
  QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(audit, "audit.json"));
  QUANT_RETURN_IF_ERROR(json_fields::ExpectObject(manifest, "manifest.json"));
  QUANT_ASSIGN_OR_RETURN(Gates gates, ReadGates(audit));
  QUANT_ASSIGN_OR_RETURN(const json* rows,
                         json_fields::GetArray(audit, "layers", "audit.json"));
  std::vector<Layer> layers;
  layers.reserve(rows->size());
  for (size_t i = 0; i < rows->size(); ++i) {
    QUANT_ASSIGN_OR_RETURN(
        Layer layer, ReadLayer((*rows)[i], IndexPath("audit.json: layers", i)));
    layers.push_back(std::move(layer));
  }

  const std::string model =
      StringOrEmpty(MemberOrNull(manifest, "source"), "path");
  std::string html = absl::StrCat(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, "
      "initial-scale=1\">\n"
      "<title>Quantization report: ",
      HtmlEscape(model.empty() ? std::string("checkpoint") : model), " (",
      gates.verdict, ")</title>\n<style>", kStyle,
      "</style>\n</head>\n<body>\n");
  Palette palette;
  AppendHeader(&html, manifest, gates);
  AppendGates(&html, gates);
  AppendPrevious(&html, gates, layers, &palette);
  AppendTasks(&html, gates);
  AppendRuntime(&html, gates);
  QUANT_RETURN_IF_ERROR(AppendMixedPrecision(&html, audit));
  AppendSummary(&html, layers);
  AppendErrorPlots(&html, layers, &palette);
  AppendHessian(&html, layers, &palette);
  AppendFlags(&html, layers);
  AppendProvenance(&html, manifest);
  AppendTable(&html, layers);
  absl::StrAppend(&html, "<script>", kScript, "</script>\n</body>\n</html>\n");
  return html;
}

}  // namespace quant::report
