// The Python modules against a real neffd, each test once per module and
// interpreter: the pybind11 extension under the system python3, and the
// portable ctypes module (client/python/portable, over libneffclient.so)
// under python3 and under PyPy. 32 Python rank processes
// (examples/rank_sim.py) ask for 16 graphs each in their own order: exactly
// 16 compiles, identical files, no errors. The module's surface, and its
// mutual TLS options against a daemon on TCP.
#include <signal.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/harness/process.h"
#include "tests/harness/tls.h"
#include "tests/rank_fleet.h"

namespace neffd::test_support {
namespace {

constexpr int kRanks = 32;
constexpr int kGraphs = 16;

// One way a rank runs the client from Python.
struct PythonSetup {
  const char* name;
  const char* interpreter;
  bool portable;  // the ctypes module; else the pybind11 extension
};

class ClientPythonTest : public ::testing::TestWithParam<PythonSetup> {
 protected:
  std::string interpreter() const { return GetParam().interpreter; }

  // `env` plus the module's path, and what the interpreter needs to load
  // the module when it was built with sanitizers.
  std::vector<std::string> PythonEnv(std::vector<std::string> env) const {
    for (std::string& e : NeffclientPythonEnv(GetParam().portable)) {
      env.push_back(std::move(e));
    }
    return env;
  }
};

INSTANTIATE_TEST_SUITE_P(
    Modules, ClientPythonTest,
    ::testing::Values(PythonSetup{"pybind11", "/usr/bin/python3", false},
                      PythonSetup{"ctypes", "/usr/bin/python3", true},
                      PythonSetup{"ctypes_pypy", "/usr/bin/pypy3", true}),
    [](const ::testing::TestParamInfo<PythonSetup>& info) {
      return std::string(info.param.name);
    });

TEST_P(ClientPythonTest, ThirtyTwoPythonRanksCompileSixteenKeysOnce) {
  const std::string root = NewTempDir("python_ranks");
  DaemonProcess daemon(root);
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  RankFleet fleet(root, daemon.address());
  fleet.Start(kRanks,
              {interpreter(), Runfile("examples/rank_sim.py"),
               "--compile_log=" + fleet.compile_log(),
               absl::StrCat("--graphs=", kGraphs), "--compile_ms=300"},
              PythonEnv({}));
  std::vector<RankReport> reports = fleet.WaitAll();
  ExpectRanksAgree(reports, kGraphs);
  EXPECT_EQ(fleet.Compiles().size(), static_cast<size_t>(kGraphs));
  EXPECT_EQ(CountFiles(root + "/local/staging"), 0);
}

// The module's surface: lookup, derive_key, torchneuron_key, errors as
// exceptions, and the allocator's statistics.
TEST_P(ClientPythonTest, ModuleApi) {
  const std::string root = NewTempDir("python_api");
  DaemonProcess daemon(root);
  ASSERT_TRUE(daemon.Start()) << daemon.process().Stderr();
  const std::string script = R"(
import neffclient, os
c = neffclient.Client()
k = c.derive_key(b"HloModule m", ["-O1", "--workdir", "/w1"], "1.0", "trn2")
assert k == neffclient.derive_key(b"HloModule m", "-O1 --workdir=/w2", "1.0", "trn2"), k
assert c.lookup("neff", "1.0", k) is None
# TorchNeuron's key (tests/torchneuron_key_test.cc's vector), bytes or str.
assert neffclient.torchneuron_key(b"basekey", b"HloModule m\n") == "c496e666b3b31b0b526f14746a3df645"
assert neffclient.torchneuron_key("basekey", "HloModule m\n") == "c496e666b3b31b0b526f14746a3df645"
def compile_fn(path):
    assert os.path.basename(os.path.dirname(path)) == k, path
    with open(path, "wb") as f:
        f.write(b"neff")
p = c.get_or_compile("neff", "1.0", k, compile_fn)
assert c.lookup("neff", "1.0", k) == p and open(p, "rb").read() == b"neff"
def lowering(path):  # hlo entries are small and published inline
    with open(path, "wb") as f:
        f.write(b"HloModule add")
h = c.get_or_compile("hlo", "1.0", "aten.add.Tensor_f32", lowering)
assert h.startswith(os.environ["TORCH_NEURONX_HLO_CACHE_DIR"] + "/"), h
assert open(h, "rb").read() == b"HloModule add"
assert c.lookup("hlo", "1.0", "aten.add.Tensor_f32") == h
def fails(path):
    raise neffclient.CompileError("ERROR: unsupported op")
try:
    c.get_or_compile("neff", "1.0", "bad", fails)
    raise SystemExit("no exception")
except neffclient.CompileFailedError as e:
    assert e.log == "ERROR: unsupported op" and e.workdir.endswith("/bad"), e
    assert e.retry_after is not None
class Boom(Exception):
    pass
def boom(path):
    raise Boom()
try:
    c.get_or_compile("neff", "1.0", "boom", boom)
    raise SystemExit("no exception")
except Boom:
    pass
assert c.lookup("neff", "1.0", "boom") is None  # abandoned, not recorded
try:
    c.get_or_compile("neff", "1.0", "../x", compile_fn)
    raise SystemExit("no exception")
except ValueError as e:
    assert "id.key" in str(e), e
pool = neffclient.SegmentPool()
ptr = pool.allocate(1000)
assert pool.memory_stats()["allocated_bytes.all.current"] >= 1000
pool.free(ptr)
assert "num_ooms" in neffclient.memory_stats()
c.write_metrics()
print("PASS")
)";
  const std::string path = root + "/api.py";
  WriteFile(path, script);
  CommandResult run = RunCommand(
      {interpreter(), path},
      PythonEnv({"NEFFD_ADDRESS=" + daemon.address(),
                 "TORCH_NEURONX_NEFF_CACHE_DIR=" + root + "/neff",
                 "TORCH_NEURONX_HLO_CACHE_DIR=" + root + "/hlo",
                 "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=" + root + "/local",
                 "TORCH_NEURONX_DEBUG_DIR=" + root + "/debug",
                 "TORCH_NEURONX_ENABLED_METRIC_TABLES=neff_cache,allocator",
                 "TORCH_NEURONX_METRICS_DIR=" + root + "/metrics", "RANK=3"}));
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.out, "PASS\n") << run.err;
  EXPECT_FALSE(absl::StrContains(run.err, "fallback")) << run.err;
  // Rank-side metrics: this rank's tables, the allocator's from its pool.
  const std::string cache = ReadFile(root + "/metrics/neff_cache_rank3.csv");
  EXPECT_TRUE(absl::StrContains(cache, "\ncompiles,4\n")) << cache;
  EXPECT_TRUE(absl::StrContains(cache, "\nfailures,1\n")) << cache;
  const std::string alloc = ReadFile(root + "/metrics/allocator_rank3.csv");
  EXPECT_TRUE(absl::StrContains(alloc, "\nnum_ooms,0\n")) << alloc;
}

