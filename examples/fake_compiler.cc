#include "examples/fake_compiler.h"

#include <fcntl.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "store/digest.h"
#include "store/file_util.h"

namespace neffd::examples {
namespace {

absl::Status WriteNew(const std::string& path, absl::string_view data,
                      int extra_flags = O_TRUNC) {
  UniqueFd fd(
      open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | extra_flags, 0644));
  if (!fd.valid()) return absl::ErrnoToStatus(errno, path);
  return WriteAll(fd.get(), data, path);
}

}  // namespace

std::string FakeNeffBytes(const std::string& key, size_t size) {
  // One digest per file, not per block: 128 ranks checking 16 graphs each
  // spent more CPU generating the expected bytes than the cache spent
  // serving them.
  const std::string prefix = Sha256Hex(key).substr(0, 48);
  std::string out;
  out.reserve(size + 64);
  for (uint64_t i = 0; out.size() < size; ++i) {
    absl::StrAppend(&out, prefix, absl::Hex(i, absl::kZeroPad16));
  }
  out.resize(size);
  return out;
}

CompileResult FakeCompile(const CompileJob& job,
                          const FakeCompilerOptions& options) {
  if (!options.compile_log.empty()) {
    (void)WriteNew(
        options.compile_log,
        absl::StrCat(job.key, " ", getpid(), " ", options.rank, "\n"),
        O_APPEND);
  }
  const std::string log = job.workdir + "/log-neuron-cc.txt";
  (void)WriteNew(job.workdir + "/compiler_args.txt",
                 absl::StrCat("--target=trn2 --output ", job.output_path,
                              " --logfile ", log, "\n"));
  (void)WriteNew(job.workdir + "/metadata.txt",
                 absl::StrCat("key=", job.key, "\ncompiler_version=",
                              job.compiler_version, "\n"));
  if (options.fail_keys.count(job.key) > 0) {
    (void)WriteNew(log, absl::StrCat("ERROR 70001: fake failure compiling ",
                                     job.key, "\n"));
    return CompileResult::CompilerError("");
  }
  const std::string neff = FakeNeffBytes(job.key, options.neff_bytes);
  UniqueFd out(open(job.output_path.c_str(),
                    O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!out.valid()) return CompileResult::Cancelled("cannot write the output");
  const size_t half = neff.size() / 2;
  absl::Status s = WriteAll(out.get(), neff.substr(0, half), job.output_path);
  absl::SleepFor(options.compile_time);
  if (s.ok()) s = WriteAll(out.get(), neff.substr(half), job.output_path);
  if (!s.ok()) return CompileResult::Cancelled(std::string(s.message()));
  (void)WriteNew(log, "Compiler status PASS\n");
  return CompileResult::Ok();
}

}  // namespace neffd::examples
