// report.html from audit.json and manifest.json: what the page shows, that
// untrusted names are escaped, that the same files give the same bytes, and
// that a document missing what the page needs is an error naming the field.
#include "core/report/report_html.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/report/html_escape.h"
#include "core/report/svg_line_plot.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace quant::report {
namespace {

using ::nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr const char* kTypes[] = {"q_proj",    "k_proj",  "v_proj",   "o_proj",
                                  "gate_proj", "up_proj", "down_proj"};

std::string GroupOf(const std::string& type) {
  if (type == "o_proj") return "attn_out";
  if (type == "down_proj") return "mlp_out";
  if (type == "gate_proj" || type == "up_proj") return "mlp_in";
  return "attn_in";
}

json PackedLayer(const std::string& name, const std::string& type, double error,
                 std::vector<std::string> flags = {}) {
  return {{"name", name},
          {"type", type},
          {"input_group", GroupOf(type)},
          {"packed", true},
          {"method", "gptq"},
          {"bits", 4},
          {"group_size", 128},
          {"grid", "sym"},
          {"bits_per_weight", 4.25},
          {"rel_output_error_heldout", error},
          {"rtn_rel_output_error_heldout", error * 1.5},
          {"rel_output_error_cal", error * 0.99},
          {"rtn_rel_output_error_cal", error * 1.49},
          {"gain_heldout", 1.5},
          {"flattery", 1.003},
          {"hessian",
           {{"tokens", 4096},
            {"k", 64},
            {"tokens_per_input", 64.0},
            {"rho_rms", 0.03},
            {"inv_sqrt_tokens", 0.0156},
            {"dead_channels", 0}}},
          {"damp", {{"used", 0.01}}},
          {"seconds", 0.5},
          {"flags", flags}};
}

// `blocks` decoder blocks of the seven Llama layer types, lm_head kept.
json Audit(int blocks, const std::string& verdict = "PASS") {
  json layers = json::array();
  for (int b = 0; b < blocks; ++b) {
    for (const char* type : kTypes) {
      const std::string part =
          GroupOf(type).rfind("mlp", 0) == 0 ? "mlp" : "self_attn";
      layers.push_back(
          PackedLayer(absl::StrCat("model.layers.", b, ".", part, ".", type),
                      type, 0.01 * (b + 1)));
    }
  }
  layers.push_back({{"name", "lm_head"},
                    {"type", "lm_head"},
                    {"packed", false},
                    {"reason", "ignored by the recipe (lm_head)"}});
  return {{"format_version", 1},
          {"verdict", verdict},
          {"gates",
           {{"checks",
             {{{"gate", "max_ppl_ratio"},
               {"value", 1.04},
               {"threshold", 1.06},
               {"passed", verdict == "PASS"}}}},
            {"perplexity", 6.2},
            {"reference_perplexity", 5.9},
            {"ppl_ratio", 1.04},
            {"mean_kl", 0.02},
            {"top1_agreement", 0.93},
            {"tokens", 32640},
            {"verdict", verdict}}},
          {"layers", layers}};
}

json Manifest() {
  return {{"format_version", 1},
          {"tool", "quant 0.1.0"},
          {"kernels", {{"isa", "v3"}, {"description", "x86-64-v3 (AVX2)"}}},
          {"recipe", {{"method", "gptq"}, {"bits", 4}}},
          {"source",
           {{"path", "/models/llama"},
            {"fingerprint", std::string(64, 'f')},
            {"files",
             {{{"name", "model.safetensors"},
               {"bytes", 1000},
               {"sha256", std::string(64, 'a')}}}}}},
          {"calibration",
           {{"sha256", std::string(64, 'c')},
            {"calibration_tokens", 4096},
            {"heldout_tokens", 4096}}},
          {"output",
           {{"format", "gptq"},
            {"verdict", "PASS"},
            {"files",
             {{{"name", "audit.json"},
               {"bytes", 10},
               {"sha256", std::string(64, 'b')}},
              {{"name", "report.html"},
               {"bytes", 10},
               {"sha256", std::string(64, 'd')}}}}}},
          {"job", {{"id", "job-000007"}, {"recipe_sha256", "abc"}}}};
}

int Count(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos;
       at = text.find(needle, at + needle.size())) {
    ++n;
  }
  return n;
}

