// report.html in a real browser: headless Chromium (Debian's `chromium`)
// loads the page from a packed checkpoint that the local pipeline wrote,
// through a harness page that reads the rendered DOM (every layer's row, the
// points each plot drew, the verdict) and clicks a header of the table to
// sort it; the test checks all of it against the checkpoint's audit.json.
// Then it takes a screenshot of the page.
//
// Skipped, saying why, when chromium is not installed; under CI=true that is
// a failure (scripts/install_deps.sh installs it).
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "core/pipeline/local_pipeline.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/pipeline/pipeline_fixture.h"
#include "tests/support/run_json_program.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::nlohmann::json;

// The browser: $QUANT_CHROMIUM, else `chromium` on the PATH; "" when none.
std::string FindChromium() {
  if (const char* set = std::getenv("QUANT_CHROMIUM"); set != nullptr) {
    return set;
  }
  const testing::JsonProgramResult which =
      testing::RunJsonProgram("command -v chromium 2>/dev/null");
  std::string path = which.out;
  while (!path.empty() && (path.back() == '\n' || path.back() == ' ')) {
    path.pop_back();
  }
  return path;
}

std::string ChromiumCommand(const std::string& chromium,
                            const std::string& flags, const std::string& url) {
  // --no-sandbox: tests may run as root in a container, where Chromium's
  // sandbox cannot start. The page is our own file.
  return absl::StrCat("timeout 120 '", chromium,
                      "' --headless --no-sandbox --disable-gpu "
                      "--no-first-run --hide-scrollbars ",
                      flags, " '", url, "' 2>/dev/null");
}

// Reads the report inside an iframe (same origin with
// --allow-file-access-from-files) and writes what it found, as JSON, into
// <pre id="result">.
constexpr char kHarness[] = R"html(<!DOCTYPE html>
<html><body><pre id="result">pending</pre>
<iframe id="report" src="REPORT_URL" width="1280" height="900"></iframe>
<script>
document.getElementById('report').addEventListener('load', function () {
  var out = {};
  try {
    var d = this.contentDocument;
    var map = Array.prototype.map;
    out.verdict = d.getElementById('verdict').textContent;
    out.rows = map.call(d.querySelectorAll('#layers tbody tr'),
                        function (r) { return r.getAttribute('data-layer'); });
    out.plots = {};
    out.plot_widths = {};
    d.querySelectorAll('svg.plot').forEach(function (svg) {
      var series = {};
      svg.querySelectorAll('g.series').forEach(function (g) {
        series[g.getAttribute('data-series')] =
            map.call(g.querySelectorAll('circle.point'), function (c) {
              return [parseFloat(c.getAttribute('data-x')),
                      parseFloat(c.getAttribute('data-y'))];
            });
      });
      var id = svg.getAttribute('data-plot');
      out.plots[id] = series;
      out.plot_widths[id] = svg.getBoundingClientRect().width;
    });
    var headers = d.querySelectorAll('#layers thead th');
    var column = -1;
    headers.forEach(function (th, i) { if (th.textContent === 'err') column = i; });
    function columnValues() {
      return map.call(d.querySelectorAll('#layers tbody tr'), function (r) {
        return r.cells[column].getAttribute('data-v');
      });
    }
    headers[column].click();
    out.ascending = columnValues();
    headers[column].click();
    out.descending = columnValues();
  } catch (e) {
    out.error = String(e);
  }
  document.getElementById('result').textContent = JSON.stringify(out);
});
</script></body></html>
)html";

class ReportBrowserTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chromium_ = FindChromium();
    if (chromium_.empty()) {
      if (testing::RunningInCi()) {
        FAIL() << "CI=true but chromium is not installed "
                  "(scripts/install_deps.sh installs it)";
      }
      GTEST_SKIP() << "chromium is not installed (apt-get install chromium); "
                      "the report is checked in a browser only where one is";
    }
    QUANT_REQUIRE_SHARED(testing::Stories260KDir());
    QUANT_REQUIRE_SHARED(testing::TinyStoriesPath());
    temp_ = testing::MakeTempDir();
  }

  std::string chromium_;
  std::string temp_;
};

