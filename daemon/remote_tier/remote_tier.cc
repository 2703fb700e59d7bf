#include "daemon/remote_tier/remote_tier.h"

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/log/log.h"
#include "proto/remote_error_causes.h"

namespace neffd {
namespace {

// Downloads at once per host; more keys wait (their leases kept alive).
constexpr int kFetchThreads = 4;

remote::CircuitBreakerOptions BreakerOptions(const RemoteTierOptions& o,
                                             Env* env) {
  remote::CircuitBreakerOptions breaker;
  breaker.failure_threshold = o.breaker_failures;
  breaker.initial_backoff = o.breaker_backoff;
  breaker.max_backoff = o.breaker_max_backoff;
  breaker.env = env;
  return breaker;
}

remote::CredentialsOptions CredentialOptions(const RemoteTierParts& parts) {
  remote::CredentialsOptions credentials;
  credentials.env = parts.environment;
  credentials.clock = parts.env;
  return credentials;
}

// One rank's publish as the outbox sees it.
class UploadIntent : public PublishIntent {
 public:
  UploadIntent(Outbox* outbox, absl::CondVar* wake)
      : outbox_(outbox), wake_(wake) {}

  void Begin(const EntryKey& id, uint64_t size,
             const std::string& sha256) override {
    absl::StatusOr<OutboxTicket> ticket =
        outbox_->BeginPublish(id, size, sha256);
    if (!ticket.ok()) {
      log::Error("upload_not_queued", {{"id", id.Canonical()},
                                       {"error", ticket.status().message()}});
      return;
    }
    id_ = id;
    ticket_ = *ticket;
  }

  void End(bool stored) override {
    if (!id_.has_value()) return;
    outbox_->EndPublish(*id_, ticket_, stored);
    if (stored) wake_->Signal();
  }

 private:
  Outbox* const outbox_;
  absl::CondVar* const wake_;
  std::optional<EntryKey> id_;
  OutboxTicket ticket_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<RemoteTier>> RemoteTier::Open(
    const RemoteTierOptions& options, RemoteTierParts parts) {
  absl::StatusOr<remote::RemoteLocation> location =
      remote::ParseRemoteUrl(options.url);
  if (!location.ok()) return location.status();
  std::unique_ptr<RemoteTier> tier(
      new RemoteTier(options, std::move(parts), *std::move(location)));
  if (absl::Status s = tier->CreateClients(); !s.ok()) return s;
  if (!options.read_only) {
    OutboxOptions outbox_options;
    outbox_options.env = tier->parts_.env;
    tier->outbox_ =
        std::make_unique<Outbox>(tier->parts_.index, std::move(outbox_options));
  }
  return tier;
}

RemoteTier::RemoteTier(const RemoteTierOptions& options, RemoteTierParts parts,
                       remote::RemoteLocation location)
    : options_(options),
      parts_(std::move(parts)),
      location_(std::move(location)),
      credentials_(CredentialOptions(parts_)),
      gate_(BreakerOptions(options, parts_.env)) {}

absl::Status RemoteTier::CreateClients() {
  remote::S3ClientOptions s3;
  s3.endpoint = options_.endpoint;
  s3.region = options_.region;
  s3.bucket = location_.bucket;
  s3.deadlines.connect = options_.connect_timeout;
  s3.deadlines.total = options_.request_timeout;
  s3.part_size = options_.part_size;
  s3.multipart_threshold = options_.multipart_threshold;
  s3.upload_concurrency = options_.upload_concurrency;
  s3.env = parts_.env;
  // model.neff is verified against model.done by the store as it is
  // published, and S3 checks an upload's MD5/ETag itself: hashing each body
  // once more before sending it would read every NEFF twice.
  s3.sign_payload = false;
  absl::StatusOr<std::unique_ptr<remote::S3Client>> client =
      remote::S3Client::Create(s3, &credentials_);
  if (!client.ok()) return client.status();
  client_ = *std::move(client);
  s3.deadlines.total = options_.lookup_timeout;
  s3.sign_payload = true;
  client = remote::S3Client::Create(s3, &credentials_);
  if (!client.ok()) return client.status();
  lookup_client_ = *std::move(client);
  return absl::OkStatus();
}

RemoteTier::~RemoteTier() { Stop(); }

void RemoteTier::Start() {
  for (int i = 0; i < kFetchThreads; ++i) {
    threads_.push_back(
        parts_.env->StartThread("neffd-s3-fetch", [this] { FetchLoop(); }));
  }
  if (outbox_ != nullptr) {
    threads_.push_back(
        parts_.env->StartThread("neffd-s3-upload", [this] { UploadLoop(); }));
  }
  log::Info("remote_tier_started",
            {{"remote", location_.Url()},
             {"endpoint", client_->options().endpoint},
             {"region", options_.region},
             {"mode", options_.read_only ? "ro" : "rw"},
             {"queued_uploads",
              static_cast<uint64_t>(outbox_ ? outbox_->size() : 0)}});
}

void RemoteTier::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
    fetch_wake_.SignalAll();
    upload_wake_.SignalAll();
  }
  for (EnvThread& t : threads_) t.Join();
  threads_.clear();
  // Fetches that never started are misses: their ranks compile.
  std::deque<FetchJob> left;
  {
    absl::MutexLock lock(&mu_);
    left.swap(jobs_);
    fetch_leases_.clear();
  }
  for (FetchJob& job : left) job.done(FetchOutcome::kFailed);
}

void RemoteTier::FetchUnderLease(const EntryKey& id,
                                 const std::string& lease_id,
                                 std::function<void(FetchOutcome)> done) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopping_) {
      fetch_leases_.insert(lease_id);
      jobs_.push_back(FetchJob{id, lease_id, std::move(done)});
      fetch_wake_.Signal();
      return;
    }
  }
  done(FetchOutcome::kFailed);
}

