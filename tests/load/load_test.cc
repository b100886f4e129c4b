// A short run of quant_loadtest: real quantd, real local workers, client
// threads over loopback gRPC. Only outcomes that do not depend on the
// machine's speed are asserted (the ASan build is slow): no errors, no lost
// job, at least one job completed, every RPC kind called. Under ASan a job
// takes about a minute of worker time, hence the long drain; in a release
// build the drain ends within seconds, when the last job finishes.
#include <sys/wait.h>

#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/run_json_program.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

TEST(LoadTest, ConcurrentClientsLoseNothingAndGetNoErrors) {
  QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
  QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
  const std::string command = absl::StrCat(
      QUANT_LOADTEST_PATH, " --duration=15 --clients=4 --workers=2",
      " --max_pending=1 --drain=90 --json --quantd=", testing::BinaryDir(),
      "/server/quantd --shared=", testing::SharedDir());
  const testing::JsonProgramResult run = testing::RunJsonProgram(command);
  const int status = run.status;
  const std::string& out = run.out;
  ASSERT_TRUE(WIFEXITED(status)) << status << "\n" << out;
  const nlohmann::json& result = run.json;
  ASSERT_FALSE(result.is_discarded()) << "not JSON: " << out;
  EXPECT_EQ(WEXITSTATUS(status), 0) << result.dump(2);

  EXPECT_EQ(result.at("errors").get<int>(), 0) << result.dump(2);
  EXPECT_EQ(result.at("lost").get<int>(), 0) << result.dump(2);
  EXPECT_EQ(result.at("jobs_failed").get<int>(), 0) << result.dump(2);
  EXPECT_GE(result.at("jobs_created").get<int>(), 1);
  EXPECT_GE(result.at("jobs_completed").get<int>(), 1) << result.dump(2);
  EXPECT_EQ(result.at("jobs_completed").get<int>() +
                result.at("jobs_pending").get<int>(),
            result.at("jobs_created").get<int>());
  EXPECT_TRUE(result.at("ok").get<bool>());

  std::set<std::string> called;
  for (const nlohmann::json& rpc : result.at("rpcs")) {
    EXPECT_EQ(rpc.at("errors").get<int>(), 0) << rpc.dump();
    if (rpc.at("requests").get<int>() > 0) {
      called.insert(rpc.at("method").get<std::string>());
    }
  }
  const std::set<std::string> expected = {"CreateJob", "CreateJob(replay)",
                                          "GetJob",    "ListJobs",
                                          "WatchJob",  "GetJobReport"};
  EXPECT_EQ(called, expected) << result.dump(2);
}

}  // namespace
}  // namespace quant
