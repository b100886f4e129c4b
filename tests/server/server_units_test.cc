// Unit tests of quantd's pieces that need no server: recipe conversion,
// the URI policy, the loopback check, the task plan and the artifact store.
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/recipe_convert.h"
#include "common/token_file.h"
#include "core/base/clock.h"
#include "core/base/file_util.h"
#include "core/base/sha256.h"
#include "core/pipeline/finalize_part_tasks.h"
#include "core/pipeline/task_io.h"
#include "core/recipe/recipe.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/artifact_store.h"
#include "server/auth.h"
#include "server/data_dir_lock.h"
#include "server/job_spec.h"
#include "server/listen_address.h"
#include "server/reported_layer_check.h"
#include "server/store/sqlite_job_store.h"
#include "server/task_plan.h"
#include "server/uri_policy.h"
#include "tests/support/test_env.h"

namespace quant::server {
namespace {

std::string RealTempDir() {
  char buffer[PATH_MAX];
  const std::string dir = testing::MakeTempDir();
  return realpath(dir.c_str(), buffer) ? buffer : dir;
}

TEST(RecipeConvertTest, UnspecifiedEnumsAndUnsetMessagesTakeDefaults) {
  v1::Recipe proto;
  proto.set_bits(4);
  proto.set_group_size(128);
  proto.add_ignore("lm_head");
  auto recipe = common::RecipeFromProto(proto);
  ASSERT_TRUE(recipe.ok()) << recipe.status();
  EXPECT_EQ(*recipe, Recipe());  // Exactly the struct's defaults.
}

TEST(RecipeConvertTest, RoundTripsEveryField) {
  Recipe recipe;
  recipe.method = QuantMethod::kGptq;
  recipe.bits = 3;
  recipe.group_size = 64;
  recipe.grid = QuantGrid::kAsym;
  recipe.damp.automatic = true;
  recipe.damp.auto_grid = {0.01, 0.1};
  recipe.act_order = true;
  recipe.static_groups = true;
  recipe.propagation = Propagation::kIndependent;
  recipe.calibration.samples = 16;
  recipe.calibration.seq_len = 256;
  recipe.calibration.heldout_count = 4;
  recipe.calibration.seed = 7;
  recipe.calibration.packing = CalibrationPacking::kPerDocument;
  recipe.calibration.chat_template = "file:///srv/chat.jinja";
  recipe.calibration.system_prompt = "";
  recipe.calibration.add_generation_prompt = true;
  recipe.calibration.sources = {{"/srv/a.jsonl", "", 2.5},
                                {"", std::string(64, 'e'), 1.0}};
  LayerOverride layer;
  layer.match = "model\\.layers\\.0\\..*";
  layer.bits = 8;
  layer.method = QuantMethod::kRtn;
  layer.damp = DampValue{false, 0.05};
  recipe.overrides.push_back(layer);
  recipe.gates.max_ppl_ratio = 1.05;
  recipe.gates.min_top1_agreement = 0.9;
  recipe.gates.compare_to = "job-000007";
  recipe.gates.max_ppl_ratio_vs_previous = 1.02;
  recipe.gates.tasks = "file:///srv/tasks.jsonl";
  recipe.gates.min_task_accuracy_ratio = 0.9;
  recipe.gates.runtime = "vllm";
  recipe.format = OutputFormat::kCompressedTensors;
  ASSERT_TRUE(ValidateRecipe(recipe).ok()) << ValidateRecipe(recipe);
  auto back = common::RecipeFromProto(common::RecipeToProto(recipe));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, recipe);
  EXPECT_EQ(RecipeToJson(*back), RecipeToJson(recipe));
}

TEST(RecipeConvertTest, MixedPrecisionRoundTrips) {
  Recipe recipe;
  recipe.mixed_precision = MixedPrecision{4.25, {3, 4, 8}, {64, 128}, true};
  ASSERT_TRUE(ValidateRecipe(recipe).ok()) << ValidateRecipe(recipe);
  const v1::Recipe proto = common::RecipeToProto(recipe);
  EXPECT_TRUE(proto.has_mixed_precision());
  auto back = common::RecipeFromProto(proto);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, recipe);
  EXPECT_EQ(RecipeToJson(*back), RecipeToJson(recipe));
  // Without it the proto has none either.
  EXPECT_FALSE(common::RecipeToProto(Recipe()).has_mixed_precision());
}

