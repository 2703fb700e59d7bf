#include "tests/harness/planted.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace neffd::test_support {
namespace {

void Check(bool ok, const std::string& what) {
  if (ok) return;
  std::fprintf(stderr, "planting %s failed: %s\n", what.c_str(),
               std::strerror(errno));
  std::abort();
}

void PlantSocket(const std::string& path) {
  // A unix socket path is limited to 108 bytes: bind in the directory.
  const std::string dir = path.substr(0, path.rfind('/'));
  const std::string name = path.substr(path.rfind('/') + 1);
  char cwd[4096];
  Check(getcwd(cwd, sizeof(cwd)) != nullptr, "getcwd");
  Check(chdir(dir.c_str()) == 0, dir);
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  Check(fd >= 0, "socket");
  sockaddr_un addr = {};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, name.c_str(), sizeof(addr.sun_path) - 1);
  Check(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0, path);
  close(fd);  // the socket file stays
  Check(chdir(cwd) == 0, cwd);
}

void WriteFile(const std::string& path, const std::string& content) {
  std::ofstream out(path, std::ios::binary);
  out << content;
  Check(out.good(), path);
}

}  // namespace

const std::vector<PlantedShape>& AllPlantedShapes() {
  static const auto* const shapes = new std::vector<PlantedShape>{
      PlantedShape::kFifo,          PlantedShape::kSocket,
      PlantedShape::kSymlinkToRoot, PlantedShape::kDirectory,
      PlantedShape::kHugeRecord,    PlantedShape::kTruncatedRecord};
  return *shapes;
}

const char* PlantedShapeName(PlantedShape shape) {
  switch (shape) {
    case PlantedShape::kFifo:
      return "fifo";
    case PlantedShape::kSocket:
      return "socket";
    case PlantedShape::kSymlinkToRoot:
      return "symlink_to_root_only_file";
    case PlantedShape::kDirectory:
      return "directory";
    case PlantedShape::kHugeRecord:
      return "3mb_record";
    case PlantedShape::kTruncatedRecord:
      return "truncated_record";
  }
  return "?";
}

void Plant(const std::string& path, PlantedShape shape) {
  switch (shape) {
    case PlantedShape::kFifo:
      Check(mkfifo(path.c_str(), 0666) == 0, path);
      return;
    case PlantedShape::kSocket:
      PlantSocket(path);
      return;
    case PlantedShape::kSymlinkToRoot:
      Check(symlink("/etc/shadow", path.c_str()) == 0, path);
      return;
    case PlantedShape::kDirectory:
      Check(mkdir(path.c_str(), 0755) == 0, path);
      WriteFile(path + "/inside", "x");
      return;
    case PlantedShape::kHugeRecord:
      WriteFile(path, std::string(3 << 20, '{'));
      return;
    case PlantedShape::kTruncatedRecord:
      WriteFile(path, "{\"size\": \"12\", \"sha256\": \"ab");
      return;
  }
}

}  // namespace neffd::test_support
