"""Shared helpers of the end-to-end tests: locate the binary and the shared test data, run cbatch,
read JSONL. A test that needs ../shared exits with 77 (ctest: skipped) when it is absent."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.environ.get("CBATCH_BIN", os.path.join(ROOT, "build", "cbatch"))
SHARED = os.environ.get("CBATCH_SHARED_DIR", os.path.join(ROOT, "..", "shared"))
AIDREAMS = os.path.join(SHARED, "models", "aidreams260K")
SKIP = 77


def need(path):
    if not os.path.exists(path):
        print(f"SKIPPED: test data {path} not found")
        sys.exit(SKIP)


def run(args, stdin=None, check=True, expect_rc=0):
    proc = subprocess.run([BIN] + args, input=stdin, capture_output=True, text=True)
    if check and proc.returncode != expect_rc:
        raise AssertionError(f"cbatch {' '.join(args)} exited {proc.returncode}, expected {expect_rc}\n"
                             f"stderr:\n{proc.stderr[-3000:]}")
    return proc


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")


def tmpdir():
    return tempfile.mkdtemp(prefix="cbatch-e2e-")


def by_id(rows):
    return {row["id"]: row for row in rows}


class Checks:
    """Counts checks so every test prints one 'N passed, N failed' line and exits non-zero on failure."""

    def __init__(self):
        self.passed = 0
        self.failed = 0

    def check(self, condition, message):
        if condition:
            self.passed += 1
        else:
            self.failed += 1
            print(f"FAILED: {message}")

    def done(self):
        print(f"{self.passed} passed, {self.failed} failed")
        sys.exit(1 if self.failed else 0)
