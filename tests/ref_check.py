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


def start(flags, modules, why, optional=()):
    """The Python reference check's start: the required `flags` (--python among them) and the `optional` ones (None
    when absent) parsed, the script re-run under that venv's Python, the `modules` imported (exit 77 with a "skipped:"
    line saying `why` when one is missing) and the fresh --scratch folder. Returns (args, {module name: module})."""
    import argparse
    import importlib
    import shutil
    ap = argparse.ArgumentParser()
    for flag in ("python", *flags):
        ap.add_argument("--" + flag, required=True)
    for flag in optional:
        ap.add_argument("--" + flag)
    args = ap.parse_args()
    in_venv(args.python)
    loaded = {}
    for name in modules:
        try:
            loaded[name] = importlib.import_module(name)
        except ImportError:
            print(f"skipped: {name} is not installed in {sys.executable} ({why})")
            sys.exit(77)
    shutil.rmtree(args.scratch, ignore_errors=True)
    os.makedirs(args.scratch)
    return args, loaded


def finish():
    """The exit status of the checks: 1 when one failed, else 0, after a closing line."""
    print(f"{len(FAILURES)} failure(s)" if FAILURES else "all checks hold")
    return 1 if FAILURES else 0


def in_venv(python):
    """Re-runs the calling script under `python` (the venv's) unless it runs there already; exits 77 when missing."""
    if os.path.realpath(sys.executable) == os.path.realpath(python) or os.environ.get("HP_REF_CHECK_CHILD"):
        return
    if not os.path.exists(python):
        print(f"skipped: no Python reference at {python} (scripts/setup_python.sh makes it)")
        sys.exit(77)
    env = dict(os.environ, HP_REF_CHECK_CHILD="1")
    sys.exit(subprocess.run([python, *sys.argv], env=env).returncode)
