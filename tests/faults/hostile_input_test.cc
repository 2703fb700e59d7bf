// Hostile input over the wire: more than 10,000 requests to a real daemon,
// a quarter of them random bytes sent as the protobuf of a method (through
// grpc::GenericStub), the rest well-formed protobufs whose every field is at
// an edge: empty, huge, NUL, "..", "/", absolute paths, symlinks, FIFOs and
// hard links in the staging dir pointing outside the roots, a lease of
// another client, zero, giant or lying sizes, wrong sha256 (or none, with a
// lying size: an empty sha256 leaves the digest to the daemon). Each gets the
// status its first bad field calls for (Expect: the code, and a message that
// starts with the field's name), random bytes that do not parse get gRPC's
// INTERNAL and those that do the status of the request they parse to,
// nothing outside the cache roots is created, read into the cache or
// changed, and the daemon stays healthy and correct.
#include <sys/stat.h>
#include <unistd.h>

#include <condition_variable>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/security/credentials.h"
#include "gtest/gtest.h"
#include "store/digest.h"
#include "store/entry_id.h"
#include "tests/faults/wire.h"
#include "tests/harness/process.h"

namespace neffd::test_support {
namespace {

namespace fs = std::filesystem;

constexpr int kRandomByteRequests = 3000;
constexpr int kFieldRequests = 8000;
constexpr uint32_t kSeed = 20261202;

// path -> content of every regular file under `dir` (symlinks as "->target").
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_symlink()) {
      files[e.path()] = "->" + fs::read_symlink(e.path()).string();
    } else if (e.is_regular_file()) {
      files[e.path()] = ReadFile(e.path());
    } else {
      files[e.path()] = "<other>";
    }
  }
  return files;
}

// The answer a request must get: one of `codes` and, for an error, a
// message starting with one of `fields` (the field at fault).
struct Expected {
  std::set<grpc::StatusCode> codes;
  std::vector<std::string> fields;
};

Expected Refused(grpc::StatusCode code, std::vector<std::string> fields) {
  return Expected{{code}, std::move(fields)};
}

// Checks every method makes first, in the daemon's order
// (daemon/server/request_validation.h); nullopt if they pass.
std::optional<Expected> BadId(const v1::EntryId& id) {
  if (EntryKey::Parse(id).ok()) return std::nullopt;
  return Refused(grpc::StatusCode::INVALID_ARGUMENT, {"id"});
}

std::optional<Expected> BadLeaseId(const std::string& lease_id) {
  if (!lease_id.empty() && lease_id.size() <= 64) return std::nullopt;
  return Refused(grpc::StatusCode::INVALID_ARGUMENT, {"lease_id"});
}

Expected ExpectLookup(const v1::LookupRequest& r) {
  return BadId(r.id()).value_or(Expected{{grpc::StatusCode::OK}, {}});
}

Expected ExpectLock(const v1::LockRequest& r) {
  if (auto bad = BadId(r.id())) return *bad;
  if (r.holder().host().size() > 256) {
    return Refused(grpc::StatusCode::INVALID_ARGUMENT, {"holder.host"});
  }
  // A waiter may run into its deadline or the waiter cap.
  return Expected{{grpc::StatusCode::OK, grpc::StatusCode::DEADLINE_EXCEEDED,
                   grpc::StatusCode::RESOURCE_EXHAUSTED},
                  {"holder", "Lock", "too many"}};
}

