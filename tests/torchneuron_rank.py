#!/usr/bin/env python3
"""An unmodified TorchNeuron rank's use of the NEFF cache, replayed from the
spec page "How an unmodified TorchNeuron rank uses the NEFF cache" (the
shared spec, torchneuron-cache-protocol.md): it links nothing of neffd's.

Get: <cache>/<k[0:2]>/<k[2:4]>/<k>.neff, a hit if readable and non-empty.
On a miss: open (create, 0666) <local>/locks/<k>.lock, non-blocking
exclusive flock, on contention sleep 10 ms doubling up to 1 s until the lock
timeout (TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT, default 1200 s); at the
timeout delete the lock file, recreate it and try again, a few times. With
the lock: Get again; on a miss "compile" (--neff bytes), Put (mkstemp
.tmp.XXXXXX in the shard directory, close without fsync, rename), release.

Prints one line per event, flushed, for the test to wait on: WAITING (the
first flock attempt found the key held), LOCKED, HIT or COMPILED, RELEASED.
With --hold_until=PATH it keeps the lock after LOCKED until PATH exists.
"""
import argparse
import fcntl
import os
import sys
import tempfile
import time

TIMEOUT_RETRIES = 3


def say(event):
    print(event, flush=True)


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
    parser.add_argument("--key", required=True)
    parser.add_argument("--neff", default="neff")
    parser.add_argument("--hold_until", default="")
    args = parser.parse_args()
    timeout = float(os.environ.get("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT",
                                   "1200"))
    if get(args.cache_dir, args.key) is not None:
        say("HIT")
        return
    locks = os.path.join(args.local_dir, "locks")
    os.makedirs(locks, exist_ok=True)
    fd = acquire(os.path.join(locks, args.key + ".lock"), timeout)
    say("LOCKED")
    while args.hold_until and not os.path.exists(args.hold_until):
        time.sleep(0.01)
    if get(args.cache_dir, args.key) is not None:
        say("HIT")
    else:
        put(args.cache_dir, args.key, args.neff.encode())
        say("COMPILED")
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    say("RELEASED")


if __name__ == "__main__":
    main()
