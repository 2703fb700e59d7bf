// tests/faults/wire.h
//
// Small synchronous helpers for fault tests that talk to a real neffd over
// gRPC: take a lease, publish staged or inline bytes, look an entry up and
// read it back, count a process's open file descriptors, mount a tmpfs.
//
// Thread-safe (each call makes its own ClientContext).
#ifndef NEFFD_TESTS_FAULTS_WIRE_H_
#define NEFFD_TESTS_FAULTS_WIRE_H_

#include <sys/types.h>

#include <string>

#include "grpcpp/support/status.h"
#include "proto/neffd/v1/neffd.grpc.pb.h"

namespace neffd::test_support {

v1::EntryId Id(const std::string& ns, const std::string& version,
               const std::string& key);

// Lock(wait) on neff/1.0/{key} for holder `pid`; the response's outcome says
// whether a lease was granted.
v1::LockResponse LockKey(v1::CompileCache::Stub& stub, const std::string& key,
                         int64_t pid, int wait_seconds = 30,
                         grpc::Status* status = nullptr);

// LockKey for this process; the calling test case fails unless the call
// succeeds and the lease is granted.
v1::Lease GrantLease(v1::CompileCache::Stub& stub, const std::string& key);

// Writes `content` into the lease's staging dir and publishes it.
grpc::Status PublishStaged(v1::CompileCache::Stub& stub, const v1::Lease& lease,
                           const std::string& content,
                           const std::string& staged_name = "staged");

// Lookup of neff/1.0/{key}: the artifact's bytes on a HIT, "" otherwise.
// `result` (if given) gets the outcome.
std::string LookupContent(v1::CompileCache::Stub& stub, const std::string& key,
                          v1::LookupResponse::Result* result = nullptr);

// Entries under /proc/{pid}/fd; -1 if the process is gone.
int CountFds(pid_t pid);

// Resident memory of `pid` in KiB (VmRSS), -1 if unknown.
long RssKib(pid_t pid);

// True if the process may mount filesystems (root in CI). A test that
// skips without it says "needs root" in its GTEST_SKIP message:
// tests/count_results.py counts such a skip as a failure when the run is
// root's, since there the test should have run.
bool CanMount();

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_FAULTS_WIRE_H_