TEST(RecipeConvertTest, MixtureOfExpertsPolicyRoundTrips) {
  for (const MoeCalibration& moe :
       {MoeCalibration{ExpertRouting::kAllExperts, 512,
                       StarvedExpertAction::kFail},
        MoeCalibration{ExpertRouting::kNatural, 64, StarvedExpertAction::kDamp},
        MoeCalibration{}}) {
    Recipe recipe;
    recipe.moe = moe;
    recipe.gates.max_starved_experts = 0.125;
    ASSERT_TRUE(ValidateRecipe(recipe).ok()) << ValidateRecipe(recipe);
    const v1::Recipe proto = common::RecipeToProto(recipe);
    ASSERT_TRUE(proto.has_moe());
    auto back = common::RecipeFromProto(proto);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, recipe);
    EXPECT_EQ(RecipeToJson(*back), RecipeToJson(recipe));
  }
  EXPECT_FALSE(common::RecipeToProto(Recipe()).has_moe());
  // Unset enums read as the defaults; unknown ones and bad counts are
  // refused naming the field.
  v1::Recipe proto = common::RecipeToProto(Recipe());
  proto.mutable_moe();
  auto defaults = common::RecipeFromProto(proto);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(*defaults->moe, MoeCalibration{});
  proto.mutable_moe()->set_routing(static_cast<v1::ExpertRouting>(9));
  auto bad = common::RecipeFromProto(proto);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(absl::StrContains(bad.status().message(), "recipe.moe.routing"))
      << bad.status();
  proto.mutable_moe()->set_routing(v1::EXPERT_ROUTING_NATURAL);
  proto.mutable_moe()->set_min_tokens_per_expert(-3);
  bad = common::RecipeFromProto(proto);
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(
      absl::StrContains(bad.status().message(),
                        "recipe.moe.min_tokens_per_expert: -3 is out of range"))
      << bad.status();
}

TEST(RecipeConvertTest, ErrorsNameTheField) {
  v1::Recipe proto = common::RecipeToProto(Recipe());
  proto.add_overrides()->set_match("x");
  proto.add_overrides()->set_bits(6);
  proto.mutable_overrides(1)->set_match("y");
  auto recipe = common::RecipeFromProto(proto);
  ASSERT_FALSE(recipe.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(recipe.status()));
  // overrides[0] sets nothing: the first error.
  EXPECT_NE(recipe.status().message().find("recipe.overrides[0]"),
            std::string::npos)
      << recipe.status();
  proto.mutable_overrides(0)->set_keep_unquantized(true);
  recipe = common::RecipeFromProto(proto);
  ASSERT_FALSE(recipe.ok());
  EXPECT_NE(recipe.status().message().find("recipe.overrides[1].bits"),
            std::string::npos)
      << recipe.status();

  proto = common::RecipeToProto(Recipe());
  proto.set_grid(static_cast<v1::Grid>(9));
  recipe = common::RecipeFromProto(proto);
  ASSERT_FALSE(recipe.ok());
  EXPECT_NE(recipe.status().message().find("recipe.grid"), std::string::npos);
}

JobSpec SampleSpec() {
  JobSpec spec;
  spec.checkpoint_uri = "file:///models/m";
  spec.checkpoint_path = "/models/m";
  spec.num_blocks = 5;
  spec.recipe.bits = 3;
  spec.calibration_sha256 = std::string(64, 'a');
  spec.calibration_path = "/data/c.txt";
  spec.labels = {{"team", "release"}, {"run", "7"}};
  spec.warnings = {"override 'x' matches no layer"};
  return spec;
}

TEST(JobSpecTest, RoundTripsEveryField) {
  const JobSpec spec = SampleSpec();
  auto back = JobSpecFromJson(JobSpecToJson(spec));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->checkpoint_uri, spec.checkpoint_uri);
  EXPECT_EQ(back->checkpoint_path, spec.checkpoint_path);
  EXPECT_EQ(back->num_blocks, 5);
  EXPECT_EQ(back->recipe, spec.recipe);
  EXPECT_EQ(back->calibration_sha256, spec.calibration_sha256);
  EXPECT_EQ(back->calibration_path, spec.calibration_path);
  EXPECT_EQ(back->labels, spec.labels);
  EXPECT_EQ(back->warnings, spec.warnings);
  EXPECT_TRUE(back->calibration_sources.empty());
  EXPECT_TRUE(back->tasks_sha256.empty());

  // A mixed set's sources and the pinned files.
  JobSpec mixed = spec;
  mixed.calibration_path.clear();
  mixed.calibration_sources = {{std::string(64, 'b'), "/data/b.jsonl", 3.0},
                               {std::string(64, 'c'), "/data/c.txt", 0.25}};
  mixed.chat_template_sha256 = std::string(64, 'd');
  mixed.tasks_sha256 = std::string(64, 'e');
  back = JobSpecFromJson(JobSpecToJson(mixed));
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->calibration_sources.size(), 2u);
  EXPECT_EQ(back->calibration_sources[1].sha256, std::string(64, 'c'));
  EXPECT_EQ(back->calibration_sources[1].path, "/data/c.txt");
  EXPECT_EQ(back->calibration_sources[1].weight, 0.25);
  EXPECT_EQ(back->chat_template_sha256, std::string(64, 'd'));
  EXPECT_EQ(back->tasks_sha256, std::string(64, 'e'));
}

