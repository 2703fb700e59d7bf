#!/usr/bin/env python3
"""Counts the test cases of one `bazel test` run from Bazel's test.xml files.

    tests/count_results.py TESTLOGS SINCE LABEL...

prints "passed failed skipped" on its last line, after one line per case
that did not pass. Only this run counts (issue 18, "Test counts that mean
what they say"):
  * only the LABELs (the test targets the run was asked for, as
    `bazel query` lists them) are read, so the test.xml of a renamed or
    removed target is never counted;
  * only a test.xml written at or after SINCE (seconds since the epoch) is
    read; a LABEL without one (not built, not run) counts as one failed case;
  * a GTEST_SKIP case (gtest 1.12: result="skipped" and a <skipped> child)
    and a disabled one (status="notrun") count as skipped, not passed;
  * a case that skipped because it "needs root" counts as failed when this
    runs as root: CI runs as root, so such a skip there means the test did
    not run what it exists for.
"""
import glob
import os
import sys
import xml.etree.ElementTree as ET


def result_files(logs, label):
    """The test.xml files of one label (several when the test is sharded)."""
    package, _, name = label[2:].partition(":")
    base = os.path.join(logs, package, name)
    return [os.path.join(base, "test.xml")] + sorted(
        glob.glob(os.path.join(base, "shard_*_of_*", "test.xml")))


def case_outcome(case, as_root):
    """("passed" | "failed" | "skipped", why) of one <testcase>."""
    for tag in ("failure", "error"):
        if case.find(tag) is not None:
            return "failed", (case.find(tag).get("message") or tag)
    skipped = case.find("skipped")
    if skipped is not None or case.get("result") == "skipped":
        why = (skipped.get("message") if skipped is not None else "") or ""
        why = why.replace("\n", " ")
        if as_root and "needs root" in why:
            return "failed", "skipped as root: " + why
        return "skipped", why
    if case.get("status") == "notrun":
        return "skipped", "disabled"
    return "passed", ""


def main():
    logs, since, labels = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    as_root = os.geteuid() == 0
    totals = {"passed": 0, "failed": 0, "skipped": 0}
    for label in labels:
        fresh = [p for p in result_files(logs, label)
                 if os.path.exists(p) and os.path.getmtime(p) >= since]
        if not fresh:
            totals["failed"] += 1
            print(f"run_all: FAILED {label}: no result from this run")
            continue
        for path in fresh:
            try:
                root = ET.parse(path).getroot()
            except ET.ParseError as e:
                totals["failed"] += 1
                print(f"run_all: FAILED {label}: unreadable test.xml ({e})")
                continue
            for case in root.iter("testcase"):
                outcome, why = case_outcome(case, as_root)
                totals[outcome] += 1
                if outcome != "passed":
                    name = f"{case.get('classname')}.{case.get('name')}"
                    print(f"run_all: {outcome.upper()} {label} {name}: "
                          f"{why[:200]}")
    print(totals["passed"], totals["failed"], totals["skipped"])


if __name__ == "__main__":
    main()
