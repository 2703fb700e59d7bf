#!/usr/bin/env python3
"""rank_sim.py: one simulated training rank, in Python (see rank_sim.cc).

Asks the cache for --graphs graphs in its own random order through the
`neffclient` module, compiling with a fake compiler (sleeps --compile_ms,
writes --neff_bytes bytes derived from the key, the same bytes as
examples/fake_compiler.cc) when this rank is the one to compile, and checks
the sha256 of every file it gets. Settings come from the environment (RANK,
NEFFD_ADDRESS, TORCH_NEURONX_*), like a real rank's.

    PYTHONPATH=bazel-bin/client/python python3 examples/rank_sim.py \\
        --graphs=16 --compile_ms=300 --compile_log=/tmp/compiles.txt

Prints "OK <graph> <key> <sha256> <path>" per graph, or "ERROR ..." /
"TORN ..."; exits 0 only if every graph was OK (1: error, 2: torn file).
"""

import argparse
import hashlib
import os
import random
import sys
import time

import neffclient


def fake_neff_bytes(key, size):
    """examples/fake_compiler.h's FakeNeffBytes: 64-byte blocks, each the first
    48 hex digits of sha256(key) and the block's index as 16 hex digits."""
    prefix = hashlib.sha256(key.encode()).hexdigest()[:48]
    blocks = (size + 63) // 64
    return "".join(f"{prefix}{i:016x}" for i in range(blocks)).encode()[:size]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--graphs", type=int, default=16)
    parser.add_argument("--compile_ms", type=int, default=200)
    parser.add_argument("--neff_bytes", type=int, default=64 << 10)
    parser.add_argument("--compiler_version", default="2.19.1")
    parser.add_argument("--compile_log", default="")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--address", default=None)
    args = parser.parse_args()

    rank = int(os.environ.get("RANK", "0"))
    client = neffclient.Client(args.address)
    keys = [
        client.derive_key(
            f"HloModule graph_{g}\n".encode(),
            f"--model-type=transformer -O1 --logfile=/tmp/rank{rank}/log.txt",
            args.compiler_version, "trn2")
        for g in range(args.graphs)
    ]

    def fake_compile(key):
        def compile_fn(path):
            if args.compile_log:
                fd = os.open(args.compile_log,
                             os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
                os.write(fd, f"{key} {os.getpid()} {rank}\n".encode())
                os.close(fd)
            data = fake_neff_bytes(key, args.neff_bytes)
            with open(path, "wb") as out:
                out.write(data[:len(data) // 2])
                out.flush()
                time.sleep(args.compile_ms / 1000)
                out.write(data[len(data) // 2:])
        return compile_fn

    order = list(range(args.graphs))
    random.Random(rank if args.seed is None else args.seed).shuffle(order)
    exit_code = 0
    for g in order:
        key = keys[g]
        try:
            path = client.get_or_compile("neff", args.compiler_version, key,
                                         fake_compile(key))
        except neffclient.Error as e:
            print(f"ERROR {g} {key} {e}")
            exit_code = max(exit_code, 1)
            continue
        with open(path, "rb") as f:
            got = hashlib.sha256(f.read()).hexdigest()
        want = hashlib.sha256(fake_neff_bytes(key, args.neff_bytes)).hexdigest()
        if got != want:
            print(f"TORN {g} {key} file {got} want {want}")
            exit_code = 2
            continue
        print(f"OK {g} {key} {got} {path}")
    sys.stdout.flush()
    return exit_code


if __name__ == "__main__":
    sys.exit(main())
