#!/usr/bin/env python3
"""Prints the figures of the last run of the fault and bad-input tests as a
Markdown table, from Bazel's test.xml files (what each test recorded with
RecordProperty, its result and its time).

    tests/faults/report.py [TESTLOGS]    default: $(bazel info bazel-testlogs)

tests/run_all.sh prints it after the test stage; docs/RELIABILITY.md quotes
the table of the last recorded CI run.
"""
import glob
import os
import subprocess
import sys
import xml.etree.ElementTree as ET

TESTS = ["tests/faults/daemon_kill_test", "tests/faults/stopped_holder_test",
         "tests/faults/disk_full_test", "tests/faults/index_loss_test",
         "tests/faults/overload_test", "tests/faults/hostile_input_test",
         "tests/bad_input_test", "tests/concurrent_put_test",
         "tests/shared_store_test", "tests/tls_test"]

CODES = dict(enumerate([
    "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE", "UNIMPLEMENTED",
    "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED"]))


def main():
    logs = sys.argv[1] if len(sys.argv) > 1 else subprocess.run(
        ["bazel", "info", "bazel-testlogs"], capture_output=True,
        text=True).stdout.strip()
    print("| test | cases | time (s) | recorded figures |")
    print("|---|---:|---:|---|")
    for test in TESTS:
        path = os.path.join(logs, test, "test.xml")
        if not os.path.exists(path):
            print(f"| `{test}` | not run | | |")
            continue
        root = ET.parse(path).getroot()
        passed = failed = 0
        seconds = 0.0
        figures = []
        for case in root.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                failed += 1
            elif case.get("status", "run") != "notrun":
                passed += 1
            seconds += float(case.get("time", "0") or 0)
            for prop in case.iter("property"):
                name = prop.get("name")
                if name.startswith("status_"):  # a gRPC code number
                    name = "answered " + CODES.get(int(name[7:]), name[7:])
                figures.append(f"{name}={prop.get('value')}")
        cases = f"{passed} passed" + (f", **{failed} failed**" if failed else "")
        print(f"| `{test}` | {cases} | {seconds:.1f} | {', '.join(figures)} |")


if __name__ == "__main__":
    main()
