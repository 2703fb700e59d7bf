// A stand-in for the real neuronx-cc with the same command line, for neffcc's
// tests and benchmark:
//
//   fake_neuronx_cc --version
//       NeuronX Compiler version 2.19.8089.0+8ab9f450
//   fake_neuronx_cc [--target=trn1] compile --framework=XLA INPUT
//       --output OUT [--logfile F] [--workdir D] [--verbose=35] [-O2] ...
//
// Options may stand before or after the subcommand, as "--opt value" or
// "--opt=value"; "-O N", "-ON" and "--optlevel N" are one setting, as are
// "--lnc N" and "--logical-nc-config N"; "--pipeline" takes every value up to
// the next option. A compile writes OUT: FAKE_NEURONX_CC_NEFF_BYTES (default
// 4096) bytes derived only from the input's bytes and the settings that
// change code (every option but --output, --logfile, --workdir and
// --verbose, in any order), so two compiles of the same graph give the same
// NEFF and -O2 gives another. With --enable-internal-neff-wrapper it also
// writes wrapped_neff.hlo into its working directory (bytes of its own, also
// derived from the input and settings). It prints "Compiler status PASS"
// last, like the real one. Controlled by the environment:
//   FAKE_NEURONX_CC_RUNS        a file that gets one line per compile
//                               (counted by the tests; one O_APPEND write)
//   FAKE_NEURONX_CC_SLEEP_MS    how long a compile takes
//   FAKE_NEURONX_CC_CRASH       if set, the compile kills itself (SIGKILL)
//   FAKE_NEURONX_CC_NO_VERDICT  if set, the compile prints "Killed" on
//                               stderr and exits 137 without a verdict (what
//                               a shell reports for an OOM-killed child)
//   FAKE_NEURONX_CC_TEMP_DIR    if set, a successful compile also leaves a
//                               directory "neuroncc_temps" in its working
//                               directory (a result neffcc cannot capture)
// An input containing FAIL_THIS_GRAPH fails: an error on stderr, "Compiler
// status ERROR" on stdout, exit 70.
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "store/digest.h"

namespace {

constexpr char kFailMarker[] = "FAIL_THIS_GRAPH";
constexpr int kExitCompileError = 70;

bool HasPrefix(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

bool IsUnkeyed(const std::string& name) {
  return name == "--output" || name == "--logfile" || name == "--workdir" ||
         name == "--verbose";
}

bool TakesValue(const std::string& name) {
  for (const char* n :
       {"--output", "--logfile", "--workdir", "--verbose", "--target",
        "--framework", "--optlevel", "-O", "--lnc", "--logical-nc-config",
        "--model-type", "--auto-cast", "--auto-cast-type"}) {
    if (name == n) return true;
  }
  return false;
}

std::string Canonical(const std::string& name) {
  if (name == "-O") return "--optlevel";
  if (name == "--logical-nc-config") return "--lnc";
  return name;
}

struct Command {
  bool compile = false;
  std::string input, output, logfile;
  bool wrapper = false;
  std::set<std::string> code_settings;  // "name=value", in any order
};

// The compiler's own reading of its arguments (independent of neffcc's).
Command Parse(const std::vector<std::string>& args) {
  Command c;
  bool after_subcommand = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg.empty() || arg[0] != '-') {
      if (!after_subcommand) {
        c.compile = arg == "compile";
        after_subcommand = true;
      } else {
        c.input = arg;
      }
      continue;
    }
    std::string name = arg, value;
    const size_t eq = arg.find('=');
    if (HasPrefix(arg, "--") && eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else if (HasPrefix(arg, "-O") && arg.size() > 2) {
      name = "-O";
      value = arg.substr(2);
    } else if (TakesValue(name) && i + 1 < args.size()) {
      value = args[++i];
    } else if (name == "--pipeline") {
      while (i + 1 < args.size() && args[i + 1][0] != '-') {
        value += (value.empty() ? "" : " ") + args[++i];
      }
    }
    name = Canonical(name);
    if (name == "--output") c.output = value;
    if (name == "--logfile") c.logfile = value;
    if (name == "--enable-internal-neff-wrapper") c.wrapper = true;
    if (!IsUnkeyed(name)) c.code_settings.insert(name + "=" + value);
  }
  return c;
}

// splitmix64: deterministic bytes from a seed, fast enough for 512 MiB.
std::string NeffBytes(const std::string& seed_hex, size_t size) {
  uint64_t state = std::strtoull(seed_hex.substr(0, 16).c_str(), nullptr, 16);
  std::string out(size, '\0');
  for (size_t i = 0; i < size; i += 8) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(&out[i], &z, std::min<size_t>(8, size - i));
  }
  return out;
}

