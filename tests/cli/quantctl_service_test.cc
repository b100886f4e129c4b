// The service commands of the built quantctl against the built quantd, both
// real processes over loopback gRPC: calib upload, submit (file and hash
// calibration, labels, idempotent request ids, --json, --wait), status,
// list with filters, cancel, retry (refused for a job that did not fail),
// watch, report, fetch, bearer tokens and TLS, and the errors of bad input.
// No worker runs, so jobs stay QUEUED until cancelled; running a job to the
// end is tests/service's business.
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/base/directory_util.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/pipeline/manifest_signature.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/service/child_process.h"
#include "tests/support/quantctl_runner.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using json = nlohmann::json;
using testing::Quote;
using testing::RealPath;
using testing::RunQuantctl;
using testing::RunResult;

std::string CheckpointDir() {
  return testing::SharedPath("models/stories260K/hf-f32");
}
std::string CalibrationFile() {
  return testing::SharedPath("data/tinystories_val.txt");
}
std::string RecipeFile() {
  return testing::FixturesDir() + "/service/stories260k-gptq-small.yaml";
}

// The service recipe with `lines` added to its calibration section (after
// its seed) or, `in_gates`, to its gates (its last section), written to
// DIR/NAME; the path.
std::string RecipeVariant(const std::string& dir, const std::string& name,
                          const std::string& lines, bool in_gates = false) {
  std::string text = ReadFileToString(RecipeFile()).value_or("");
  const std::string anchor = "  seed: 0\n";
  const size_t at = in_gates ? text.size() : text.find(anchor) + anchor.size();
  EXPECT_TRUE(in_gates || text.find(anchor) != std::string::npos);
  text.insert(at, lines);
  const std::string path = dir + "/" + name;
  EXPECT_TRUE(WriteFileAtomically(path, text).ok());
  return path;
}

// `submit` of stories260K with `recipe` and `calibration` (none: empty),
// then `extra` (other flags and the address).
std::string SubmitOf(const std::string& recipe, const std::string& calibration,
                     const std::string& extra) {
  return absl::StrCat(
      "submit --checkpoint ", Quote(CheckpointDir()), " --recipe ",
      Quote(recipe),
      calibration.empty() ? "" : " --calibration " + Quote(calibration), extra);
}

// A quantd subprocess on a free loopback port.
class Quantd {
 public:
  explicit Quantd(const std::vector<std::string>& extra_flags = {}) {
    temp_ = testing::MakeTempDir();
    std::vector<std::string> args = {
        testing::BinaryDir() + "/server/quantd", "--listen=127.0.0.1:0",
        "--data_dir=" + temp_ + "/data",
        "--artifact_root=file://" + temp_ + "/artifacts",
        "--allowed_roots=" + RealPath(testing::SharedDir()) + "," + temp_};
    args.insert(args.end(), extra_flags.begin(), extra_flags.end());
    process_ = std::make_unique<testing::ChildProcess>(
        args, std::vector<std::string>{}, temp_ + "/quantd.stderr");
    const std::string line = process_->ReadLine(30000);
    const std::string prefix = "quantd: listening on ";
    if (absl::StartsWith(line, prefix)) address_ = line.substr(prefix.size());
  }
  ~Quantd() {
    process_->Signal(SIGTERM);
    process_->Wait(10000);
  }
  const std::string& address() const { return address_; }  // "" on failure.
  std::string Log() const {
    return ReadFileToString(temp_ + "/quantd.stderr").value_or("");
  }
  const std::string& temp() const { return temp_; }

 private:
  std::string temp_;
  std::string address_;
  std::unique_ptr<testing::ChildProcess> process_;
};

class QuantctlServiceTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    quantd_ = new Quantd();
    // Every call finds quantd through the environment, as a user's would.
    setenv("QUANT_ADDR", quantd_->address().c_str(), 1);
    unsetenv("QUANT_TOKEN");
  }
  static void TearDownTestSuite() {
    delete quantd_;
    quantd_ = nullptr;
    unsetenv("QUANT_ADDR");
  }
  void SetUp() override {
    ASSERT_FALSE(quantd_->address().empty())
        << "quantd did not start: " << quantd_->Log();
    QUANT_REQUIRE_SHARED(CheckpointDir());
    QUANT_REQUIRE_SHARED(CalibrationFile());
  }

  static std::string SubmitArgs(const std::string& calibration) {
    return absl::StrCat("submit --checkpoint ", Quote(CheckpointDir()),
                        " --recipe ", Quote(RecipeFile()), " --calibration ",
                        Quote(calibration));
  }

  static json Json(const RunResult& r) {
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << r.out << r.err;
    return j;
  }

  static std::vector<std::string> ListedIds(const std::string& filter) {
    const RunResult r = RunQuantctl("list --all --json " + filter);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::vector<std::string> ids;
    const json j = Json(r);
    if (!j.is_object()) return ids;
    for (const json& job : j["jobs"]) ids.push_back(job["id"]);
    return ids;
  }

  static Quantd* quantd_;
};

Quantd* QuantctlServiceTest::quantd_ = nullptr;

std::string Sha256sum(const std::string& path) {
  FILE* pipe = popen(("sha256sum " + Quote(path)).c_str(), "r");
  if (pipe == nullptr) return "";
  char buffer[128] = {};
  const size_t n = fread(buffer, 1, 64, pipe);
  pclose(pipe);
  return std::string(buffer, n);
}

TEST_F(QuantctlServiceTest, EveryServiceCommandHasHelpWithAnExample) {
  for (const char* command : {"calib", "submit", "status", "list", "watch",
                              "report", "cancel", "retry", "fetch"}) {
    const RunResult r = RunQuantctl(std::string(command) + " --help");
    EXPECT_EQ(r.exit_code, 0) << command << ": " << r.err;
    EXPECT_THAT(r.out, HasSubstr(absl::StrCat("Usage: quantctl ", command)));
    EXPECT_THAT(r.out,
                HasSubstr(absl::StrCat("Example:\n  quantctl ", command, " ")))
        << command;
    EXPECT_THAT(r.out, HasSubstr("--addr")) << command;
    EXPECT_THAT(r.out, HasSubstr("--token_file")) << command;
  }
  EXPECT_THAT(RunQuantctl("fetch --help").out,
              HasSubstr("resumes where it stopped"));
  EXPECT_THAT(RunQuantctl("retry --help").out,
              HasSubstr("Only a FAILED job can be retried"));
  const RunResult top = RunQuantctl("--help");
  EXPECT_THAT(top.out, HasSubstr("submit"));
  EXPECT_THAT(top.out, HasSubstr("report"));
  EXPECT_THAT(top.out, HasSubstr("retry"));
}

