"""neffd rank-side client: get-or-compile NEFFs through neffd.

The portable `neffclient` module: pure Python over the C ABI
(client/neffclient.h) through ctypes, so one file serves CPython 3.8+ and
PyPy alike. Its API is the pybind11 module's (client/python/neffclient_module.cc):

    import neffclient
    client = neffclient.Client()            # or Client(address="unix:/...")
    key = client.derive_key(hlo_bytes, "-O1 --lnc 2", "2.19.8089.0")
    path = client.get_or_compile("neff", "2.19.8089.0", key, compile_fn)
    client.lookup("neff", "2.19.8089.0", key)   # path or None
    neffclient.memory_stats()                # the allocator's statistics
    neffclient.torchneuron_key(base_key, ir_bytes)  # TorchNeuron's 32-hex key

    # TorchNeuron's persistent cache and compile lock (client/torchneuron_cache.h)
    cache = neffclient.TorchNeuronCache("2.19.8089.0")
    if cache.get(key) is None:                  # bytes or None
        with cache.acquire_lock(key):           # LockTimeoutError at the timeout
            if not cache.exists(key):
                cache.put(key, compile_to_bytes())  # waiters wake to a hit

compile_fn(path) writes the artifact to `path`. It reports a deterministic
compiler error by raising neffclient.CompileError(log): the failure is
recorded and get_or_compile raises neffclient.CompileFailedError (with .log,
.retry_after and .workdir) here and in every waiter. Any other exception
abandons the compile (nothing recorded) and propagates unchanged.

The library is $NEFFCLIENT_LIBRARY if set, else libneffclient.so beside this
file or in ../ (the release's lib/python and lib/), else the loader's search
path. ctypes releases the GIL while a call waits and takes it back while
compile_fn runs.
"""

import ctypes
import os

__all__ = [
    "Client", "SegmentPool", "Error", "CancelledError", "CompileFailedError",
    "CompileError", "LockTimeoutError", "TorchNeuronCache",
    "TorchNeuronCompileLock", "derive_key", "torchneuron_key",
    "default_pool", "memory_stats",
]


# BEGIN EXCEPTIONS: the pybind11 module defines its exceptions from these
# lines too (client/python/BUILD.bazel, :exceptions_header).
class Error(RuntimeError):
    """A neffd client call failed; the message is the daemon's."""


class CancelledError(Error):
    """compile_fn cancelled the compile; nothing was recorded."""


class CompileFailedError(Error):
    """The compile failed (here, or recorded by another rank).

    log: the compiler's log; retry_after: unix seconds after which the key is
    compiled again (None if unknown); workdir: this rank's kept working
    directory (None for a rank that only waited).
    """

    def __init__(self, message, log="", retry_after=None, workdir=None):
        super().__init__(message)
        self.log = log
        self.retry_after = retry_after
        self.workdir = workdir


class LockTimeoutError(Error):
    """A compile lock stayed held by another process for the whole timeout."""


class CompileError(Exception):
    """Raise from compile_fn to report a deterministic compiler error."""

    def __init__(self, log=""):
        super().__init__(log)
        self.log = log
# END EXCEPTIONS


# neff_status and neff_compile_status (client/neffclient.h).
_OK, _MISS, _INVALID, _COMPILE_FAILED, _CANCELLED = 0, 1, 2, 3, 4
_LOCK_TIMEOUT = 6
_COMPILE_OK, _COMPILE_ERROR, _COMPILE_CANCELLED = 0, 1, 2
_KEY_SIZE = 65
_TORCHNEURON_KEY_SIZE = 33


class _Job(ctypes.Structure):
    _fields_ = [("ns", ctypes.c_char_p), ("compiler_version", ctypes.c_char_p),
                ("key", ctypes.c_char_p), ("workdir", ctypes.c_char_p),
                ("output_path", ctypes.c_char_p), ("internal", ctypes.c_void_p)]


class _Counters(ctypes.Structure):
    _fields_ = [("lookups", ctypes.c_uint64), ("hits", ctypes.c_uint64),
                ("waits", ctypes.c_uint64), ("wait_seconds", ctypes.c_double),
                ("compiles", ctypes.c_uint64),
                ("compile_seconds", ctypes.c_double),
                ("fallbacks", ctypes.c_uint64), ("failures", ctypes.c_uint64),
                ("lock_timeouts", ctypes.c_uint64),
                ("uncached", ctypes.c_uint64)]


_COMPILE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p,
                               ctypes.POINTER(_Job))


