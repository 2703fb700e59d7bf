// tests/harness/planted.h
//
// What anyone who can write the shared store can leave where neffd expects a
// file of its own (model.neff, model.done, compile_flags.json, the lease
// file): the shapes of issue 18's planted-files tests.
//
// Thread-safe (each call touches only its own path).
#ifndef NEFFD_TESTS_HARNESS_PLANTED_H_
#define NEFFD_TESTS_HARNESS_PLANTED_H_

#include <string>
#include <vector>

namespace neffd::test_support {

enum class PlantedShape {
  kFifo,            // a reader that opens it blocks until a writer comes
  kSocket,          // a bound unix socket (open fails with ENXIO)
  kSymlinkToRoot,   // a symlink to a root-only file (/etc/shadow)
  kDirectory,       // with a file inside, so rmdir cannot remove it
  kHugeRecord,      // a 3 MB regular file
  kTruncatedRecord  // the first half of a valid JSON record
};

const std::vector<PlantedShape>& AllPlantedShapes();
const char* PlantedShapeName(PlantedShape shape);

// Creates `shape` at `path` (which must not exist; its directory must).
// Aborts the test binary if that fails.
void Plant(const std::string& path, PlantedShape shape);

}  // namespace neffd::test_support

#endif  // NEFFD_TESTS_HARNESS_PLANTED_H_
