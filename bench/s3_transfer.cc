// s3_transfer: moves one file to or from S3 with daemon/s3's S3Client
// and prints the time, the throughput and how much the process's peak RSS
// grew, to set against `curl --aws-sigv4` moving the same object
// (docs/REMOTE.md, "Measuring"). Credentials come from the standard chain
// (daemon/s3/credentials.h).
//
//   s3_transfer --endpoint=http://127.0.0.1:PORT --bucket=B put KEY FILE
//   s3_transfer --endpoint=http://127.0.0.1:PORT --bucket=B get KEY FILE
#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "daemon/s3/credentials.h"
#include "daemon/s3/s3_client.h"

ABSL_FLAG(std::string, endpoint, "", "S3 endpoint URL (empty: AWS)");
ABSL_FLAG(std::string, bucket, "", "bucket");
ABSL_FLAG(std::string, region, "us-east-1", "region");
ABSL_FLAG(int, part_size_mib, 16, "multipart part size, MiB");
ABSL_FLAG(int, upload_concurrency, 4, "multipart parts in flight at once");
ABSL_FLAG(int, total_deadline_s, 600, "total deadline per request, s");
ABSL_FLAG(bool, sign_payload, true, "sha256 of bodies (else UNSIGNED-PAYLOAD)");

namespace {

// A /proc/self/status field in bytes.
int64_t StatusBytes(absl::string_view field) {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    absl::string_view rest = line;
    int64_t kib = 0;
    if (absl::ConsumePrefix(&rest, field) && absl::ConsumePrefix(&rest, ":") &&
        absl::SimpleAtoi(
            absl::StripSuffix(absl::StripAsciiWhitespace(rest), " kB"), &kib)) {
      return kib << 10;
    }
  }
  return -1;
}

int Usage() {
  fprintf(stderr,
          "usage: s3_transfer --endpoint=URL --bucket=B (put|get) KEY FILE\n");
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 4) return Usage();
  const std::string command = args[1], key = args[2], path = args[3];
  if (command != "put" && command != "get") return Usage();

  neffd::remote::CredentialsProvider credentials(
      {neffd::remote::ProcessEnvironment()});
  neffd::remote::S3ClientOptions options;
  options.endpoint = absl::GetFlag(FLAGS_endpoint);
  options.bucket = absl::GetFlag(FLAGS_bucket);
  options.region = absl::GetFlag(FLAGS_region);
  options.part_size = static_cast<uint64_t>(absl::GetFlag(FLAGS_part_size_mib))
                      << 20;
  options.multipart_threshold = options.part_size * 2;
  options.upload_concurrency = absl::GetFlag(FLAGS_upload_concurrency);
  options.deadlines.total =
      absl::Seconds(absl::GetFlag(FLAGS_total_deadline_s));
  options.sign_payload = absl::GetFlag(FLAGS_sign_payload);
  auto client = neffd::remote::S3Client::Create(options, &credentials);
  if (!client.ok()) {
    fprintf(stderr, "s3_transfer: %s\n",
            std::string(client.status().message()).c_str());
    return 2;
  }
  int fd = command == "put"
               ? open(path.c_str(), O_RDONLY)
               : open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    perror(path.c_str());
    return 2;
  }
  std::ofstream("/proc/self/clear_refs") << "5";  // peak RSS := current
  const int64_t rss_before = StatusBytes("VmRSS");
  const absl::Time start = absl::Now();
  absl::Status status;
  uint64_t bytes = 0;
  if (command == "put") {
    bytes = lseek(fd, 0, SEEK_END);
    status = (*client)->UploadFile(key, fd);
  } else {
    absl::StatusOr<uint64_t> got = (*client)->GetObject(key, fd);
    status = got.status();
    bytes = got.value_or(0);
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  close(fd);
  if (!status.ok()) {
    fprintf(stderr, "s3_transfer: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  printf("%s %llu bytes in %.3f s = %.1f MiB/s; peak RSS growth %.1f MiB\n",
         command.c_str(), static_cast<unsigned long long>(bytes), seconds,
         bytes / seconds / (1 << 20),
         (StatusBytes("VmHWM") - rss_before) / double{1 << 20});
  return 0;
}
