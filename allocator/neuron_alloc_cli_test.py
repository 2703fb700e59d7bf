"""End-to-end tests of the neuron-alloc command: round, config, replay."""

import json
import os
import subprocess
import tempfile
import unittest

ENV_VAR = "TORCH_NEURONX_SEGMENT_ALLOCATOR_CONFIG"
MIB = 1 << 20


def _binary():
    return os.path.join(os.environ["TEST_SRCDIR"],
                        os.environ.get("TEST_WORKSPACE", "neffd"),
                        "allocator", "neuron-alloc")


def run(*args, config=None):
    env = dict(os.environ)
    env.pop(ENV_VAR, None)
    if config is not None:
        env[ENV_VAR] = config
    return subprocess.run([_binary(), *args], capture_output=True, text=True,
                          env=env, check=False)


def run_json(*args, config=None):
    result = run(*args, "--json", config=config)
    if result.returncode != 0:
        raise AssertionError(result.stderr)
    return json.loads(result.stdout)


class RoundTest(unittest.TestCase):

    def test_json_fields_for_each_size(self):
        rows = run_json("round", "1000", str(MIB), str(17000000))
        self.assertEqual(rows, [
            {"requested": 1000, "rounded": 1024, "pool": "small",
             "segment": "small", "segment_bytes": 2 * MIB},
            {"requested": MIB, "rounded": MIB, "pool": "large",
             "segment": "medium", "segment_bytes": 64 * MIB},
            {"requested": 17000000, "rounded": 18 * MIB, "pool": "large",
             "segment": "per_request", "segment_bytes": 18 * MIB},
        ])

    def test_divisions_come_from_the_environment(self):
        sizes = ["1025", "2049", "3000"]
        pow2 = [r["rounded"] for r in run_json(
            "round", *sizes, config="kRoundupPower2Divisions=1")]
        eighths = [r["rounded"] for r in run_json(
            "round", *sizes, config="kRoundupPower2Divisions=8")]
        self.assertEqual(pow2, [2048, 4096, 4096])
        self.assertEqual(eighths, [1280, 2304, 3072])

    def test_zero_is_not_placed(self):
        self.assertEqual(run_json("round", "0")[0]["pool"], "none")

    def test_text_output_and_bad_sizes(self):
        result = run("round", "256")
        self.assertEqual(result.returncode, 0)
        self.assertRegex(result.stdout, r"256\s+256\s+small\s+small\s+2097152")
        for bad in (["round"], ["round", "1MB"], ["round", "x1"]):
            result = run(*bad)
            self.assertEqual(result.returncode, 2, bad)
            self.assertIn("neuron-alloc:", result.stderr)


class ConfigTest(unittest.TestCase):

    def test_defaults_have_all_eleven_keys(self):
        doc = run_json("config")
        self.assertEqual(doc["warnings"], [])
        self.assertEqual(len(doc["config"]), 11)
        self.assertEqual(doc["config"]["kPoolBoundary"], MIB)
        self.assertEqual(doc["config"]["kRoundupPower2Divisions"], 4)
        # Beyond 2^53 a JSON number is inexact: written as a string.
        self.assertEqual(doc["config"]["kMaxSplitSizeBytes"],
                         str(2**64 - 1))

    def test_warnings_name_key_and_value(self):
        doc = run_json("config", config=(
            "kPoolBoundary=1MB,kNope=3,kRoundupPower2Divisions=6,"
            "kMinRoundedSize=512"))
        self.assertEqual(doc["config"]["kPoolBoundary"], MIB)
        self.assertEqual(doc["config"]["kMinRoundedSize"], 512)
        self.assertEqual(doc["config"]["kSmallSplitThreshold"], 512)
        self.assertEqual(doc["config"]["kRoundupPower2Divisions"], 6)
        self.assertEqual(len(doc["warnings"]), 3)
        joined = "\n".join(doc["warnings"])
        self.assertIn("kPoolBoundary=1MB", joined)
        self.assertIn("kNope=3", joined)
        self.assertIn("kRoundupPower2Divisions=6 is not a power of two",
                      joined)

    def test_text_output(self):
        result = run("config", config="kBad=1")
        self.assertEqual(result.returncode, 0)
        self.assertIn("kMediumThreshold=16777216\n", result.stdout)
        self.assertIn("warning: ", result.stdout)


class ReplayTest(unittest.TestCase):

    def write(self, text):
        fd, path = tempfile.mkstemp(suffix=".trace")
        with os.fdopen(fd, "w") as f:
            f.write(text)
        return path

    def test_reports_flat_statistics(self):
        trace = self.write("# t\na 1 1000\na 2 5000000\nf 1\ne\n"
                           "a 3 30000000\n")
        stats = run_json("replay", trace)
        self.assertEqual(set(stats), {
            "reserved_bytes", "allocated_bytes", "requested_bytes",
            "peak_reserved_bytes", "peak_allocated_bytes",
            "peak_requested_bytes", "segment", "num_alloc_retries",
            "num_ooms", "num_device_alloc", "num_device_free",
            "ops_per_second"})
        self.assertEqual(stats["reserved_bytes"], 64 * MIB)
        self.assertEqual(stats["peak_reserved_bytes"], 66 * MIB)
        self.assertEqual(stats["requested_bytes"], 35000000)
        self.assertEqual(stats["num_device_free"], 1)
        self.assertGreater(stats["ops_per_second"], 0)
        self.assertGreaterEqual(stats["peak_reserved_bytes"],
                                stats["peak_allocated_bytes"])
        self.assertGreaterEqual(stats["peak_allocated_bytes"],
                                stats["peak_requested_bytes"])

    def test_capacity_makes_ooms_and_replay_goes_on(self):
        trace = self.write("a 1 100000000\na 2 100\nf 1\nf 2\n")
        stats = run_json("replay", "--capacity", str(64 * MIB), trace)
        self.assertEqual(stats["num_ooms"], 1)
        self.assertEqual(stats["num_alloc_retries"], 1)
        self.assertEqual(stats["peak_requested_bytes"], 100)

    def test_malformed_line_exits_2_naming_the_line(self):
        trace = self.write("a 1 10\n\n# fine\nf 1 2\n")
        result = run("replay", trace)
        self.assertEqual(result.returncode, 2)
        self.assertIn("line 4", result.stderr)
        self.assertEqual(result.stdout, "")

    def test_missing_file_and_usage(self):
        self.assertEqual(run("replay", "/nonexistent.trace").returncode, 1)
        self.assertEqual(run("replay").returncode, 2)
        self.assertEqual(run("frobnicate").returncode, 2)
        self.assertEqual(run().returncode, 2)

    def test_text_output(self):
        result = run("replay", self.write("a 1 1000\n"))
        self.assertEqual(result.returncode, 0)
        self.assertRegex(result.stdout, r"allocated_bytes\s+1024\n")


if __name__ == "__main__":
    unittest.main()
