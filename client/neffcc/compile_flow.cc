#include "client/neffcc/compile_flow.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/explain.h"
#include "client/neffcc/cached_inputs.h"
#include "client/neffcc/real_compiler.h"
#include "store/digest.h"
#include "store/file_util.h"

namespace neffd::neffcc {
namespace {

constexpr char kNamespace[] = "neff";
// What a successful neuronx-cc compile prints last; frameworks look for it.
constexpr char kPassLine[] = "Compiler status PASS\n";

void PrintError(absl::string_view message) {
  std::fprintf(stderr, "neffcc: %.*s\n", static_cast<int>(message.size()),
               message.data());
}

std::string CurrentDir() {
  char buffer[PATH_MAX];
  return getcwd(buffer, sizeof(buffer)) == nullptr ? "." : buffer;
}

// A keyed option whose value names a file: the key would hold the name, not
// the bytes, so a changed file would hit a stale NEFF.
absl::Status CheckNoFileValues(const CompileCommand& command) {
  for (const std::string& value : command.keyed_values) {
    struct stat st;
    if (!value.empty() && stat(value.c_str(), &st) == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("the option value '", value,
                       "' names a file whose bytes would not be in the key"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::string> ReadInput(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream bytes;
  if (!in || !(bytes << in.rdbuf())) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot read the input ", path));
  }
  return bytes.str();
}

// Writes `source`'s bytes to `target` as a new file of its own: a reflink
// where the filesystem shares extents (FICLONE), else a kernel copy. Built
// beside the target and renamed over it, so nobody sees a partial NEFF.
absl::Status PlaceOutput(const std::string& source, const std::string& target) {
  UniqueFd in(open(source.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in.valid()) return absl::ErrnoToStatus(errno, "opening " + source);
  const size_t slash = target.rfind('/');
  const std::string dir =
      slash == std::string::npos ? "." : target.substr(0, slash);
  const std::string temp = absl::StrCat(
      dir, "/",
      UniqueTempName(
          slash == std::string::npos ? target : target.substr(slash + 1),
          "neffcc"));
  UniqueFd out(open(temp.c_str(),
                    O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                    0666));
  if (!out.valid()) return absl::ErrnoToStatus(errno, "writing " + target);
  if (ioctl(out.get(), FICLONE, in.get()) != 0) {
    absl::StatusOr<uint64_t> copied =
        CopyFileContents(in.get(), out.get(), source);
    if (!copied.ok()) {
      unlink(temp.c_str());
      return copied.status();
    }
  }
  if (rename(temp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    unlink(temp.c_str());
    return absl::ErrnoToStatus(err, "writing " + target);
  }
  return absl::OkStatus();
}

int Delivered(const CacheResult& result, const CompileFlowOptions& options,
              bool compiled_here) {
  if (absl::Status s = PlaceOutput(result.path, options.command.output);
      !s.ok()) {
    PrintError(s.message());
    return kExitNeffccError;
  }
  // The compiler printed its own status line when it ran in this process.
  if (!compiled_here) std::fputs(kPassLine, stdout);
  return 0;
}

// A failure recorded by another caller: its compiler's text, its status.
int ReportRecordedFailure(const absl::Status& status) {
  std::optional<CompileFailure> failure = GetCompileFailure(status);
  const std::string log = failure.has_value() ? failure->log : "";
  absl::string_view text = log;
  if (absl::StartsWith(text, kExitStatusLine)) {
    const size_t newline = text.find('\n');
    text = newline == absl::string_view::npos ? "" : text.substr(newline + 1);
  }
  std::fwrite(text.data(), 1, text.size(), stderr);
  if (!text.empty() && text.back() != '\n') std::fputc('\n', stderr);
  std::string when = "until it is retried";
  if (failure.has_value() && failure->retry_after != absl::InfinitePast()) {
    when = absl::StrCat(
        "until ", absl::FormatTime("%Y-%m-%d %H:%M:%S UTC",
                                   failure->retry_after, absl::UTCTimeZone()));
  }
  PrintError(absl::StrCat(
      "this graph failed to compile in another process; its result is "
      "recorded and served ",
      when, " (the compiler's output is above)"));
  return ExitStatusOfFailureLog(log);
}

v1::KeyInputsRecord MakeRecord(absl::string_view input,
                               const std::string& platform_target,
                               const CompileFlowOptions& options) {
  v1::KeyInputsRecord record;
  record.set_input_sha256(Sha256Hex(input));
  record.set_input_size(input.size());
  for (const std::string& flag : options.command.key_flags) {
    record.add_flags(flag);
  }
  record.set_compiler_version(options.compiler_version);
  record.set_platform_target(platform_target);
  for (const std::string& arg : options.invocation) record.add_invocation(arg);
  return record;
}

// So `neffctl why` can explain a key that is not cached (yet). Best effort.
void WriteMissRecord(const CacheClientOptions& client, absl::string_view key,
                     const std::string& json) {
  const std::string path = MissRecordPath(client.local_dir, key);
  const std::string dir = path.substr(0, path.rfind('/'));
  if (!MakeDirs(dir).ok()) return;
  (void)WriteFileAtomically(dir, path.substr(dir.size() + 1), json, client.host,
                            /*durable=*/false);
}

}  // namespace

CompileResult Verdict(int wait_status, const std::string& output) {
  if (WIFEXITED(wait_status) && WEXITSTATUS(wait_status) != 0) {
    if (!absl::StrContains(output, kErrorVerdict)) {
      return CompileResult::Cancelled(
          absl::StrCat("the compiler exited ", WEXITSTATUS(wait_status),
                       " without its verdict (", kErrorVerdict, ")"));
    }
    return CompileResult::CompilerError(
        absl::StrCat(kExitStatusLine, WEXITSTATUS(wait_status), "\n", output));
  }
  return CompileResult::FromWaitStatus(wait_status, output);
}

int ExitStatusOfFailureLog(absl::string_view log) {
  int status = 1;
  if (!absl::ConsumePrefix(&log, kExitStatusLine)) return status;
  const absl::string_view digits = log.substr(0, log.find('\n'));
  if (!absl::SimpleAtoi(digits, &status) || status <= 0 || status > 255) {
    return 1;
  }
  return status;
}

absl::StatusOr<int> RunCachedCompile(CacheClient& client,
                                     const CompileFlowOptions& options) {
  if (absl::Status s = CheckNoFileValues(options.command); !s.ok()) return s;
  absl::StatusOr<std::string> input = ReadInput(options.command.input);
  if (!input.ok()) return input.status();
  const std::string flags = absl::StrJoin(options.command.key_flags, " ");
  absl::StatusOr<std::string> key = client.DeriveKey(
      *input, flags, options.compiler_version, options.command.target);
  if (!key.ok()) return key.status();
  absl::StatusOr<std::optional<CacheResult>> found =
      client.Lookup(kNamespace, options.compiler_version, *key);
  if (!found.ok()) {
    if (IsCompileFailure(found.status())) {
      return ReportRecordedFailure(found.status());
    }
    return found.status();
  }
  if (found->has_value()) return Delivered(**found, options, false);

  const std::string target = options.command.target.empty()
                                 ? client.options().platform_target
                                 : options.command.target;
  const v1::KeyInputsRecord record = MakeRecord(*input, target, options);
  input->clear();
  input->shrink_to_fit();  // the compiler may need the memory
  if (options.explain || options.no_compile) {
    const std::string why =
        ExplainMiss(*key, record, CachedKeyInputs(client.options()));
    if (options.no_compile) {
      PrintError(absl::StrCat("not compiling ", kNamespace, "/",
                              options.compiler_version, "/", *key,
                              " (NEFFD_NO_COMPILE=1): ", why));
      return kExitNoCompile;
    }
    PrintError(why);
  }
  const std::string json = KeyInputsToJson(record);
  WriteMissRecord(client.options(), *key, json);

  bool compiled_here = false;
  int compiler_status = 0;
  auto compile = [&](const CompileJob& job) {
    compiled_here = true;
    std::vector<std::string> argv = {options.compiler};
    for (std::string& arg : RunnableArgs(options.compiler_args, options.command,
                                         job.output_path, CurrentDir())) {
      argv.push_back(std::move(arg));
    }
    absl::StatusOr<CompilerRun> run = RunCompiler(argv, /*pass_through=*/true);
    if (!run.ok()) return CompileResult::Cancelled(run.status().ToString());
    compiler_status = run->wait_status;
    return Verdict(run->wait_status, run->output);
  };
  absl::StatusOr<CacheResult> result =
      client.GetOrCompile(kNamespace, options.compiler_version, *key, compile,
                          {{kKeyInputsMetadata, json}});
  if (result.ok()) return Delivered(*result, options, compiled_here);
  if (compiled_here && WIFSIGNALED(compiler_status)) {
    PrintError(result.status().message());
    return 128 + WTERMSIG(compiler_status);
  }
  if (compiled_here && WIFEXITED(compiler_status) &&
      WEXITSTATUS(compiler_status) != 0) {
    return WEXITSTATUS(compiler_status);  // its output was shown live
  }
  if (IsCompileFailure(result.status())) {
    return ReportRecordedFailure(result.status());
  }
  PrintError(result.status().message());
  return kExitNeffccError;
}

}  // namespace neffd::neffcc
