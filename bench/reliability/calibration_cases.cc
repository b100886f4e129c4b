// The calibration rows: hashes, malformed or oversized uploads, and sets
// that only the job's tokenization can judge (ids outside the vocabulary,
// too few tokens for one window).
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "bench/reliability/bad_input_cases.h"
#include "bench/reliability/case_actions.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"

namespace quant::reliability {
namespace {

// stories260K's vocabulary has 512 tokens.
constexpr int kOutOfVocabulary = 9999;

BadInputCase Case(std::string name, std::string input, Expectation expect,
                  std::function<Observation(BadInputEnv&)> act) {
  BadInputCase c;
  c.name = std::move(name);
  c.input = std::move(input);
  c.expect = std::move(expect);
  c.act = std::move(act);
  return c;
}

// Six documents of 40 in-vocabulary ids; line 4's has one outside.
std::string IdsOutsideVocabulary() {
  std::string text;
  for (int line = 1; line <= 6; ++line) {
    std::vector<int> ids;
    for (int i = 0; i < 40; ++i) ids.push_back(1 + (line * 37 + i * 11) % 500);
    if (line == 4) ids[7] = kOutOfVocabulary;
    absl::StrAppend(&text, "{\"input_ids\": [", absl::StrJoin(ids, ", "),
                    "]}\n");
  }
  return text;
}

}  // namespace

std::vector<BadInputCase> CalibrationCases() {
  std::vector<BadInputCase> cases;
  cases.push_back(Case(
      "calibration/hash_mismatch",
      "uri + sha256: a file under the root with another file's sha256",
      {Stage::kCreateJob, "FAILED_PRECONDITION", {"calibration.uri.sha256"}},
      [](BadInputEnv& env) {
        const std::string path =
            JoinPath(env.temp_dir(), "inputs/calib/mismatch.txt");
        const std::string text =
            env.good_calibration_text() + "One more story.\n";
        if (absl::Status s = WriteFileAtomically(path, text); !s.ok()) {
          return SetupFailed(s);
        }
        Observation observed =
            CreateWith(env, [&](BadInputEnv& e, v1::CreateJobRequest& request) {
              v1::UriWithHash* uri =
                  request.mutable_calibration()->mutable_uri();
              uri->set_uri("file://" + path);
              uri->set_sha256(e.good_calibration_sha256());
              return absl::OkStatus();
            });
        observed.unstored_sha256 = Sha256Hex(text);
        return observed;
      }));
  cases.push_back(Case(
      "calibration/unknown_hash", "calibration.sha256 of a set never uploaded",
      {Stage::kCreateJob, "NOT_FOUND", {"calibration.sha256"}},
      [](BadInputEnv& env) {
        return CreateWith(env, [](BadInputEnv&, v1::CreateJobRequest& r) {
          r.mutable_calibration()->set_sha256(Sha256Hex("never uploaded"));
          return absl::OkStatus();
        });
      }));
  cases.push_back(
      Case("calibration/invalid_jsonl",
           "broken.jsonl: lines 1-2 fine, line 3 an unterminated string",
           {Stage::kUploadCalibration,
            "INVALID_ARGUMENT",
            {"broken.jsonl", "line 3"}},
           [](BadInputEnv& env) {
             return UploadThenCreate(env, "broken.jsonl",
                                     "{\"text\": \"Once upon a time.\"}\n"
                                     "{\"text\": \"There was a cat.\"}\n"
                                     "{\"text\": \"It was\n"
                                     "{\"text\": \"The end.\"}\n",
                                     nullptr);
           }));
  BadInputCase vocabulary =
      Case("calibration/ids_outside_vocabulary",
           absl::StrCat("ids.jsonl: input_ids with ", kOutOfVocabulary,
                        " on line 4 (vocabulary 512)"),
           {Stage::kJob, "FAILED", {"line 4", "input_ids", "vocabulary"}},
           [](BadInputEnv& env) {
             return UploadThenCreate(env, "ids.jsonl", IdsOutsideVocabulary(),
                                     nullptr);
           });
  vocabulary.also_accepted = {{Stage::kCreateJob,
                               "INVALID_ARGUMENT",
                               {"line 4", "input_ids", "vocabulary"}}};
  cases.push_back(std::move(vocabulary));
  BadInputCase few = Case(
      "calibration/too_few_tokens",
      "short.txt: 4 one-line documents; recipe seq_len 512",
      {Stage::kJob, "FAILED", {"seq_len"}}, [](BadInputEnv& env) {
        return UploadThenCreate(
            env, "short.txt",
            "Once upon a time.\n\nThere was a cat.\n\nIt was red.\n\n"
            "The end.\n",
            [](BadInputEnv&, v1::CreateJobRequest& request) {
              request.mutable_recipe()->mutable_calibration()->set_seq_len(512);
              return absl::OkStatus();
            });
      });
  few.also_accepted = {{Stage::kCreateJob, "INVALID_ARGUMENT", {"seq_len"}}};
  cases.push_back(std::move(few));
  cases.push_back(Case(
      "calibration/upload_too_large",
      "huge.txt: 1.5 MiB of stories, over --max_upload_mb=1",
      {Stage::kUploadCalibration, "RESOURCE_EXHAUSTED", {"huge.txt", "limit"}},
      [](BadInputEnv& env) {
        std::string text;
        while (text.size() < (3u << 19)) text += env.good_calibration_text();
        return UploadThenCreate(env, "huge.txt", text, nullptr);
      }));
  return cases;
}

}  // namespace quant::reliability