// The markup of one plot: from <svg ... data-plot="id" to its </svg>.
std::string Plot(const std::string& html, const std::string& id) {
  const size_t start = html.find(absl::StrCat("data-plot=\"", id, "\""));
  if (start == std::string::npos) return "";
  return html.substr(start, html.find("</svg>", start) - start);
}

// The markup of one series inside a plot.
std::string SeriesOf(const std::string& plot, const std::string& key) {
  const size_t start = plot.find(absl::StrCat("data-series=\"", key, "\""));
  if (start == std::string::npos) return "";
  return plot.substr(start, plot.find("</g>", start) - start);
}

TEST(ReportHtmlTest, ShowsVerdictGatesPlotsAndEveryLayer) {
  const json audit = Audit(3);
  auto html = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(*html, HasSubstr("<!DOCTYPE html>"));
  EXPECT_THAT(*html, HasSubstr("id=\"verdict\" class=\"verdict pass\" "
                               "data-verdict=\"PASS\">PASS</span>"));
  EXPECT_THAT(*html, HasSubstr("data-gate=\"max_ppl_ratio\""));
  // Every layer has its row, linkable by name.
  for (const json& layer : audit["layers"]) {
    const std::string name = layer["name"];
    EXPECT_EQ(Count(*html, absl::StrCat("<tr id=\"layer-", name, "\"")), 1)
        << name;
  }
  // One point per block and type: the method and RTN for each type.
  const std::string errors = Plot(*html, "rel_error");
  ASSERT_FALSE(errors.empty());
  for (const char* type : kTypes) {
    for (const char* variant : {"/method", "/rtn"}) {
      const std::string series = SeriesOf(errors, absl::StrCat(type, variant));
      EXPECT_EQ(Count(series, "class=\"point"), 3) << type << variant;
    }
  }
  // The values are the audit's: block 2's q_proj error, RTN 1.5x.
  EXPECT_THAT(SeriesOf(errors, "q_proj/method"), HasSubstr("data-y=\"0.03\""));
  EXPECT_THAT(SeriesOf(errors, "q_proj/rtn"), HasSubstr("data-y=\"0.045\""));
  for (const char* id : {"gain", "flattery", "tokens_per_input", "rho_rms"}) {
    EXPECT_FALSE(Plot(*html, id).empty()) << id;
  }
  EXPECT_EQ(Count(SeriesOf(Plot(*html, "tokens_per_input"), "mlp_in"),
                  "class=\"point"),
            3);
  // Kept layers say why; provenance is there; the page is self-contained.
  EXPECT_THAT(*html, HasSubstr("ignored by the recipe (lm_head)"));
  EXPECT_THAT(*html, HasSubstr(std::string(64, 'c')));
  EXPECT_THAT(*html, HasSubstr("job-000007"));
  EXPECT_THAT(*html, HasSubstr("x86-64-v3 (AVX2)"));
  EXPECT_THAT(*html, Not(HasSubstr("src=\"http")));
  EXPECT_THAT(*html, Not(HasSubstr("href=\"http")));
  EXPECT_THAT(*html, Not(HasSubstr("@import")));
  // The page leaves itself out of the file list it shows.
  EXPECT_THAT(*html, HasSubstr(std::string(64, 'b')));
  EXPECT_THAT(*html, Not(HasSubstr(std::string(64, 'd'))));
}

TEST(ReportHtmlTest, SameFilesGiveTheSameBytes) {
  auto first = RenderReportHtml(Audit(2), Manifest());
  auto second = RenderReportHtml(Audit(2), Manifest());
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_EQ(*first, *second);
}