// A stored spec this code did not write is an internal error that names the
// field, never an exception or a silently defaulted value.
TEST(JobSpecTest, CorruptStoredSpecsNameTheField) {
  const std::string good = JobSpecToJson(SampleSpec());
  auto expect_error = [](const std::string& text, const std::string& names) {
    auto spec = JobSpecFromJson(text);
    ASSERT_FALSE(spec.ok()) << text;
    EXPECT_TRUE(absl::IsInternal(spec.status())) << spec.status();
    EXPECT_TRUE(absl::StrContains(spec.status().message(), "stored job spec"))
        << spec.status();
    EXPECT_TRUE(absl::StrContains(spec.status().message(), names))
        << spec.status() << " should name " << names;
  };
  auto replaced = [&good](const std::string& from, const std::string& to) {
    const size_t at = good.find(from);
    EXPECT_NE(at, std::string::npos) << from;
    std::string text = good;
    return at == std::string::npos ? text : text.replace(at, from.size(), to);
  };
  expect_error("{", "spec_json");
  expect_error("[]", "spec_json: expected an object");
  expect_error(replaced("\"uri\":", "\"url\":"), "checkpoint.uri: missing");
  expect_error(replaced("\"blocks\":5", "\"blocks\":\"5\""),
               "checkpoint.blocks: expected an integer");
  expect_error(replaced("\"blocks\":5", "\"blocks\":-1"),
               "checkpoint.blocks: out of range");
  expect_error(replaced("\"run\":\"7\"", "\"run\":7"),
               "labels.run: expected a string");
  expect_error(replaced("[\"override", "[1,\"override"),
               "warnings[0]: expected a string");
  expect_error(replaced("\"calibration\":", "\"calibration\":7,\"x\":"),
               "calibration: expected an object, got number");
  expect_error(replaced("\"bits\":3", "\"bitz\":3"), "bitz");
}

TEST(UriPolicyTest, ResolvesUnderRootsAndRefusesEscapes) {
  const std::string root = RealTempDir();
  const std::string other = RealTempDir();
  ASSERT_EQ(mkdir((root + "/models").c_str(), 0755), 0);
  ASSERT_TRUE(WriteFileAtomically(other + "/secret", "x").ok());
  ASSERT_EQ(symlink(other.c_str(), (root + "/models/out").c_str()), 0);
  ASSERT_EQ(symlink((root + "/models").c_str(), (other + "/in").c_str()), 0);
  auto policy = UriPolicy::Create({root + "/models"});
  ASSERT_TRUE(policy.ok()) << policy.status();

  auto path = policy->Resolve("file://" + root + "/models/./", "f");
  ASSERT_TRUE(path.ok()) << path.status();
  EXPECT_EQ(*path, root + "/models");

  for (const std::string& uri :
       {"file://" + root + "/models/../models/../x",
        "file://" + root + "/models/out/secret", "file://" + other + "/secret",
        std::string("file:///")}) {
    SCOPED_TRACE(uri);
    auto refused = policy->Resolve(uri, "checkpoint_uri");
    EXPECT_TRUE(absl::IsPermissionDenied(refused.status())) << refused.status();
    EXPECT_NE(refused.status().message().find("checkpoint_uri"),
              std::string::npos);
    EXPECT_NE(refused.status().message().find(uri), std::string::npos);
  }
  // A symlink from outside into a root: lexically outside, so refused too.
  EXPECT_TRUE(absl::IsPermissionDenied(
      policy->Resolve("file://" + other + "/in", "f").status()));
  EXPECT_TRUE(absl::IsNotFound(
      policy->Resolve("file://" + root + "/models/none", "f").status()));
  for (const char* bad :
       {"", "/abs/path", "file://host/x", "s3://b/k", "file:///x?y"}) {
    SCOPED_TRACE(bad);
    EXPECT_TRUE(absl::IsInvalidArgument(policy->Resolve(bad, "f").status()));
  }
  EXPECT_FALSE(UriPolicy::Create({root + "/missing"}).ok());
  EXPECT_FALSE(UriPolicy::Create({"relative"}).ok());
}

