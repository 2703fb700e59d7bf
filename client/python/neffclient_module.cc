// client/python/neffclient_module.cc
//
// The Python module `neffclient` (pybind11): CacheClient for PyTorch ranks.
//
//   import neffclient
//   client = neffclient.Client()            # or Client(address="unix:/...")
//   # a TCP daemon with mutual TLS: Client(address="host:port",
//   #     tls_ca="ca.pem", tls_cert="rank.pem", tls_key="rank.key")
//   key = client.derive_key(hlo_bytes, "-O1 --lnc 2", "2.19.8089.0")
//   path = client.get_or_compile("neff", "2.19.8089.0", key, compile_fn)
//   client.lookup("neff", "2.19.8089.0", key)   # path or None
//   neffclient.torchneuron_key(base_key, ir_bytes)  # TorchNeuron's 32-hex key
//   neffclient.memory_stats()                # the allocator's statistics
//   cache = neffclient.TorchNeuronCache("2.19.8089.0")  # TorchNeuron's cache
//   with cache.acquire_lock(key):            # and compile lock, over neffd
//     if cache.get(key) is None: cache.put(key, neff_bytes)
//
// compile_fn(path) writes the artifact to `path` (in the spec's working
// directory, os.path.dirname(path)). It reports a deterministic compiler
// error by raising neffclient.CompileError(log): the failure is recorded and
// get_or_compile raises neffclient.CompileFailedError (with .log,
// .retry_after and .workdir) here and in every waiter. Any other exception
// abandons the compile (nothing recorded) and propagates unchanged.
// Errors are Python exceptions carrying the daemon's message: ValueError for
// bad arguments, neffclient.CancelledError, neffclient.LockTimeoutError
// (a TorchNeuronCache lock wait ran out), neffclient.Error otherwise.
//
// The GIL is released while a call waits (for the daemon, a lock, a
// publish) and held only while compile_fn runs.
#include <pybind11/eval.h>
#include <pybind11/functional.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "allocator/segment_pool.h"
#include "allocator/segment_provider.h"
#include "client/cache_client.h"
#include "client/python/exceptions.h"
#include "client/torchneuron_cache.h"
#include "client/torchneuron_key.h"
#include "config/env.h"

namespace py = pybind11;

