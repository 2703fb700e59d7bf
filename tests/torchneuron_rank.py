#!/usr/bin/env python3
"""An unmodified TorchNeuron rank's use of the NEFF cache, replayed from the
spec page "How an unmodified TorchNeuron rank uses the NEFF cache" (the
shared spec, torchneuron-cache-protocol.md): it links nothing of neffd's.

Key: with --ir (and --base_key), the persistent key is the XXH3-128 of the
base key's bytes followed by the IR bytes, high then low 64 bits as 32 hex
digits (Debian's libxxhash, through ctypes: TorchNeuron's hash, not ours).
Get: <cache>/<k[0:2]>/<k[2:4]>/<k>.neff, a hit if readable and non-empty.
On a miss: open (create, 0666) <local>/locks/<k>.lock, non-blocking
exclusive flock, on contention sleep 10 ms doubling up to 1 s until the lock
timeout (TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT, default 1200 s); at the
timeout delete the lock file, recreate it and try again, a few times. With
the lock: Get again; on a miss compile, Put (mkstemp .tmp.XXXXXX in the
shard directory, close without fsync, rename), release. The compile is
--neff's bytes, or with --ir the spec page's: the IR written to a fresh
temporary directory as module.hlo.pb, then `neuronx-cc compile ... --output
<tmp>/module.neff` found through PATH with that directory as the working
directory; a non-zero exit fails the rank with the compiler's stderr.

Prints one line per event, flushed, for the test to wait on: WAITING (the
first flock attempt found the key held), LOCKED, HIT or COMPILED, RELEASED,
and last "KEY <key> SHA256 <hex>" of the bytes the rank ends with.
With --hold_until=PATH it keeps the lock after LOCKED until PATH exists.
"""
import argparse
import ctypes
import fcntl
import hashlib
import os
import subprocess
import sys
import tempfile
import time

TIMEOUT_RETRIES = 3


def say(event):
    print(event, flush=True)


class Xxh128(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]


def persistent_key(base_key, ir):
    lib = ctypes.CDLL("libxxhash.so.0")
    lib.XXH3_128bits.restype = Xxh128
    lib.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    data = base_key + ir
    h = lib.XXH3_128bits(data, len(data))
    return "%016x%016x" % (h.high64, h.low64)


def compile_ir(ir):
    work = tempfile.mkdtemp(prefix="torchneuron-compile-")
    with open(os.path.join(work, "module.hlo.pb"), "wb") as f:
        f.write(ir)
    out = os.path.join(work, "module.neff")
    done = subprocess.run(
        ["neuronx-cc", "compile", os.path.join(work, "module.hlo.pb"),
         "--framework", "XLA", "--target", "trn2", "--lnc", "1", "-O1",
         "--output", out], cwd=work, capture_output=True)
    if done.returncode != 0:
        sys.exit("neuronx-cc failed: " + done.stderr.decode(errors="replace"))
    with open(out, "rb") as f:
        return f.read()


def entry_path(cache_dir, key):
    return os.path.join(cache_dir, key[0:2], key[2:4], key + ".neff")


def get(cache_dir, key):
    try:
        with open(entry_path(cache_dir, key), "rb") as f:
            data = f.read()
    except OSError:
        return None
    return data or None


def put(cache_dir, key, data):
    path = entry_path(cache_dir, key)
    shard = os.path.dirname(path)
    os.makedirs(shard, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp.", dir=shard)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.rename(tmp, path)


def say_result(key, data):
    say("KEY %s SHA256 %s" % (key, hashlib.sha256(data).hexdigest()))


def try_lock_until(lock_path, deadline):
    fd = os.open(lock_path, os.O_CREAT | os.O_RDWR, 0o666)
    delay = 0.01
    waiting = False
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return fd
        except BlockingIOError:
            if not waiting:
                say("WAITING")
                waiting = True
            if time.monotonic() >= deadline:
                os.close(fd)
                return None
            time.sleep(delay)
            delay = min(delay * 2, 1.0)


def acquire(lock_path, timeout):
    fd = try_lock_until(lock_path, time.monotonic() + timeout)
    for _ in range(TIMEOUT_RETRIES):
        if fd is not None:
            return fd
        # The lock timeout: delete the lock file, recreate it, try again.
        try:
            os.unlink(lock_path)
        except FileNotFoundError:
            pass
        fd = try_lock_until(lock_path, time.monotonic())
    if fd is None:
        sys.exit("lock timeout: " + lock_path)
    return fd


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--cache_dir", required=True)
    parser.add_argument("--local_dir", required=True)
    parser.add_argument("--key", default="")
    parser.add_argument("--ir", default="", help="a file holding the IR")
    parser.add_argument("--base_key", default="torchneuron-base-key")
    parser.add_argument("--neff", default="neff")
    parser.add_argument("--hold_until", default="")
    args = parser.parse_args()
    timeout = float(os.environ.get("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT",
                                   "1200"))
    ir = b""
    if args.ir:
        with open(args.ir, "rb") as f:
            ir = f.read()
        args.key = persistent_key(args.base_key.encode(), ir)
    if not args.key:
        sys.exit("--key or --ir is required")
    data = get(args.cache_dir, args.key)
    if data is not None:
        say("HIT")
        say_result(args.key, data)
        return
    locks = os.path.join(args.local_dir, "locks")
    os.makedirs(locks, exist_ok=True)
    fd = acquire(os.path.join(locks, args.key + ".lock"), timeout)
    say("LOCKED")
    while args.hold_until and not os.path.exists(args.hold_until):
        time.sleep(0.01)
    data = get(args.cache_dir, args.key)
    if data is not None:
        say("HIT")
    else:
        data = compile_ir(ir) if args.ir else args.neff.encode()
        put(args.cache_dir, args.key, data)
        say("COMPILED")
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    say("RELEASED")
    say_result(args.key, data)


if __name__ == "__main__":
    main()