void RemoteTier::FetchLoop() {
  for (;;) {
    std::optional<FetchJob> job;
    {
      absl::MutexLock lock(&mu_);
      // A CondVar loop rather than Await(Condition): the predicate is then
      // read by this thread with mu_ held, which TSan can see through
      // Debian's uninstrumented absl.
      while (!stopping_ && jobs_.empty()) fetch_wake_.Wait(&mu_);
      if (stopping_) return;
      job.emplace(std::move(jobs_.front()));
      jobs_.pop_front();
    }
    const FetchOutcome outcome = Fetch(job->id, job->lease_id);
    {
      absl::MutexLock lock(&mu_);
      fetch_leases_.erase(job->lease_id);
    }
    job->done(outcome);
  }
}

void RemoteTier::KeepFetchesAlive() {
  std::vector<std::string> leases;
  {
    absl::MutexLock lock(&mu_);
    leases.assign(fetch_leases_.begin(), fetch_leases_.end());
  }
  for (const std::string& lease : leases) {
    (void)parts_.locks->KeepAlive(lease);  // gone: the fetch finds out
  }
}

std::unique_ptr<PublishIntent> RemoteTier::NewUploadIntent() {
  if (outbox_ == nullptr) return nullptr;
  return std::make_unique<UploadIntent>(outbox_.get(), &upload_wake_);
}

void RemoteTier::FillStats(v1::Stats* stats) const {
  stats->set_remote(location_.Url());
  stats->set_remote_mode(options_.read_only ? "ro" : "rw");
  stats->set_hits_remote(hits_);
  stats->set_remote_misses(misses_);
  stats->set_remote_corrupt(corrupt_);
  stats->set_remote_uploads(uploads_);
  stats->set_remote_upload_failures(upload_failures_);
  uint64_t in = 0, out = 0;
  std::array<uint64_t, remote::kRemoteErrorCauseCount> errors{};
  for (const remote::S3Client* client : {client_.get(), lookup_client_.get()}) {
    const remote::S3ClientCounters c = client->counters();
    in += c.bytes_downloaded;
    out += c.bytes_uploaded;
    for (int i = 0; i < remote::kRemoteErrorCauseCount; ++i) {
      errors[i] += c.errors[i];
    }
  }
  stats->set_remote_bytes_in(in);
  stats->set_remote_bytes_out(out);
  // Stats counts each cause under the name the S3 client gives it; the one
  // it has no field for (not_found) is an answer, not an error.
  for (int i = 0; i < remote::kRemoteErrorCauseCount; ++i) {
    const RemoteErrorCauseField* field = FindRemoteErrorCause(
        remote::RemoteErrorCauseName(static_cast<remote::RemoteErrorCause>(i)));
    if (field != nullptr) (stats->*field->set)(errors[i]);
  }
  stats->set_remote_errors(RemoteErrorsTotal(*stats));
  if (outbox_ != nullptr) {
    stats->set_upload_queue(outbox_->size());
    stats->set_upload_queue_oldest_ms(
        absl::ToInt64Milliseconds(outbox_->OldestAge()));
  }
  const remote::CircuitBreakerStats breaker = gate_.breaker();
  stats->set_remote_breaker(
      std::string(remote::BreakerStateName(breaker.state)));
  stats->set_remote_skipped(breaker.calls_skipped);
  if (breaker.state == remote::BreakerState::kOpen) {
    stats->set_remote_breaker_retry_ms(std::max<int64_t>(
        0, absl::ToInt64Milliseconds(breaker.open_until - parts_.env->Now())));
  }
}

}  // namespace neffd