TEST_F(QuantctlServiceTest, RetryOfAJobThatDidNotFailIsRefused) {
  const RunResult submitted =
      RunQuantctl(SubmitArgs(CalibrationFile()) + " --label suite=retry");
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id(absl::StripTrailingAsciiWhitespace(submitted.out));
  const RunResult queued = RunQuantctl("retry " + id);
  EXPECT_EQ(queued.exit_code, 1) << queued.out;
  EXPECT_THAT(queued.err, HasSubstr(id + " is QUEUED"));
  EXPECT_THAT(queued.err, HasSubstr("only a FAILED job can be retried"));
  EXPECT_EQ(queued.out, "");

  ASSERT_EQ(RunQuantctl("cancel " + id).exit_code, 0);
  const RunResult cancelled = RunQuantctl("retry --wait --json " + id);
  EXPECT_EQ(cancelled.exit_code, 1) << cancelled.out;
  EXPECT_THAT(cancelled.err, HasSubstr(id + " is CANCELLED"));
  EXPECT_EQ(Json(RunQuantctl("status --json " + id))["state"], "CANCELLED");

  const RunResult unknown = RunQuantctl("retry job-999999");
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_THAT(unknown.err, HasSubstr("job-999999"));
  EXPECT_EQ(RunQuantctl("retry").exit_code, 2);  // The job id is required.
}

TEST_F(QuantctlServiceTest, CalibUploadPrintsTheFilesSha256) {
  const std::string expected = Sha256sum(CalibrationFile());
  ASSERT_EQ(expected.size(), 64u);
  const RunResult r = RunQuantctl("calib upload " + Quote(CalibrationFile()));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(absl::StartsWith(r.out, expected + "  ")) << r.out;
  EXPECT_THAT(r.out, HasSubstr("documents"));

  const RunResult again =
      RunQuantctl("calib upload --json " + Quote(CalibrationFile()));
  ASSERT_EQ(again.exit_code, 0) << again.err;
  const json j = Json(again);
  EXPECT_EQ(j["sha256"], expected);
  EXPECT_EQ(
      j["size_bytes"].get<int64_t>(),
      static_cast<int64_t>(std::filesystem::file_size(CalibrationFile())));
  EXPECT_GT(j["documents"].get<int>(), 100);
  EXPECT_EQ(j["already_present"], true);
}

TEST_F(QuantctlServiceTest, SubmitStatusListCancel) {
  const std::string submit =
      SubmitArgs(CalibrationFile()) +
      " --label suite=lifecycle --label team=lm --request_id lifecycle-1";
  const RunResult first = RunQuantctl(submit);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string id(absl::StripTrailingAsciiWhitespace(first.out));
  ASSERT_FALSE(id.empty());
  EXPECT_THAT(id, Not(HasSubstr("\n")));
  EXPECT_THAT(first.err, HasSubstr(Sha256sum(CalibrationFile())));
  // Before the upload, what the job will make of the set (calib inspect):
  // its 4300 paragraphs, the recipe's 16 windows of 64 tokens, and T/K for
  // stories260K's input widths.
  EXPECT_THAT(first.err, HasSubstr("calibration " + CalibrationFile() +
                                   ":\nsha256 " + Sha256sum(CalibrationFile()) +
                                   "\n4300 documents (4300 text"));
  EXPECT_THAT(first.err, HasSubstr("-> 16 windows of 64 tokens, T = 1024"));
  EXPECT_THAT(first.err, HasSubstr("rank: K = 172 (down_proj): T/K = 5.95"));

  const RunResult status = RunQuantctl("status --json " + id);
  ASSERT_EQ(status.exit_code, 0) << status.err;
  json job = Json(status);
  EXPECT_EQ(job["id"], id);
  EXPECT_THAT(job["state"].get<std::string>(),
              ::testing::AnyOf("QUEUED", "RUNNING"));
  EXPECT_EQ(job["verdict"], "");
  EXPECT_EQ(job["labels"], (json{{"suite", "lifecycle"}, {"team", "lm"}}));
  EXPECT_EQ(job["progress"]["blocks_total"], 5);  // stories260K's blocks.
  EXPECT_EQ(job["request_id"], "lifecycle-1");
  EXPECT_EQ(job["calibration_sha256"], Sha256sum(CalibrationFile()));
  // The plain path became a file:// URI of the real absolute path.
  EXPECT_EQ(job["checkpoint_uri"], "file://" + RealPath(CheckpointDir()));
  EXPECT_EQ(job["artifact_uri"], "");
  EXPECT_TRUE(job.contains("error"));

  // The same request id and request: the same job.
  const RunResult retry = RunQuantctl(submit);
  ASSERT_EQ(retry.exit_code, 0) << retry.err;
  EXPECT_EQ(std::string(absl::StripTrailingAsciiWhitespace(retry.out)), id);
  // Another request under that id is refused, naming the field.
  const RunResult conflict = RunQuantctl(SubmitArgs(CalibrationFile()) +
                                         " --label suite=other"
                                         " --request_id lifecycle-1");
  EXPECT_EQ(conflict.exit_code, 1) << conflict.out;
  EXPECT_THAT(conflict.err, HasSubstr("request_id"));

  EXPECT_THAT(ListedIds("--label suite=lifecycle"), ::testing::Contains(id));
  EXPECT_THAT(ListedIds("--label suite=nothing-like-it"),
              Not(::testing::Contains(id)));
  const RunResult table = RunQuantctl("list --label team=lm");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_THAT(table.out, HasSubstr(id));
  EXPECT_THAT(table.out, HasSubstr("suite=lifecycle,team=lm"));
  const RunResult text = RunQuantctl("status " + id);
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_THAT(text.out, HasSubstr("0/5 blocks"));

  const RunResult cancel = RunQuantctl("cancel " + id);
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_THAT(cancel.out, HasSubstr(id + ": CANCELLED"));
  job = Json(RunQuantctl("status --json " + id));
  EXPECT_EQ(job["state"], "CANCELLED");
  EXPECT_THAT(ListedIds("--state cancelled --label suite=lifecycle"),
              ::testing::Contains(id));
  EXPECT_THAT(ListedIds("--state QUEUED --label suite=lifecycle"),
              Not(::testing::Contains(id)));
}

TEST_F(QuantctlServiceTest, SubmitByHashWithJsonAndPaging) {
  const RunResult upload =
      RunQuantctl("calib upload " + Quote(CalibrationFile()));
  ASSERT_EQ(upload.exit_code, 0) << upload.err;
  const std::string sha = upload.out.substr(0, 64);
  std::vector<std::string> ids;
  for (int i = 0; i < 3; ++i) {
    const RunResult r =
        RunQuantctl(SubmitArgs(sha) + " --json --label suite=paging");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_THAT(r.err, Not(HasSubstr("uploaded")));  // No upload for a hash.
    const json job = Json(r);
    EXPECT_EQ(job["calibration_sha256"], sha);
    EXPECT_EQ(job["state"], "QUEUED");
    ids.push_back(job["id"]);
  }
  const RunResult page =
      RunQuantctl("list --json --page_size 2 --label suite=paging");
  ASSERT_EQ(page.exit_code, 0) << page.err;
  const json first = Json(page);
  EXPECT_EQ(first["jobs"].size(), 2u);
  EXPECT_NE(first["next_page_token"], "");
  const RunResult note = RunQuantctl("list --page_size 2 --label suite=paging");
  EXPECT_THAT(note.err, HasSubstr("--all"));
  const std::vector<std::string> all =
      ListedIds("--page_size 2 --label suite=paging");
  EXPECT_THAT(all, ::testing::UnorderedElementsAreArray(ids));
}

