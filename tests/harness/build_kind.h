// tests/harness/build_kind.h
//
// Whether this binary (and so the daemon built with it) runs under a
// sanitizer. Wall-clock bounds mean something only without one: ASan and
// TSan make every call several times slower and the CI machine runs two
// tests at once, so a test keeps its behavioural checks in every build and
// its wall-clock ones in the plain build only.
#ifndef NEFFD_TESTS_HARNESS_BUILD_KIND_H_
#define NEFFD_TESTS_HARNESS_BUILD_KIND_H_

namespace neffd::test_support {

// The TSan config undefines __SANITIZE_THREAD__ (see .bazelrc) and says
// NEFFD_TSAN instead.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || \
    defined(NEFFD_TSAN)
inline constexpr bool kSanitizedBuild = true;
#else
inline constexpr bool kSanitizedBuild = false;
#endif

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_BUILD_KIND_H_