def _load():
    here = os.path.dirname(os.path.abspath(__file__))
    candidates = [os.environ.get("NEFFCLIENT_LIBRARY", ""),
                  os.path.join(here, "libneffclient.so"),
                  os.path.join(os.path.dirname(here), "libneffclient.so"),
                  "libneffclient.so"]
    errors = []
    for path in candidates:
        if path and (os.path.sep not in path or os.path.exists(path)):
            try:
                return ctypes.CDLL(path)
            except OSError as e:
                errors.append(str(e))
    raise ImportError("neffclient: cannot load libneffclient.so (set "
                      "NEFFCLIENT_LIBRARY): " + "; ".join(errors))


def _declare(lib):
    P, S, I = ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
    PP = ctypes.POINTER(ctypes.c_void_p)
    signatures = {
        "neff_client_new_tls": (I, [S, S, S, S, PP]),
        "neff_client_free": (None, [P]),
        "neff_derive_key": (I, [P, ctypes.c_char_p, ctypes.c_size_t, S, S, S,
                                S, ctypes.c_char_p]),
        "neff_torchneuron_key": (I, [ctypes.c_char_p, ctypes.c_size_t,
                                     ctypes.c_char_p, ctypes.c_size_t,
                                     ctypes.c_char_p]),
        "neff_lookup": (I, [P, S, S, S, PP]),
        "neff_get_or_compile": (I, [P, S, S, S, _COMPILE_FN, P, PP]),
        "neff_compile_set_log": (None, [ctypes.POINTER(_Job), S]),
        "neff_last_error": (S, []),
        "neff_last_failure_log": (S, []),
        "neff_last_failure_retry_after_ms": (ctypes.c_int64, []),
        "neff_last_failure_workdir": (S, []),
        "neff_client_counters": (I, [P, ctypes.POINTER(_Counters)]),
        "neff_client_write_metrics": (I, [P]),
        "neff_pool_new": (I, [ctypes.c_size_t, PP]),
        "neff_default_pool": (I, [PP]),
        "neff_pool_free": (None, [P]),
        "neff_pool_allocate": (I, [P, ctypes.c_size_t, PP]),
        "neff_pool_release": (I, [P, P]),
        "neff_pool_empty_cache": (I, [P, ctypes.POINTER(ctypes.c_size_t)]),
        "neff_pool_memory_stats": (I, [P, PP]),
        "neff_pool_reset_peak_memory_stats": (None, [P]),
        "neff_client_attach_pool": (None, [P, P]),
        "neff_torchneuron_cache_new": (I, [S, S, PP]),
        "neff_torchneuron_cache_free": (None, [P]),
        "neff_torchneuron_cache_exists": (I, [P, S]),
        "neff_torchneuron_cache_get": (I, [P, S, PP,
                                           ctypes.POINTER(ctypes.c_size_t)]),
        "neff_torchneuron_cache_put": (I, [P, S, ctypes.c_char_p,
                                           ctypes.c_size_t]),
        "neff_torchneuron_cache_remove": (I, [P, S]),
        "neff_torchneuron_cache_clear": (I, [P]),
        "neff_torchneuron_cache_acquire_lock": (I, [P, S, ctypes.c_double,
                                                    PP]),
        "neff_torchneuron_lock_held": (I, [P]),
        "neff_torchneuron_lock_release": (None, [P]),
        "neff_free": (None, [P]),
    }
    for name, (restype, argtypes) in signatures.items():
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    return lib


_lib = _declare(_load())


def _text(value):
    return value.decode("utf-8", "replace") if value is not None else ""


def _encode(value):
    if value is None:
        return None
    return value.encode() if isinstance(value, str) else bytes(value)


def _take_string(pointer):
    """A malloc'd C string as str; frees it."""
    if not pointer:
        return None
    try:
        return _text(ctypes.cast(pointer, ctypes.c_char_p).value)
    finally:
        _lib.neff_free(pointer)


def _raise(status):
    message = _text(_lib.neff_last_error())
    if status == _INVALID:
        raise ValueError(message)
    if status == _CANCELLED:
        raise CancelledError(message)
    if status == _LOCK_TIMEOUT:
        raise LockTimeoutError(message)
    if status == _COMPILE_FAILED:
        log = _text(_lib.neff_last_failure_log())
        retry_ms = _lib.neff_last_failure_retry_after_ms()
        workdir = _text(_lib.neff_last_failure_workdir())
        raise CompileFailedError(message, log,
                                 retry_ms / 1e3 if retry_ms else None,
                                 workdir or None)
    raise Error(message)


def _check(status):
    if status not in (_OK, _MISS):
        _raise(status)
    return status