TEST(AuthTest, TokenFilesKeepOneLineOfVisibleAscii) {
  const std::string dir = testing::MakeTempDir();
  const auto read = [&](const std::string& contents) {
    const std::string path = JoinPath(dir, "token");
    EXPECT_TRUE(WriteFileAtomically(path, contents).ok());
    return common::ReadTokenFile(path, "--token_file");
  };
  EXPECT_EQ(*read("0123456789abcdef\n"), "0123456789abcdef");
  EXPECT_EQ(*read("0123456789abcdef\r\n"), "0123456789abcdef");
  EXPECT_EQ(*read("0123456789abcdef"), "0123456789abcdef");
  // Each of these once started quantd; clients could then not send the
  // token (quantctl aborted in gRPC's metadata check) and workers
  // crash-looped.
  const std::string bad[] = {
      "01234567\n89abcdef\n",  // a newline inside
      "0123456789abcdef\n\n",  // two trailing newlines
      std::string("01234567\0"
                  "89abcdef",
                  17),           // a NUL
      "0123456789abcd\xc3\xa9",  // non-ASCII
      "01234567 89abcdef",       // a space
      "short\n",
  };
  for (const std::string& contents : bad) {
    absl::StatusOr<std::string> token = read(contents);
    ASSERT_FALSE(token.ok()) << absl::CHexEscape(contents);
    EXPECT_EQ(token.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_TRUE(absl::StartsWith(token.status().message(), "--token_file: "))
        << token.status();
    // The message never echoes the token's bytes.
    EXPECT_FALSE(absl::StrContains(token.status().message(), "01234567"))
        << token.status();
  }
}

TEST(AuthTest, BearerSchemeIsCaseInsensitive) {
  AuthTokens tokens;
  tokens.client = "client-token-0123456789";
  tokens.worker = "worker-token-0123456789";
  const Authenticator auth(tokens);
  for (const std::string scheme : {"Bearer ", "bearer ", "BEARER "}) {
    const std::string header = scheme + tokens.client;
    EXPECT_TRUE(auth.CheckHeader(&header, CallerRole::kClient).ok()) << scheme;
  }
  const std::string basic = "Basic " + tokens.client;
  EXPECT_TRUE(
      absl::IsUnauthenticated(auth.CheckHeader(&basic, CallerRole::kClient)));
  const std::string worker = "bearer " + tokens.worker;
  EXPECT_TRUE(
      absl::IsPermissionDenied(auth.CheckHeader(&worker, CallerRole::kClient)));
}

TEST(ListenAddressTest, OnlyLoopbackWithoutTokens) {
  for (const char* ok :
       {"127.0.0.1:50051", "127.1.2.3:0", "localhost:1", "[::1]:8080"}) {
    EXPECT_TRUE(CheckListenAddress(ok, false).ok()) << ok;
  }
  for (const char* bad :
       {"0.0.0.0:50051", "[::]:1", "10.0.0.1:1", "example.com:1", "127.0.0.1",
        "127.0.0.1:99999", "127.0.0.1:x"}) {
    const absl::Status status = CheckListenAddress(bad, false);
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << bad;
    EXPECT_NE(status.message().find(bad), std::string::npos) << status;
  }
  // With tokens any host will do; the form is still checked.
  EXPECT_TRUE(CheckListenAddress("0.0.0.0:50051", true).ok());
  EXPECT_TRUE(CheckListenAddress("10.0.0.1:1", true).ok());
  EXPECT_TRUE(absl::IsInvalidArgument(CheckListenAddress("0.0.0.0", true)));
  EXPECT_TRUE(
      absl::IsInvalidArgument(CheckListenAddress("0.0.0.0:70000", true)));
}

// Local workers dial the interface quantd is bound to: a server on a
// veth's or a pod's address does not answer on loopback.
TEST(ListenAddressTest, LocalWorkersDialTheBoundInterface) {
  EXPECT_EQ(LocalDialAddress("10.231.0.1:0", 4321, false), "10.231.0.1:4321");
  EXPECT_EQ(LocalDialAddress("[fd00::1]:0", 4321, false), "[fd00::1]:4321");
  EXPECT_EQ(LocalDialAddress("127.0.0.5:50051", 50051, false),
            "127.0.0.5:50051");
  EXPECT_EQ(LocalDialAddress("localhost:0", 7, false), "localhost:7");
  // Every interface: loopback is one of them.
  EXPECT_EQ(LocalDialAddress("0.0.0.0:50051", 50051, false), "127.0.0.1:50051");
  EXPECT_EQ(LocalDialAddress("[::]:0", 9, false), "127.0.0.1:9");
  // TLS: loopback by the certificate's name, other hosts as given.
  EXPECT_EQ(LocalDialAddress("0.0.0.0:0", 9, true), "localhost:9");
  EXPECT_EQ(LocalDialAddress("127.0.0.1:0", 9, true), "localhost:9");
  EXPECT_EQ(LocalDialAddress("quantd.ns.svc:0", 9, true), "quantd.ns.svc:9");
}

TEST(TaskPlanTest, SequentialChainsIndependentDoesNot) {
  auto sequential = PlanJobTasks(3, Propagation::kSequential);
  ASSERT_EQ(sequential.size(), 4u);
  EXPECT_TRUE(sequential[0].depends_on.empty());
  EXPECT_EQ(sequential[2].depends_on, std::vector<int>{1});
  EXPECT_EQ(sequential[3].kind, store::TaskKind::kFinalize);
  EXPECT_EQ(sequential[3].block, -1);
  EXPECT_EQ(sequential[3].depends_on, (std::vector<int>{0, 1, 2}));
  auto independent = PlanJobTasks(3, Propagation::kIndependent);
  EXPECT_TRUE(independent[2].depends_on.empty());
  EXPECT_EQ(independent[3].depends_on, (std::vector<int>{0, 1, 2}));
}

// --gate_parts: the finalize becomes a pack with its dependencies, the
// parts after the pack, and the finalize after every part; the spec keeps
// the count, and a stored count out of range names the field.
TEST(TaskPlanTest, GatePartsSplitTheFinalize) {
  JobSpec spec;
  spec.num_blocks = 3;
  spec.recipe.propagation = Propagation::kSequential;
  spec.gate_parts = 2;
  const std::vector<store::TaskSpec> plan = PlanJobTasks(spec);
  ASSERT_EQ(plan.size(), 3u + 1 + 2 + 1);
  for (size_t i = 0; i < plan.size(); ++i) {
    EXPECT_EQ(plan[i].index, static_cast<int>(i));
  }
  EXPECT_EQ(plan[3].kind, store::TaskKind::kFinalizePack);
  EXPECT_EQ(plan[3].depends_on, (std::vector<int>{0, 1, 2}));
  for (int part = 0; part < 2; ++part) {
    const store::TaskSpec& task = plan[4 + part];
    EXPECT_EQ(task.kind, store::TaskKind::kGatePart);
    EXPECT_EQ(task.shard, part);
    EXPECT_EQ(task.split, store::TaskSplit::kNone);
    EXPECT_EQ(task.depends_on, std::vector<int>{3});
  }
  EXPECT_EQ(plan[6].kind, store::TaskKind::kFinalize);
  EXPECT_EQ(plan[6].depends_on, (std::vector<int>{4, 5}));
  // What they publish is checked by name.
  store::Task pack;
  pack.kind = store::TaskKind::kFinalizePack;
  EXPECT_EQ(RoundFileOf(pack), StagedFinalizeRecordFile());
  store::Task part;
  part.kind = store::TaskKind::kGatePart;
  part.shard = 1;
  EXPECT_EQ(RoundFileOf(part), GatePartFile(1));
  EXPECT_EQ(store::DescribeTaskWork(part), "finalize: gate part 1");
  // Rounds: the same split after the last reduces.
  spec.rounds = RoundShardCounts{1, 1};
  const std::vector<store::TaskSpec> rounds = PlanJobTasks(spec);
  ASSERT_GE(rounds.size(), 4u);
  EXPECT_EQ(rounds[rounds.size() - 4].kind, store::TaskKind::kFinalizePack);
  EXPECT_EQ(rounds.back().kind, store::TaskKind::kFinalize);
  // None: the plan as before.
  spec.gate_parts = 0;
  EXPECT_EQ(PlanJobTasks(spec).back().depends_on,
            rounds[rounds.size() - 4].depends_on);

  spec.gate_parts = 5;
  auto parsed = JobSpecFromJson(JobSpecToJson(spec));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->gate_parts, 5);
  nlohmann::json stored = nlohmann::json::parse(JobSpecToJson(spec));
  stored.erase("gate_parts");
  parsed = JobSpecFromJson(stored.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->gate_parts, 0);
  stored["gate_parts"] = kMaxGateParts + 1;
  parsed = JobSpecFromJson(stored.dump());
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.status().message().find("gate_parts"), std::string::npos)
      << parsed.status();
}

