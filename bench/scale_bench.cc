// scale_bench: neffd with a large index (issue #8, benchmark 5).
//
// For each size N in --sizes it builds an index of N entries and measures,
// over --runs daemon starts: exec to health SERVING, VmRSS after start and
// after the lookups, Lookup p50/p99, GetStats latency and the wall time of
// `neffctl ls | wc -l`.
//
// The index is built in two parts, because a million real entries would
// cost minutes of file creation on the shared store and gigabytes of
// directories:
//   - --real entries are published through the daemon (Lock + inline
//     Publish), so they exist in the store; the Lookups ask only for these
//     and must all be hits;
//   - the other N - real are written straight into the daemon's RocksDB
//     index through the Index API (the same records Catalog::Record writes)
//     while the daemon is stopped. They count for every index-wide
//     operation (open, totals, GetStats, ls) but have no files, so looking
//     them up would correctly answer a miss and drop them from the index.
// Keys are hex digests, so the real entries are spread over the whole key
// range of the index, as in production, not clustered in a few blocks.
//
// The index files are in the page cache (just written) when the daemon
// starts: the start time is a warm-cache figure.
#include <signal.h>

#include <cstdio>
#include <random>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "daemon/index/index.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "store/digest.h"
#include "store/layout.h"
#include "tests/harness/process.h"

ABSL_FLAG(std::string, sizes, "1000,10000,100000,1000000",
          "comma-separated index sizes; the first is the Lookup baseline");
ABSL_FLAG(int, runs, 5, "daemon starts (timed repetitions) per size");
ABSL_FLAG(int, real, 1000, "entries per size published through the daemon");
ABSL_FLAG(int, lookups, 5000, "Lookups per run (of the real entries)");
ABSL_FLAG(std::string, workdir, "/tmp/neffd-scale-bench", "scratch dir");
ABSL_FLAG(std::string, markdown, "", "also write the table here");
ABSL_FLAG(std::string, data, "", "write gnuplot data here");

