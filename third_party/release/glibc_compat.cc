// arc4random and arc4random_buf for the release build. Debian 12's static
// archives were built against its glibc 2.36 and call them (libstdc++'s
// std::random_device, expat's hash salt), but the target hosts have glibc
// 2.34, which has neither. The release links with --wrap for both (BUILD),
// so those calls come here: getrandom(2), glibc 2.25, the same kernel
// entropy glibc's own arc4random reads.
#include <sys/random.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>

extern "C" {

void __wrap_arc4random_buf(void* buffer, size_t size) {
  auto* out = static_cast<unsigned char*>(buffer);
  while (size > 0) {
    const ssize_t n = getrandom(out, size, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      // glibc's arc4random cannot fail either: it aborts.
      std::abort();
    }
    out += n;
    size -= static_cast<size_t>(n);
  }
}

uint32_t __wrap_arc4random() {
  uint32_t value;
  __wrap_arc4random_buf(&value, sizeof(value));
  return value;
}

}  // extern "C"