TEST_F(QuantctlServiceTest, SubmitWaitEndsWithTheJob) {
  // No worker runs: the job waits until cancelled, and --wait exits 1.
  RunResult waited;
  std::thread waiter([&] {
    waited = RunQuantctl(SubmitArgs(CalibrationFile()) +
                         " --wait --label suite=waiter");
  });
  std::vector<std::string> ids;
  for (int i = 0; i < 300 && ids.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    ids = ListedIds("--label suite=waiter");
  }
  EXPECT_EQ(ids.size(), 1u);
  if (!ids.empty()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_EQ(RunQuantctl("cancel " + ids[0]).exit_code, 0);
  }
  waiter.join();
  ASSERT_FALSE(ids.empty());
  EXPECT_EQ(waited.exit_code, 1) << waited.out << waited.err;
  EXPECT_THAT(waited.out, HasSubstr(ids[0] + "\n"));
  EXPECT_THAT(waited.out, HasSubstr(ids[0] + ": CANCELLED"));
  EXPECT_THAT(waited.err, HasSubstr("was CANCELLED"));
}

TEST_F(QuantctlServiceTest, WatchReportAndFetchOfAnUnfinishedJob) {
  const RunResult submitted = RunQuantctl(SubmitArgs(CalibrationFile()));
  ASSERT_EQ(submitted.exit_code, 0) << submitted.err;
  const std::string id(absl::StripTrailingAsciiWhitespace(submitted.out));

  const RunResult report = RunQuantctl("report --json " + id);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const json j = Json(report);
  EXPECT_EQ(j["job"]["id"], id);
  EXPECT_EQ(j["verdict"], "");
  EXPECT_EQ(j["layers"], json::array());
  EXPECT_TRUE(j.contains("gates"));
  EXPECT_THAT(RunQuantctl("report " + id).out,
              HasSubstr("no layer has finished yet"));

  const std::string dest = testing::MakeTempDir() + "/fetched";
  const RunResult fetch = RunQuantctl("fetch " + id + " " + Quote(dest));
  EXPECT_EQ(fetch.exit_code, 1);
  EXPECT_THAT(fetch.err, HasSubstr("only a SUCCEEDED job"));
  EXPECT_FALSE(testing::PathExists(dest));

  ASSERT_EQ(RunQuantctl("cancel " + id).exit_code, 0);
  const RunResult watch = RunQuantctl("watch " + id);
  EXPECT_EQ(watch.exit_code, 1) << watch.out << watch.err;
  EXPECT_THAT(watch.out, HasSubstr(id + ": CANCELLED"));
  EXPECT_THAT(watch.err, HasSubstr("CANCELLED"));
}

TEST_F(QuantctlServiceTest, BadInputsNameTheProblem) {
  const std::string missing_recipe = testing::MakeTempDir() + "/nope.yaml";
  RunResult r = RunQuantctl(absl::StrCat(
      "submit --checkpoint ", Quote(CheckpointDir()), " --recipe ",
      Quote(missing_recipe), " --calibration ", Quote(CalibrationFile())));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(missing_recipe));

  r = RunQuantctl(SubmitArgs(CalibrationFile()) + " --label teamlm");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--label"));
  EXPECT_THAT(r.err, HasSubstr("teamlm"));

  r = RunQuantctl("submit --recipe " + Quote(RecipeFile()) + " --calibration " +
                  Quote(CalibrationFile()));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--checkpoint is required"));

  // A checkpoint outside quantd's allowed roots: the server's message.
  r = RunQuantctl(absl::StrCat("submit --checkpoint /etc --recipe ",
                               Quote(RecipeFile()), " --calibration ",
                               Quote(CalibrationFile())));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("checkpoint_uri"));

  r = RunQuantctl("status --addr 127.0.0.1:1 job-000001");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot reach quantd at 127.0.0.1:1"));

  r = RunQuantctl("status job-999999");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("job-999999"));

  r = RunQuantctl("list --state finished");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--state"));

  r = RunQuantctl("calib upload " + Quote(missing_recipe));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(missing_recipe));

  r = RunQuantctl("calib download x");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("download"));

  r = RunQuantctl("status --token a --token_file b job-000001");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--token_file"));
}

// quantd with a client token and TLS: quantctl sends the token from
// --token_file or QUANT_TOKEN and trusts the --tls_ca certificate.
TEST(QuantctlAuthTest, BearerTokenAndTls) {
  const std::string temp = testing::MakeTempDir();
  const std::string openssl = absl::StrCat(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost"
      " -addext subjectAltName=IP:127.0.0.1,DNS:localhost -keyout ",
      Quote(temp + "/key.pem"), " -out ", Quote(temp + "/cert.pem"),
      " >/dev/null 2>&1");
  if (std::system(openssl.c_str()) != 0) {
    GTEST_SKIP() << "the openssl program is needed to make a test certificate";
  }
  ASSERT_TRUE(
      WriteFileAtomically(temp + "/client.token", "s3cret-client-token-0001\n")
          .ok());
  ASSERT_TRUE(
      WriteFileAtomically(temp + "/worker.token", "s3cret-worker-token-0001\n")
          .ok());
  ASSERT_TRUE(
      WriteFileAtomically(temp + "/wrong.token", "guessed-wrong-token-0001\n")
          .ok());
  Quantd quantd({"--client_token_file=" + temp + "/client.token",
                 "--worker_token_file=" + temp + "/worker.token",
                 "--tls_cert=" + temp + "/cert.pem",
                 "--tls_key=" + temp + "/key.pem"});
  ASSERT_FALSE(quantd.address().empty()) << quantd.Log();
  unsetenv("QUANT_TOKEN");
  const std::string base =
      absl::StrCat("list --addr ", quantd.address(), " --tls_ca ",
                   Quote(temp + "/cert.pem"));

  RunResult r = RunQuantctl(base);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--token_file"));  // The hint.

  r = RunQuantctl(base + " --token_file " + Quote(temp + "/wrong.token"));
  EXPECT_EQ(r.exit_code, 1);

  r = RunQuantctl(base + " --token_file " + Quote(temp + "/client.token"));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("STATE"));

  setenv("QUANT_TOKEN", "s3cret-client-token-0001", 1);
  r = RunQuantctl(base + " --json");
  unsetenv("QUANT_TOKEN");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\"jobs\""));

  // Plaintext to a TLS server fails, and so does TLS trusting nothing.
  r = RunQuantctl(absl::StrCat("list --addr ", quantd.address(),
                               " --token s3cret-client-token-0001"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(quantd.address()));
  r = RunQuantctl(base + " --token s3cret-client-token-0001 --tls_ca " +
                  Quote(temp + "/missing.pem"));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("--tls_ca"));
}