TEST(ReportHtmlTest, FailedGateAndFlaggedLayersAreShownAndLinked) {
  json audit = Audit(2, "FAIL");
  audit["layers"][3] = PackedLayer("model.layers.0.self_attn.o_proj", "o_proj",
                                   0.4, {"outlier", "rank_deficient"});
  auto html = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(*html, HasSubstr("data-verdict=\"FAIL\""));
  EXPECT_THAT(*html,
              HasSubstr("<tr class=\"fail\" data-gate=\"max_ppl_ratio\""));
  EXPECT_THAT(*html, HasSubstr("must not ship"));
  // Listed under each of its flags with a link to its row.
  const std::string link =
      "<a href=\"#layer-model.layers.0.self_attn.o_proj\">";
  EXPECT_THAT(*html, HasSubstr("<ul data-flag=\"outlier\">\n<li>" + link));
  EXPECT_THAT(*html,
              HasSubstr("<ul data-flag=\"rank_deficient\">\n<li>" + link));
  EXPECT_THAT(*html, HasSubstr("<ul id=\"rank-deficient\">\n<li>" + link));
  // Its point is ringed.
  const std::string series =
      SeriesOf(Plot(*html, "rel_error"), "o_proj/method");
  EXPECT_EQ(Count(series, "class=\"point marked\""), 1);
}

TEST(ReportHtmlTest, NamesFromTheCheckpointAreEscaped) {
  json audit = Audit(1);
  audit["layers"][0]["name"] = "model.layers.0.<img src=x onerror=alert(1)>";
  audit["layers"][0]["flags"] = {"<b>"};
  json manifest = Manifest();
  manifest["source"]["path"] = "/m/\"><script>alert(2)</script>";
  auto html = RenderReportHtml(audit, manifest);
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(*html, Not(HasSubstr("<img src=x")));
  EXPECT_THAT(*html, Not(HasSubstr("<script>alert")));
  EXPECT_THAT(*html, Not(HasSubstr("<b>")));
  EXPECT_THAT(*html, HasSubstr("&lt;img src=x onerror=alert(1)&gt;"));
  EXPECT_EQ(Count(*html, "<script>"), 1);  // the page's own sorter
}

// gates.compare_to: the previous release's held-out numbers beside this
// checkpoint's, with where it came from; no section without one.
TEST(ReportHtmlTest, ThePreviousReleaseSideBySide) {
  json audit = Audit(1);
  auto plain = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(*plain, Not(HasSubstr("previous-section")));

  audit["gates"]["ppl_ratio_vs_previous"] = 0.9876;
  audit["gates"]["previous"] = {{"compare_to", "job-000041"},
                                {"job_id", "job-000041"},
                                {"manifest_sha256", std::string(64, 'a')},
                                {"verdict", "PASS"},
                                {"method", "<rtn>"},
                                {"perplexity", 6.2777},
                                {"ppl_ratio", 1.0641},
                                {"mean_kl", 0.0333},
                                {"top1_agreement", 0.9111}};
  auto html = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(*html, HasSubstr("id=\"previous-section\""));
  EXPECT_THAT(*html, HasSubstr("<code>job-000041</code>"));
  EXPECT_THAT(*html, HasSubstr(std::string(64, 'a')));
  EXPECT_THAT(*html, HasSubstr("&lt;rtn&gt;"));
  EXPECT_THAT(*html, HasSubstr(">0.9876</b>"));
  // Each metric's row: this checkpoint's value, then the previous one's.
  EXPECT_THAT(*html, HasSubstr("<tr data-metric=\"perplexity\"><td>perplexity"
                               "</td><td class=\"n\">6.2</td><td "
                               "class=\"n\">6.2777</td></tr>"));
  EXPECT_THAT(*html, HasSubstr("class=\"n\">0.93</td><td "
                               "class=\"n\">0.9111</td>"));

  EXPECT_THAT(*html, Not(HasSubstr("rel_error_vs_previous")));
  // The per-layer plot, when layers were compared: one dashed line per
  // compared type, one point per block.
  audit = Audit(2);
  audit["gates"]["previous"] = {{"compare_to", "/releases/w48"},
                                {"perplexity", 6.3}};
  for (json& layer : audit["layers"]) {
    if (layer["type"] == "q_proj") {
      layer["previous_rel_output_error_heldout"] = 0.5;
    }
  }
  html = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(*html, HasSubstr("rel_error_vs_previous"));
  EXPECT_THAT(*html, HasSubstr("q_proj previous"));
  EXPECT_THAT(*html, Not(HasSubstr("k_proj previous")));
  EXPECT_THAT(*html, HasSubstr("It has no manifest.json"));

  audit["gates"]["previous"]["perplexity"] = "6.3";
  auto bad = RenderReportHtml(audit, Manifest());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("audit.json: gates.previous.perplexity"));
}