TEST_F(ReportBrowserTest, PageFromTheArtifactShowsEveryLayerPointAndVerdict) {
  LocalQuantizeOptions options;
  options.checkpoint_dir = testing::Stories260KDir();
  options.calibration_path = testing::TinyStoriesPath();
  options.out_dir = temp_ + "/packed";
  options.recipe = testing::SmallRecipe(QuantMethod::kGptq, 0,
                                        OutputFormat::kCompressedTensors,
                                        Propagation::kSequential);
  auto run = RunLocalQuantization(options);
  ASSERT_TRUE(run.ok()) << run.status();
  const json& audit = run->audit;

  const std::string harness = temp_ + "/harness.html";
  {
    std::ofstream out(harness);
    out << absl::StrReplaceAll(
        kHarness,
        {{"REPORT_URL", "file://" + options.out_dir + "/report.html"}});
  }
  const testing::JsonProgramResult dom = testing::RunJsonProgram(
      ChromiumCommand(chromium_,
                      "--allow-file-access-from-files "
                      "--virtual-time-budget=20000 --dump-dom",
                      "file://" + harness));
  const std::string open = "<pre id=\"result\">";
  const size_t start = dom.out.find(open);
  ASSERT_NE(start, std::string::npos)
      << "chromium printed no DOM (status " << dom.status << "):\n"
      << dom.out.substr(0, 2000);
  const size_t end = dom.out.find("</pre>", start);
  const std::string text = absl::StrReplaceAll(
      dom.out.substr(start + open.size(), end - start - open.size()),
      {{"&lt;", "<"}, {"&gt;", ">"}, {"&amp;", "&"}});
  const json found = json::parse(text, nullptr, false);
  ASSERT_FALSE(found.is_discarded()) << text.substr(0, 2000);
  ASSERT_FALSE(found.contains("error")) << found["error"];

  // The verdict shown is audit.json's.
  EXPECT_EQ(found["verdict"], audit["verdict"]);

  // Every layer has its row, in the audit's order.
  std::vector<std::string> names;
  for (const json& layer : audit["layers"]) {
    names.push_back(layer["name"].get<std::string>());
  }
  EXPECT_EQ(found["rows"].get<std::vector<std::string>>(), names);

  // One point per block and layer type, at the audit's values.
  std::map<std::string, std::map<int, double>> error_by_type;
  std::map<std::string, std::map<int, double>> rtn_by_type;
  std::set<int> blocks;
  for (const json& layer : audit["layers"]) {
    if (!layer["packed"].get<bool>()) continue;
    const std::string name = layer["name"];
    const int block = std::stoi(name.substr(name.find("layers.") + 7));
    blocks.insert(block);
    const std::string type = layer["type"].get<std::string>();
    error_by_type[type][block] = layer["rel_output_error_heldout"];
    rtn_by_type[type][block] = layer["rtn_rel_output_error_heldout"];
  }
  ASSERT_EQ(blocks.size(), 5u);  // stories260K
  ASSERT_EQ(error_by_type.size(), 7u);
  const json& errors = found["plots"]["rel_error"];
  ASSERT_EQ(errors.size(), 14u) << errors.dump();
  const auto check_series = [&](const json& points,
                                const std::map<int, double>& expected,
                                const std::string& what) {
    ASSERT_EQ(points.size(), expected.size()) << what;
    for (const json& p : points) {
      const int block = p[0].get<int>();
      ASSERT_TRUE(expected.count(block)) << what << " block " << block;
      EXPECT_NEAR(p[1].get<double>(), expected.at(block),
                  1e-5 * expected.at(block))
          << what << " block " << block;
    }
  };
  for (const auto& [type, by_block] : error_by_type) {
    check_series(errors[type + "/method"], by_block, type + " method");
    check_series(errors[type + "/rtn"], rtn_by_type[type], type + " RTN");
  }
  for (const char* plot :
       {"rel_error", "gain", "flattery", "tokens_per_input", "rho_rms"}) {
    EXPECT_GT(found["plot_widths"].value(plot, 0.0), 300.0) << plot;
  }
  EXPECT_EQ(found["plots"]["gain"].size(), 7u);
  EXPECT_EQ(found["plots"]["tokens_per_input"].size(), 4u);  // input groups

  // Clicking the header sorted the rows by it, then the other way.
  const auto values = [](const json& column) {
    std::vector<double> v;
    for (const json& cell : column) {
      const std::string s = cell.is_string() ? cell.get<std::string>() : "";
      if (!s.empty()) v.push_back(std::stod(s));
    }
    return v;
  };
  const std::vector<double> ascending = values(found["ascending"]);
  const std::vector<double> descending = values(found["descending"]);
  ASSERT_EQ(ascending.size(), names.size());
  EXPECT_TRUE(std::is_sorted(ascending.begin(), ascending.end()));
  EXPECT_TRUE(std::is_sorted(descending.rbegin(), descending.rend()));
  EXPECT_LT(ascending.front(), ascending.back());

  // And a screenshot of the page as a person sees it.
  const std::string png = temp_ + "/report.png";
  testing::RunJsonProgram(
      ChromiumCommand(chromium_, "--window-size=1280,2200 --screenshot=" + png,
                      "file://" + options.out_dir + "/report.html"));
  std::ifstream shot(png, std::ios::binary);
  ASSERT_TRUE(shot.good()) << "no screenshot at " << png;
  std::string bytes((std::istreambuf_iterator<char>(shot)),
                    std::istreambuf_iterator<char>());
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(bytes.size(), 20000u) << "a blank page?";
}

}  // namespace
}  // namespace quant