// A job run to the end by a local worker, through the commands a release
// pipeline would use: `submit --wait --json` exits 0 on PASS and 3 on FAIL
// with the stable job view, `watch`, `report` and `status` agree, `report
// --json` carries audit.json's layer keys, `fetch` copies the checkpoint.
TEST(QuantctlServiceRunTest, VerdictsExitCodesReportAndFetch) {
  QUANT_REQUIRE_SHARED(CheckpointDir());
  QUANT_REQUIRE_SHARED(CalibrationFile());
  // quantd signs every finished job's manifest with this key.
  const std::string keys = testing::MakeTempDir();
  auto key_pair = GenerateSigningKeyPem();
  ASSERT_TRUE(key_pair.ok()) << key_pair.status();
  auto other_pair = GenerateSigningKeyPem();
  ASSERT_TRUE(other_pair.ok()) << other_pair.status();
  ASSERT_TRUE(WriteFileAtomically(keys + "/quantd.pem", key_pair->first).ok());
  ASSERT_TRUE(WriteFileAtomically(keys + "/quantd.pub", key_pair->second).ok());
  ASSERT_TRUE(
      WriteFileAtomically(keys + "/other.pub", other_pair->second).ok());
  Quantd quantd({"--local-workers=1", "--signing-key=" + keys + "/quantd.pem"});
  ASSERT_FALSE(quantd.address().empty()) << quantd.Log();
  const std::string addr = " --addr " + quantd.address();
  // The same recipe with a ppl-ratio gate no 4-bit model meets.
  auto recipe_text = ReadFileToString(RecipeFile());
  ASSERT_TRUE(recipe_text.ok());
  std::string strict = *recipe_text;
  strict.replace(strict.find("max_ppl_ratio: 2.0"), 18,
                 "max_ppl_ratio: 1.0001");
  // And windows of 8 tokens: 16 x 8 = 128 calibration tokens (the held-out
  // windows come on top), fewer than down_proj's 172 inputs but not than
  // the other layers' 64: a warning at submit and one from the audit.
  strict.replace(strict.find("seq_len: 64"), 11, "seq_len: 8");
  const std::string strict_recipe = quantd.temp() + "/strict.yaml";
  ASSERT_TRUE(WriteFileAtomically(strict_recipe, strict).ok());

  for (const auto& [recipe, verdict, code] :
       {std::make_tuple(RecipeFile(), std::string("PASS"), 0),
        std::make_tuple(strict_recipe, std::string("FAIL"), 3)}) {
    SCOPED_TRACE(verdict);
    const RunResult submitted = RunQuantctl(
        absl::StrCat("submit --checkpoint ", Quote(CheckpointDir()),
                     " --recipe ", Quote(recipe), " --calibration ",
                     Quote(CalibrationFile()), " --wait --json", addr));
    ASSERT_EQ(submitted.exit_code, code)
        << submitted.out << submitted.err << quantd.Log();
    const json job = json::parse(submitted.out, nullptr, false);
    ASSERT_TRUE(job.is_object()) << submitted.out;
    EXPECT_EQ(job["state"], "SUCCEEDED");
    EXPECT_EQ(job["verdict"], verdict);
    EXPECT_EQ(job["progress"]["blocks_done"], 5);
    EXPECT_EQ(job["progress"]["blocks_total"], 5);
    const std::string id = job["id"];
    const std::string artifact = job["artifact_uri"];
    ASSERT_EQ(artifact.rfind("file://", 0), 0u) << artifact;

    const RunResult status = RunQuantctl("status " + id + " --json" + addr);
    EXPECT_EQ(status.exit_code, 0) << status.err;
    EXPECT_EQ(json::parse(status.out, nullptr, false)["verdict"], verdict);

    const RunResult watched = RunQuantctl("watch " + id + addr);
    EXPECT_EQ(watched.exit_code, code) << watched.out << watched.err;
    EXPECT_THAT(watched.out + watched.err, HasSubstr(verdict));
    // Watched after the end: every layer's row once, then the final state.
    for (int b = 0; b < 5; ++b) {
      const std::string row =
          absl::StrCat("model.layers.", b, ".mlp.down_proj ");
      const size_t at = watched.out.find(row);
      ASSERT_NE(at, std::string::npos) << row << watched.out;
      EXPECT_EQ(watched.out.find(row, at + 1), std::string::npos)
          << watched.out;
      EXPECT_LT(at, watched.out.find(": SUCCEEDED")) << watched.out;
    }

    // The job's warnings: none on the full recipe; on the short windows one
    // from submit and one from the audit, which watch prints at the end.
    std::vector<std::string> warnings;
    for (const json& w : job["warnings"]) warnings.push_back(w);
    const std::string audit_warning =
        "audit: 5 layers calibrated on 128 tokens, fewer than their 172 "
        "inputs "
        "(T < K)";
    if (verdict == "PASS") {
      EXPECT_THAT(warnings, ::testing::IsEmpty());
      EXPECT_THAT(watched.err, Not(HasSubstr("warning:")));
    } else {
      ASSERT_EQ(warnings.size(), 2u) << submitted.out;
      EXPECT_THAT(warnings[0], HasSubstr("at most 128 tokens"));
      EXPECT_THAT(warnings[1], HasSubstr(audit_warning));
      EXPECT_THAT(warnings[1], HasSubstr("model.layers.0.mlp.down_proj"));
      EXPECT_THAT(watched.err, HasSubstr("warning: " + audit_warning));
    }

    const RunResult report = RunQuantctl("report " + id + " --json" + addr);
    EXPECT_EQ(report.exit_code, code) << report.err;
    const json r = json::parse(report.out, nullptr, false);
    ASSERT_TRUE(r.is_object()) << report.out;
    EXPECT_EQ(r["verdict"], verdict);
    ASSERT_EQ(r["layers"].size(), 35u);
    // The same numbers as the artifact's audit.json.
    auto audit_text = ReadFileToString(artifact.substr(7) + "/audit.json");
    ASSERT_TRUE(audit_text.ok());
    const json audit = json::parse(*audit_text);
    for (size_t i = 0; i < 35; ++i) {
      for (const char* key :
           {"name", "type", "method", "bits", "group_size", "packed",
            "rel_output_error_cal", "rel_output_error_heldout",
            "rtn_rel_output_error_heldout", "gain_heldout", "flattery",
            "flags"}) {
        EXPECT_EQ(r["layers"][i][key], audit["layers"][i][key])
            << "layer " << i << " key " << key;
      }
    }
    EXPECT_EQ(r["gates"]["ppl_ratio"], audit["gates"]["ppl_ratio"]);

    const RunResult table = RunQuantctl("report " + id + addr);
    EXPECT_EQ(table.exit_code, code);
    EXPECT_THAT(table.out, HasSubstr("verdict: " + verdict));

    const std::string copy = quantd.temp() + "/fetched-" + verdict;
    const RunResult fetched = RunQuantctl("fetch " + id + " " + copy + addr);
    EXPECT_EQ(fetched.exit_code, 0) << fetched.err;
    EXPECT_EQ(ReadFileToString(copy + "/model.safetensors").value_or("a"),
              ReadFileToString(artifact.substr(7) + "/model.safetensors")
                  .value_or("b"));
    EXPECT_THAT(fetched.out, HasSubstr("verified against manifest.json"));
    EXPECT_THAT(fetched.out, HasSubstr("signed"));
    EXPECT_EQ(RunQuantctl("verify " + copy).exit_code, 0);
    // Signed provenance: quantd's key verifies the manifest, another does
    // not, and a manifest changed after signing does not either.
    const RunResult signed_ok =
        RunQuantctl("verify " + copy + " --public_key " + keys + "/quantd.pub");
    EXPECT_EQ(signed_ok.exit_code, 0) << signed_ok.out << signed_ok.err;
    EXPECT_THAT(signed_ok.out, HasSubstr("ok       manifest.json.sig"));
    const RunResult other_key =
        RunQuantctl("verify " + copy + " --public_key " + keys + "/other.pub");
    EXPECT_EQ(other_key.exit_code, 1) << other_key.out;
    EXPECT_THAT(other_key.out, HasSubstr("another key"));
    if (verdict == "FAIL") {
      auto manifest = ReadFileToString(copy + "/manifest.json");
      ASSERT_TRUE(manifest.ok());
      ASSERT_TRUE(
          WriteFileAtomically(copy + "/manifest.json", *manifest + " ").ok());
      const RunResult changed = RunQuantctl(
          "verify " + copy + " --public_key " + keys + "/quantd.pub");
      EXPECT_EQ(changed.exit_code, 1) << changed.out;
      EXPECT_THAT(changed.out, HasSubstr("does not verify"));
      std::filesystem::remove(copy + "/manifest.json.sig");
      const RunResult unsigned_copy = RunQuantctl(
          "verify " + copy + " --public_key " + keys + "/quantd.pub");
      EXPECT_EQ(unsigned_copy.exit_code, 1) << unsigned_copy.out;
      EXPECT_THAT(unsigned_copy.out, HasSubstr("not signed"));
    }

    // An artifact damaged after publishing is not fetched: nothing appears.
    if (verdict == "PASS") {
      ASSERT_TRUE(WriteFileAtomically(artifact.substr(7) + "/audit.json",
                                      "{\"tampered\": true}")
                      .ok());
      const std::string second = quantd.temp() + "/fetched-damaged";
      const RunResult refused =
          RunQuantctl("fetch " + id + " " + second + addr);
      EXPECT_EQ(refused.exit_code, 1) << refused.out;
      EXPECT_THAT(refused.err, HasSubstr("does not match its manifest.json"));
      EXPECT_THAT(refused.err, HasSubstr("audit.json: "));
      EXPECT_FALSE(std::filesystem::exists(second));
    }
  }
}

