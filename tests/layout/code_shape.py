#!/usr/bin/env python3
"""The shape of the code, checked on every test run (docs/ARCHITECTURE.md):

  include order   every `#include "folder/..."` runs down the floors: core <- gates <- eval <- train <- prune
                  <- analysis <- cli; inside core: base <- kernels, text, dist, plot <- model <- io <- data;
                  inside prune: record, data, export, objective <- heads <- search <- stages <- frontier <- embedding <- run.
                  A file may include its own folder and any floor below; never one above, never a sibling.
  file length     no source file outside tests/ over 600 lines.
  function length no function in prune/, analysis/, train/, cli/ over 80 lines, except the table-like
                  switches named in LONG_OK.

    tests/layout/code_shape.py [--root DIR] [--report N]     exit 1 with one line per breach
    tests/layout/code_shape.py --self-test                    plants each breach in a scratch tree
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

# Floors, lowest first; folders on one floor are siblings and may not include each other.
FLOORS = [["core"], ["gates"], ["eval"], ["train"], ["prune"], ["analysis"], ["cli"]]
CORE_FLOORS = [["base"], ["kernels", "text", "dist", "plot"], ["model"], ["io"], ["data"]]
PRUNE_FLOORS = [["record", "data", "export", "objective"], ["heads"], ["search"], ["stages"], ["frontier"], ["finish"], ["embedding"], ["run"]]
SUB_FLOORS = {"core": CORE_FLOORS, "prune": PRUNE_FLOORS}  # folders whose sub-folders stand on floors
SOURCES = (".cpp", ".h", ".c")
CODE_DIRS = [d for floor in FLOORS for d in floor]
MAX_FILE_LINES = 600
MAX_FUNCTION_LINES = 80
FUNCTION_DIRS = ("prune", "analysis", "train", "cli")
# Table-like switches that may run longer (path:function).
LONG_OK = {"core/io/torch_pickle.cpp:run"}

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def floor_of(path):
    """(floor index, sub-floor index or None, folder name) of a repo-relative path, or None outside."""
    parts = path.split("/")
    top = parts[0]
    for i, floor in enumerate(FLOORS):
        if top in floor:
            if top in SUB_FLOORS and len(parts) > 2:
                for j, sub in enumerate(SUB_FLOORS[top]):
                    if parts[1] in sub:
                        return i, j, parts[1]
                return i, None, parts[1]
            return i, None, top
    return None


def sources(root):
    for d in CODE_DIRS:
        for base, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if f.endswith(SOURCES):
                    yield os.path.relpath(os.path.join(base, f), root)


def include_breaches(root):
    out = []
    for rel in sources(root):
        me = floor_of(rel)
        if rel.split("/")[0] in SUB_FLOORS and rel.count("/") == 1:
            out.append(f"{rel}: stands in no room of {rel.split('/')[0]}/; move it into one "
                       f"({os.path.basename(__file__)} lists them)")
        for n, line in enumerate(open(os.path.join(root, rel), encoding="utf-8", errors="replace"), 1):
            m = INCLUDE.match(line)
            if not m or "/" not in m.group(1):
                continue
            inc = m.group(1)
            them = floor_of(inc)
            if them is None:
                continue  # a generated header or a library's
            top = rel.split("/")[0]
            if top in SUB_FLOORS and inc.split("/")[0] == top:
                floors = SUB_FLOORS[top]
                if me[1] is None or them[1] is None:
                    room = rel if me[1] is None else inc
                    where = (f"{room} stands in no room of {top}/" if room.count("/") == 1
                             else f"{top}/{room.split('/')[1]} is on no floor of {top.upper()}_FLOORS")
                    out.append(f"{rel}:{n}: {inc}: {where}; add it to one ({os.path.basename(__file__)})")
                elif them[1] > me[1] or (them[1] == me[1] and them[2] != me[2]):
                    out.append(f"{rel}:{n}: includes {inc}, but {top}/{me[2]} sits below {top}/{them[2]} "
                               f"({' <- '.join('/'.join(f) for f in floors)}); move the code down or the include up")
            elif them[0] > me[0]:
                out.append(f"{rel}:{n}: includes {inc}, but {rel.split('/')[0]} sits below {inc.split('/')[0]} "
                           f"({' <- '.join('/'.join(f) for f in FLOORS)}); move the code down or the include up")
    return out


def functions(text):
    """(name, first line, line count) of each function body at namespace level (brace matching on code
    with strings, characters and comments blanked)."""
    code = re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                  lambda m: re.sub(r"[^\n]", " ", m.group(0)), text, flags=re.S)
    lines = code.split("\n")
    out, depth, start, name, scopes = [], 0, None, None, []
    for i, line in enumerate(lines):
        for ch_i, ch in enumerate(line):
            if ch == "{":
                if start is None:
                    head = " ".join(lines[max(0, i - 3):i]) + " " + line[:ch_i]
                    m = re.search(r"([~\w:]+)\s*\([^;{}]*\)\s*(?:const)?\s*(?:noexcept)?\s*(?:->\s*[\w:<>]+)?\s*"
                                  r"(?::[^;{}]*)?$", head)
                    is_ns = re.search(r"\b(namespace|struct|class|enum|union|extern)\b[^;{}()]*$", head)
                    if m and not is_ns and not re.search(r"=\s*$", head.strip()):
                        start, name, scopes = i, m.group(1), [depth]
                depth += 1
            elif ch == "}":
                depth -= 1
                if start is not None and depth == scopes[0]:
                    out.append((name, start + 1, i - start + 1))
                    start = None
    return out


def length_breaches(root, report):
    out, all_fns = [], []
    for rel in sources(root):
        text = open(os.path.join(root, rel), encoding="utf-8", errors="replace").read()
        n = text.count("\n")
        if n > MAX_FILE_LINES:
            out.append(f"{rel}: {n} lines, over {MAX_FILE_LINES}; split it by concept")
        for name, line, length in functions(text):
            all_fns.append((length, f"{rel}:{line}", name))
            key = f"{rel}:{name.split('::')[-1]}"
            if rel.split("/")[0] in FUNCTION_DIRS and length > MAX_FUNCTION_LINES and key not in LONG_OK:
                out.append(f"{rel}:{line}: {name} is {length} lines, over {MAX_FUNCTION_LINES}; split it into named steps")
    if report:
        for length, where, name in sorted(all_fns, reverse=True)[:report]:
            print(f"{length:5d}  {where}  {name}")
    return out


def self_test():
    """Each kind of breach, planted in a scratch tree, must be reported; the clean tree must pass."""
    tmp = tempfile.mkdtemp()
    try:
        def write(rel, text):
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            open(os.path.join(tmp, rel), "w").write(text)
        write("core/base/a.h", "#pragma once\n")
        write("core/model/m.h", '#include "core/base/a.h"\n')
        write("prune/heads/p.cpp", '#include "core/model/m.h"\nint f() {\n  return 1;\n}\n')
        write("prune/run/r.cpp", '#include "prune/heads/p.h"\n')
        write("cli/main.cpp", '#include "prune/p.h"\n#include "analysis/x.h"\n')
        clean = include_breaches(tmp) + length_breaches(tmp, 0)
        planted = {
            "prune/heads/q.cpp": ('#include "analysis/report/report.h"\n', "sits below analysis"),
            "prune/heads/u.cpp": ('#include "prune/frontier/frontier_stage.h"\n', "prune/heads sits below prune/frontier"),
            "prune/data/s.cpp": ('#include "prune/export/slim.h"\n', "prune/data sits below prune/export"),
            "prune/flat.cpp": ("int x;\n", "stands in no room of prune/"),
            "core/base/b.cpp": ('#include "core/model/m.h"\n', "core/base sits below core/model"),
            "core/text/t.cpp": ('#include "core/kernels/gemm.h"\n', "core/text sits below core/kernels"),
            "train/long.cpp": ("int g() {\n" + "  x();\n" * 90 + "}\n", "over 80"),
            "eval/big.cpp": ("int a;\n" * 601, "over 600"),
        }
        ok = not clean
        print(f"clean tree: {'passes' if not clean else 'FAILS: ' + '; '.join(clean)}")
        for rel, (text, expect) in planted.items():
            write(rel, text)
            found = [b for b in include_breaches(tmp) + length_breaches(tmp, 0) if b.startswith(rel)]
            hit = any(expect in b for b in found)
            ok = ok and hit
            print(f"planted {rel}: {'reported' if hit else 'NOT reported'} ({found[0] if found else 'nothing'})")
            os.remove(os.path.join(tmp, rel))
        return 0 if ok else 1
    finally:
        shutil.rmtree(tmp)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--root", default=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    ap.add_argument("--report", type=int, default=0, help="print the N longest functions")
    ap.add_argument("--self-test", action="store_true")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    breaches = include_breaches(a.root) + length_breaches(a.root, a.report)
    for b in breaches:
        print(b)
    print(f"{len(breaches)} breach{'es' if len(breaches) != 1 else ''} of the code's shape")
    return 1 if breaches else 0


if __name__ == "__main__":
    sys.exit(main())
