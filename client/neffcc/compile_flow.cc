#include "client/neffcc/compile_flow.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
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
#include "client/neffcc/outputs.h"
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

// The compiler's result, for the caller alone (it could not be cached):
// every file where the compiler would have written it.
absl::Status DeliverUncached(const std::string& neff,
                             const std::string& cwd_dir,
                             const std::string& out_dir,
                             const CompileFlowOptions& options) {
  if (absl::Status s = PlaceFile(neff, options.command.output); !s.ok()) {
    return s;
  }
  const std::string output_dir = DirName(options.command.output);
  for (const auto& [from, to] :
       {std::pair{cwd_dir, CurrentDir()}, std::pair{out_dir, output_dir}}) {
    std::error_code error;
    for (const auto& e : std::filesystem::directory_iterator(from, error)) {
      const std::string target =
          absl::StrCat(to, "/", e.path().filename().string());
      if (e.path() == neff) continue;
      if (rename(e.path().c_str(), target.c_str()) != 0) {
        return absl::ErrnoToStatus(errno, "moving " + e.path().string());
      }
    }
  }
  return absl::OkStatus();
}

// Runs the compiler in {workdir}/cwd with --output in {workdir}/out, so that
// everything it writes is this call's (client/neffcc/outputs.h), and leaves
// the artifact at job.output_path. A result that cannot be captured is
// placed for the caller, `uncaptured` says why, and the compile is
// Cancelled (nothing published or recorded).
CompileResult CompileInPrivateDirs(const CompileFlowOptions& options,
                                   const CompileJob& job, int& compiler_status,
                                   std::string& uncaptured) {
  const std::string cwd_dir = job.workdir + "/cwd";
  const std::string out_dir = job.workdir + "/out";
  const std::string output_name = BaseName(options.command.output);
  for (const std::string& dir : {cwd_dir, out_dir}) {
    if (absl::Status s = RemoveTree(dir); !s.ok() && !absl::IsNotFound(s)) {
      return CompileResult::Cancelled(s.ToString());
    }
    if (absl::Status s = MakeDirs(dir); !s.ok()) {
      return CompileResult::Cancelled(s.ToString());
    }
  }
  const std::string neff = out_dir + "/" + output_name;
  std::vector<std::string> argv = {options.compiler};
  for (std::string& arg : RunnableArgs(options.compiler_args, options.command,
                                       neff, CurrentDir())) {
    argv.push_back(std::move(arg));
  }
  absl::StatusOr<CompilerRun> run =
      RunCompiler(argv, /*pass_through=*/true, cwd_dir);
  if (!run.ok()) return CompileResult::Cancelled(run.status().ToString());
  compiler_status = run->wait_status;
  CompileResult verdict = Verdict(run->wait_status, run->output);
  // The compiler's own log goes where it would have, result or not.
  for (absl::string_view log : kCompilerLogs) {
    const std::string path = absl::StrCat(cwd_dir, "/", log);
    if (access(path.c_str(), F_OK) == 0) {
      (void)PlaceFile(path, absl::StrCat(CurrentDir(), "/", log));
    }
  }
  if (verdict.kind != CompileResult::Kind::kOk) return verdict;
  absl::StatusOr<std::vector<SideOutput>> sides =
      CollectSideOutputs(cwd_dir, out_dir, output_name);
  if (sides.ok()) {
    absl::Status written = WriteArtifact(neff, *sides, job.output_path);
    if (written.ok()) return verdict;
    sides = written;
  }
  uncaptured = std::string(sides.status().message());
  if (absl::Status s = DeliverUncached(neff, cwd_dir, out_dir, options);
      !s.ok()) {
    uncaptured = absl::StrCat(uncaptured, "; ", s.message());
  }
  return CompileResult::Cancelled(uncaptured);
}

int Delivered(const CacheResult& result, const CompileFlowOptions& options,
              bool compiled_here) {
  if (absl::Status s =
          PlaceResult(result.path, options.command.output, CurrentDir());
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

absl::StatusOr<std::string> DeriveCompileKey(const CacheClient& client,
                                             const CompileCommand& command,
                                             absl::string_view input,
                                             const std::string& version) {
  return client.DeriveKey(input, absl::StrJoin(command.key_flags, " "), version,
                          command.target);
}

v1::KeyInputsRecord MakeKeyInputs(const CacheClient& client,
                                  const CompileCommand& command,
                                  absl::string_view input,
                                  const std::string& version,
                                  const std::vector<std::string>& invocation) {
  v1::KeyInputsRecord record;
  record.set_input_sha256(Sha256Hex(input));
  record.set_input_size(input.size());
  for (const std::string& flag : command.key_flags) record.add_flags(flag);
  record.set_compiler_version(version);
  record.set_platform_target(command.target.empty()
                                 ? client.options().platform_target
                                 : command.target);
  for (const std::string& arg : invocation) record.add_invocation(arg);
  return record;
}

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
  absl::StatusOr<std::string> key = DeriveCompileKey(
      client, options.command, *input, options.compiler_version);
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

  const v1::KeyInputsRecord record =
      MakeKeyInputs(client, options.command, *input, options.compiler_version,
                    options.invocation);
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
  std::string uncaptured;  // why the compiler's result could not be cached
  auto compile = [&](const CompileJob& job) {
    compiled_here = true;
    return CompileInPrivateDirs(options, job, compiler_status, uncaptured);
  };
  absl::StatusOr<CacheResult> result =
      client.GetOrCompile(kNamespace, options.compiler_version, *key, compile,
                          {{kKeyInputsMetadata, json}});
  if (result.ok()) return Delivered(*result, options, compiled_here);
  if (!uncaptured.empty()) {
    PrintError(absl::StrCat("warning: ", uncaptured,
                            "; the result is yours, not cached"));
    return 0;
  }
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