namespace neffd::python {
namespace {

[[noreturn]] void Raise(const absl::Status& status) {
  py::module_ module = py::module_::import("neffclient");
  const std::string message(status.message());
  py::object error;
  if (std::optional<CompileFailure> failure = GetCompileFailure(status)) {
    py::object retry_after = py::none();
    if (failure->retry_after != absl::InfinitePast()) {
      retry_after = py::float_(absl::ToUnixMillis(failure->retry_after) / 1e3);
    }
    py::object workdir = py::none();
    if (!failure->workdir.empty()) workdir = py::str(failure->workdir);
    error = module.attr("CompileFailedError")(
        message, py::bytes(failure->log).attr("decode")("utf-8", "replace"),
        retry_after, workdir);
  } else if (absl::IsInvalidArgument(status)) {
    error = py::module_::import("builtins").attr("ValueError")(message);
  } else if (absl::IsCancelled(status)) {
    error = module.attr("CancelledError")(message);
  } else if (absl::IsDeadlineExceeded(status)) {
    error = module.attr("LockTimeoutError")(message);
  } else {
    error = module.attr("Error")(message);
  }
  PyErr_SetObject(reinterpret_cast<PyObject*>(Py_TYPE(error.ptr())),
                  error.ptr());
  throw py::error_already_set();
}

template <typename T>
T ValueOrRaise(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

std::string AsBytes(const py::object& data) {
  if (py::isinstance<py::str>(data)) return data.cast<std::string>();
  return std::string(py::bytes(data));
}

// compiler_flags may be one string or a list of arguments.
std::string AsFlags(const py::object& flags) {
  if (flags.is_none()) return "";
  if (py::isinstance<py::str>(flags)) return flags.cast<std::string>();
  std::string joined;
  for (const py::handle& f : flags) {
    joined += f.cast<std::string>();
    joined += " ";
  }
  return joined;
}

// A NeuronSegmentPool over its own provider (host memory here; NRT's device
// memory on a NeuronCore).
class PySegmentPool {
 public:
  // Never raises: also called without the GIL (metrics).
  static absl::StatusOr<std::shared_ptr<PySegmentPool>> Create(
      std::optional<size_t> capacity_bytes) {
    auto pool = std::shared_ptr<PySegmentPool>(new PySegmentPool(
        capacity_bytes.value_or(allocator::HostMemoryProvider::kUnlimited)));
    absl::StatusOr<std::unique_ptr<allocator::NeuronSegmentPool>> created =
        allocator::NeuronSegmentPool::CreateFromEnvironment(&pool->provider_);
    if (!created.ok()) return created.status();
    pool->pool_ = *std::move(created);
    return pool;
  }

  uintptr_t Allocate(size_t bytes) {
    allocator::Allocation a = ValueOrRaise(pool_->Allocate(bytes));
    return reinterpret_cast<uintptr_t>(a.ptr);
  }
  void Free(uintptr_t ptr) {
    absl::Status s = pool_->Free(reinterpret_cast<void*>(ptr));
    if (!s.ok()) Raise(s);
  }
  size_t EmptyCache() { return pool_->EmptyCache(); }
  std::vector<std::pair<std::string, int64_t>> Stats() const {
    return allocator::MemoryStatsToDict(pool_->GetStats());
  }
  void ResetPeak() { pool_->ResetPeakStats(); }

 private:
  explicit PySegmentPool(size_t capacity) : provider_(capacity) {}

  allocator::HostMemoryProvider provider_;
  std::unique_ptr<allocator::NeuronSegmentPool> pool_;
};

// The process's pool, created on first use; never destroyed.
const absl::StatusOr<std::shared_ptr<PySegmentPool>>& DefaultPool() {
  static const auto* pool = new absl::StatusOr<std::shared_ptr<PySegmentPool>>(
      PySegmentPool::Create(std::nullopt));
  return *pool;
}

py::dict StatsDict(const std::vector<std::pair<std::string, int64_t>>& rows) {
  py::dict out;
  for (const auto& [name, value] : rows) out[py::str(name)] = value;
  return out;
}

class PyClient {
 public:
  // The "allocator" metric table reports the default pool until
  // attach_allocator names another.
  // Raises ValueError if a TLS file given cannot be read.
  PyClient(const std::optional<std::string>& address,
           const std::optional<std::string>& tls_ca = std::nullopt,
           const std::optional<std::string>& tls_cert = std::nullopt,
           const std::optional<std::string>& tls_key = std::nullopt)
      : client_(ValueOrRaise(CacheClient::FromEnvironment(
            address.value_or(""),
            ClientTls{tls_cert.value_or(""), tls_key.value_or(""),
                      tls_ca.value_or("")}))) {
    client_->SetAllocatorStats([] {
      const auto& pool = DefaultPool();
      return pool.ok() ? (*pool)->Stats()
                       : std::vector<std::pair<std::string, int64_t>>();
    });
  }

  std::string DeriveKey(const py::object& hlo_bytes,
                        const py::object& compiler_flags,
                        const std::string& compiler_version,
                        const std::optional<std::string>& platform_target,
                        const std::optional<py::object>& base_key) const {
    return ValueOrRaise(
        client_->DeriveKey(AsBytes(hlo_bytes), AsFlags(compiler_flags),
                           compiler_version, platform_target.value_or(""),
                           base_key.has_value() ? AsBytes(*base_key) : ""));
  }

  std::string GetOrCompile(const std::string& ns,
                           const std::string& compiler_version,
                           const std::string& key, py::function compile_fn) {
    std::optional<py::error_already_set> raised;
    CompileFn fn = [&](const CompileJob& job) -> CompileResult {
      py::gil_scoped_acquire gil;
      try {
        compile_fn(job.output_path);
        return CompileResult::Ok();
      } catch (py::error_already_set& e) {
        if (e.matches(py::module_::import("neffclient").attr("CompileError"))) {
          return CompileResult::CompilerError(
              py::str(e.value().attr("log")).cast<std::string>());
        }
        std::string what = e.what();
        raised = std::move(e);
        return CompileResult::Cancelled("compile_fn raised " + what);
      }
    };
    absl::StatusOr<CacheResult> result;
    {
      py::gil_scoped_release nogil;
      result = client_->GetOrCompile(ns, compiler_version, key, fn);
    }
    if (raised.has_value()) {
      raised->restore();
      throw py::error_already_set();
    }
    return ValueOrRaise(std::move(result)).path;
  }

  std::optional<std::string> Lookup(const std::string& ns,
                                    const std::string& compiler_version,
                                    const std::string& key) {
    absl::StatusOr<std::optional<CacheResult>> found;
    {
      py::gil_scoped_release nogil;
      found = client_->Lookup(ns, compiler_version, key);
    }
    std::optional<CacheResult> hit = ValueOrRaise(std::move(found));
    if (!hit.has_value()) return std::nullopt;
    return hit->path;
  }

  py::dict Counters() const {
    const CacheCounters c = client_->counters();
    py::dict out;
    out["lookups"] = c.lookups;
    out["hits"] = c.hits;
    out["waits"] = c.waits;
    out["wait_seconds"] = c.wait_seconds;
    out["compiles"] = c.compiles;
    out["compile_seconds"] = c.compile_seconds;
    out["fallbacks"] = c.fallbacks;
    out["failures"] = c.failures;
    out["lock_timeouts"] = c.lock_timeouts;
    out["uncached"] = c.uncached;
    return out;
  }

  void AttachAllocator(std::shared_ptr<PySegmentPool> pool) {
    client_->SetAllocatorStats([pool] { return pool->Stats(); });
  }

  void WriteMetrics() {
    absl::Status s = client_->WriteMetrics();
    if (!s.ok()) Raise(s);
  }

 private:
  std::unique_ptr<CacheClient> client_;
};

// f() without the GIL.
template <typename F>
auto Unlocked(F f) {
  py::gil_scoped_release nogil;
  return f();
}

// TorchNeuronCache's compile lock; keeps its cache alive.
class PyTorchNeuronLock {
 public:
  PyTorchNeuronLock(std::shared_ptr<TorchNeuronCache> cache,
                    std::unique_ptr<TorchNeuronCompileLock> lock)
      : cache_(std::move(cache)), lock_(std::move(lock)) {}

  const std::string& key() const { return lock_->key(); }
  bool held() const { return lock_->held(); }
  void Release() {
    py::gil_scoped_release nogil;
    lock_->Release();
  }

 private:
  std::shared_ptr<TorchNeuronCache> cache_;  // destroyed after lock_
  std::unique_ptr<TorchNeuronCompileLock> lock_;
};

// TorchNeuronCache (client/torchneuron_cache.h); waits without the GIL.
class PyTorchNeuronCache {
 public:
  PyTorchNeuronCache(const std::string& compiler_version,
                     const std::optional<std::string>& address)
      : cache_(ValueOrRaise(TorchNeuronCache::FromEnvironment(
            compiler_version, address.value_or("")))) {}

  bool Exists(const std::string& key) {
    return ValueOrRaise(Unlocked([&] { return cache_->Exists(key); }));
  }
  std::optional<py::bytes> Get(const std::string& key) {
    absl::StatusOr<std::string> bytes =
        Unlocked([&] { return cache_->Get(key); });
    if (absl::IsNotFound(bytes.status())) return std::nullopt;
    return py::bytes(ValueOrRaise(std::move(bytes)));
  }
  void Put(const std::string& key, const py::object& data) {
    const std::string bytes = AsBytes(data);
    Check(Unlocked([&] { return cache_->Put(key, bytes); }));
  }
  void Remove(const std::string& key) {
    Check(Unlocked([&] { return cache_->Remove(key); }));
  }
  void Clear() {
    Check(Unlocked([&] { return cache_->Clear(); }));
  }
  PyTorchNeuronLock AcquireLock(const std::string& key,
                                std::optional<double> timeout) {
    const absl::Duration wait = timeout.has_value()
                                    ? absl::Seconds(*timeout)
                                    : -absl::Seconds(1);  // the environment's
    return PyTorchNeuronLock(
        cache_,
        ValueOrRaise(Unlocked([&] { return cache_->AcquireLock(key, wait); })));
  }

 private:
  static void Check(const absl::Status& s) {
    if (!s.ok()) Raise(s);
  }

  std::shared_ptr<TorchNeuronCache> cache_;
};

// The client behind the module-level functions; never destroyed.
PyClient& DefaultClient() {
  static PyClient* client = new PyClient(std::nullopt);
  return *client;
}

}  // namespace
}  // namespace neffd::python

PYBIND11_MODULE(neffclient, m) {
  using neffd::python::PyClient;
  using neffd::python::PySegmentPool;
  m.doc() = "neffd rank-side client: get-or-compile NEFFs through neffd.";
  py::exec(neffd::python::kExceptions, m.attr("__dict__"));

  py::class_<PyClient>(m, "Client")
      .def(py::init<const std::optional<std::string>&,
                    const std::optional<std::string>&,
                    const std::optional<std::string>&,
                    const std::optional<std::string>&>(),
           py::arg("address") = py::none(), py::kw_only(),
           py::arg("tls_ca") = py::none(), py::arg("tls_cert") = py::none(),
           py::arg("tls_key") = py::none(),
           "A client for the daemon at `address` (default $NEFFD_ADDRESS); "
           "settings from the TORCH_NEURONX_* environment. For a TCP address "
           "served with mutual TLS: tls_ca (the CA that signed the daemon's "
           "certificate), tls_cert and tls_key (this client's), PEM file "
           "paths; ValueError if one cannot be read.")
      .def("get_or_compile", &PyClient::GetOrCompile, py::arg("namespace"),
           py::arg("compiler_version"), py::arg("key"), py::arg("compile_fn"),
           "The entry's path; calls compile_fn(path) only if this rank must "
           "compile.")
      .def("lookup", &PyClient::Lookup, py::arg("namespace"),
           py::arg("compiler_version"), py::arg("key"),
           "The entry's path, or None.")
      .def("derive_key", &PyClient::DeriveKey, py::arg("hlo_bytes"),
           py::arg("compiler_flags"), py::arg("compiler_version"),
           py::arg("platform_target") = py::none(),
           py::arg("base_key") = py::none())
      .def("counters", &PyClient::Counters)
      .def("attach_allocator", &PyClient::AttachAllocator, py::arg("pool"),
           "Report `pool`'s statistics in the 'allocator' metric table.")
      .def("write_metrics", &PyClient::WriteMetrics);

  using neffd::python::PyTorchNeuronCache;
  using neffd::python::PyTorchNeuronLock;
  py::class_<PyTorchNeuronLock>(m, "TorchNeuronCompileLock")
      .def_property_readonly("key", &PyTorchNeuronLock::key)
      .def_property_readonly("held", &PyTorchNeuronLock::held)
      .def("release", &PyTorchNeuronLock::Release,
           "Lets the next waiter have the key. Idempotent.")
      .def("__enter__", [](py::object self) { return self; })
      .def("__exit__",
           [](PyTorchNeuronLock& lock, const py::args&) { lock.Release(); });

  py::class_<PyTorchNeuronCache>(m, "TorchNeuronCache")
      .def(py::init<const std::string&, const std::optional<std::string>&>(),
           py::arg("compiler_version"), py::arg("address") = py::none(),
           "TorchNeuron's persistent NEFF cache and compile lock over neffd "
           "(client/torchneuron_cache.h); every request carries "
           "compiler_version.")
      .def("exists", &PyTorchNeuronCache::Exists, py::arg("key"))
      .def("get", &PyTorchNeuronCache::Get, py::arg("key"),
           "The entry's bytes, or None.")
      .def("put", &PyTorchNeuronCache::Put, py::arg("key"), py::arg("data"))
      .def("remove", &PyTorchNeuronCache::Remove, py::arg("key"))
      .def("clear", &PyTorchNeuronCache::Clear)
      .def("acquire_lock", &PyTorchNeuronCache::AcquireLock, py::arg("key"),
           py::arg("timeout") = py::none(),
           "Waits up to `timeout` seconds (None: "
           "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT) for the key's compile "
           "lock; LockTimeoutError if another process held it throughout.");

  py::class_<PySegmentPool, std::shared_ptr<PySegmentPool>>(m, "SegmentPool")
      .def(py::init([](std::optional<size_t> capacity_bytes) {
             return ValueOrRaise(PySegmentPool::Create(capacity_bytes));
           }),
           py::arg("capacity_bytes") = py::none())
      .def("allocate", &PySegmentPool::Allocate, py::arg("bytes"))
      .def("free", &PySegmentPool::Free, py::arg("ptr"))
      .def("empty_cache", &PySegmentPool::EmptyCache)
      .def("memory_stats",
           [](const PySegmentPool& p) {
             return neffd::python::StatsDict(p.Stats());
           })
      .def("reset_peak_memory_stats", &PySegmentPool::ResetPeak);

  m.def(
      "derive_key",
      [](const py::object& hlo_bytes, const py::object& compiler_flags,
         const std::string& compiler_version,
         const std::optional<std::string>& platform_target,
         const std::optional<py::object>& base_key) {
        return neffd::python::DefaultClient().DeriveKey(
            hlo_bytes, compiler_flags, compiler_version, platform_target,
            base_key);
      },
      py::arg("hlo_bytes"), py::arg("compiler_flags"),
      py::arg("compiler_version"), py::arg("platform_target") = py::none(),
      py::arg("base_key") = py::none(),
      "Client().derive_key with this process's settings.");
  m.def(
      "torchneuron_key",
      [](const py::object& base_key, const py::object& ir_bytes) {
        return neffd::TorchNeuronKey(neffd::python::AsBytes(base_key),
                                     neffd::python::AsBytes(ir_bytes));
      },
      py::arg("base_key"), py::arg("ir_bytes"),
      "TorchNeuron's persistent cache key: XXH3-128 of base_key's bytes then "
      "ir_bytes' (bytes or str), as 32 lowercase hex digits.");
  m.def(
      "default_pool",
      [] { return neffd::python::ValueOrRaise(neffd::python::DefaultPool()); },
      "The process's SegmentPool (created on first use).");
  m.def(
      "memory_stats",
      [] {
        return neffd::python::StatsDict(
            neffd::python::ValueOrRaise(neffd::python::DefaultPool())->Stats());
      },
      "torch.cuda.memory_stats()-style statistics of the default pool.");
}
