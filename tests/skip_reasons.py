#!/usr/bin/env python3
"""After every ctest run (CTEST_CUSTOM_POST_TEST, tests/CMakeLists.txt): why each skipped test did not run.

CTest lists the skipped tests by name only ("The following tests did not run"). A test that skips prints its reason
on a line starting "skipped:" before it exits 77 (tests/skip.h for the Catch2 executables, and the Python tests);
this reads those lines back from CTest's own log of the run (Testing/Temporary/LastTest.log) and prints them under
the test's name, so that README command 2 says why. Prints nothing when no test skipped; always exits 0 (a failure
here must not fail the test run).

Usage: skip_reasons.py BUILD_DIR | --self-test
"""
import os
import re
import sys


def reasons(log_text):
    """[(test name, reason)] in the log's order: each test block's first "skipped:" line, its wrapped continuations
    (Catch2 indents a warning's following lines) joined."""
    out = []
    for block in re.split(r"\n-{20,}\n\n", log_text):
        name = re.search(r"^\d+/\d+ Test: (\S+)$", block, re.M)
        if not name:
            continue
        lines = block.split("\n")
        for i, line in enumerate(lines):
            if not line.strip().startswith("skipped:"):
                continue
            text = [line.strip()[len("skipped:"):].strip()]
            indent = len(line) - len(line.lstrip())
            for more in lines[i + 1:]:
                if not more.strip() or indent == 0 or len(more) - len(more.lstrip()) != indent:
                    break
                text.append(more.strip())
            # Catch2 breaks lines at any character of a path: no space after a piece that ends in "/".
            reason = "".join(t if not k or text[k - 1].endswith("/") else " " + t for k, t in enumerate(text))
            if name.group(1) not in (n for n, _ in out):  # the first reason of each test: one line a test
                out.append((name.group(1), reason))
    return out


SAMPLE = """Start testing: Nov 28 03:21 UTC
----------------------------------------------------------
1/2 Testing: train.device_cuda
1/2 Test: train.device_cuda
Output:
----------------------------------------------------------
../tests/catch_main.cpp:15: 
warning:
  skipped: no transformers 5 reference at /root/.cache/headprune/venv-v5/bin/
  python (scripts/setup.sh --v5
  makes it)

warning:
  skipped: a second case's reason
<end of output>
Test Passed.
----------------------------------------------------------

2/2 Testing: core.ok
2/2 Test: core.ok
Output:
----------------------------------------------------------
all passed; this line says skipped: mid-line, which is no reason
<end of output>
Test Passed.
----------------------------------------------------------

End testing: Nov 28 03:22 UTC
"""


def log_path(build):
    """The log of the run in progress: CTest writes LastTest.log.tmp and renames it only after the post-test step
    (LastTest.log is then the previous run's)."""
    log = os.path.join(build, "Testing", "Temporary", "LastTest.log")
    return log + ".tmp" if os.path.exists(log + ".tmp") else log


def self_test():
    """The parse of a log as CTest writes it, and the choice of the log; exit 1 on a difference."""
    import tempfile
    want = [("train.device_cuda", "no transformers 5 reference at /root/.cache/headprune/venv-v5/bin/python "
             "(scripts/setup.sh --v5 makes it)")]
    got = reasons(SAMPLE)
    ok = got == want
    print("ok  the parse" if ok else f"FAIL the parse: {got} != {want}")
    with tempfile.TemporaryDirectory() as build:
        folder = os.path.join(build, "Testing", "Temporary")
        os.makedirs(folder)
        for name in ("LastTest.log", "LastTest.log.tmp"):
            open(os.path.join(folder, name), "w").close()
        good = log_path(build).endswith("LastTest.log.tmp")
        os.remove(os.path.join(folder, "LastTest.log.tmp"))
        good &= log_path(build).endswith("LastTest.log")
    ok &= good
    print("ok  the log of the run in progress" if good else "FAIL: not the log of the run in progress")
    return 0 if ok else 1


def main():
    if sys.argv[1:] == ["--self-test"]:
        return self_test()
    log = log_path(sys.argv[1] if len(sys.argv) > 1 else ".")
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            found = reasons(f.read())
    except OSError:
        return 0
    if found:
        print("Why the skipped tests did not run:")
        for name, why in found:
            print(f"\t{name}: {why}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
