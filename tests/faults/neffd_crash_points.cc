// The test build of neffd's filesystem hook (daemon/main.cc,
// NEFFD_TEST_ENV_HOOK): with NEFFD_TEST_CRASH_AT=<point> the daemon SIGKILLs
// itself at that point of its first matching publish step
// (store/testing/crash_point_env.h); without it, it is plain neffd.
#include <cstdio>
#include <cstdlib>
#include <string>

#include "store/env.h"
#include "store/testing/crash_point_env.h"

namespace neffd {

Env* TestEnv() {
  const char* at = std::getenv("NEFFD_TEST_CRASH_AT");
  if (at == nullptr || *at == '\0') return Env::Default();
  absl::StatusOr<CrashPoint> point = FindCrashPoint(at);
  if (!point.ok()) {
    std::fprintf(stderr, "neffd: NEFFD_TEST_CRASH_AT: %s\n",
                 std::string(point.status().message()).c_str());
    std::exit(2);
  }
  static Env* const env = new CrashPointEnv(Env::Default(), *point);
  return env;
}

}  // namespace neffd