// gates.compare_to through quantd: a job compared with an earlier job by
// its id evaluates that job's checkpoint on its own held-out windows (the
// same recipe, so the same numbers to the bit and a ratio of 1), and a
// previous release quantd cannot use is refused at submit by field.
TEST(QuantctlServiceRunTest, ComparesWithAnEarlierJob) {
  QUANT_REQUIRE_SHARED(CheckpointDir());
  QUANT_REQUIRE_SHARED(CalibrationFile());
  Quantd quantd({"--local-workers=1"});
  ASSERT_FALSE(quantd.address().empty()) << quantd.Log();
  const std::string addr = " --addr " + quantd.address();
  const auto submit = [&](const std::string& recipe) {
    return RunQuantctl(
        absl::StrCat("submit --checkpoint ", Quote(CheckpointDir()),
                     " --recipe ", Quote(recipe), " --calibration ",
                     Quote(CalibrationFile()), " --wait --json", addr));
  };
  const auto audit_of = [](const json& job) {
    const std::string uri = job["artifact_uri"];
    auto text = ReadFileToString(uri.substr(7) + "/audit.json");
    EXPECT_TRUE(text.ok()) << text.status();
    return json::parse(text.value_or("{}"), nullptr, false);
  };
  const RunResult first = submit(RecipeFile());
  ASSERT_EQ(first.exit_code, 0) << first.out << first.err << quantd.Log();
  const json first_job = json::parse(first.out, nullptr, false);
  const std::string first_id = first_job["id"];
  const json first_audit = audit_of(first_job);

  auto recipe_text = ReadFileToString(RecipeFile());
  ASSERT_TRUE(recipe_text.ok());
  const auto with_compare_to = [&](const std::string& compare_to) {
    const std::string path = absl::StrCat(quantd.temp(), "/compare-",
                                          Sha256Hex(compare_to), ".yaml");
    EXPECT_TRUE(
        WriteFileAtomically(
            path, absl::StrCat(*recipe_text, "  compare_to: ", compare_to,
                               "\n  max_ppl_ratio_vs_previous: 1.0\n"))
            .ok());
    return path;
  };
  const RunResult second = submit(with_compare_to(first_id));
  ASSERT_EQ(second.exit_code, 0) << second.out << second.err << quantd.Log();
  const json second_audit = audit_of(json::parse(second.out, nullptr, false));
  const json& gates = second_audit["gates"];
  ASSERT_TRUE(gates.contains("previous")) << gates.dump(2);
  EXPECT_EQ(gates["previous"]["job_id"], first_id);
  EXPECT_EQ(gates["previous"]["perplexity"].get<double>(),
            first_audit["gates"]["perplexity"].get<double>());
  EXPECT_EQ(gates["ppl_ratio_vs_previous"].get<double>(), 1.0);
  // The API carries it: `report --json` and the text report.
  const std::string second_id = json::parse(second.out, nullptr, false)["id"];
  const RunResult report =
      RunQuantctl("report " + second_id + " --json" + addr);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const json reported = json::parse(report.out, nullptr, false);
  EXPECT_EQ(reported["gates"]["previous"]["perplexity"].get<double>(),
            gates["previous"]["perplexity"].get<double>())
      << report.out;
  EXPECT_EQ(reported["gates"]["previous"]["job_id"], first_id);
  // Layer by layer: the earlier job's layer has this job's error.
  int compared = 0;
  for (const json& layer : reported["layers"]) {
    if (!layer.contains("previous_rel_output_error_heldout")) continue;
    EXPECT_NEAR(layer["previous_rel_output_error_heldout"].get<double>(),
                layer["rel_output_error_heldout"].get<double>(),
                1e-6 * layer["rel_output_error_heldout"].get<double>())
        << layer.dump();
    ++compared;
  }
  EXPECT_GT(compared, 0) << report.out;
  const RunResult text = RunQuantctl("report " + second_id + addr);
  EXPECT_THAT(text.out, HasSubstr("previous release " + first_id));
  EXPECT_THAT(text.out, HasSubstr("gate max_ppl_ratio_vs_previous"));

  // Refused at submit, naming the field: a job that does not exist, a
  // directory outside the allowed roots, one that holds no checkpoint.
  const std::string empty_dir = quantd.temp() + "/not-a-release";
  ASSERT_TRUE(MakeDirectory(empty_dir).ok());
  for (const auto& [compare_to, says] :
       {std::make_pair(std::string("job-999999"), std::string("no such job")),
        std::make_pair(std::string("file:///etc"),
                       std::string("outside the allowed roots")),
        std::make_pair("file://" + empty_dir, std::string("config.json"))}) {
    SCOPED_TRACE(compare_to);
    const RunResult refused = submit(with_compare_to(compare_to));
    EXPECT_NE(refused.exit_code, 0) << refused.out;
    EXPECT_THAT(refused.err, HasSubstr("recipe.gates.compare_to"));
    EXPECT_THAT(refused.err, HasSubstr(says));
  }
}