TEST(TaskPlanTest, RoundsChainShardsAndReduces) {
  // 2 blocks, 2 calibration shards and 1 held-out shard: per block 4
  // rounds of 3 shard tasks and a reduce; block 0's 3 shard outputs; the
  // finalize.
  const std::vector<store::TaskSpec> plan =
      PlanRoundTasks(2, RoundShardCounts{2, 1});
  ASSERT_EQ(plan.size(), 2u * 16 + 3 + 1);
  auto find = [&](store::TaskKind kind, int block, int group,
                  store::TaskSplit split, int shard) {
    for (const store::TaskSpec& t : plan) {
      if (t.kind == kind && t.block == block && t.group == group &&
          t.split == split && t.shard == shard) {
        return t.index;
      }
    }
    ADD_FAILURE() << store::DescribeTaskWork(kind, block, group, split, shard)
                  << " is not planned";
    return -1;
  };
  using store::TaskKind;
  using store::TaskSplit;
  for (int i = 0; i < static_cast<int>(plan.size()); ++i) {
    EXPECT_EQ(plan[i].index, i);
  }
  // Block 0's first round needs nothing; later rounds need the reduce
  // before them; a reduce needs its round's shards.
  EXPECT_TRUE(plan[find(TaskKind::kShardStats, 0, 0, TaskSplit::kHeldout, 0)]
                  .depends_on.empty());
  const int reduce_0_1 = find(TaskKind::kReduce, 0, 1, TaskSplit::kNone, -1);
  EXPECT_EQ(plan[find(TaskKind::kShardStats, 0, 2, TaskSplit::kCalibration, 1)]
                .depends_on,
            std::vector<int>{reduce_0_1});
  EXPECT_EQ(plan[reduce_0_1].depends_on,
            (std::vector<int>{
                find(TaskKind::kShardStats, 0, 1, TaskSplit::kCalibration, 0),
                find(TaskKind::kShardStats, 0, 1, TaskSplit::kCalibration, 1),
                find(TaskKind::kShardStats, 0, 1, TaskSplit::kHeldout, 0)}));
  // Block 1's first round needs only its shard's output of block 0, which
  // needs block 0's last reduce.
  const int reduce_0_3 = find(TaskKind::kReduce, 0, 3, TaskSplit::kNone, -1);
  const int out_0_cal_1 =
      find(TaskKind::kShardOutput, 0, -1, TaskSplit::kCalibration, 1);
  EXPECT_EQ(plan[out_0_cal_1].depends_on, std::vector<int>{reduce_0_3});
  EXPECT_EQ(plan[find(TaskKind::kShardStats, 1, 0, TaskSplit::kCalibration, 1)]
                .depends_on,
            std::vector<int>{out_0_cal_1});
  // Nothing reads the last block's leaving states; the finalize needs each
  // block's last reduce.
  for (const store::TaskSpec& t : plan) {
    EXPECT_FALSE(t.kind == TaskKind::kShardOutput && t.block == 1);
  }
  EXPECT_EQ(plan.back().kind, TaskKind::kFinalize);
  EXPECT_EQ(plan.back().depends_on,
            (std::vector<int>{reduce_0_3, find(TaskKind::kReduce, 1, 3,
                                               TaskSplit::kNone, -1)}));
  // The files round tasks publish, by name.
  store::Task shard;
  shard.kind = TaskKind::kShardStats;
  shard.block = 1;
  shard.group = 2;
  shard.split = TaskSplit::kHeldout;
  shard.shard = 0;
  EXPECT_EQ(RoundFileOf(shard), ShardStatisticsFile(1, 2, false, 0));
  store::Task last_reduce;
  last_reduce.kind = TaskKind::kReduce;
  last_reduce.block = 1;
  last_reduce.group = 3;
  EXPECT_EQ(RoundFileOf(last_reduce), std::nullopt);
  last_reduce.group = 2;
  EXPECT_EQ(RoundFileOf(last_reduce), RoundDeltaFile(1, 2));
  // A JobSpec with rounds plans them; without, block tasks.
  JobSpec spec;
  spec.num_blocks = 2;
  EXPECT_EQ(PlanJobTasks(spec).size(), 3u);
  spec.rounds = RoundShardCounts{2, 1};
  EXPECT_EQ(PlanJobTasks(spec).size(), plan.size());
}

