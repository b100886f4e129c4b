// Workers on other hosts, simulated on this one (issue 25, docs/DEPLOYMENT.md
// "Workers on many nodes"): each remote worker runs in a network namespace
// of its own (ip netns) and reaches quantd over a veth pair, with the
// artifact store shared as a directory, as an RWX volume is shared between
// nodes. quantd listens on the host end of the first pair, not on loopback,
// and a namespace has a loopback of its own, so no call can take a
// loopback shortcut. A local worker of quantd's runs beside them (it must
// dial the interface quantd is bound to). The packed checkpoint is the local
// run's, byte for byte, and each remote worker ran part of it.
//
// Needs root (CAP_NET_ADMIN) and iproute2's `ip`; skipped, saying which is
// missing, without them.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/file_util.h"
#include "core/base/status_macros.h"
#include "gtest/gtest.h"
#include "tests/service/child_process.h"
#include "tests/service/service_fixture.h"
#include "tests/support/test_env.h"

namespace quant {
namespace {

using testing::ChildProcess;
using testing::RealPath;
using testing::ServiceHarness;

std::string IpProgram() {
  for (const char* path :
       {"/usr/sbin/ip", "/sbin/ip", "/usr/bin/ip", "/bin/ip"}) {
    if (access(path, X_OK) == 0) return path;
  }
  return "";
}

// Runs `ip ARGS...`; its stderr goes to dir/ip.log and comes back in the
// error.
absl::Status RunIp(const std::string& dir, std::vector<std::string> args) {
  const std::string what = "ip " + absl::StrJoin(args, " ");
  args.insert(args.begin(), IpProgram());
  const std::string log = dir + "/ip.log";
  ChildProcess ip(std::move(args), {}, log);
  const int status = ip.Wait(30'000);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
  auto text = ReadFileToString(log);
  return absl::UnavailableError(absl::StrCat(
      what, " failed (wait status ", status, "): ", text.ok() ? *text : ""));
}

// A network namespace joined to the host by a veth pair: the host end is
// 10.231.S.1/30, the namespace's end 10.231.S.2/30 with a default route
// through the host end, so that the namespace reaches every host address
// (and nothing else of the host: its loopback is its own). Removed on
// destruction.
class VethNamespace {
 public:
  static absl::StatusOr<std::unique_ptr<VethNamespace>> Create(
      const std::string& dir, int subnet) {
    const int tag = static_cast<int>(getpid() % 100000);
    auto made = std::unique_ptr<VethNamespace>(new VethNamespace(
        dir, absl::StrCat("quant-test-", tag, "-", subnet),
        absl::StrCat("qh", tag, "-", subnet), absl::StrCat("10.231.", subnet)));
    const std::string peer = absl::StrCat("qn", tag, "-", subnet);
    for (std::vector<std::string> args : std::vector<std::vector<std::string>>{
             {"netns", "add", made->name_},
             {"link", "add", made->host_if_, "type", "veth", "peer", "name",
              peer},
             {"link", "set", peer, "netns", made->name_},
             {"addr", "add", made->HostAddress() + "/30", "dev",
              made->host_if_},
             {"link", "set", made->host_if_, "up"},
             {"netns", "exec", made->name_, "ip", "addr", "add",
              made->prefix_ + ".2/30", "dev", peer},
             {"netns", "exec", made->name_, "ip", "link", "set", peer, "up"},
             {"netns", "exec", made->name_, "ip", "link", "set", "lo", "up"},
             {"netns", "exec", made->name_, "ip", "route", "add", "default",
              "via", made->HostAddress()}}) {
      if (args[0] == "netns" && args[1] == "add") made->created_ = true;
      QUANT_RETURN_IF_ERROR(RunIp(dir, std::move(args)));
    }
    return made;
  }

  ~VethNamespace() {
    // Deleting one end of a veth pair deletes both.
    RunIp(dir_, {"link", "del", host_if_}).IgnoreError();
    if (created_) RunIp(dir_, {"netns", "del", name_}).IgnoreError();
  }

  std::string HostAddress() const { return prefix_ + ".1"; }
  // What runs a program inside the namespace.
  std::vector<std::string> Exec() const {
    return {IpProgram(), "netns", "exec", name_};
  }

 private:
  VethNamespace(std::string dir, std::string name, std::string host_if,
                std::string prefix)
      : dir_(std::move(dir)),
        name_(std::move(name)),
        host_if_(std::move(host_if)),
        prefix_(std::move(prefix)) {}

  std::string dir_;
  std::string name_;
  std::string host_if_;
  std::string prefix_;  // "10.231.S"
  bool created_ = false;
};

class NetnsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    QUANT_REQUIRE_SHARED(testing::SharedPath("models/stories260K/hf-f32"));
    QUANT_REQUIRE_SHARED(testing::SharedPath("data/tinystories_val.txt"));
    if (geteuid() != 0) {
      GTEST_SKIP() << "network namespaces need root (CAP_NET_ADMIN)";
    }
    if (IpProgram().empty()) {
      GTEST_SKIP() << "no `ip` program (Debian's iproute2)";
    }
  }
};

TEST_F(NetnsE2eTest, WorkersInTheirOwnNetworkNamespacesGiveTheLocalRunsBytes) {
  auto reference = testing::ReferenceRun(testing::SmallRecipePath());
  ASSERT_TRUE(reference.ok()) << reference.status();
  ServiceHarness service(RealPath(testing::MakeTempDir()));
  const std::string dir = service.dir();

  // Two subnets no other test of this binary uses at the same time.
  const int first_subnet = 16 + static_cast<int>(getpid() % 100) * 2;
  std::vector<std::unique_ptr<VethNamespace>> hosts;
  for (int i = 0; i < 2; ++i) {
    auto host = VethNamespace::Create(dir, first_subnet + i);
    if (!host.ok() && i == 0) {
      GTEST_SKIP() << "cannot make a network namespace here: " << host.status();
    }
    ASSERT_TRUE(host.ok()) << host.status();
    hosts.push_back(*std::move(host));
  }

  // A non-loopback address needs both tokens.
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/client.token", "netns-client-token\n").ok());
  ASSERT_TRUE(
      WriteFileAtomically(dir + "/worker.token", "netns-worker-token\n").ok());
  std::vector<std::string> args =
      service.QuantdArgs(hosts[0]->HostAddress() + ":0");
  args.push_back("--client_token_file=" + dir + "/client.token");
  args.push_back("--worker_token_file=" + dir + "/worker.token");
  args.push_back("--local_workers=1");
  args.push_back("--round_tasks");
  const absl::Status started = service.StartQuantd(args);
  ASSERT_TRUE(started.ok()) << started;
  service.set_client_token("netns-client-token");
  ASSERT_EQ(service.address().rfind(hosts[0]->HostAddress() + ":", 0), 0u)
      << service.address();

  std::vector<std::unique_ptr<ChildProcess>> workers;
  for (int i = 0; i < 2; ++i) {
    workers.push_back(
        service.StartWrappedWorker(hosts[i]->Exec(), absl::StrCat("remote-", i),
                                   {"--token_file=" + dir + "/worker.token"}));
  }
  for (int i = 0; i < 2; ++i) {
    const absl::Status registered = service.WaitForLog(
        absl::StrCat("remote-", i, ".log"), "registered as", 120);
    ASSERT_TRUE(registered.ok()) << registered;
  }
  const absl::Status local_registered = service.WaitForLog(
      "quantd.log", "quant-worker[local-0]: registered as", 120);
  ASSERT_TRUE(local_registered.ok()) << local_registered;

  const v1::Job job = testing::ValueOrFailure(
      service.Create("netns-1", testing::SmallRecipePath()));
  ASSERT_FALSE(job.id().empty());
  const v1::Job done =
      testing::ValueOrFailure(service.WaitForEnd(job.id(), 1200));
  ASSERT_EQ(done.state(), v1::JOB_STATE_SUCCEEDED) << done.error() << "\n"
                                                   << service.Log("quantd.log");
  const std::string tensors =
      testing::ValueOrFailure(service.JobTensors(job.id()));
  EXPECT_TRUE(tensors == reference->tensors)
      << "the packed tensors differ from the local run's";
  for (int i = 0; i < 2; ++i) {
    const std::string log = service.Log(absl::StrCat("remote-", i, ".log"));
    EXPECT_NE(log.find("running " + job.id()), std::string::npos)
        << "remote-" << i << " ran no task of the job:\n"
        << log;
  }
  ASSERT_TRUE(service.StopQuantd().ok());
  for (std::unique_ptr<ChildProcess>& worker : workers) {
    worker->Signal(SIGTERM);
    worker->Wait(30'000);
  }
}

}  // namespace
}  // namespace quant