def _flags(compiler_flags):
    """compiler_flags may be one string or a list of arguments."""
    if compiler_flags is None:
        return ""
    if isinstance(compiler_flags, str):
        return compiler_flags
    return "".join(flag + " " for flag in compiler_flags)


class SegmentPool:
    """The Neuron caching allocator over host memory (here)."""

    def __init__(self, capacity_bytes=None, _handle=None):
        self._owned = _handle is None
        if _handle is None:
            handle = ctypes.c_void_p()
            _check(_lib.neff_pool_new(capacity_bytes or 0,
                                      ctypes.byref(handle)))
            _handle = handle.value
        self._handle = _handle

    def allocate(self, bytes):  # noqa: A002 (the pybind module's name)
        ptr = ctypes.c_void_p()
        _check(_lib.neff_pool_allocate(self._handle, bytes,
                                       ctypes.byref(ptr)))
        return ptr.value or 0

    def free(self, ptr):
        _check(_lib.neff_pool_release(self._handle, ptr))

    def empty_cache(self):
        released = ctypes.c_size_t()
        _check(_lib.neff_pool_empty_cache(self._handle,
                                          ctypes.byref(released)))
        return released.value

    def memory_stats(self):
        text = ctypes.c_void_p()
        _check(_lib.neff_pool_memory_stats(self._handle, ctypes.byref(text)))
        stats = {}
        for line in _take_string(text.value).splitlines():
            name, value = line.rsplit(" ", 1)
            stats[name] = int(value)
        return stats

    def reset_peak_memory_stats(self):
        _lib.neff_pool_reset_peak_memory_stats(self._handle)

    def __del__(self):
        if getattr(self, "_owned", False) and _lib is not None:
            _lib.neff_pool_free(self._handle)


class Client:
    """A client for the daemon at `address` (default $NEFFD_ADDRESS);
    settings from the TORCH_NEURONX_* environment. For a TCP address served
    with mutual TLS: tls_ca, tls_cert and tls_key, PEM file paths; ValueError
    if one cannot be read."""

    def __init__(self, address=None, *, tls_ca=None, tls_cert=None,
                 tls_key=None):
        handle = ctypes.c_void_p()
        _check(_lib.neff_client_new_tls(
            _encode(address), _encode(tls_ca), _encode(tls_cert),
            _encode(tls_key), ctypes.byref(handle)))
        self._handle = handle.value
        self._pools = []  # attached pools live as long as the client

    def derive_key(self, hlo_bytes, compiler_flags, compiler_version,
                   platform_target=None, base_key=None):
        data = _encode(hlo_bytes)
        out = ctypes.create_string_buffer(_KEY_SIZE)
        _check(_lib.neff_derive_key(
            self._handle, data, len(data), _flags(compiler_flags).encode(),
            compiler_version.encode(), _encode(platform_target),
            _encode(base_key), out))
        return out.value.decode()

    def lookup(self, namespace, compiler_version, key):
        """The entry's path, or None."""
        path = ctypes.c_void_p()
        status = _check(_lib.neff_lookup(
            self._handle, namespace.encode(), compiler_version.encode(),
            key.encode(), ctypes.byref(path)))
        return None if status == _MISS else _take_string(path.value)

    def get_or_compile(self, namespace, compiler_version, key, compile_fn):
        """The entry's path; calls compile_fn(path) only if this rank must
        compile."""
        raised = []

        def run(_user_data, job):
            try:
                compile_fn(_text(job.contents.output_path))
                return _COMPILE_OK
            except CompileError as e:
                _lib.neff_compile_set_log(job, str(e.log).encode())
                return _COMPILE_ERROR
            except BaseException as e:  # propagated after the call returns
                raised.append(e)
                _lib.neff_compile_set_log(
                    job, ("compile_fn raised " + repr(e)).encode())
                return _COMPILE_CANCELLED

        callback = _COMPILE_FN(run)
        path = ctypes.c_void_p()
        status = _lib.neff_get_or_compile(
            self._handle, namespace.encode(), compiler_version.encode(),
            key.encode(), callback, None, ctypes.byref(path))
        if raised:
            raise raised[0]
        _check(status)
        return _take_string(path.value)

    def counters(self):
        c = _Counters()
        _check(_lib.neff_client_counters(self._handle, ctypes.byref(c)))
        return {name: getattr(c, name) for name, _ in _Counters._fields_}

    def attach_allocator(self, pool):
        """Report `pool`'s statistics in the 'allocator' metric table."""
        self._pools.append(pool)
        _lib.neff_client_attach_pool(self._handle, pool._handle)

    def write_metrics(self):
        _check(_lib.neff_client_write_metrics(self._handle))

    def __del__(self):
        if getattr(self, "_handle", None) and not getattr(
                self, "_immortal", False) and _lib is not None:
            _lib.neff_client_free(self._handle)


