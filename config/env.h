// config/env.h
//
// The one place that knows every environment variable neffd, its client
// library, the allocator and torch-neuronx read (spec:
// torch-neuronx-env-vars.rst, plus RANK and neffd's own NEFFD_ADDRESS). Each
// variable has a VarSpec: name, type, default, the spec's description, its
// validation and which components read it. The table is data
// (config/registry.cc); docs/CONFIG.md is generated from it
// (`neuronx-env --markdown`).
//
// An EnvSnapshot reads the environment once and answers typed values, each
// with its Origin, plus the warnings found while reading:
//   - a value that fails validation is reported (naming variable and value)
//     and the default is kept, with origin kInvalid;
//   - defaults that depend on the host or process (user name, uid, PyTorch
//     version, EC2 instance type), and values forced by another variable,
//     have origin kDerived; the split-collective defaults depend on the
//     stream and are asked through Split*Enabled();
//   - a TORCH_NEURONX_*, NEURON_* or NEFFD_* variable that is not in the
//     registry but within edit distance 2 of one that is gives the warning
//     "unknown variable X; did you mean Y?".
// A snapshot never fails: bad input becomes a warning, never an error.
// The daemon and the client read their settings through this API only.
//
// Asking a snapshot for a name that is not in the registry, or for a value
// of the wrong type (GetInt on a bool), is a programming error: the process
// prints the name and aborts.
//
// Thread-safety: an EnvSnapshot is immutable once built; every const method
// may be called from any number of threads. FromProcessEnvironment reads the
// environment without a lock, so do not call setenv() concurrently with it.

