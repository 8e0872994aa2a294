#!/usr/bin/env python3
"""Which translation units load the torch precompiled header (cmake/hp_helpers.cmake, #43).

Loading the header costs ~3 s per translation unit, so the torch-free sources of a torch target skip it
(`hp_use_torch(target TORCH_FREE ...)`, `hp_add_tests(... TORCH_FREE ...)`). This check reads the build's
compile commands and each source's includes, and holds the lists true both ways:

  a source that reaches no torch header (directly or through our headers) but loads the precompiled header
      -> list it under TORCH_FREE (it pays the load for nothing);
  a source under TORCH_FREE that reaches a torch header -> take it off (it parses the torch headers itself);
  any source or header that includes <torch/torch.h> -> include the parts it uses (docs/ARCHITECTURE.md).

    tests/layout/torch_free.py --build DIR     exit 1 with one line per breach
    tests/layout/torch_free.py --self-test     a torch-free and a torch source, each on the wrong side
"""
import argparse
import functools
import json
import os
import re
import subprocess
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
TORCH_PREFIXES = ("torch/", "ATen/", "c10/")
PCH_FLAG = re.compile(r"-include \S*cmake_pch\.hxx")
TARGET_DIR = re.compile(r" -o \S*CMakeFiles/([^/]+)\.dir/")


def make_reaches_torch(root):
    @functools.lru_cache(maxsize=None)
    def reaches_torch(path):
        try:
            text = open(path, encoding="utf-8", errors="replace").read()
        except OSError:
            return False
        for name in INCLUDE.findall(text):
            if name.startswith(TORCH_PREFIXES):
                return True
            ours = os.path.join(root, name)
            if os.path.isfile(ours) and reaches_torch(ours):
                return True
        return False
    return reaches_torch


def breaches(commands, root):
    """commands: [(source path, command line)]. One line per source on the wrong side of TORCH_FREE."""
    reaches_torch = make_reaches_torch(root)
    by_target = {}
    for source, command in commands:
        target = TARGET_DIR.search(command)
        if target and source.endswith(".cpp"):
            by_target.setdefault(target.group(1), []).append((source, bool(PCH_FLAG.search(command))))
    out = []
    for target, units in sorted(by_target.items()):
        if not any(pch for _, pch in units):
            continue  # not a torch target (hp_core_torchfree, hp_analysis_math, ...)
        for source, pch in units:
            rel = os.path.relpath(source, root)
            torch = reaches_torch(source)
            if pch and not torch:
                out.append(f"{rel} ({target}): reaches no torch header but loads the precompiled one; "
                           f"list it under TORCH_FREE in its hp_use_torch/hp_add_tests call")
            elif not pch and torch:
                out.append(f"{rel} ({target}): listed under TORCH_FREE but includes torch; take it off the list")
    return out


def whole_torch_includes(root):
    """Sources and headers under root that include <torch/torch.h> (the build folders left out)."""
    out = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(("build", ".")) and d not in ("checkpoints", "runs")]
        for name in files:
            if name.endswith((".cpp", ".h")):
                path = os.path.join(folder, name)
                if "torch/torch.h" in INCLUDE.findall(open(path, encoding="utf-8", errors="replace").read()):
                    out.append(f"{os.path.relpath(path, root)}: includes <torch/torch.h>; include the parts it uses "
                               f"(<torch/types.h>, <torch/utils.h>, <torch/autograd.h>, ...)")
    return out


def compile_commands(build):
    db = subprocess.run(["ninja", "-C", build, "-t", "compdb"], capture_output=True, text=True, check=True)
    return [(e["file"] if os.path.isabs(e["file"]) else os.path.join(e["directory"], e["file"]), e["command"])
            for e in json.loads(db.stdout)]


def self_test():
    import tempfile
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "a"))
        files = {"a/plain.h": "#include <string>\n", "a/tensor.h": "#include <torch/types.h>\n",
                 "a/free.cpp": '#include "a/plain.h"\n', "a/uses.cpp": '#include "a/tensor.h"\n'}
        for name, text in files.items():
            with open(os.path.join(root, name), "w") as f:
                f.write(text)
        pch = "c++ -include /b/core/CMakeFiles/hp_core.dir/cmake_pch.hxx -o a/CMakeFiles/t.dir/{}.o -c {}"
        bare = "c++ -o a/CMakeFiles/t.dir/{}.o -c {}"
        src = lambda n: os.path.join(root, "a", n)
        right = [(src("free.cpp"), bare.format("free", src("free.cpp"))),
                 (src("uses.cpp"), pch.format("uses", src("uses.cpp")))]
        wrong = [(src("free.cpp"), pch.format("free", src("free.cpp"))),
                 (src("uses.cpp"), bare.format("uses", src("uses.cpp")))]
        assert breaches(right, root) == [], breaches(right, root)
        found = breaches(wrong, root)
        assert len(found) == 2 and "list it under TORCH_FREE" in found[0] and "take it off" in found[1], found
        assert whole_torch_includes(root) == []
        with open(src("uses.cpp"), "a") as f:
            f.write("#include <torch/torch.h>\n")
        assert [l.split(":")[0] for l in whole_torch_includes(root)] == ["a/uses.cpp"], whole_torch_includes(root)
    print("torch_free self-test: the planted breaches found (each side, <torch/torch.h>), the right split passes")
    return 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", help="the build folder (ninja)")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    if args.self_test:
        return self_test()
    if not args.build:
        ap.error("--build DIR is required")
    root = os.path.realpath(args.root)
    found = breaches(compile_commands(args.build), root) + whole_torch_includes(root)
    for line in found:
        print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
