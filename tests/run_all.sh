#!/usr/bin/env bash
# Installs what is missing, builds everything and runs every test, then prints
# one line "N passed, N failed" counting test cases (from Bazel's test.xml).
set -uo pipefail
cd "$(dirname "$0")/.."
bash deploy/install-deps.sh || exit 1

bazel build //... || { echo "0 passed, 1 failed"; exit 1; }
bazel test //... --test_output=errors
status=$?

read -r passed failed < <(python3 - <<'PY'
import glob, xml.etree.ElementTree as ET
passed = failed = 0
for path in glob.glob("bazel-testlogs/**/test.xml", recursive=True):
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError:
        failed += 1
        continue
    for case in root.iter("testcase"):
        if case.find("failure") is not None or case.find("error") is not None:
            failed += 1
        elif case.get("status", "run") != "notrun":
            passed += 1
print(passed, failed)
PY
)
# A target that failed without writing cases (crash, timeout) still counts.
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
echo "${passed} passed, ${failed} failed"
exit "$status"