TEST(TaskPlanTest, GroupsOfSeveralLayersReduceALayerAtATime) {
  // Per block: 4 rounds of 3 shard tasks; reduces q, k, v; o; gate, up;
  // down (7); block 0's 3 shard outputs; the finalize.
  const std::vector<store::TaskSpec> plan =
      PlanRoundTasks(2, RoundShardCounts{2, 1, /*layer_reduces=*/true});
  ASSERT_EQ(plan.size(), 2u * (12 + 7) + 3 + 1);
  std::map<std::pair<int, int>, std::vector<int>> reduces;  // (block, group)
  std::map<std::pair<int, int>, std::vector<std::string>> layers;
  for (const store::TaskSpec& t : plan) {
    if (t.kind != store::TaskKind::kReduce) {
      EXPECT_EQ(t.layer, "");
      continue;
    }
    reduces[{t.block, t.group}].push_back(t.index);
    layers[{t.block, t.group}].push_back(t.layer);
  }
  EXPECT_EQ(layers[std::make_pair(1, 0)],
            (std::vector<std::string>{"q_proj", "k_proj", "v_proj"}));
  EXPECT_EQ(layers[std::make_pair(1, 1)], std::vector<std::string>{""});
  EXPECT_EQ(layers[std::make_pair(1, 2)],
            (std::vector<std::string>{"gate_proj", "up_proj"}));
  EXPECT_EQ(layers[std::make_pair(1, 3)], std::vector<std::string>{""});
  for (const store::TaskSpec& t : plan) {
    // The next round's shards need every layer's reduce; the layer
    // reduces of a group need the same shards.
    if (t.kind == store::TaskKind::kShardStats && t.group == 1) {
      EXPECT_EQ(t.depends_on, reduces[std::make_pair(t.block, 0)]);
    }
    if (t.kind == store::TaskKind::kReduce && t.group == 2) {
      EXPECT_EQ(t.depends_on,
                plan[reduces[std::make_pair(t.block, 2)][0]].depends_on);
      EXPECT_EQ(t.depends_on.size(), 3u);
    }
  }
  // Each layer's reduce publishes its own delta.
  store::Task reduce;
  reduce.kind = store::TaskKind::kReduce;
  reduce.block = 1;
  reduce.group = 0;
  reduce.layer = "k_proj";
  EXPECT_EQ(RoundFileOf(reduce), RoundDeltaFile(1, 0, LayerType::kKProj));
  EXPECT_EQ(*RoundFileOf(reduce),
            "block-00001.rounds/g0.k_proj.delta.safetensors");
  EXPECT_EQ(store::DescribeTaskWork(reduce), "block 1 group 0: reduce k_proj");

  // The spec keeps the choice; a spec from before it reduces groups whole.
  JobSpec spec;
  spec.num_blocks = 2;
  spec.rounds = RoundShardCounts{2, 1, true};
  EXPECT_EQ(PlanJobTasks(spec).size(), plan.size());
  auto parsed = JobSpecFromJson(JobSpecToJson(spec));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  ASSERT_TRUE(parsed->rounds.has_value());
  EXPECT_TRUE(parsed->rounds->layer_reduces);
  nlohmann::json old = nlohmann::json::parse(JobSpecToJson(spec));
  old["rounds"].erase("layer_reduces");
  parsed = JobSpecFromJson(old.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->rounds->layer_reduces);
  old["rounds"]["layer_reduces"] = "yes";
  EXPECT_FALSE(JobSpecFromJson(old.dump()).ok());
}