// Issue 21: a calibration set of conversations, rendered with a chat
// template named in the recipe, through quantd and its worker; the
// manifest records the template by content, the system prompt and how many
// conversations were used; the same job run locally sees the same tokens.
TEST(QuantctlServiceRunTest, ConversationsCalibrateThroughTheChatTemplate) {
  QUANT_REQUIRE_SHARED(CheckpointDir());
  QUANT_REQUIRE_SHARED(CalibrationFile());
  Quantd quantd({"--local-workers=1"});
  ASSERT_FALSE(quantd.address().empty()) << quantd.Log();
  const std::string addr = " --addr " + quantd.address();
  const std::string dir = quantd.temp();

  const std::string chat_template =
      "{{ bos_token }}{% for m in messages %}{{ m.role }}: {{ m.content }}\n"
      "{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";
  const std::string template_path = dir + "/chat.jinja";
  ASSERT_TRUE(WriteFileAtomically(template_path, chat_template).ok());
  // Conversations around TinyStories paragraphs.
  auto stories = ReadFileToString(CalibrationFile());
  ASSERT_TRUE(stories.ok());
  std::string conversations;
  int count = 0;
  for (absl::string_view paragraph : absl::StrSplit(*stories, "\n\n")) {
    paragraph = absl::StripAsciiWhitespace(paragraph);
    if (paragraph.empty()) continue;
    json line = {{"messages",
                  {{{"role", "user"}, {"content", "Tell me a story."}},
                   {{"role", "assistant"}, {"content", paragraph}}}}};
    absl::StrAppend(&conversations, line.dump(), "\n");
    if (++count == 120) break;
  }
  const std::string calibration = dir + "/conversations.jsonl";
  ASSERT_TRUE(WriteFileAtomically(calibration, conversations).ok());
  const auto recipe_with = [&](const std::string& name,
                               const std::string& lines) {
    return RecipeVariant(dir, name, lines);
  };
  const std::string recipe =
      recipe_with("chat.yaml", "  chat_template: " + template_path +
                                   "\n  system_prompt: You tell stories.\n");

  const RunResult run =
      RunQuantctl(SubmitOf(recipe, calibration, " --wait --json" + addr));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err << quantd.Log();
  const json job = json::parse(run.out, nullptr, false);
  const std::string artifact = job["artifact_uri"].get<std::string>().substr(7);
  auto manifest_text = ReadFileToString(artifact + "/manifest.json");
  ASSERT_TRUE(manifest_text.ok()) << manifest_text.status();
  const json manifest = json::parse(*manifest_text, nullptr, false);
  const json& chat = manifest["calibration"]["chat_template"];
  ASSERT_TRUE(chat.is_object()) << manifest["calibration"].dump(2);
  EXPECT_EQ(chat["sha256"], Sha256Hex(chat_template));
  EXPECT_EQ(chat["source"], template_path);
  EXPECT_EQ(chat["system_prompt"], "You tell stories.");
  EXPECT_EQ(chat["add_generation_prompt"], false);
  const int used = chat["conversation_documents"];
  EXPECT_GT(used, 0);
  EXPECT_LE(used, count);

  // The same recipe and set run locally: the same conversations, tokens
  // and template.
  const std::string local = dir + "/local-out";
  const RunResult local_run = RunQuantctl(
      absl::StrCat("quantize --local --checkpoint ", Quote(CheckpointDir()),
                   " --calibration ", Quote(calibration), " --recipe ",
                   Quote(recipe), " --out ", Quote(local)));
  ASSERT_EQ(local_run.exit_code, 0) << local_run.out << local_run.err;
  auto local_manifest_text = ReadFileToString(local + "/manifest.json");
  ASSERT_TRUE(local_manifest_text.ok());
  const json local_calibration =
      json::parse(*local_manifest_text, nullptr, false)["calibration"];
  EXPECT_EQ(local_calibration["chat_template"], chat);
  EXPECT_EQ(local_calibration["calibration_tokens"],
            manifest["calibration"]["calibration_tokens"]);

  // Refused at submit, naming the field: a template outside the allowed
  // roots, a relative path, one that does not parse (line:column).
  const std::string broken = dir + "/broken.jinja";
  ASSERT_TRUE(WriteFileAtomically(broken, "{{ bos_token }}\n{% if %}").ok());
  for (const auto& [name, lines, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"outside.yaml", "  chat_template: /etc/hostname\n",
            "outside the allowed roots"},
           {"relative.yaml", "  chat_template: chat.jinja\n", "absolute path"},
           {"broken.yaml", "  chat_template: " + broken + "\n", "2:"}}) {
    SCOPED_TRACE(name);
    const RunResult refused =
        RunQuantctl(SubmitOf(recipe_with(name, lines), calibration, addr));
    EXPECT_NE(refused.exit_code, 0) << refused.out;
    EXPECT_THAT(refused.err, HasSubstr("calibration.chat_template"));
    EXPECT_THAT(refused.err, HasSubstr(says));
  }
}