int Compile(const Command& command) {
  const std::string& input = command.input;
  const std::string& output = command.output;
  std::string code_flags;
  for (const std::string& setting : command.code_settings) {
    code_flags += setting + " ";
  }
  if (input.empty() || output.empty()) {
    std::fprintf(stderr, "ERROR: usage: compile INPUT --output OUT\n");
    return 2;
  }
  std::ifstream in(input, std::ios::binary);
  std::ostringstream bytes;
  if (!in || !(bytes << in.rdbuf())) {
    std::fprintf(stderr, "ERROR: cannot read %s\n", input.c_str());
    return 2;
  }
  if (const char* runs = std::getenv("FAKE_NEURONX_CC_RUNS")) {
    const std::string line = "compile " + input + "\n";
    const int fd = open(runs, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd >= 0) {
      (void)!write(fd, line.data(), line.size());
      close(fd);
    }
  }
  std::printf("Compiling %s\n", input.c_str());
  std::fflush(stdout);
  if (std::getenv("FAKE_NEURONX_CC_CRASH") != nullptr) raise(SIGKILL);
  if (std::getenv("FAKE_NEURONX_CC_NO_VERDICT") != nullptr) {
    std::fprintf(stderr, "Killed\n");
    return 137;
  }
  if (const char* ms = std::getenv("FAKE_NEURONX_CC_SLEEP_MS")) {
    std::this_thread::sleep_for(std::chrono::milliseconds(std::atoi(ms)));
  }
  if (bytes.str().find(kFailMarker) != std::string::npos) {
    std::fprintf(stderr,
                 "ERROR 70: [NCC_EUOC002] unsupported operator in graph %s\n",
                 input.c_str());
    std::printf("Compiler status ERROR\n");
    return kExitCompileError;
  }
  const char* size_env = std::getenv("FAKE_NEURONX_CC_NEFF_BYTES");
  const size_t size = size_env ? std::strtoull(size_env, nullptr, 10) : 4096;
  const std::string neff =
      NeffBytes(neffd::Sha256Hex(bytes.str() + "\nflags:" + code_flags), size);
  std::ofstream out(output, std::ios::binary | std::ios::trunc);
  if (!out.write(neff.data(), neff.size()) || !out.flush()) {
    std::fprintf(stderr, "ERROR: cannot write %s\n", output.c_str());
    return 1;
  }
  if (std::getenv("FAKE_NEURONX_CC_TEMP_DIR") != nullptr) {
    mkdir("neuroncc_temps", 0755);
  }
  if (command.wrapper) {
    const std::string wrapped = NeffBytes(
        neffd::Sha256Hex("wrapper\n" + bytes.str() + "\nflags:" + code_flags),
        1000);
    std::ofstream("wrapped_neff.hlo", std::ios::binary) << wrapped;
  }
  if (!command.logfile.empty()) {
    std::ofstream(command.logfile) << "compiled " << input << "\n";
  }
  std::printf("Compiler status PASS\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty()) {
    std::fprintf(stderr, "usage: neuronx-cc <command> [options]\n");
    return 2;
  }
  if (args[0] == "--version") {
    std::printf("NeuronX Compiler version 2.19.8089.0+8ab9f450\n");
    return 0;
  }
  const Command command = Parse(args);
  if (command.compile) return Compile(command);
  std::printf("fake neuronx-cc: %s\n", args[0].c_str());
  return 0;
}