TEST(TaskPlanTest, ReducesWaitForTheCalibrationShardsOnly) {
  // Held-out audits in the block's last reduce: the same tasks, other
  // dependencies.
  const RoundShardCounts counts{2, 1, /*layer_reduces=*/true,
                                /*heldout_later=*/true};
  const std::vector<store::TaskSpec> plan = PlanRoundTasks(2, counts);
  ASSERT_EQ(plan.size(),
            PlanRoundTasks(2, RoundShardCounts{2, 1, true}).size());
  using store::TaskKind;
  using store::TaskSplit;
  std::map<std::pair<int, int>, std::vector<int>> reduces;  // (block, group)
  std::map<int, std::vector<int>> heldout;                  // block
  std::map<std::pair<int, int>, std::vector<int>> calibration;
  for (const store::TaskSpec& t : plan) {
    if (t.kind == TaskKind::kReduce)
      reduces[{t.block, t.group}].push_back(t.index);
    if (t.kind == TaskKind::kShardStats && t.split == TaskSplit::kHeldout) {
      heldout[t.block].push_back(t.index);
    }
    if (t.kind == TaskKind::kShardStats && t.split == TaskSplit::kCalibration) {
      calibration[{t.block, t.group}].push_back(t.index);
    }
  }
  for (const store::TaskSpec& t : plan) {
    if (t.kind == TaskKind::kReduce && t.group < 3) {
      // Its round's calibration shards, nothing held out.
      EXPECT_EQ(t.depends_on, calibration[std::make_pair(t.block, t.group)])
          << store::DescribeTaskWork(t.kind, t.block, t.group, t.split,
                                     t.shard);
    }
    if (t.kind == TaskKind::kReduce && t.group == 3) {
      // Its calibration shards, then every round's held-out shard.
      std::vector<int> want = calibration[std::make_pair(t.block, 3)];
      want.insert(want.end(), heldout[t.block].begin(), heldout[t.block].end());
      EXPECT_EQ(t.depends_on, want);
      EXPECT_EQ(heldout[t.block].size(), 4u);
    }
    // A held-out shard still starts from the round before it.
    if (t.kind == TaskKind::kShardStats && t.split == TaskSplit::kHeldout &&
        t.group > 0) {
      EXPECT_EQ(t.depends_on, reduces[std::make_pair(t.block, t.group - 1)]);
    }
  }
  // The spec keeps the choice; one from before it waits for both splits;
  // one without held-out shards cannot have it.
  JobSpec spec;
  spec.num_blocks = 2;
  spec.rounds = counts;
  auto parsed = JobSpecFromJson(JobSpecToJson(spec));
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_TRUE(parsed->rounds->heldout_later);
  nlohmann::json old = nlohmann::json::parse(JobSpecToJson(spec));
  old["rounds"].erase("heldout_later");
  parsed = JobSpecFromJson(old.dump());
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->rounds->heldout_later);
  old["rounds"]["heldout_later"] = true;
  old["rounds"]["heldout_shards"] = 0;
  auto none = JobSpecFromJson(old.dump());
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("rounds.heldout_later"),
            std::string::npos)
      << none.status();
  // Decided from the recipe: GPTQ with a held-out split, not AWQ.
  Recipe recipe;
  recipe.method = QuantMethod::kGptq;
  recipe.calibration.samples = 32;
  recipe.calibration.heldout_fraction = 0.1;
  EXPECT_TRUE(PlanRoundShardCounts(recipe).heldout_later);
  recipe.method = QuantMethod::kAwq;
  EXPECT_FALSE(PlanRoundShardCounts(recipe).heldout_later);
}