// Client(address, tls_ca=, tls_cert=, tls_key=) against a daemon serving
// TCP with mutual TLS: with a certificate signed by the CA it compiles once
// and then hits (the path is the daemon's tier copy); with the CA alone it
// does what the C++ client does (a warning, no TLS, refused, the cache
// directories: a miss for the daemon's entry); a file it cannot read is a
// ValueError naming it.
TEST_P(ClientPythonTest, MutualTlsOptions) {
  const std::string root = NewTempDir("python_tls");
  MakeTestCertificates(root);
  const int port = 20000 + (getpid() + 7) % 30000;
  std::unique_ptr<Process> daemon = StartTlsDaemon(root, root, port);
  ASSERT_NE(daemon, nullptr);
  const std::string script = R"(
import neffclient, sys
root, address = sys.argv[1], sys.argv[2]
files = dict(tls_ca=root + "/ca.pem", tls_cert=root + "/client.pem",
             tls_key=root + "/client.key")
def compile_fn(path):
    with open(path, "wb") as f:
        f.write(b"neff over TLS")
neffclient.Client(address, **files).get_or_compile("neff", "1.0", "k", compile_fn)
p = neffclient.Client(address, **files).lookup("neff", "1.0", "k")
assert p is not None and p.startswith(root + "/local/tier/"), p
assert open(p, "rb").read() == b"neff over TLS"
no_cert = neffclient.Client(address, tls_ca=root + "/ca.pem")
assert no_cert.lookup("neff", "1.0", "k") is None
q = no_cert.get_or_compile("neff", "1.0", "q", compile_fn)
assert q.startswith(root + "/fallback/neff/"), q
try:
    neffclient.Client(address, tls_ca=root + "/ca.pem",
                      tls_cert=root + "/client.pem", tls_key=root + "/none.key")
    raise SystemExit("no exception")
except ValueError as e:
    assert "tls_key" in str(e) and root + "/none.key" in str(e), e
print("PASS")
)";
  const std::string path = root + "/tls.py";
  WriteFile(path, script);
  CommandResult run = RunCommand(
      {interpreter(), path, root, absl::StrCat("127.0.0.1:", port)},
      PythonEnv(
          {"TORCH_NEURONX_NEFF_CACHE_DIR=" + root + "/fallback/neff",
           "TORCH_NEURONX_HLO_CACHE_DIR=" + root + "/fallback/hlo",
           "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR=" + root + "/fallback/local",
           "TORCH_NEURONX_DEBUG_DIR=" + root + "/fallback/debug"}));
  EXPECT_EQ(run.exit_code, 0) << run.out << run.err;
  EXPECT_EQ(run.out, "PASS\n") << run.err;
  EXPECT_TRUE(absl::StrContains(run.err, "connecting without TLS")) << run.err;
  daemon->Signal(SIGTERM);
  EXPECT_EQ(daemon->Wait(), 0);
}

}  // namespace
}  // namespace neffd::test_support