// gates.tasks: the groups' accuracies, unquantized and packed, their ratios,
// and the tasks the two models answered differently; no section without.
TEST(ReportHtmlTest, TaskGroupsAndTheTasksThatFlipped) {
  json audit = Audit(1);
  auto plain = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(*plain, Not(HasSubstr("tasks-section")));

  auto ratio = [](int count, double reference, double candidate) {
    return json{{"count", count},
                {"reference_accuracy", reference},
                {"candidate_accuracy", candidate},
                {"ratio", reference == 0 ? 1.0 : candidate / reference},
                {"reference_zero", reference == 0}};
  };
  auto item = [](int line, const char* id, bool correct, int predicted) {
    return json{{"line", line},       {"id", id},
                {"task", "endings"},  {"kind", "multiple_choice"},
                {"correct", correct}, {"predicted", predicted}};
  };
  json generated = item(3, "w<1>", false, -1);
  generated.erase("predicted");
  generated["kind"] = "generation";
  generated["generated"] = "tree";
  json generated_right = generated;
  generated_right["correct"] = true;
  generated_right["generated"] = "<b>";
  audit["gates"]["tasks"] = {
      {"file", "/srv/tasks/<endings>.jsonl"},
      {"file_sha256", std::string(64, 'c')},
      {"min_ratio", 0.5},
      {"overall", ratio(3, 2.0 / 3, 1.0 / 3)},
      {"groups",
       {{"endings", ratio(2, 0.5, 0.5)}, {"words", ratio(1, 1.0, 0.0)}}},
      {"reference",
       {{"items",
         {item(1, "e1", true, 0), item(2, "e2", false, 1), generated_right}}}},
      {"candidate",
       {{"items",
         {item(1, "e1", true, 0), item(2, "e2", false, 1), generated}}}}};
  auto html = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(*html, HasSubstr("id=\"tasks-section\""));
  EXPECT_THAT(*html,
              HasSubstr("<code>/srv/tasks/&lt;endings&gt;.jsonl</code>"));
  EXPECT_THAT(*html, HasSubstr(std::string(64, 'c')));
  EXPECT_THAT(*html, HasSubstr("id=\"task-min-ratio\">0.5</b>"));
  EXPECT_THAT(*html, HasSubstr("<tr data-task=\"words\"><td>words</td><td>1"
                               "</td><td>1.0000</td><td>0.0000</td><td>"
                               "0.0000</td></tr>"));
  EXPECT_THAT(*html, HasSubstr("<tr data-task=\"all\"><td><b>all</b>"));
  // Only the generation task flipped, its texts escaped.
  EXPECT_THAT(*html, HasSubstr("1 task(s) scored differently"));
  EXPECT_THAT(*html, HasSubstr("<tr><td>3</td><td>w&lt;1&gt;</td><td>endings"
                               "</td><td>right: &lt;b&gt;</td><td>wrong: "
                               "tree</td></tr>"));
  EXPECT_THAT(*html, Not(HasSubstr("<td>e1</td>")));

  audit["gates"]["tasks"]["groups"]["words"]["ratio"] = "0";
  auto bad = RenderReportHtml(audit, Manifest());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("audit.json: gates.tasks.groups.words.ratio"));
  audit["gates"]["tasks"]["groups"]["words"]["ratio"] = 0.0;
  audit["gates"]["tasks"]["candidate"]["items"].erase(0);
  bad = RenderReportHtml(audit, Manifest());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("same length"));
}