// Which rows a reduce may report: its own group's, pending or not; the
// block's other layers only from the last reduce of a job that left the
// held-out audits to it, and only complete; a pending row only from a
// reduce.
TEST(ReportedLayerCheckTest, TheLastReduceReportsTheBlocksAuditedLayers) {
  store::Task reduce;
  reduce.kind = store::TaskKind::kReduce;
  reduce.block = 2;
  reduce.group = 3;
  v1::LayerAudit down;
  down.set_name("model.layers.2.mlp.down_proj");
  down.set_type("down_proj");
  v1::LayerAudit q;
  q.set_name("model.layers.2.self_attn.q_proj");
  q.set_type("q_proj");
  EXPECT_TRUE(CheckReportedLayer(down, reduce).ok());
  EXPECT_FALSE(CheckReportedLayer(q, reduce).ok());
  EXPECT_TRUE(CheckReportedLayer(q, reduce, /*audits_block=*/true).ok());
  q.set_heldout_pending(true);
  absl::Status pending = CheckReportedLayer(q, reduce, true);
  EXPECT_EQ(pending.code(), absl::StatusCode::kInvalidArgument) << pending;
  // Another group's reduce reports its own layers only, pending or not.
  reduce.group = 0;
  reduce.layer = "q_proj";
  EXPECT_TRUE(CheckReportedLayer(q, reduce, true).ok());
  EXPECT_FALSE(CheckReportedLayer(down, reduce, true).ok());
  // A block task never leaves an audit pending.
  store::Task block;
  block.kind = store::TaskKind::kBlock;
  block.block = 2;
  absl::Status from_block = CheckReportedLayer(q, block);
  EXPECT_EQ(from_block.code(), absl::StatusCode::kInvalidArgument)
      << from_block;
  EXPECT_NE(from_block.message().find("heldout_pending"), std::string::npos)
      << from_block;
  q.set_heldout_pending(false);
  EXPECT_TRUE(CheckReportedLayer(q, block).ok());
}

TEST(FileArtifactStoreTest, ContentAddressedAndBounded) {
  const std::string root = RealTempDir() + "/art";
  auto store = FileArtifactStore::Open("file://" + root, 16);
  ASSERT_TRUE(store.ok()) << store.status();
  auto sha = (*store)->PutCalibration("hello\n");
  ASSERT_TRUE(sha.ok());
  EXPECT_EQ(*sha, Sha256Hex("hello\n"));
  EXPECT_EQ((*store)->CalibrationPath(*sha),
            absl::StrCat(root, "/calib/", *sha, ".jsonl"));
  auto bytes = ReadFileToString((*store)->CalibrationPath(*sha));
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, "hello\n");
  EXPECT_TRUE(absl::IsResourceExhausted(
      (*store)->PutCalibration(std::string(17, 'x')).status()));
  EXPECT_FALSE(FileArtifactStore::Open(root, 16).ok());  // Not a URI.
}

TEST(FileArtifactStoreTest, OpenRemovesInterruptedUploads) {
  const std::string root = RealTempDir() + "/art";
  {
    auto store = FileArtifactStore::Open("file://" + root, 1 << 20);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->PutCalibration("kept\n").ok());
  }
  // What a SIGKILL during UploadCalibration leaves (WriteFileAtomically's
  // temporary name).
  const std::string orphan =
      JoinPath(root, "calib/" + std::string(64, 'a') + ".jsonl.tmp-123-456");
  ASSERT_TRUE(WriteFileAtomically(orphan, std::string(4096, 'x')).ok());
  auto store = FileArtifactStore::Open("file://" + root, 1 << 20);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_FALSE(FileExists(orphan));
  EXPECT_TRUE(FileExists((*store)->CalibrationPath(Sha256Hex("kept\n"))));
}

TEST(DataDirLockTest, SecondHolderIsRefusedNamingTheFirst) {
  const std::string dir = testing::MakeTempDir();
  auto first = DataDirLock::Acquire(dir);
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = DataDirLock::Acquire(dir);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(
      absl::StrContains(second.status().message(),
                        absl::StrCat("another quantd (pid ", ::getpid(), ")")))
      << second.status();
  first->reset();
  // Released with its holder (a crashed quantd's lock goes with it).
  EXPECT_TRUE(DataDirLock::Acquire(dir).ok());
}

TEST(TaskPlanTest, EnsureJobPlannedIsSafeToRace) {
  const std::string temp = testing::MakeTempDir();
  auto store =
      store::SqliteJobStore::Open(temp + "/quantd.db", SystemClock::Default());
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < 20; ++i) {
    auto job = (*store)->CreateJob(absl::StrCat("r", i), "{}", {});
    ASSERT_TRUE(job.ok());
    const std::string id = job->job.id;
    absl::Status a, b;
    bool planned_a = false, planned_b = false;
    JobSpec spec;
    spec.num_blocks = 3;
    if (i % 2 == 1) spec.rounds = RoundShardCounts{2, 1};
    std::thread first(
        [&] { a = EnsureJobPlanned(**store, id, spec, &planned_a); });
    std::thread second(
        [&] { b = EnsureJobPlanned(**store, id, spec, &planned_b); });
    first.join();
    second.join();
    EXPECT_TRUE(a.ok()) << a;
    EXPECT_TRUE(b.ok()) << b;
    EXPECT_TRUE(planned_a != planned_b) << "exactly one call plans";
    auto tasks = (*store)->ListTasks(id);
    ASSERT_TRUE(tasks.ok());
    EXPECT_EQ(tasks->size(), PlanJobTasks(spec).size());
  }
}

}  // namespace
}  // namespace quant::server