namespace neffd {
namespace {

constexpr char kVersion[] = "2.15.128";
constexpr int kFillVersions = 4;  // fill rows spread over a few versions

std::string Key(int i) { return Sha256Hex(absl::StrCat("entry ", i)); }

struct Sample {
  double serving_ms, rss_start, rss_after, p50_us, p99_us, stats_ms, ls_s;
};

void PublishReal(const test_support::DaemonProcess& daemon, int count) {
  auto stub = daemon.NewStub();
  for (int i = 0; i < count; ++i) {
    v1::EntryId id;
    id.set_namespace_("neff");
    id.set_compiler_version(kVersion);
    id.set_key(Key(i));
    absl::Status s = test_support::PublishInline(
        *stub, id, absl::StrCat("neff ", i, std::string(4096, 'x')));
    if (!s.ok() && !absl::IsAlreadyExists(s)) {
      std::fprintf(stderr, "publish failed: %s\n", s.ToString().c_str());
      std::exit(1);
    }
  }
}

// Index-only rows for entries [from, to), as Catalog::Record writes them.
double Fill(const std::string& index_dir, const std::string& neff_root,
            int from, int to) {
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<Index>> index = Index::Open(index_dir);
  if (!index.ok()) {
    std::fprintf(stderr, "%s\n", index.status().ToString().c_str());
    std::exit(1);
  }
  std::vector<std::pair<EntryKey, v1::IndexRecord>> batch;
  for (int i = from; i < to; ++i) {
    const std::string version = absl::StrCat(kVersion, "-", i % kFillVersions);
    EntryKey id = *EntryKey::Parse("neff", version, Key(i));
    v1::IndexRecord record;
    v1::Entry* entry = record.mutable_entry();
    *entry->mutable_id() = id.ToProto();
    entry->set_path(absl::StrCat(neff_root, "/",
                                 ArtifactRelPath(Namespace::kNeff, id.key())));
    entry->set_size(4096 + (i % 4096) * 1024);
    entry->set_sha256(Sha256Hex(id.key()));
    entry->set_producer_host("scale-bench");
    entry->set_publish_time_unix_ms(absl::ToUnixMillis(absl::Now()));
    record.set_verified_inode(1000000 + i);
    record.set_verified_mtime_ns(i);
    record.set_verified_ctime_ns(i);
    batch.emplace_back(std::move(id), std::move(record));
    if (batch.size() == 10000 || i + 1 == to) {
      if (absl::Status s = (*index)->PutAll(batch); !s.ok()) {
        std::fprintf(stderr, "fill: %s\n", s.ToString().c_str());
        std::exit(1);
      }
      batch.clear();
    }
  }
  (void)(*index)->Flush();
  return absl::ToDoubleSeconds(absl::Now() - start);
}

void Lookups(const std::string& address, int real, int count,
             std::vector<double>* latencies_us) {
  auto stub = v1::CompileCache::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> pick(0, real - 1);
  v1::LookupRequest request;
  request.mutable_id()->set_namespace_("neff");
  request.mutable_id()->set_compiler_version(kVersion);
  for (int i = 0; i <= count; ++i) {
    request.mutable_id()->set_key(Key(pick(rng)));
    v1::LookupResponse response;
    grpc::ClientContext context;
    const absl::Time t0 = absl::Now();
    grpc::Status s = stub->Lookup(&context, request, &response);
    const double us = absl::ToDoubleMicroseconds(absl::Now() - t0);
    if (!s.ok() || response.result() != v1::LookupResponse::HIT) {
      std::fprintf(stderr, "lookup %s was not a hit: %s\n",
                   request.id().key().c_str(), s.error_message().c_str());
      std::exit(1);
    }
    if (i > 0) latencies_us->push_back(us);  // the first one connects
  }
}

double GetStatsMs(const std::string& address, uint64_t want_entries) {
  auto stub = v1::CompileCache::NewStub(
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  std::vector<double> ms;
  for (int i = 0; i < 6; ++i) {
    v1::Stats stats;
    grpc::ClientContext context;
    const absl::Time t0 = absl::Now();
    grpc::Status s = stub->GetStats(&context, {}, &stats);
    if (i > 0) ms.push_back(absl::ToDoubleMilliseconds(absl::Now() - t0));
    if (!s.ok() || stats.entries() != want_entries) {
      std::fprintf(stderr, "GetStats: %s, %llu entries (want %llu)\n",
                   s.error_message().c_str(),
                   static_cast<unsigned long long>(stats.entries()),
                   static_cast<unsigned long long>(want_entries));
      std::exit(1);
    }
  }
  return bench::Median(ms);
}

Sample RunOnce(const test_support::DaemonProcess& daemon, int entries,
               int real) {
  Sample sample;
  const absl::Time t0 = absl::Now();
  test_support::Process process(daemon.Argv());
  if (!bench::WaitServing(daemon.socket_path(), absl::Seconds(120))) {
    std::fprintf(stderr, "neffd did not serve: %s\n", process.Stderr().c_str());
    std::exit(1);
  }
  sample.serving_ms = absl::ToDoubleMilliseconds(absl::Now() - t0);
  sample.rss_start = bench::RssMiB(process.pid());
  sample.stats_ms = GetStatsMs(daemon.address(), entries);
  std::vector<double> latencies;
  Lookups(daemon.address(), real, absl::GetFlag(FLAGS_lookups), &latencies);
  sample.p50_us = bench::Percentile(latencies, 0.50);
  sample.p99_us = bench::Percentile(latencies, 0.99);
  sample.rss_after = bench::RssMiB(process.pid());
  const std::string neffctl = test_support::Runfile("client/neffctl");
  const absl::Time ls0 = absl::Now();
  test_support::CommandResult ls = test_support::RunCommand(
      {"/bin/sh", "-c",
       absl::StrCat(neffctl, " --address=", daemon.address(), " ls | wc -l")});
  sample.ls_s = absl::ToDoubleSeconds(absl::Now() - ls0);
  int lines = 0;
  // Header and footer lines besides one per entry.
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(ls.out), &lines) ||
      lines != entries + 2) {
    std::fprintf(stderr, "neffctl ls printed %s lines for %d entries: %s\n",
                 ls.out.c_str(), entries, ls.err.c_str());
    std::exit(1);
  }
  process.Signal(SIGTERM);
  process.Wait();
  return sample;
}

int Main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string workdir = absl::GetFlag(FLAGS_workdir);
  bench::PrepareHarness(workdir);
  const int real = absl::GetFlag(FLAGS_real);
  std::string table = absl::StrCat(
      "Machine: ", bench::MachineDescription(), ". Started ", bench::NowUtc(),
      ", load average ", bench::LoadAverage(), ".\n\n",
      "| entries | fill (s) | start to SERVING (ms) | RSS after start (MiB) "
      "| RSS after lookups (MiB) | Lookup p50 (us) | Lookup p99 (us) | p99 vs "
      "first size | GetStats (ms) | `neffctl ls \\| wc -l` (s) | load "
      "average |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|\n");
  std::string data = "# entries serving_ms rss_start rss_after p99_us ls_s\n";
  double baseline_p99 = 0;
  std::printf("%s", table.c_str());
  for (absl::string_view size :
       absl::StrSplit(absl::GetFlag(FLAGS_sizes), ',')) {
    int entries = 0;
    if (!absl::SimpleAtoi(size, &entries) || entries < real) {
      std::fprintf(stderr, "--sizes: '%s' is below --real\n",
                   std::string(size).c_str());
      return 2;
    }
    test_support::DaemonProcess daemon(absl::StrCat(workdir, "/n", entries));
    if (!daemon.Start()) {
      std::fprintf(stderr, "neffd did not start: %s\n",
                   daemon.process().Stderr().c_str());
      return 1;
    }
    PublishReal(daemon, real);
    daemon.Signal(SIGTERM);
    daemon.Wait();
    const double fill_s =
        Fill(daemon.local_dir() + "/index", daemon.neff_dir(), real, entries);
    std::vector<Sample> samples;
    for (int r = 0; r < absl::GetFlag(FLAGS_runs); ++r) {
      samples.push_back(RunOnce(daemon, entries, real));
    }
    auto median = [&](double Sample::*field) {
      std::vector<double> v;
      for (const Sample& s : samples) v.push_back(s.*field);
      return bench::Median(v);
    };
    const double p99 = median(&Sample::p99_us);
    if (baseline_p99 == 0) baseline_p99 = p99;
    const std::string row = absl::StrFormat(
        "| %d | %.1f | %.0f | %.1f | %.1f | %.0f | %.0f | %.2f | %.2f | %.2f "
        "| %s |\n",
        entries, fill_s, median(&Sample::serving_ms),
        median(&Sample::rss_start), median(&Sample::rss_after),
        median(&Sample::p50_us), p99, p99 / baseline_p99,
        median(&Sample::stats_ms), median(&Sample::ls_s), bench::LoadAverage());
    std::printf("%s", row.c_str());
    std::fflush(stdout);
    table += row;
    absl::StrAppendFormat(
        &data, "%d %.1f %.1f %.1f %.1f %.3f\n", entries,
        median(&Sample::serving_ms), median(&Sample::rss_start),
        median(&Sample::rss_after), p99, median(&Sample::ls_s));
  }
  absl::StrAppend(&table, "\nFinished ", bench::NowUtc(), ", load average ",
                  bench::LoadAverage(), ".\n");
  if (!absl::GetFlag(FLAGS_markdown).empty()) {
    bench::WriteOrDie(absl::GetFlag(FLAGS_markdown), table);
  }
  if (!absl::GetFlag(FLAGS_data).empty()) {
    bench::WriteOrDie(absl::GetFlag(FLAGS_data), data);
  }
  return 0;
}

}  // namespace
}  // namespace neffd

int main(int argc, char** argv) { return neffd::Main(argc, argv); }
