"""Tests snapshot_to_trace on a small snapshot-like pickle, then replays the
converted trace with neuron-alloc."""

import collections
import json
import os
import pickle
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import snapshot_to_trace  # pylint: disable=wrong-import-position


def _runfile(path):
    return os.path.join(os.environ["TEST_SRCDIR"],
                        os.environ.get("TEST_WORKSPACE", "neffd"), path)


def _event(action, addr, size):
    return {"action": action, "addr": addr, "size": size, "stream": 0,
            "frames": [{"filename": "train.py", "line": 1, "name": "step"}]}


SNAPSHOT = {
    "segments": [],
    "device_traces": [
        [
            _event("segment_alloc", 0x7000, 2097152),
            _event("alloc", 0x7000, 512),
            _event("alloc", 0x7200, 1048576),
            _event("free_requested", 0x7000, 512),
            _event("free_completed", 0x7000, 512),
            _event("free_completed", 0x9999, 4096),  # allocated before
            _event("alloc", 0x7000, 256),  # address reused: a new id
            _event("oom", 0, 99999999),
            _event("free_completed", 0x7200, 1048576),
        ],
        [_event("alloc", 0x1, 20000000)],
    ],
}


class SnapshotToTraceTest(unittest.TestCase):

    def setUp(self):
        self.dir = tempfile.mkdtemp()
        self.snapshot = os.path.join(self.dir, "snapshot.pickle")
        with open(self.snapshot, "wb") as f:
            pickle.dump(SNAPSHOT, f)

    def test_converts_allocs_and_completed_frees_by_address(self):
        lines, counts = snapshot_to_trace.convert(SNAPSHOT)
        body = [l for l in lines if not l.startswith("#")]
        self.assertEqual(body, ["a 0 512", "a 1 1048576", "f 0", "a 2 256",
                                "f 1"])
        self.assertEqual(counts, {"alloc": 3, "free": 2, "unmatched_free": 1,
                                  "oom": 1})
        self.assertIn("# oom in the recorded run: 99999999 bytes", lines)

    def test_other_device_and_missing_device(self):
        lines, _ = snapshot_to_trace.convert(SNAPSHOT, device=1)
        self.assertIn("a 0 20000000", lines)
        with self.assertRaises(ValueError):
            snapshot_to_trace.convert(SNAPSHOT, device=2)

    def test_refuses_pickles_with_classes(self):
        # Any class reference is refused, harmless or not.
        data = pickle.dumps({"device_traces": [[collections.OrderedDict()]]})
        with self.assertRaises(pickle.UnpicklingError):
            snapshot_to_trace.load_snapshot(data)
        with self.assertRaises(ValueError):
            snapshot_to_trace.load_snapshot(pickle.dumps({"segments": []}))

    def test_converted_trace_replays(self):
        trace = os.path.join(self.dir, "out.trace")
        self.assertEqual(
            snapshot_to_trace.main([self.snapshot, "-o", trace]), 0)
        result = subprocess.run(
            [_runfile("allocator/neuron-alloc"), "replay", "--json", trace],
            capture_output=True, text=True, check=False)
        self.assertEqual(result.returncode, 0, result.stderr)
        stats = json.loads(result.stdout)
        self.assertEqual(stats["peak_requested_bytes"], 512 + 1048576)
        self.assertEqual(stats["allocated_bytes"], 256)
        self.assertEqual(stats["num_ooms"], 0)

    def test_bad_file_exits_1(self):
        path = os.path.join(self.dir, "junk")
        with open(path, "wb") as f:
            f.write(b"not a pickle")
        self.assertEqual(snapshot_to_trace.main([path]), 1)


if __name__ == "__main__":
    unittest.main()
