#!/usr/bin/env python3
"""Converts a PyTorch memory snapshot into a neuron-alloc trace.

A snapshot is what torch.cuda.memory._snapshot() returns, or what
torch.cuda.memory._dump_snapshot() pickles: a dict whose "device_traces" holds,
per device, the allocator events recorded after
torch.cuda.memory._record_memory_history(). Each "alloc" event becomes
"a <id> <size>" and each "free_completed" event the matching "f <id>"
(matched by address). Everything else is dropped: frees of blocks allocated
before recording started, "free_requested" (the free is complete only later),
and segment events (the replaying pool decides its own segments). OOMs of the
original run become comments.

Usage: snapshot_to_trace.py SNAPSHOT.pickle [-o TRACE] [--device N]

The pickle is loaded with a restricted unpickler that only builds plain
Python values (dicts, lists, numbers, strings), so a snapshot cannot run code.
"""

import argparse
import io
import pickle
import sys


class _PlainUnpickler(pickle.Unpickler):
    """Refuses every class: snapshots are plain dicts, lists and scalars."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(
            f"snapshot refers to {module}.{name}; only plain Python values "
            "are accepted")


def load_snapshot(data):
    """Returns the snapshot dict from pickle bytes."""
    snapshot = _PlainUnpickler(io.BytesIO(data)).load()
    if not isinstance(snapshot, dict) or "device_traces" not in snapshot:
        raise ValueError("not a PyTorch memory snapshot: no 'device_traces' "
                         "(record with torch.cuda.memory."
                         "_record_memory_history() first)")
    return snapshot


def convert(snapshot, device=0, source="snapshot"):
    """Returns (trace lines, counts) for one device of `snapshot`."""
    traces = snapshot["device_traces"]
    if device < 0 or device >= len(traces):
        raise ValueError(f"device {device} not in snapshot "
                         f"({len(traces)} devices)")
    live = {}  # address -> id
    next_id = 0
    counts = {"alloc": 0, "free": 0, "unmatched_free": 0, "oom": 0}
    body = []
    for event in traces[device]:
        action = event.get("action")
        addr = event.get("addr")
        if action == "alloc":
            live[addr] = next_id
            body.append(f"a {next_id} {int(event['size'])}")
            next_id += 1
            counts["alloc"] += 1
        elif action == "free_completed":
            block = live.pop(addr, None)
            if block is None:
                counts["unmatched_free"] += 1
                continue
            body.append(f"f {block}")
            counts["free"] += 1
        elif action == "oom":
            counts["oom"] += 1
            body.append(f"# oom in the recorded run: "
                        f"{int(event.get('size', 0))} bytes")
    header = [
        f"# neuron-alloc trace from {source}, device {device}",
        f"# {counts['alloc']} allocations, {counts['free']} frees; "
        f"{counts['unmatched_free']} frees of blocks allocated before "
        "recording were dropped",
    ]
    return header + body, counts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("snapshot", help="pickled PyTorch memory snapshot")
    parser.add_argument("-o", "--output", help="trace file (default: stdout)")
    parser.add_argument("--device", type=int, default=0,
                        help="device whose trace to convert (default 0)")
    args = parser.parse_args(argv)
    try:
        with open(args.snapshot, "rb") as f:
            snapshot = load_snapshot(f.read())
        lines, counts = convert(snapshot, args.device, args.snapshot)
    except (OSError, ValueError, pickle.UnpicklingError, EOFError) as e:
        print(f"snapshot_to_trace: {args.snapshot}: {e}", file=sys.stderr)
        return 1
    text = "\n".join(lines) + "\n"
    if args.output:
        with open(args.output, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)
    print(f"snapshot_to_trace: {counts['alloc']} allocations, "
          f"{counts['free']} frees, {counts['unmatched_free']} unmatched "
          f"frees dropped", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