#ifndef NEFFD_CONFIG_ENV_H_
#define NEFFD_CONFIG_ENV_H_

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace neffd::config {

// The type of a variable's value, which decides the Get* method to call.
enum class Type {
  kBool,        // GetBool
  kInt,         // GetInt (int64)
  kString,      // GetString
  kPath,        // GetString; a file system path
  kIntList,     // GetIntList
  kStringList,  // GetStringList
};

// Where a snapshot's value came from.
enum class Origin {
  kDefault,  // not set; the spec's constant default
  kEnv,      // set, valid, used as given
  kDerived,  // computed: from the host/process (user, uid, PyTorch version,
             // instance type) or overridden by another variable
  kInvalid,  // set but rejected (see warnings()); the default is used
};

// Components that read a variable (bit set in VarSpec::readers).
enum Reader : unsigned {
  kDaemon = 1u << 0,
  kClient = 1u << 1,
  kAllocator = 1u << 2,
  kTorchNeuronx = 1u << 3,  // torch-neuronx / PyTorch only; not read by neffd
};

// How a set value is validated and parsed.
enum class Rule {
  kBool,          // 1/0, true/false, yes/no, on/off, any case
  kBool01,        // only "0" and "1"
  kOnlyOneOn,     // "1" is true, anything else false; never a warning
  kInt,           // plain decimal digits, in [min, max]
  kIntList,       // comma-separated plain decimals, each in [min, max]
  kIndexRanges,   // comma-separated N or A-B (A <= B), each in [min, max]
  kChoices,       // comma-separated subset of `choices`
  kNames,         // comma-separated names of [A-Za-z0-9_.-]
  kAnyString,     // anything, including the empty string
  kNonEmpty,      // any non-empty string
  kAbsolutePath,  // a path starting with '/'
  kPlatform,      // a platform name such as trn2 or trn3
  kAddress,       // unix:/absolute/path or HOST:PORT
};

// How a default that is not a constant is computed.
enum class Derivation {
  kNone,          // VarSpec::default_value, or unset if that is null
  kTorchVersion,  // true iff PyTorch >= 2.13; false if unknown
  kInstanceType,  // trnN from /sys/class/dmi/id/product_name, else unset
  kUserName,      // /tmp/torchinductor_<user name>/
  kUid,           // /var/tmp/nki-trace-cache-<uid>/
  kStream,        // on for the default stream, off for other streams
};

// One variable of the registry. Built by the helpers in config/registry.cc.
struct VarSpec {
  const char* name;
  const char* section;  // the spec's section heading
  Type type;
  Rule rule;
  // The default in the variable's own syntax; nullptr: unset unless derived.
  const char* default_value;
  Derivation derivation;
  // The default as the docs print it when it is not `default_value`.
  const char* default_doc;
  int64_t min;          // kInt, kIntList, kIndexRanges
  int64_t max;          // kInt, kIntList, kIndexRanges
  const char* choices;  // kChoices: the allowed names, comma-separated
  // kBool only: the effective value is false (with a warning) while this
  // other bool variable is false.
  const char* requires_true;
  unsigned readers;  // bit set of Reader
  const char* doc;   // the spec's description
};

// Every variable, in the spec's order, then neffd's own.
absl::Span<const VarSpec> Variables();

// The variable called `name`, or nullptr.
const VarSpec* FindVariable(absl::string_view name);

// The known variable nearest to `name` within edit distance 2, or nullptr.
const VarSpec* SuggestVariable(absl::string_view name);

// Lowercase names for output: "bool", "default", "daemon, client", ...
absl::string_view TypeName(Type type);
absl::string_view OriginName(Origin origin);
std::string ReadersText(unsigned readers);
// One line that says what a variable accepts, for docs and --explain.
std::string ValidationText(const VarSpec& spec);
// The default as docs print it: default_doc, else default_value, else unset.
std::string DefaultText(const VarSpec& spec);

// Inputs other than the environment, injectable for tests and tools.
struct SnapshotOptions {
  // PyTorch version of the calling process ("2.13", "2.13.0+cpu"); empty
  // means unknown. Decides the default of TORCH_NEURONX_COMPLEX_DECOMPOSE.
  std::string torch_version;
  // File that names the EC2 instance type (e.g. "trn2.48xlarge").
  std::string product_name_path = "/sys/class/dmi/id/product_name";
  // User name for TORCHINDUCTOR_CACHE_DIR. Empty: like Python's
  // getpass.getuser(), the first of LOGNAME, USER, LNAME, USERNAME in the
  // environment, then the password database entry of the real uid.
  std::string user_name;
  // uid for the NKI trace cache directory. Unset: getuid().
  std::optional<uid_t> uid;
};

// The effective configuration of one process. Cheap to copy.
class EnvSnapshot {
 public:
  // Reads the process environment once.
  static EnvSnapshot FromProcessEnvironment(
      const SnapshotOptions& options = {});

  // The same from `env` (name -> value), standing for the whole environment.
  static EnvSnapshot FromMap(const std::map<std::string, std::string>& env,
                             const SnapshotOptions& options = {});

  // Typed values. Abort on an unknown name or a call for the wrong type.
  bool GetBool(absl::string_view name) const;
  int64_t GetInt(absl::string_view name) const;
  // For kString and kPath. The empty string when !IsSet(name).
  const std::string& GetString(absl::string_view name) const;
  std::vector<int64_t> GetIntList(absl::string_view name) const;
  std::vector<std::string> GetStringList(absl::string_view name) const;

  // False when the variable has no value at all: e.g.
  // NEURON_PLATFORM_TARGET_OVERRIDE on a host that is not a Trainium
  // instance, or TORCH_NEURONX_DYNAMO_TENSOR_DUMPS when not set.
  bool IsSet(absl::string_view name) const;

  Origin origin(absl::string_view name) const;

  // Why a derived or stream-dependent value is what it is; often empty.
  const std::string& note(absl::string_view name) const;

  // The value as text in the variable's own syntax ("true", "1200",
  // "0,1,2"); "(unset)" when !IsSet(name).
  std::string FormatValue(absl::string_view name) const;

  // Every problem found, one line each, in registry order and then the
  // unknown variables by name.
  const std::vector<std::string>& warnings() const { return warnings_; }

  // NEURON_USE_SPLIT_ALLGATHER / NEURON_USE_SPLIT_REDUCE_SCATTER for work on
  // the default stream (`default_stream`) or another stream. Set: true only
  // for "1". Unset: true on the default stream, false elsewhere; with
  // TORCH_NEURONX_ENABLE_STREAMS false every stream is the default stream.
  bool SplitAllgatherEnabled(bool default_stream) const;
  bool SplitReduceScatterEnabled(bool default_stream) const;

 private:
  // A value of any Type; monostate means unset.
  using Value = std::variant<std::monostate, bool, int64_t, std::string,
                             std::vector<int64_t>, std::vector<std::string>>;
  struct Entry {
    Value value;
    Origin origin = Origin::kDefault;
    std::string note;
  };
  friend class SnapshotBuilder;

  EnvSnapshot() = default;
  const Entry& EntryFor(absl::string_view name, const char* caller,
                        std::initializer_list<Type> types) const;
  bool SplitEnabled(absl::string_view name, bool default_stream) const;

  std::vector<Entry> entries_;  // parallel to Variables()
  std::vector<std::string> warnings_;
};

}  // namespace neffd::config

#endif  // NEFFD_CONFIG_ENV_H_
