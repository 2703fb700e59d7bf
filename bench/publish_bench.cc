// publish_bench: a large NEFF through neffd's staged Publish and Verify
// (issue #8, benchmark 4), each against the tool that bounds it, timed in
// the same run on the same filesystem:
//   - Publish RPC (staged file -> durable, indexed entry: copy + sha256 +
//     fsync + rename + model.done + directory fsync) vs `cp` + `sync FILE`
//     (coreutils: copy, then fsync) of the same bytes into the store root;
//   - the same publish end to end through the client library (its
//     crash-recovery hash of the compile output, staging copy, Lock and
//     Publish: compile end -> GetOrCompile returns) vs the same baseline;
//   - Verify RPC of that entry (re-reads and hashes it) vs `sha256sum`
//     (Debian's portable C SHA-256) and `openssl dgst -sha256` (OpenSSL's,
//     the hash the daemon uses).
// Page cache state, equal for both sides: the source is in the page cache
// and clean (written, then `sync`ed) before either copy; both hash a file
// that was just written (cached). Dirty data from earlier steps is
// `sync`ed before every timed step. The order of the two sides alternates
// between runs so neither always runs on a cache the other warmed.
// Lock is not timed; Evict after each run keeps one entry in the index.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "bench/publish_small.h"
#include "client/cache_client.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "store/digest.h"
#include "tests/harness/process.h"

ABSL_FLAG(int, mib, 256, "artifact size in MiB");
ABSL_FLAG(int, runs, 5, "repetitions");
ABSL_FLAG(std::string, workdir, "/tmp/neffd-publish-bench", "scratch dir");
ABSL_FLAG(std::string, markdown, "", "also write the table here");
ABSL_FLAG(std::string, data, "", "write gnuplot data here");
ABSL_FLAG(int, small_kib, 0,
          "instead of the large publish: a NEFF of this many KiB, published "
          "--small_runs times (end to end, RPC alone, daemon CPU) beside a "
          "hand-written durable write of the same bytes");
ABSL_FLAG(int, small_runs, 200, "repetitions of the small publish");
ABSL_FLAG(std::string, label, "", "names this build in the small table");