class TorchNeuronCompileLock:
    """The compile lock of one key (TorchNeuronCache.acquire_lock); a
    context manager that releases it."""

    def __init__(self, cache, key, handle):
        self._cache = cache  # the lock must not outlive its cache
        self.key = key
        self._handle = handle

    @property
    def held(self):
        """True until released; False from the start when the entry was
        already cached (there was nothing to hold)."""
        return bool(self._handle) and bool(
            _lib.neff_torchneuron_lock_held(self._handle))

    def release(self):
        """Lets the next waiter have the key. Idempotent."""
        handle, self._handle = self._handle, None
        if handle:
            _lib.neff_torchneuron_lock_release(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.release()

    def __del__(self):
        if _lib is not None:
            self.release()


class TorchNeuronCache:
    """TorchNeuron's persistent NEFF cache and compile lock over neffd
    (client/torchneuron_cache.h): keys are TorchNeuron's 32-hex keys, and
    every request carries `compiler_version`."""

    def __init__(self, compiler_version, address=None):
        handle = ctypes.c_void_p()
        _check(_lib.neff_torchneuron_cache_new(
            _encode(address), compiler_version.encode(),
            ctypes.byref(handle)))
        self._handle = handle.value

    def exists(self, key):
        return _check(_lib.neff_torchneuron_cache_exists(
            self._handle, key.encode())) == _OK

    def get(self, key):
        """The entry's bytes, or None."""
        data, size = ctypes.c_void_p(), ctypes.c_size_t()
        status = _check(_lib.neff_torchneuron_cache_get(
            self._handle, key.encode(), ctypes.byref(data),
            ctypes.byref(size)))
        if status == _MISS:
            return None
        try:
            return ctypes.string_at(data.value, size.value)
        finally:
            _lib.neff_free(data.value)

    def put(self, key, data):
        data = _encode(data)
        _check(_lib.neff_torchneuron_cache_put(self._handle, key.encode(),
                                               data, len(data)))

    def remove(self, key):
        _check(_lib.neff_torchneuron_cache_remove(self._handle, key.encode()))

    def clear(self):
        _check(_lib.neff_torchneuron_cache_clear(self._handle))

    def acquire_lock(self, key, timeout=None):
        """Waits up to `timeout` seconds (None:
        TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT) for the key's compile lock;
        LockTimeoutError if another process held it throughout."""
        handle = ctypes.c_void_p()
        _check(_lib.neff_torchneuron_cache_acquire_lock(
            self._handle, key.encode(), -1.0 if timeout is None else timeout,
            ctypes.byref(handle)))
        return TorchNeuronCompileLock(self, key, handle.value)

    def __del__(self):
        if getattr(self, "_handle", None) and _lib is not None:
            _lib.neff_torchneuron_cache_free(self._handle)


_default = {}


def _default_client():
    if "client" not in _default:
        client = Client()
        # Never freed, as in the pybind11 module: freeing a client writes
        # its metric tables, and this one's (all zero: it only derives
        # keys) would overwrite the rank's own at interpreter exit.
        client._immortal = True
        _default["client"] = client
    return _default["client"]


def derive_key(hlo_bytes, compiler_flags, compiler_version,
               platform_target=None, base_key=None):
    """Client().derive_key with this process's settings."""
    return _default_client().derive_key(hlo_bytes, compiler_flags,
                                        compiler_version, platform_target,
                                        base_key)


def torchneuron_key(base_key, ir_bytes):
    """TorchNeuron's persistent cache key (32 hex digits) of `ir_bytes` under
    `base_key`, bytes or str: the name an unmodified rank caches it by."""
    base, ir = _encode(base_key), _encode(ir_bytes)
    out = ctypes.create_string_buffer(_TORCHNEURON_KEY_SIZE)
    _check(_lib.neff_torchneuron_key(base, len(base), ir, len(ir), out))
    return out.value.decode()


def default_pool():
    """The process's SegmentPool (created on first use)."""
    if "pool" not in _default:
        handle = ctypes.c_void_p()
        _check(_lib.neff_default_pool(ctypes.byref(handle)))
        _default["pool"] = SegmentPool(_handle=handle.value)
    return _default["pool"]


def memory_stats():
    """torch.cuda.memory_stats()-style statistics of the default pool."""
    return default_pool().memory_stats()