// No request here carries the content its claims describe.
Expected ExpectPublish(const v1::PublishRequest& r) {
  if (auto bad = BadId(r.id())) return *bad;
  if (auto bad = BadLeaseId(r.lease_id())) return *bad;
  // Metadata bounds may be checked before the content's claims.
  std::vector<std::string> fields = {"metadata"};
  // An empty sha256 leaves the digest to the daemon (issue 30).
  if (!r.sha256().empty() && !IsSha256Hex(r.sha256())) {
    fields.push_back("sha256");
    return Refused(grpc::StatusCode::INVALID_ARGUMENT, fields);
  }
  if (r.size() > (uint64_t{8} << 30)) {
    fields.push_back("size");
    return Refused(grpc::StatusCode::INVALID_ARGUMENT, fields);
  }
  // Past the request's own checks: its content, path or lease is refused.
  return Expected{{grpc::StatusCode::INVALID_ARGUMENT,
                   grpc::StatusCode::FAILED_PRECONDITION},
                  {"metadata", "content", "inline_bytes", "size", "sha256",
                   "staged_path", "lease_id", "id"}};
}

Expected ExpectKeepAlive(const v1::KeepAliveRequest& r,
                         const v1::Lease& victim) {
  if (auto bad = BadLeaseId(r.lease_id())) return *bad;
  if (r.lease_id() == victim.lease_id()) {
    return Expected{{grpc::StatusCode::OK}, {}};
  }
  return Refused(grpc::StatusCode::FAILED_PRECONDITION, {"lease_id"});
}

Expected ExpectUnlock(const v1::UnlockRequest& r) {
  if (auto bad = BadId(r.id())) return *bad;
  if (auto bad = BadLeaseId(r.lease_id())) return *bad;
  if (r.outcome() != v1::UnlockRequest::ABANDONED &&
      r.outcome() != v1::UnlockRequest::FAILED) {
    return Refused(grpc::StatusCode::INVALID_ARGUMENT, {"outcome"});
  }
  // Nobody else's lease is ever on one of these ids.
  return Refused(grpc::StatusCode::FAILED_PRECONDITION, {"lease_id"});
}

Expected ExpectEvict(const v1::EvictRequest& r) {
  if (auto bad = BadId(r.id())) return *bad;
  return Expected{{grpc::StatusCode::OK, grpc::StatusCode::FAILED_PRECONDITION},
                  {"id"}};
}

// What random bytes sent as `method`'s request must get: gRPC's INTERNAL
// if they do not parse as its request message (no handler runs), else what
// the request they parse to must get.
Expected ExpectRandomBytes(const std::string& method, const std::string& bytes,
                           const v1::Lease& victim) {
  auto parse = [&](google::protobuf::Message& m) {
    return m.ParseFromString(bytes);
  };
  const Expected unparsed = Refused(grpc::StatusCode::INTERNAL, {});
  if (absl::EndsWith(method, "/Lookup")) {
    v1::LookupRequest r;
    return parse(r) ? ExpectLookup(r) : unparsed;
  }
  if (absl::EndsWith(method, "/Lock")) {
    v1::LockRequest r;
    return parse(r) ? ExpectLock(r) : unparsed;
  }
  if (absl::EndsWith(method, "/Publish")) {
    v1::PublishRequest r;
    return parse(r) ? ExpectPublish(r) : unparsed;
  }
  if (absl::EndsWith(method, "/Unlock")) {
    v1::UnlockRequest r;
    return parse(r) ? ExpectUnlock(r) : unparsed;
  }
  if (absl::EndsWith(method, "/KeepAlive")) {
    v1::KeepAliveRequest r;
    return parse(r) ? ExpectKeepAlive(r, victim) : unparsed;
  }
  v1::EvictRequest r;
  return parse(r) ? ExpectEvict(r) : unparsed;
}

class HostileInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = NewTempDir("hostile");
    outside_ = root_ + "/outside";
    fs::create_directories(outside_);
    WriteFile(outside_ + "/secret", "the secret that must stay put");
    daemon_ = std::make_unique<DaemonProcess>(root_);
    ASSERT_TRUE(daemon_->Start()) << daemon_->process().Stderr();
    stub_ = daemon_->NewStub();
    channel_ = grpc::CreateChannel(daemon_->address(),
                                   grpc::InsecureChannelCredentials());
    admin_channel_ = grpc::CreateChannel(daemon_->admin_address(),
                                         grpc::InsecureChannelCredentials());
  }

  template <typename T>
  T Pick(std::mt19937& rng, const std::vector<T>& from) {
    return from[rng() % from.size()];
  }

  std::string RandomBytes(std::mt19937& rng, size_t max) {
    std::string s(rng() % (max + 1), '\0');
    for (char& c : s) c = static_cast<char>(rng());
    return s;
  }

  // Random ASCII, NUL and control characters included: what a string field
  // can carry (gRPC refuses invalid UTF-8 before the daemon sees it).
  std::string RandomText(std::mt19937& rng, size_t max) {
    std::string s = RandomBytes(rng, max);
    for (char& c : s) c &= 0x7f;
    return s;
  }

  // Records the status; false unless it is the one `expected` calls for.
  bool Check(const grpc::Status& s, const Expected& expected) {
    ++codes_[s.error_code()];
    if (expected.codes.count(s.error_code()) == 0) return false;
    if (s.ok()) return true;
    // gRPC's own refusal of bytes that do not parse has no message.
    if (s.error_code() == grpc::StatusCode::INTERNAL) return true;
    if (s.error_message().empty()) return false;
    if (expected.fields.empty()) return true;
    for (const std::string& field : expected.fields) {
      if (absl::StartsWith(s.error_message(), field)) return true;
    }
    return false;
  }

  std::string root_, outside_;
  std::unique_ptr<DaemonProcess> daemon_;
  std::unique_ptr<v1::CompileCache::Stub> stub_;
  std::shared_ptr<grpc::Channel> channel_;
  // Evict is served only on the admin socket: its validation is tested
  // there (on the ranks' socket it is refused before it reads the request).
  std::shared_ptr<grpc::Channel> admin_channel_;
  std::map<grpc::StatusCode, int> codes_;
};