namespace neffd {
namespace {

constexpr char kVersion[] = "2.15.128";

void Die(const std::string& what) {
  std::fprintf(stderr, "publish_bench: %s\n", what.c_str());
  std::exit(1);
}

// Seconds `argv` took; dies unless it exits 0.
double Timed(const std::vector<std::string>& argv, std::string* out = nullptr) {
  const absl::Time t0 = absl::Now();
  test_support::CommandResult r = test_support::RunCommand(argv);
  const double s = absl::ToDoubleSeconds(absl::Now() - t0);
  if (r.exit_code != 0) Die(absl::StrCat(argv[0], " failed: ", r.err));
  if (out != nullptr) *out = r.out;
  return s;
}

void Sync() { Timed({"/bin/sync"}); }

// Incompressible bytes, as a NEFF mostly is.
std::string MakeArtifact(const std::string& path, size_t bytes) {
  std::string content(bytes, '\0');
  std::mt19937_64 rng(8);
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = rng();
    memcpy(&content[i], &v, 8);
  }
  test_support::WriteFile(path, content);
  return Sha256Hex(content);
}

v1::EntryId IdFor(int run) {
  v1::EntryId id;
  id.set_namespace_("neff");
  id.set_compiler_version(kVersion);
  id.set_key(absl::StrCat("publish", run));
  return id;
}

// Publish RPC of `staged` under IdFor(run), Lock untimed. Returns seconds
// and the artifact's path in the store.
double PublishStaged(v1::CompileCache::Stub& stub, int run,
                     const std::string& staged, uint64_t size,
                     const std::string& sha256, std::string* path) {
  v1::LockRequest lock;
  *lock.mutable_id() = IdFor(run);
  lock.set_wait(true);
  v1::LockResponse granted;
  grpc::ClientContext c1;
  if (!stub.Lock(&c1, lock, &granted).ok() ||
      granted.outcome() != v1::LockResponse::GRANTED) {
    Die("Lock was not granted");
  }
  v1::PublishRequest publish;
  publish.set_lease_id(granted.lease().lease_id());
  *publish.mutable_id() = IdFor(run);
  publish.set_staged_path(staged);
  publish.set_size(size);
  publish.set_sha256(sha256);
  v1::PublishResponse published;
  grpc::ClientContext c2;
  const absl::Time t0 = absl::Now();
  grpc::Status s = stub.Publish(&c2, publish, &published);
  const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  if (!s.ok() || published.outcome() != v1::PublishResponse::PUBLISHED) {
    Die(absl::StrCat("Publish: ", s.error_message()));
  }
  *path = published.entry().path();
  return seconds;
}

double VerifyRpc(v1::CacheAdmin::Stub& admin) {
  v1::VerifyRequest request;
  request.set_namespace_("neff");
  grpc::ClientContext context;
  const absl::Time t0 = absl::Now();
  auto reader = admin.Verify(&context, request);
  v1::VerifyProgress progress, last;
  while (reader->Read(&progress)) last = progress;
  grpc::Status s = reader->Finish();
  const double seconds = absl::ToDoubleSeconds(absl::Now() - t0);
  if (!s.ok() || !last.finished() || last.ok() != 1) {
    Die(absl::StrCat("Verify: ", s.error_message(), " ok=", last.ok()));
  }
  return seconds;
}

// Publish of a copy of `master` through the client library, as a rank
// publishes what its compiler wrote; seconds from the compile's end to
// GetOrCompile returning. The compile (the copy, then `sync`) is not timed,
// so the output is cached and clean like the cp baseline's source.
double PublishThroughClient(const test_support::DaemonProcess& daemon, int run,
                            const std::string& master,
                            const std::string& workdir) {
  CacheClientOptions options;
  options.address = daemon.address();
  options.neff_cache_dir = daemon.neff_dir();
  options.local_dir = daemon.local_dir();
  options.debug_dir = workdir + "/debug";
  options.warn = [](const std::string&) {};
  CacheClient client(options);
  absl::Time compiled;
  absl::StatusOr<CacheResult> r = client.GetOrCompile(
      "neff", kVersion, absl::StrCat("e2e", run), [&](const CompileJob& job) {
        Timed({"/bin/cp", master, job.output_path});
        Sync();
        compiled = absl::Now();
        return CompileResult::Ok();
      });
  const double seconds = absl::ToDoubleSeconds(absl::Now() - compiled);
  if (!r.ok() || r->source != CacheResult::Source::kCompiled) {
    Die(absl::StrCat("GetOrCompile: ", r.status().ToString()));
  }
  return seconds;
}

void Evict(v1::CacheAdmin::Stub& admin, const std::string& key) {
  v1::EvictRequest evict;
  *evict.mutable_id() = IdFor(0);
  evict.mutable_id()->set_key(key);
  v1::EvictResponse evicted;
  grpc::ClientContext context;
  if (!admin.Evict(&context, evict, &evicted).ok()) Die("Evict failed");
}

struct Sample {
  double publish, end_to_end, cp_fsync, verify, sha256sum, openssl;
};

Sample RunOnce(const test_support::DaemonProcess& daemon, int run,
               const std::string& master, uint64_t size,
               const std::string& sha256, const std::string& workdir) {
  auto stub = daemon.NewStub();
  auto admin = v1::CacheAdmin::NewStub(grpc::CreateChannel(
      daemon.admin_address(), grpc::InsecureChannelCredentials()));
  const std::string staged =
      absl::StrCat(daemon.local_dir(), "/staging/bench-", run);
  const std::string copy = absl::StrCat(daemon.neff_dir(), "/cp-", run);
  Timed({"/bin/cp", master, staged});
  Sample s;
  std::string artifact;
  auto publish = [&] {
    Sync();
    s.publish = PublishStaged(*stub, run, staged, size, sha256, &artifact);
  };
  auto cp = [&] {
    Sync();
    s.cp_fsync =
        Timed({"/bin/sh", "-c",
               absl::StrCat("cp ", master, " ", copy, " && sync ", copy)});
  };
  auto end_to_end = [&] {
    s.end_to_end = PublishThroughClient(daemon, run, master, workdir);
    // Verify below must hash one entry, as sha256sum does.
    Evict(*admin, absl::StrCat("e2e", run));
  };
  // Each side runs first, second and last in turn.
  const std::function<void()> sides[] = {publish, end_to_end, cp};
  for (int i = 0; i < 3; ++i) sides[(run + i) % 3]();
  Sync();
  auto verify = [&] { s.verify = VerifyRpc(*admin); };
  auto sum = [&] {
    std::string out;
    s.sha256sum = Timed({"/usr/bin/sha256sum", artifact}, &out);
    if (out.substr(0, 64) != sha256) Die("sha256sum disagrees: " + out);
  };
  auto openssl = [&] {
    std::string out;
    s.openssl =
        Timed({"/usr/bin/openssl", "dgst", "-sha256", "-r", artifact}, &out);
    if (out.substr(0, 64) != sha256) Die("openssl disagrees: " + out);
  };
  const std::function<void()> hashes[] = {verify, sum, openssl};
  for (int i = 0; i < 3; ++i) hashes[(run + i) % 3]();
  Evict(*admin, IdFor(run).key());
  unlink(copy.c_str());
  return s;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string workdir = absl::GetFlag(FLAGS_workdir);
  bench::PrepareHarness(workdir);
  if (absl::GetFlag(FLAGS_small_kib) > 0) {
    return bench::RunSmallPublish(workdir, absl::GetFlag(FLAGS_small_kib),
                                  absl::GetFlag(FLAGS_small_runs),
                                  absl::GetFlag(FLAGS_label),
                                  absl::GetFlag(FLAGS_markdown));
  }
  const int mib = absl::GetFlag(FLAGS_mib);
  const uint64_t size = static_cast<uint64_t>(mib) << 20;
  const std::string master = workdir + "/master.neff";
  const std::string sha256 = MakeArtifact(master, size);
  test_support::DaemonProcess daemon(workdir + "/d");
  if (!daemon.Start()) Die("neffd did not start: " + daemon.process().Stderr());
  const std::string header = absl::StrCat(
      "Machine: ", bench::MachineDescription(), ". Started ", bench::NowUtc(),
      ", load average ", bench::LoadAverage(), ".\n\n");
  std::vector<Sample> samples;
  std::string runs_table =
      "| run | Publish RPC (s) | end to end (s) | cp + fsync (s) | Verify (s) "
      "| sha256sum (s) | openssl dgst (s) | load average |\n"
      "|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (int r = 0; r < absl::GetFlag(FLAGS_runs); ++r) {
    samples.push_back(RunOnce(daemon, r, master, size, sha256, workdir));
    const Sample& s = samples.back();
    absl::StrAppendFormat(
        &runs_table, "| %d | %.3f | %.3f | %.3f | %.3f | %.3f | %.3f | %s |\n",
        r + 1, s.publish, s.end_to_end, s.cp_fsync, s.verify, s.sha256sum,
        s.openssl, bench::LoadAverage());
  }
  daemon.Signal(SIGTERM);
  daemon.Wait();
  auto median = [&](double Sample::*field) {
    std::vector<double> v;
    for (const Sample& s : samples) v.push_back(s.*field);
    return bench::Median(v);
  };
  const double publish = median(&Sample::publish);
  const double cp = median(&Sample::cp_fsync);
  const double verify = median(&Sample::verify);
  const double sum = median(&Sample::sha256sum);
  const double e2e = median(&Sample::end_to_end);
  const double ssl = median(&Sample::openssl);
  // Ratios are of throughput: baseline time / daemon time.
  const std::string summary = absl::StrFormat(
      "| operation (%d MiB, median of %d) | time (s) | MiB/s | vs. baseline "
      "| target |\n|---|---:|---:|---:|---:|\n"
      "| Publish RPC (staged file; daemon side only) | %.3f | %.0f | **%.2fx** "
      "| >= 0.8x |\n"
      "| Publish end to end (client hash + staging + Lock + Publish) | %.3f | "
      "%.0f | **%.2fx** | >= 0.8x |\n"
      "| `cp` + `sync FILE` (baseline) | %.3f | %.0f | 1.00x | |\n"
      "| Verify RPC | %.3f | %.0f | **%.2fx** vs. sha256sum, **%.2fx** vs. "
      "openssl | >= 0.9x |\n"
      "| `sha256sum` (baseline) | %.3f | %.0f | 1.00x | |\n"
      "| `openssl dgst -sha256` (second baseline) | %.3f | %.0f | 1.00x | |\n",
      mib, samples.size(), publish, mib / publish, cp / publish, e2e, mib / e2e,
      cp / e2e, cp, mib / cp, verify, mib / verify, sum / verify, ssl / verify,
      sum, mib / sum, ssl, mib / ssl);
  const std::string table = absl::StrCat(
      header, summary, "\nEvery run:\n\n", runs_table, "\nFinished ",
      bench::NowUtc(), ", load average ", bench::LoadAverage(), ".\n");
  std::printf("%s", table.c_str());
  if (!absl::GetFlag(FLAGS_markdown).empty()) {
    bench::WriteOrDie(absl::GetFlag(FLAGS_markdown), table);
  }
  if (!absl::GetFlag(FLAGS_data).empty()) {
    bench::WriteOrDie(
        absl::GetFlag(FLAGS_data),
        absl::StrFormat(
            "# label MiB/s\n\"Publish RPC\" %.1f\n\"Publish end to end\" "
            "%.1f\n\"cp + fsync\" %.1f\n\"Verify RPC\" %.1f\n\"sha256sum\" "
            "%.1f\n\"openssl dgst\" %.1f\n",
            mib / publish, mib / e2e, mib / cp, mib / verify, mib / sum,
            mib / ssl));
  }
  return 0;
}

}  // namespace
}  // namespace neffd

int main(int argc, char** argv) { return neffd::Main(argc, argv); }