// gates.runtime: each runtime's method, whether it loads, layers per
// kernel, and why it would not (escaped); no section without.
TEST(ReportHtmlTest, RuntimesAndWhyOneWouldNotLoad) {
  json audit = Audit(1);
  auto plain = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(*plain, Not(HasSubstr("runtime-section")));
  audit["gates"]["runtime"] = {
      {{"runtime", "vllm"},
       {"method", "gptq_marlin"},
       {"loads", false},
       {"kernels", {{"fails", 1}, {"marlin", 3}}},
       {"problems", {"model.layers.0.self_attn.qkv_proj: <no kernel>"}}},
      {{"runtime", "transformers"},
       {"method", "gptq"},
       {"loads", true},
       {"kernels", {{"torch", 7}}},
       {"problems", json::array()}}};
  auto html = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(*html, HasSubstr("id=\"runtime-section\""));
  EXPECT_THAT(*html, HasSubstr("<tr class=\"fail\" data-runtime=\"vllm\">"
                               "<td>vllm</td><td>gptq_marlin</td><td "
                               "class=\"result\">no</td><td>fails 1, "
                               "marlin 3</td></tr>"));
  EXPECT_THAT(*html, HasSubstr("<tr data-runtime=\"transformers\">"));
  EXPECT_THAT(*html, HasSubstr("<li>model.layers.0.self_attn.qkv_proj: "
                               "&lt;no kernel&gt;</li>"));
  audit["gates"]["runtime"][1]["kernels"]["torch"] = "7";
  auto bad = RenderReportHtml(audit, Manifest());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("gates.runtime[1].kernels.torch"));
}

TEST(ReportHtmlTest, MixedPrecisionChoicesAndWhy) {
  json audit = Audit(1);
  auto plain = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_THAT(*plain, Not(HasSubstr("mixed-precision-section")));
  json candidates = json::array();
  candidates.push_back({{"bits", 3},
                        {"group_size", 128},
                        {"keep_float", false},
                        {"cost_bits", 1000},
                        {"error", 0.5},
                        {"weighted_error", 0.02}});
  candidates.push_back({{"bits", 8},
                        {"group_size", 0},
                        {"keep_float", false},
                        {"cost_bits", 2000},
                        {"error", 0.001},
                        {"weighted_error", 4e-05}});
  audit["mixed_precision"] = {{"budget_average_bits", 4.5},
                              {"chosen_average_bits", 4.4},
                              {"under_budget_bits", 120},
                              {"predicted_kl", 0.0123},
                              {"probe_windows", 8},
                              {"groups",
                               {{{"block", 0},
                                 {"group", "attn_in"},
                                 {"chosen", 1},
                                 {"chosen_setting", "8-bit per-row"},
                                 {"sensitivity", 0.04},
                                 {"candidates", candidates}}}}};
  auto html = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(*html, HasSubstr("id=\"mixed-precision-section\""));
  EXPECT_THAT(*html, HasSubstr("for a budget of 4.5 (120 bits under it)"));
  EXPECT_THAT(*html, HasSubstr("<tr><td>0</td><td>attn_in</td><td>8-bit "
                               "per-row</td><td>0.04</td><td>3-bit g128, "
                               "1000, 0.5, 0.02; <b>8-bit per-row, 2000, "
                               "0.001, 4e-05</b></td></tr>"));
  audit["mixed_precision"]["groups"][0]["candidates"][1].erase("cost_bits");
  auto bad = RenderReportHtml(audit, Manifest());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(),
              HasSubstr("mixed_precision.groups[0].candidates[1]"));
}

// An MoE block has many layers of a type (its experts): one point per block,
// their mean.
TEST(ReportHtmlTest, ExpertsOfABlockAreOnePointTheirMean) {
  json audit = Audit(0);
  json layers = json::array();
  for (int block = 0; block < 2; ++block) {
    for (int expert = 0; expert < 4; ++expert) {
      layers.push_back(
          PackedLayer(absl::StrCat("model.layers.", block, ".mlp.experts.",
                                   expert, ".down_proj"),
                      "down_proj", 0.01 * (expert + 1)));
    }
  }
  audit["layers"] = layers;
  auto html = RenderReportHtml(audit, Manifest());
  ASSERT_TRUE(html.ok()) << html.status();
  const std::string series =
      SeriesOf(Plot(*html, "rel_error"), "down_proj/method");
  EXPECT_EQ(Count(series, "class=\"point"), 2);
  EXPECT_THAT(series, HasSubstr("data-y=\"0.025\""));
  EXPECT_THAT(series, HasSubstr("mean 0.025 of 4 layers"));
}

