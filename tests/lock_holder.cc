// lock_holder: a rank stand-in for tests. Takes the lock on one entry (waiting
// for it), prints "GRANTED <lease_id>" or the other outcome, then holds the
// lease until killed, renewing it every --heartbeat_ms (0 = never: a holder
// that is alive but silent) with KeepAlive calls or, with --hold_stream, on
// a Hold stream (the lease then ends when this process dies, whatever
// namespace it runs in). With --publish it publishes a small entry instead of
// holding on, and prints PUBLISHED. With --idle_connections=N it is N ranks
// between compiles instead: N connections, one Lookup of the entry on each,
// "IDLE N", then nothing until killed (no call in progress, so gRPC reads
// those sockets only on its backup poll).
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/time/clock.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"
#include "store/digest.h"

ABSL_FLAG(std::string, address, "", "daemon address");
ABSL_FLAG(std::string, ns, "neff", "namespace");
ABSL_FLAG(std::string, key, "", "entry key");
ABSL_FLAG(std::string, compiler_version, "1.0", "compiler version");
ABSL_FLAG(std::string, host, "", "holder host (default: hostname)");
ABSL_FLAG(int, wait_seconds, 0, "lock wait (0: daemon default)");
ABSL_FLAG(int, heartbeat_ms, 0, "KeepAlive interval; 0 = none");
ABSL_FLAG(bool, hold_stream, false, "keep the lease on a Hold stream");
ABSL_FLAG(bool, publish, false, "publish at once when granted, then exit");
ABSL_FLAG(int, idle_connections, 0,
          "instead of locking: this many connections, one Lookup each, then "
          "idle");

namespace {

int IdleConnections(const neffd::v1::EntryId& id, int connections) {
  std::vector<std::shared_ptr<grpc::Channel>> channels;
  for (int c = 0; c < connections; ++c) {
    grpc::ChannelArguments args;  // a distinct argument: a connection each
    args.SetInt("neffd.idle_connection", c);
    channels.push_back(
        grpc::CreateCustomChannel(absl::GetFlag(FLAGS_address),
                                  grpc::InsecureChannelCredentials(), args));
    neffd::v1::LookupRequest lookup;
    *lookup.mutable_id() = id;
    neffd::v1::LookupResponse answer;
    grpc::ClientContext context;
    grpc::Status status = neffd::v1::CompileCache::NewStub(channels.back())
                              ->Lookup(&context, lookup, &answer);
    if (!status.ok()) {
      std::printf("ERROR %d %s\n", status.error_code(),
                  status.error_message().c_str());
      return 1;
    }
  }
  std::printf("IDLE %d\n", connections);
  std::fflush(stdout);
  for (;;) pause();
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto stub = neffd::v1::CompileCache::NewStub(grpc::CreateChannel(
      absl::GetFlag(FLAGS_address), grpc::InsecureChannelCredentials()));
  neffd::v1::LockRequest request;
  request.mutable_id()->set_namespace_(absl::GetFlag(FLAGS_ns));
  request.mutable_id()->set_compiler_version(
      absl::GetFlag(FLAGS_compiler_version));
  request.mutable_id()->set_key(absl::GetFlag(FLAGS_key));
  if (absl::GetFlag(FLAGS_idle_connections) > 0) {
    return IdleConnections(request.id(), absl::GetFlag(FLAGS_idle_connections));
  }
  std::string host = absl::GetFlag(FLAGS_host);
  if (host.empty()) {
    char name[256] = {};
    gethostname(name, sizeof(name) - 1);
    host = name;
  }
  request.mutable_holder()->set_host(host);
  request.mutable_holder()->set_pid(getpid());
  request.set_wait(true);
  request.set_wait_seconds(absl::GetFlag(FLAGS_wait_seconds));
  neffd::v1::LockResponse response;
  grpc::ClientContext context;
  grpc::Status status = stub->Lock(&context, request, &response);
  if (!status.ok()) {
    std::printf("ERROR %d %s\n", status.error_code(),
                status.error_message().c_str());
    return 1;
  }
  std::printf("%s %s\n",
              neffd::v1::LockResponse::Outcome_Name(response.outcome()).c_str(),
              response.lease().lease_id().c_str());
  std::fflush(stdout);
  if (response.outcome() != neffd::v1::LockResponse::GRANTED) return 0;
  if (absl::GetFlag(FLAGS_publish)) {
    neffd::v1::PublishRequest publish;
    publish.set_lease_id(response.lease().lease_id());
    *publish.mutable_id() = request.id();
    const std::string bytes = "neff of " + request.id().key();
    publish.set_inline_bytes(bytes);
    publish.set_size(bytes.size());
    publish.set_sha256(neffd::Sha256Hex(bytes));
    neffd::v1::PublishResponse published;
    grpc::ClientContext publish_context;
    status = stub->Publish(&publish_context, publish, &published);
    std::printf("%s\n", status.ok()
                            ? "PUBLISHED"
                            : ("ERROR " + status.error_message()).c_str());
    return status.ok() ? 0 : 1;
  }
  const int heartbeat_ms = absl::GetFlag(FLAGS_heartbeat_ms);
  if (absl::GetFlag(FLAGS_hold_stream)) {
    grpc::ClientContext hold_context;
    auto stream = stub->Hold(&hold_context);
    neffd::v1::KeepAliveRequest keep;
    keep.set_lease_id(response.lease().lease_id());
    neffd::v1::KeepAliveResponse ttl;
    while (stream->Write(keep) && stream->Read(&ttl)) {
      if (heartbeat_ms == 0) pause();
      absl::SleepFor(absl::Milliseconds(heartbeat_ms));
    }
    grpc::Status ended = stream->Finish();
    std::printf("LOST %s\n", ended.error_message().c_str());
    std::fflush(stdout);
    for (;;) pause();
  }
  for (;;) {
    if (heartbeat_ms == 0) {
      pause();
      continue;
    }
    absl::SleepFor(absl::Milliseconds(heartbeat_ms));
    neffd::v1::KeepAliveRequest keep;
    keep.set_lease_id(response.lease().lease_id());
    neffd::v1::KeepAliveResponse ignored;
    grpc::ClientContext keep_context;
    stub->KeepAlive(&keep_context, keep, &ignored);
  }
}
