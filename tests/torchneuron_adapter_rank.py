#!/usr/bin/env python3
"""A TorchNeuron rank whose persistent cache and compile lock are swapped
for neffd's adapter (neffclient.TorchNeuronCache, client/torchneuron_cache.h):
the algorithm of tests/torchneuron_rank.py, with every cache and flock call
replaced by the adapter's (docs/INTEGRATION.md, "Swapping TorchNeuron's cache
for neffd's"). Works with either neffclient module (pybind11 or portable).

For each key in --keys: Get; a hit ends there. On a miss: acquire the
compile lock (within TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT), Get again; on a
miss "compile" (--compile_ms, the compiler's run time) and Put the NEFF
b"NEFF:<key>", then release.

Prints one line per event and key, flushed, for the test to wait on and to
count: LOCKED <key>, HIT <key>, COMPILED <key>, RELEASED <key>; BAD <key> if
an entry read is not the key's NEFF (exit 1). With --hold_until=PATH it
keeps the lock after LOCKED until PATH exists.
"""
import argparse
import os
import sys
import time

import neffclient


def say(event, key):
    print(event, key, flush=True)


def neff_of(key):
    return ("NEFF:" + key).encode()


def check(data, key):
    if data != neff_of(key):
        say("BAD", key)
        sys.exit("%s: read %r" % (key, data))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--keys", required=True, help="comma-separated")
    parser.add_argument("--compiler_version", default="2.19.8089.0")
    parser.add_argument("--compile_ms", type=int, default=0)
    parser.add_argument("--hold_until", default="")
    args = parser.parse_args()
    cache = neffclient.TorchNeuronCache(args.compiler_version)
    for key in args.keys.split(","):
        data = cache.get(key)
        if data is not None:
            check(data, key)
            say("HIT", key)
            continue
        with cache.acquire_lock(key):
            say("LOCKED", key)
            while args.hold_until and not os.path.exists(args.hold_until):
                time.sleep(0.01)
            data = cache.get(key)
            if data is None:
                time.sleep(args.compile_ms / 1000.0)  # the compiler runs
                cache.put(key, neff_of(key))
                say("COMPILED", key)
            else:
                check(data, key)
                say("HIT", key)
        say("RELEASED", key)


if __name__ == "__main__":
    main()