TEST(ReportHtmlTest, MissingOrMistypedFieldsAreNamed) {
  struct Case {
    std::string name;
    json audit;
    std::string error;
  };
  std::vector<Case> cases;
  {
    json a = Audit(1);
    a.erase("layers");
    cases.push_back({"no layers", a, "audit.json.layers: missing"});
  }
  {
    json a = Audit(1);
    a["layers"][2].erase("name");
    cases.push_back(
        {"nameless layer", a, "audit.json: layers[2].name: missing"});
  }
  {
    json a = Audit(1);
    a["layers"][1]["rel_output_error_heldout"] = "0.1";
    cases.push_back({"error as a string", a,
                     "audit.json: layers[1].rel_output_error_heldout: "
                     "expected a number, got string"});
  }
  {
    json a = Audit(1);
    a["layers"][0]["hessian"]["dead_channels"] = 1.5;
    cases.push_back({"fractional count", a,
                     "audit.json: layers[0].hessian.dead_channels: expected "
                     "an integer"});
  }
  {
    json a = Audit(1);
    a["verdict"] = "MAYBE";
    cases.push_back({"unknown verdict", a, "audit.json: verdict: expected"});
  }
  {
    json a = Audit(1);
    a["gates"]["checks"] = "all good";
    cases.push_back({"checks not a list", a,
                     "audit.json: gates.checks: expected an array"});
  }
  cases.push_back(
      {"not an object", json::array(), "audit.json: expected an object"});
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    auto html = RenderReportHtml(c.audit, Manifest());
    ASSERT_FALSE(html.ok());
    EXPECT_EQ(html.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(html.status().message()), HasSubstr(c.error));
  }
  auto no_manifest = RenderReportHtml(Audit(1), json("text"));
  EXPECT_THAT(std::string(no_manifest.status().message()),
              HasSubstr("manifest.json: expected an object"));
}

// The manifest is shown, not trusted: any shape of its sections renders
// (what is not there shows as a dash) instead of throwing.
TEST(ReportHtmlTest, ManifestOfAnyShapeRenders) {
  const json manifest = {{"source", "not an object"},    {"output", 5},
                         {"calibration", json::array()}, {"kernels", nullptr},
                         {"job", {{"id", 7}}},           {"recipe", {1, 2}}};
  auto html = RenderReportHtml(Audit(1), manifest);
  ASSERT_TRUE(html.ok()) << html.status();
  EXPECT_THAT(*html, HasSubstr("data-verdict=\"PASS\""));
  auto empty = RenderReportHtml(Audit(1), json::object());
  ASSERT_TRUE(empty.ok()) << empty.status();
}

TEST(HtmlEscapeTest, EscapesTheFiveSpecialCharacters) {
  EXPECT_EQ(HtmlEscape("a&b<c>d\"e'f"), "a&amp;b&lt;c&gt;d&quot;e&#39;f");
  EXPECT_EQ(HtmlEscape("plain.layers.0"), "plain.layers.0");
}

TEST(SvgLinePlotTest, LeavesOutValuesItCannotDrawAndSaysWhenEmpty) {
  PlotSeries series;
  series.key = "s";
  series.color = "#000";
  series.points = {{0, 1.0, "", "", false},
                   {1, std::nan(""), "", "", false},
                   {2, -1.0, "", "", false},
                   {3, 10.0, "", "", false}};
  LinePlotOptions options;
  options.id = "p";
  options.log_y = true;
  const std::string log_plot = RenderLinePlot(options, {series});
  EXPECT_EQ(Count(log_plot, "class=\"point"), 2);  // 1 and 10
  options.log_y = false;
  const std::string linear = RenderLinePlot(options, {series});
  EXPECT_EQ(Count(linear, "class=\"point"), 3);  // -1 too
  series.points = {{0, std::nan(""), "", "", false}};
  EXPECT_THAT(RenderLinePlot(options, {series}),
              HasSubstr("no values to plot"));
}

}  // namespace
}  // namespace quant::report
