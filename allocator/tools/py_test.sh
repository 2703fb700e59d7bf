#!/bin/sh
# Runs a Python unittest file (the first argument, relative to the workspace)
# with the system python3: this offline workspace registers no Bazel Python
# toolchain, and py_test's stub wants a `python` binary that Debian lacks.
set -eu
cd "${TEST_SRCDIR}/${TEST_WORKSPACE:-neffd}"
exec python3 "$@"