TEST_F(HostileInputTest, TenThousandHostileRequestsGetAStatusAndChangeNothing) {
  std::mt19937 rng(kSeed);
  RecordProperty("seed", static_cast<int>(kSeed));

  // A lease of "another client", and traps in the staging dir.
  v1::LockResponse other = LockKey(*stub_, "victim", 777);
  ASSERT_EQ(other.outcome(), v1::LockResponse::GRANTED);
  const std::string staging = other.lease().staging_dir();
  const std::string secret = outside_ + "/secret";
  ASSERT_EQ(symlink(secret.c_str(), (staging + "/link").c_str()), 0);
  ASSERT_EQ(symlink(outside_.c_str(), (staging + "/dirlink").c_str()), 0);
  ASSERT_EQ(link(secret.c_str(), (staging + "/hard").c_str()), 0);
  ASSERT_EQ(mkfifo((staging + "/fifo").c_str(), 0600), 0);
  fs::create_directories(staging + "/sub");
  const auto outside_before = Snapshot(outside_);

  // One byte over the largest bounded field (a metadata value); a larger one
  // tests nothing more and, under ASan, cost 80 s of the suite.
  const std::string huge((64 << 10) + 1, 'h');
  const std::vector<std::string> tokens = {"",
                                           ".",
                                           "..",
                                           "../x",
                                           "../../etc/passwd",
                                           "/etc/passwd",
                                           "a/b",
                                           std::string("a\0b", 3),
                                           std::string(128, 'k'),
                                           std::string(129, 'k'),
                                           huge,
                                           "%2e%2e",
                                           "\xc3\xa9",
                                           " ",
                                           "\n",
                                           "neff",
                                           "hlo",
                                           "1.0",
                                           "victim2",
                                           "key",
                                           "MODULE_x",
                                           "-",
                                           "+",
                                           "a..b"};
  const std::vector<std::string> namespaces = {"neff", "hlo",     "",
                                               "NEFF", "../neff", huge};
  const std::vector<std::string> paths = {"",
                                          "/",
                                          "relative",
                                          secret,
                                          "/etc/passwd",
                                          "/proc/self/environ",
                                          staging,
                                          staging + "/",
                                          staging + "/link",
                                          staging + "/dirlink",
                                          staging + "/dirlink/secret",
                                          staging + "/hard",
                                          staging + "/fifo",
                                          staging + "/sub",
                                          staging + "/missing",
                                          staging + "/../../outside/secret",
                                          staging + "/.",
                                          staging + "/..",
                                          staging + std::string("/a\0b", 4),
                                          staging + "x/f",
                                          huge};
  const std::vector<uint64_t> sizes = {0,
                                       1,
                                       29,
                                       uint64_t{1} << 33,
                                       (uint64_t{8} << 30) + 1,
                                       ~uint64_t{0},
                                       uint64_t{1} << 63};
  const std::vector<std::string> shas = {
      "",
      Sha256Hex("not the content"),
      std::string(64, 'g'),
      std::string(64, 'A'),
      Sha256Hex("the secret that must stay put"),
      std::string(63, 'a'),
      huge};

  auto random_id = [&] {
    return Id(Pick(rng, namespaces), Pick(rng, tokens), Pick(rng, tokens));
  };
  auto lease_id = [&] {
    switch (rng() % 4) {
      case 0:
        return other.lease().lease_id();  // somebody else's
      case 1:
        return std::string(rng() % 2 ? 65 : 0, 'l');
      case 2:
        return RandomText(rng, 64);
      default:
        return std::string(32, '0');
    }
  };

  int bad = 0, sent = 0;
  for (int i = 0; i < kFieldRequests; ++i, ++sent) {
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    grpc::Status s;
    Expected expected;
    const int kind = rng() % 6;
    switch (kind) {
      case 0: {
        v1::LookupRequest r;
        *r.mutable_id() = random_id();
        v1::LookupResponse out;
        s = stub_->Lookup(&context, r, &out);
        expected = ExpectLookup(r);
        break;
      }
      case 1: {
        v1::LockRequest r;
        *r.mutable_id() = random_id();
        r.mutable_holder()->set_host(Pick(rng, tokens));
        r.mutable_holder()->set_pid(static_cast<int64_t>(rng()) - (1 << 30));
        r.set_wait(false);
        v1::LockResponse out;
        s = stub_->Lock(&context, r, &out);
        expected = ExpectLock(r);
        if (s.ok() && out.outcome() == v1::LockResponse::GRANTED) {
          // Give it back so the limits stay untouched.
          v1::UnlockRequest u;
          *u.mutable_id() = out.lease().id();
          u.set_lease_id(out.lease().lease_id());
          u.set_outcome(v1::UnlockRequest::ABANDONED);
          v1::UnlockResponse ignored;
          grpc::ClientContext c2;
          stub_->Unlock(&c2, u, &ignored);
        }
        break;
      }
      case 2:
      case 3: {
        v1::PublishRequest r;
        *r.mutable_id() = rng() % 3 ? other.lease().id() : random_id();
        r.set_lease_id(lease_id());
        if (rng() % 2) {
          r.set_staged_path(Pick(rng, paths));
        } else {
          r.set_inline_bytes(RandomBytes(rng, 64));
        }
        r.set_size(rng() % 2 ? Pick(rng, sizes) : r.inline_bytes().size());
        r.set_sha256(Pick(rng, shas));
        if (r.sha256().empty() &&
            r.content_case() == v1::PublishRequest::kInlineBytes) {
          // Without a sha256 the size is the request's only claim about
          // its content: it lies too.
          r.set_size(r.inline_bytes().size() + 1);
        }
        if (rng() % 8 == 0) (*r.mutable_metadata())[Pick(rng, tokens)] = huge;
        v1::PublishResponse out;
        s = stub_->Publish(&context, r, &out);
        expected = ExpectPublish(r);
        break;
      }
      case 4: {
        v1::KeepAliveRequest r;
        r.set_lease_id(lease_id());
        v1::KeepAliveResponse out;
        s = stub_->KeepAlive(&context, r, &out);
        expected = ExpectKeepAlive(r, other.lease());
        break;
      }
      default: {
        v1::UnlockRequest r;
        *r.mutable_id() = random_id();
        r.set_lease_id(lease_id());
        r.set_outcome(static_cast<v1::UnlockRequest::Outcome>(rng() % 4));
        r.set_log(RandomText(rng, 256));
        v1::UnlockResponse out;
        s = stub_->Unlock(&context, r, &out);
        expected = ExpectUnlock(r);
        break;
      }
    }
    if (!Check(s, expected)) {
      ++bad;
      ADD_FAILURE() << "request " << i << " (kind " << kind
                    << "): " << s.error_code() << " '" << s.error_message()
                    << "'";
    }
    if (bad > 20) break;
  }

  grpc::GenericStub generic(channel_);
  grpc::GenericStub admin_generic(admin_channel_);
  std::map<std::string, int> unparsed_by_grpc;
  const std::vector<std::string> methods = {
      "/neffd.v1.CompileCache/Lookup",    "/neffd.v1.CompileCache/Lock",
      "/neffd.v1.CompileCache/Publish",   "/neffd.v1.CompileCache/Unlock",
      "/neffd.v1.CompileCache/KeepAlive", "/neffd.v1.CacheAdmin/Evict"};
  for (int i = 0; i < kRandomByteRequests; ++i, ++sent) {
    std::string bytes = RandomBytes(rng, 512);
    const std::string method = Pick(rng, methods);
    grpc::Slice slice(bytes);
    grpc::ByteBuffer request(&slice, 1);
    grpc::ByteBuffer response;
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() +
                         std::chrono::seconds(30));
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status s;
    grpc::GenericStub& to = absl::StartsWith(method, "/neffd.v1.CacheAdmin/")
                                ? admin_generic
                                : generic;
    to.UnaryCall(&context, method, grpc::StubOptions(), &request, &response,
                 [&](grpc::Status status) {
                   std::lock_guard<std::mutex> lock(mu);
                   s = status;
                   done = true;
                   cv.notify_one();
                 });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
      ++unparsed_by_grpc[method];  // gRPC's answer before any handler ran
      ++codes_[s.error_code()];
    } else if (!Check(s, ExpectRandomBytes(method, bytes, other.lease()))) {
      ++bad;
      ADD_FAILURE() << "random bytes " << i << " to " << method << ": "
                    << s.error_code() << " '" << s.error_message() << "'";
    }
    if (bad > 20) break;
  }

  EXPECT_GE(sent, 10000);
  EXPECT_EQ(bad, 0);
  EXPECT_EQ(Snapshot(outside_), outside_before);
  // Nothing from outside became an entry, and the victim's lease still works.
  for (const auto& e : fs::recursive_directory_iterator(daemon_->neff_dir())) {
    if (e.is_regular_file() && e.path().extension() == ".neff") {
      EXPECT_NE(ReadFile(e.path()), "the secret that must stay put")
          << e.path();
    }
  }
  EXPECT_TRUE(daemon_->process().Running());
  EXPECT_TRUE(PublishStaged(*stub_, other.lease(), "victim's bytes").ok());
  EXPECT_EQ(LookupContent(*stub_, "victim"), "victim's bytes");
  auto health = grpc::health::v1::Health::NewStub(channel_);
  grpc::health::v1::HealthCheckResponse status;
  grpc::ClientContext context;
  ASSERT_TRUE(health->Check(&context, {}, &status).ok());
  EXPECT_EQ(status.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  RecordProperty("requests", sent);
  for (const auto& [method, n] : unparsed_by_grpc) {
    std::printf("UNIMPLEMENTED from gRPC for %d random requests to %s\n", n,
                method.c_str());
  }
  for (const auto& [code, n] : codes_) {
    RecordProperty(absl::StrCat("status_", static_cast<int>(code)), n);
  }
}

}  // namespace
}  // namespace neffd::test_support
