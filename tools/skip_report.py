#!/usr/bin/env python3
"""The skip report at the end of `make test`: reads ctest's JUnit file (ctest --output-junit FILE, which keeps
each test's status and output) and prints one line per skipped test with its reason (the test's SKIPPED
line), one per "SKIPPED (no GPU):" line a passing test printed (the CUDA test binary runs only its host
suite without a GPU), and a count.

A skip is allowed when its line carries the marker "SKIPPED (no GPU):" (no CUDA device, or no CUDA support
compiled), or says "SKIPPED: Python package X is not installed" for an X that `make setup` installs (given
with --setup-packages): setup tried and could not. With CBATCH_STRICT_SKIPS=1 (CI) any other skip, such as a
model that could not be fetched, makes the script exit 1 naming the test and the reason. Standard library
only: it runs before any package is known to be installed."""
import argparse
import os
import re
import sys
import xml.etree.ElementTree as ET

GPU_MARKER = "SKIPPED (no GPU):"
PACKAGE_SKIP = re.compile(r"SKIPPED: Python package (\S+) is not installed")
# pip names whose import name differs (tests/e2e/common.py need_modules() says the import name).
IMPORT_NAMES = {"pyyaml": "yaml"}


def setup_modules(spec):
    """Import names of the pip requirements in SPEC ('tokenizers==0.23.3 "numpy>=1.24" pyyaml==6.0.3')."""
    names = set()
    for requirement in spec.replace('"', " ").replace("'", " ").split():
        match = re.match(r"[A-Za-z0-9_.-]+", requirement)
        if match:
            name = match.group(0).lower()
            names.add(IMPORT_NAMES.get(name, name))
    return names


def skip_line(output):
    """The first line of OUTPUT that says SKIPPED, or None."""
    return next((line.strip() for line in output.splitlines() if "SKIPPED" in line), None)


def classify(reason, modules):
    """'gpu', 'package' (one make setup could not install) or None (not allowed in strict mode)."""
    if GPU_MARKER in reason:
        return "gpu"
    match = PACKAGE_SKIP.search(reason)
    if match and match.group(1).lower() in modules:
        return "package"
    return None


def collect(junit_path):
    """(test name, reason, whole test skipped) for every skipped test and every GPU skip inside a passing one."""
    skips = []
    for case in ET.parse(junit_path).getroot().iter("testcase"):
        name = case.get("name")
        output = case.findtext("system-out") or ""
        status = case.get("status")
        if status in ("notrun", "disabled"):
            skipped = case.find("skipped")
            why = skipped.get("message", "") if skipped is not None else status
            skips.append((name, skip_line(output) or f"no SKIPPED line ({why})", True))
        elif status == "run":
            for line in output.splitlines():
                if GPU_MARKER in line:
                    skips.append((name, line.strip(), False))
    return skips


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("junit", help="ctest's --output-junit file")
    parser.add_argument("--setup-packages", default="", help="the pip requirements make setup installs")
    args = parser.parse_args()
    if not os.path.exists(args.junit):
        print(f"skip report: {args.junit} not found (did ctest run?)", file=sys.stderr)
        return 1
    modules = setup_modules(args.setup_packages)
    skips = collect(args.junit)
    strict = os.environ.get("CBATCH_STRICT_SKIPS") == "1"
    print(f"skip report: {sum(whole for _, _, whole in skips)} skipped tests, "
          f"{sum(not whole for _, _, whole in skips)} skipped GPU-only parts of passing tests")
    bad = []
    for name, reason, whole in skips:
        print(f"  {name}{'' if whole else ' (part)'}: {reason}")
        if classify(reason, modules) is None:
            bad.append((name, reason))
    if strict and bad:
        for name, reason in bad:
            print(f"error: {name} skipped for a reason CI does not allow (only no GPU, or a Python package "
                  f"make setup could not install): {reason}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