// gates.tasks through quantd: checked at submit (allowed roots, a file that
// parses and fits the model), scored in the finalize, shown by report with
// the same numbers as the artifact's audit.json; the gate fails the
// verdict (exit 3) when the threshold asks for more than the packed model
// kept.
TEST(QuantctlServiceRunTest, TaskGateIsCheckedAtSubmitAndScoredInTheFinalize) {
  QUANT_REQUIRE_SHARED(CheckpointDir());
  QUANT_REQUIRE_SHARED(CalibrationFile());
  Quantd quantd({"--local-workers=1"});
  ASSERT_FALSE(quantd.address().empty()) << quantd.Log();
  const std::string addr = " --addr " + quantd.address();
  const std::string dir = quantd.temp();
  auto shipped =
      ReadFileToString(testing::FixturesDir() +
                       "/../../recipes/tasks/stories260k_endings.jsonl");
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  ASSERT_TRUE(WriteFileAtomically(dir + "/tasks.jsonl", *shipped).ok());
  const auto recipe_with = [&](const std::string& name,
                               const std::string& lines) {
    return RecipeVariant(dir, name, lines, /*in_gates=*/true);
  };
  const auto submit = [&](const std::string& recipe) {
    return RunQuantctl(
        SubmitOf(recipe, CalibrationFile(), " --wait --json" + addr));
  };

  const RunResult run = submit(recipe_with(
      "tasks.yaml", "  tasks: tasks.jsonl\n  min_task_accuracy_ratio: 0\n"));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err << quantd.Log();
  const json job = json::parse(run.out, nullptr, false);
  ASSERT_TRUE(job.is_object()) << run.out;
  EXPECT_EQ(job["verdict"], "PASS");
  const std::string id = job["id"];
  const std::string artifact = job["artifact_uri"].get<std::string>().substr(7);
  auto audit_text = ReadFileToString(artifact + "/audit.json");
  ASSERT_TRUE(audit_text.ok()) << audit_text.status();
  const json tasks = json::parse(*audit_text)["gates"]["tasks"];
  ASSERT_TRUE(tasks.is_object()) << *audit_text;
  EXPECT_EQ(tasks["file"], dir + "/tasks.jsonl");
  EXPECT_EQ(tasks["candidate"]["items"].size(), 70u);
  EXPECT_EQ(tasks["file_sha256"], Sha256Hex(*shipped));

  const RunResult report = RunQuantctl("report " + id + " --json" + addr);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const json served = json::parse(report.out, nullptr, false)["gates"]["tasks"];
  ASSERT_TRUE(served.is_object()) << report.out;
  EXPECT_EQ(served["file"], tasks["file"]);
  EXPECT_EQ(served["min_ratio"], tasks["min_ratio"]);
  EXPECT_EQ(served["overall"], tasks["overall"]);
  EXPECT_EQ(served["groups"], tasks["groups"]);
  // The runtime conformance checks are served too (without the layers).
  const json runtime =
      json::parse(report.out, nullptr, false)["gates"]["runtime"];
  ASSERT_EQ(runtime.size(), 2u) << report.out;
  EXPECT_EQ(runtime[0]["runtime"], "vllm");
  EXPECT_EQ(runtime[1]["runtime"], "transformers");
  EXPECT_TRUE(runtime[1]["loads"].is_boolean()) << runtime;
  const RunResult table = RunQuantctl("report " + id + addr);
  EXPECT_THAT(table.out, HasSubstr("tasks " + dir + "/tasks.jsonl: 70 tasks"));
  EXPECT_THAT(table.out, HasSubstr("gate min_task_accuracy_ratio"));
  EXPECT_THAT(table.out, HasSubstr("runtime vllm ("));

  // A threshold above what the packed model kept: verdict FAIL.
  const double min_ratio = tasks["min_ratio"];
  if (min_ratio < 1.0) {
    const RunResult failed = submit(recipe_with(
        "strict.yaml", absl::StrCat("  tasks: tasks.jsonl\n"
                                    "  min_task_accuracy_ratio: ",
                                    std::min(1.0, min_ratio + 0.01), "\n")));
    EXPECT_EQ(failed.exit_code, 3) << failed.out << failed.err;
    EXPECT_EQ(json::parse(failed.out, nullptr, false)["verdict"], "FAIL");
  } else {
    ADD_FAILURE() << "the packed model kept every task; the test needs one "
                     "it lost to check a failing threshold";
  }

  // The file is pinned by content at submit: changed under a running job,
  // the job's next task refuses it and the job fails, naming it.
  const RunResult pinned =
      RunQuantctl(SubmitOf(recipe_with("pinned.yaml", "  tasks: tasks.jsonl\n"),
                           CalibrationFile(), addr));
  ASSERT_EQ(pinned.exit_code, 0) << pinned.err;
  const std::string pinned_id(absl::StripAsciiWhitespace(pinned.out));
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/tasks.jsonl", *shipped + "\n\n").ok());
  const RunResult watched = RunQuantctl("watch " + pinned_id + addr);
  EXPECT_EQ(watched.exit_code, 1) << watched.out << watched.err;
  const RunResult status =
      RunQuantctl("status " + pinned_id + " --json" + addr);
  const json failed_job = json::parse(status.out, nullptr, false);
  EXPECT_EQ(failed_job["state"], "FAILED") << status.out;
  EXPECT_THAT(failed_job["error"].get<std::string>(),
              HasSubstr("the job was submitted with " + Sha256Hex(*shipped)));
  ASSERT_TRUE(WriteFileAtomically(dir + "/tasks.jsonl", *shipped).ok());

  // Refused at submit, naming the field.
  ASSERT_TRUE(WriteFileAtomically(dir + "/bad.jsonl",
                                  "{\"prompt\": \"x\", \"target\": 3}\n")
                  .ok());
  std::string long_prompt(4000, 'a');
  for (size_t i = 1; i < long_prompt.size(); i += 2) long_prompt[i] = ' ';
  ASSERT_TRUE(WriteFileAtomically(
                  dir + "/long.jsonl",
                  json{{"prompt", long_prompt}, {"target", "b"}}.dump() + "\n")
                  .ok());
  for (const auto& [name, lines, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"outside.yaml", "  tasks: /etc/hostname\n",
            "outside the allowed roots"},
           {"bad.yaml", "  tasks: bad.jsonl\n", "line 1"},
           {"long.yaml", "  tasks: long.jsonl\n", "line 1"},
           {"absent.yaml", "  tasks: absent.jsonl\n", "absent.jsonl"}}) {
    SCOPED_TRACE(name);
    const RunResult refused = RunQuantctl(
        SubmitOf(recipe_with(name, lines), CalibrationFile(), addr));
    EXPECT_NE(refused.exit_code, 0) << refused.out;
    EXPECT_THAT(refused.err, HasSubstr("recipe.gates.tasks"));
    EXPECT_THAT(refused.err, HasSubstr(says));
  }
}

