"""What the Python reference checks share: re-running under the venv's Python (exit 77, skipped, without it)
and one line per check, the failures kept."""
import os
import subprocess
import sys

FAILURES = []


def expect(cond, what):
    print(("ok    " if cond else "FAIL  ") + what, flush=True)
    if not cond:
        FAILURES.append(what)


def in_venv(python):
    """Re-runs the calling script under `python` (the venv's) unless it runs there already; exits 77 when missing."""
    if os.path.realpath(sys.executable) == os.path.realpath(python) or os.environ.get("HP_REF_CHECK_CHILD"):
        return
    if not os.path.exists(python):
        print(f"skipped: no Python reference at {python} (scripts/setup_python.sh makes it)")
        sys.exit(77)
    env = dict(os.environ, HP_REF_CHECK_CHILD="1")
    sys.exit(subprocess.run([python, *sys.argv], env=env).returncode)