// recipe calibration.sources through quantd: one set uploaded (named by
// sha256), one a file under the allowed roots; each split on its own and
// recorded per source in the manifest, with the same windows as the same
// mix run locally (both sources as files there).
TEST(QuantctlServiceRunTest, MixedCalibrationSourcesAreRecordedPerSource) {
  QUANT_REQUIRE_SHARED(CheckpointDir());
  QUANT_REQUIRE_SHARED(CalibrationFile());
  Quantd quantd({"--local-workers=1"});
  ASSERT_FALSE(quantd.address().empty()) << quantd.Log();
  const std::string addr = " --addr " + quantd.address();
  const std::string dir = quantd.temp();
  // Two sets from TinyStories: the first 150 paragraphs and the next 50.
  auto stories = ReadFileToString(CalibrationFile());
  ASSERT_TRUE(stories.ok());
  std::string first;
  std::string second;
  int count = 0;
  for (absl::string_view paragraph : absl::StrSplit(*stories, "\n\n")) {
    paragraph = absl::StripAsciiWhitespace(paragraph);
    if (paragraph.empty()) continue;
    absl::StrAppend(count < 150 ? &first : &second, paragraph, "\n\n");
    if (++count == 200) break;
  }
  ASSERT_TRUE(WriteFileAtomically(dir + "/first.txt", first).ok());
  ASSERT_TRUE(WriteFileAtomically(dir + "/second.txt", second).ok());
  const RunResult uploaded =
      RunQuantctl("calib upload " + Quote(dir + "/first.txt") + addr);
  ASSERT_EQ(uploaded.exit_code, 0) << uploaded.err;
  const std::string first_sha = Sha256Hex(first);
  const std::string second_sha = Sha256Hex(second);

  const auto recipe_with = [&](const std::string& name,
                               const std::string& sources) {
    return RecipeVariant(dir, name, "  sources:\n" + sources);
  };
  const std::string recipe = recipe_with(
      "mixed.yaml", "    - {sha256: " + first_sha + ", weight: 3}\n" +
                        "    - {file: second.txt, weight: 1}\n");
  const RunResult run =
      RunQuantctl(SubmitOf(recipe, "", " --wait --json" + addr));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err << quantd.Log();
  const json job = json::parse(run.out, nullptr, false);
  const std::string artifact = job["artifact_uri"].get<std::string>().substr(7);
  auto manifest_text = ReadFileToString(artifact + "/manifest.json");
  ASSERT_TRUE(manifest_text.ok()) << manifest_text.status();
  const json calibration =
      json::parse(*manifest_text, nullptr, false)["calibration"];
  const json& sources = calibration["sources"];
  ASSERT_EQ(sources.size(), 2u) << calibration.dump(2);
  EXPECT_EQ(sources[0]["sha256"], first_sha);
  EXPECT_EQ(sources[1]["sha256"], second_sha);
  EXPECT_EQ(sources[0]["weight"], 3.0);
  // 16 windows, one each, then 14 shared 3:1 (10.5 and 3.5, the tie to
  // the first): 12 and 4.
  EXPECT_EQ(sources[0]["samples"], 12);
  EXPECT_EQ(sources[1]["samples"], 4);
  // A quarter of each source held out.
  EXPECT_EQ(sources[0]["heldout_documents"].size(), 38u);
  EXPECT_EQ(sources[1]["heldout_documents"].size(), 13u);
  EXPECT_EQ(job["calibration_sha256"], calibration["sha256"]);
  EXPECT_EQ(calibration["sha256"],
            Sha256Hex(absl::StrCat(first_sha, " 3\n", second_sha, " 1\n")));

  // The same mix locally, both as files: the same split.
  const std::string local_recipe =
      recipe_with("mixed-local.yaml",
                  "    - {file: first.txt, weight: 3}\n"
                  "    - {file: second.txt, sha256: " +
                      second_sha + "}\n");
  const std::string local = dir + "/local-out";
  const RunResult local_run = RunQuantctl(
      absl::StrCat("quantize --local --checkpoint ", Quote(CheckpointDir()),
                   " --recipe ", Quote(local_recipe), " --out ", Quote(local)));
  ASSERT_EQ(local_run.exit_code, 0) << local_run.out << local_run.err;
  auto local_manifest = ReadFileToString(local + "/manifest.json");
  ASSERT_TRUE(local_manifest.ok());
  const json local_calibration =
      json::parse(*local_manifest, nullptr, false)["calibration"];
  EXPECT_EQ(local_calibration["sources"], sources);
  EXPECT_EQ(local_calibration["calibration_tokens"],
            calibration["calibration_tokens"]);
  // Its held-out windows cannot be rebuilt from one file.
  const RunResult heldout = RunQuantctl(
      absl::StrCat("eval --checkpoint ", Quote(local), " --reference ",
                   Quote(CheckpointDir()), " --text ",
                   Quote(dir + "/first.txt"), " --heldout_of ", Quote(local)));
  EXPECT_EQ(heldout.exit_code, 1) << heldout.out;
  EXPECT_THAT(heldout.err, HasSubstr("2 sources mixed by weight"));

  // Refused, naming the field.
  const RunResult both = RunQuantctl(SubmitOf(recipe, CalibrationFile(), addr));
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_THAT(both.err, HasSubstr("leave --calibration out"));
  for (const auto& [name, lines, says] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"outside.yaml", "    - {file: /etc/hostname}\n",
            "outside the allowed roots"},
           {"unknown.yaml", "    - {sha256: " + std::string(64, 'f') + "}\n",
            "was uploaded"},
           {"wrong.yaml",
            "    - {file: second.txt, sha256: " + first_sha + "}\n",
            "has sha256 " + second_sha}}) {
    SCOPED_TRACE(name);
    const RunResult refused =
        RunQuantctl(SubmitOf(recipe_with(name, lines), "", addr));
    EXPECT_EQ(refused.exit_code, 1) << refused.out;
    EXPECT_THAT(refused.err, HasSubstr("recipe.calibration.sources[0]"));
    EXPECT_THAT(refused.err, HasSubstr(says));
  }
  const RunResult sha_only = RunQuantctl(absl::StrCat(
      "quantize --local --checkpoint ", Quote(CheckpointDir()), " --recipe ",
      Quote(recipe), " --out ", Quote(dir + "/never")));
  EXPECT_EQ(sha_only.exit_code, 1);
  EXPECT_THAT(sha_only.err, HasSubstr("a local run needs its file"));
  EXPECT_FALSE(FileExists(dir + "/never"));
}

// recipe mixed_precision through quantd: the first block task measures the
// selection, every task packs its layers at it, and the report (JSON and
// table) says what each group got and why.
TEST(QuantctlServiceRunTest, MixedPrecisionIsChosenPackedAndReported) {
  QUANT_REQUIRE_SHARED(CheckpointDir());
  QUANT_REQUIRE_SHARED(CalibrationFile());
  Quantd quantd({"--local-workers=1"});
  ASSERT_FALSE(quantd.address().empty()) << quantd.Log();
  const std::string addr = " --addr " + quantd.address();
  const std::string recipe =
      RecipeVariant(quantd.temp(), "mixed.yaml",
                    "mixed_precision:\n  average_bits: 5\n  bits: [3, 4, 8]\n");
  const RunResult run =
      RunQuantctl(SubmitOf(recipe, CalibrationFile(), " --wait --json" + addr));
  ASSERT_EQ(run.exit_code, 0) << run.out << run.err << quantd.Log();
  const json job = json::parse(run.out, nullptr, false);
  ASSERT_TRUE(job.is_object()) << run.out;
  const std::string id = job["id"];
  const std::string artifact = job["artifact_uri"].get<std::string>().substr(7);
  auto audit_text = ReadFileToString(artifact + "/audit.json");
  ASSERT_TRUE(audit_text.ok()) << audit_text.status();
  const json audit = json::parse(*audit_text);
  const json& selection = audit["mixed_precision"];
  ASSERT_TRUE(selection.is_object()) << *audit_text;
  EXPECT_LE(selection["chosen_average_bits"].get<double>(), 5.0);
  ASSERT_EQ(selection["groups"].size(), 20u);

  const RunResult report = RunQuantctl("report " + id + " --json" + addr);
  ASSERT_EQ(report.exit_code, 0) << report.err;
  const json served = json::parse(report.out, nullptr, false);
  const json& served_selection = served["mixed_precision"];
  ASSERT_TRUE(served_selection.is_object()) << report.out;
  EXPECT_EQ(served_selection["chosen_bits"], selection["chosen_bits"]);
  std::map<std::string, int> bits_of;
  for (size_t g = 0; g < selection["groups"].size(); ++g) {
    const json& group = selection["groups"][g];
    const json& theirs = served_selection["groups"][g];
    EXPECT_EQ(theirs["chosen"], group["chosen"]);
    EXPECT_EQ(theirs["candidates"][0]["cost_bits"],
              group["candidates"][0]["cost_bits"]);
    for (const json& layer : group["layers"]) {
      bits_of[layer.get<std::string>()] =
          group["candidates"][group["chosen"].get<int>()]["bits"];
    }
  }
  // Every layer the workers packed has its group's bits.
  ASSERT_EQ(served["layers"].size(), 35u);
  for (const json& layer : served["layers"]) {
    EXPECT_EQ(layer["bits"], bits_of[layer["name"].get<std::string>()])
        << layer["name"];
  }
  const RunResult table = RunQuantctl("report " + id + addr);
  EXPECT_THAT(table.out, HasSubstr("mixed precision: "));
  EXPECT_THAT(table.out, HasSubstr("for a budget of 5 "));
  EXPECT_THAT(table.out, HasSubstr("block 4   mlp_out "));
}

}  // namespace
}  // namespace quant
