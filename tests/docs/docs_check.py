#!/usr/bin/env python3
"""The documentation is tested: every command it shows parses, every link it holds resolves (#60).

  tests/docs/docs_check.py --prune PATH [--root DIR]     exit 1 with one line per problem
  tests/docs/docs_check.py --prune PATH --self-test      the same, then plants a stale flag, a stale --set key,
                                                         a broken link (and more) in scratch copies of the docs
                                                         and what they link to; each must be reported

What is checked, in README.md and docs/*.md under --root (the repository by default):
  commands  every line of a code block (fenced, or indented by four spaces) whose command is `prune` — at the
            start, after `VAR=value` words, after `&&` or `;`, or after a launcher's `--no_python` — possibly
            continued with a trailing backslash. Its subcommand must exist, each of its flags must be one that
            `prune [subcommand] --help` lists, each `--set KEY=...` key one that `prune config --doc` lists, its
            `--config NAME` a file under --root or a shipped config. Then the binary itself parses the line with
            `--dump-config` (it resolves the configuration, validates it and exits; nothing runs), with the
            placeholders of a synopsis filled in: `[optional]` parts kept, `a|b` taken as `a`, `…` dropped, an
            upper-case placeholder (`N`, `DIR`) given 8 or 0.5 where the flag takes a number.
  links     every relative link and image outside code (`[text](path)`, `![alt](path)`, `[ref]: path`) must
            name a file under --root, and a `#anchor` a heading of that file (GitHub's slugs).
  help      `prune --help` and each subcommand's `--help` end with "Guide: docs/....md", a file that exists.
"""
import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

FENCE = re.compile(r"^\s*(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
REF_LINK = re.compile(r"^\s*\[[^\]]+\]:\s*(\S+)")
CODE_SPAN = re.compile(r"`+[^`]*`+")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*(\.[a-z0-9]+)?$")
ENV_WORD = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
HELP_FLAG = re.compile(r"^\s+(?:-\w,\s+)?(--[\w-]+)(?:\s+(\S+))?")
SEPARATORS = {"&&", ";", "||", "|"}


def doc_files(root):
    files = [os.path.join(root, "README.md")]
    docs = os.path.join(root, "docs")
    if os.path.isdir(docs):
        files += sorted(os.path.join(docs, f) for f in os.listdir(docs) if f.endswith(".md"))
    return [f for f in files if os.path.isfile(f)]


# ---------------------------------------------------------------------------------------------------------------
# Reading the Markdown: code lines (with their line numbers) and prose lines.

def split_markdown(text):
    """([(line_no, code line)], [(line_no, prose line)]) with continued code lines joined."""
    code, prose = [], []
    fenced, prev_blank, in_indented = False, True, False
    lines = text.split("\n")
    for i, line in enumerate(lines, 1):
        if FENCE.match(line):
            fenced = not fenced
            prev_blank = False
            continue
        if fenced:
            code.append((i, line))
        elif line.startswith("    ") and (prev_blank or in_indented) and line.strip():
            in_indented = True
            code.append((i, line))
        else:
            if line.strip():
                in_indented = False
            prose.append((i, line))
        prev_blank = not line.strip()
    joined, pending = [], None
    for i, line in code:
        if pending:
            pending = (pending[0], pending[1] + " " + line.strip())
        else:
            pending = (i, line.strip())
        if pending[1].endswith("\\"):
            pending = (pending[0], pending[1][:-1].rstrip())
            continue
        joined.append(pending)
        pending = None
    if pending:
        joined.append(pending)
    return joined, prose


def tokens_of(line):
    lex = shlex.shlex(line, posix=True, punctuation_chars=False)
    lex.whitespace_split = True
    lex.commenters = "#"
    try:
        return list(lex)
    except ValueError:  # an unbalanced quote: not a shell line
        return None


def prune_commands(line):
    """The argument lists of the `prune` commands on one code line."""
    toks = tokens_of(line)
    if not toks:
        return []
    segments, seg, depth = [], [], 0
    for t in toks:
        if t in SEPARATORS and depth == 0:
            segments.append(seg)
            seg = []
            continue
        if t.startswith(">") or t.startswith("<") or t == "2>":
            break
        depth += t.count("[") + t.count("(") - t.count("]") - t.count(")")
        seg.append(t)
    segments.append(seg)
    out = []
    for seg in segments:
        i = 0
        while i < len(seg) and ENV_WORD.match(seg[i]):
            i += 1
        if i < len(seg) and is_prune(seg[i]):
            out.append(seg[i + 1:])
            continue
        if "--no_python" in seg:
            j = seg.index("--no_python") + 1
            if j < len(seg) and is_prune(seg[j]):
                out.append(seg[j + 1:])
    return out


def is_prune(word):
    return word in ("prune", "$PRUNE", "${PRUNE}") or word.endswith("/bin/prune")


def slug(heading):
    """GitHub's anchor of a heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors_of(path, cache={}):
    if path not in cache:
        found, fenced = set(), False
        counts = {}
        with open(path, encoding="utf-8") as f:
            for line in f:
                if FENCE.match(line):
                    fenced = not fenced
                m = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
                if m and not fenced:
                    s = slug(m.group(2))
                    n = counts.get(s, 0)
                    counts[s] = n + 1
                    found.add(s if n == 0 else "%s-%d" % (s, n))
        cache[path] = found
    return cache[path]


# ---------------------------------------------------------------------------------------------------------------
# What the binary knows.

class Prune:
    def __init__(self, path, cwd):
        self.path, self.cwd = path, cwd
        self.parsed = {}  # argv -> the finished process (the self-test's copies share it: same files, same answers)
        self.env = {k: v for k, v in os.environ.items()
                    if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "SLURM_PROCID", "SLURM_NTASKS")}
        self.env.setdefault("OMP_WAIT_POLICY", "passive")
        top = self.run(["--help"])
        self.subcommands = []
        in_subs = False
        for line in top.stdout.split("\n"):
            if line.strip().upper().startswith("SUBCOMMANDS"):
                in_subs = True
                continue
            if in_subs:
                m = re.match(r"^\s+(\w+)\s", line)
                if m:
                    self.subcommands.append(m.group(1))
                elif line.strip() and not line.startswith(" "):
                    in_subs = False
        if not self.subcommands:
            sys.exit("docs_check: `%s --help` lists no subcommands" % path)
        self.helps = {"": top.stdout}
        for s in self.subcommands:
            self.helps[s] = self.run([s, "--help"]).stdout
        self.flags = {}
        for s, text in self.helps.items():
            flags = {}
            for line in text.split("\n"):
                m = HELP_FLAG.match(line)
                if m:
                    flags[m.group(1)] = m.group(2) or ""
            self.flags[s] = flags
        doc = self.run(["config", "--doc"]).stdout
        self.keys = set(re.findall(r"^\| `([\w.]+)` \|", doc, re.M))
        listing = self.run(["config", "--list"]).stdout
        self.configs = {line.split("\t")[0] for line in listing.split("\n") if line.strip()}

    def run(self, args, timeout=120):
        return subprocess.run([self.path] + args, cwd=self.cwd, env=self.env, capture_output=True, text=True,
                              timeout=timeout)


def subcommand_of(args, prune):
    if args and not args[0].startswith("-") and not args[0].startswith("["):
        return args[0], args[1:]
    return "", args


def clean(tok):
    return tok.strip("[]()")


def static_problems(args, prune, root):
    """Problems found without running the binary: unknown subcommand, flag, --set key, --config name."""
    out = []
    sub, rest = subcommand_of(args, prune)
    if sub and sub not in prune.subcommands:
        return ["unknown subcommand '%s' (prune --help lists %s)" % (sub, ", ".join(prune.subcommands))]
    flags = prune.flags[sub]
    for i, tok in enumerate(rest):
        t = clean(tok)
        if not t.startswith("--"):
            continue
        name, _, inline = t.partition("=")
        if name not in flags:
            out.append("unknown flag %s of `prune%s` (not in its --help)" % (name, " " + sub if sub else ""))
            continue
        value = inline if inline else (clean(rest[i + 1]) if i + 1 < len(rest) else "")
        if name == "--set":
            key = value.partition("=")[0]
            if key not in prune.keys:
                out.append("unknown config key in --set %s (not in prune config --doc)" % key)
        elif name == "--config" and value and not PLACEHOLDER.match(value):
            if not (os.path.isfile(os.path.join(root, value)) or value in prune.configs
                    or os.path.splitext(value)[0] in prune.configs):
                out.append("--config %s: no such file under the root and no shipped config of that name" % value)
    return out


def concrete(args, prune):
    """The command line with a synopsis's placeholders filled in, for the binary to parse."""
    sub, _ = subcommand_of(args, prune)
    flags = prune.flags.get(sub, {})
    out, prev_flag, depth, skip_below = [], None, 0, None
    for tok in args:
        depth_before = depth
        depth += tok.count("[") + tok.count("(") - tok.count("]") - tok.count(")")
        if skip_below is not None:  # the second alternative of `(A | B)`: left out up to the group's end
            if depth < skip_below:
                skip_below = None
            continue
        t = clean(tok).replace("[", "").replace("]", "")
        if tok == "|" and depth_before > 0:
            skip_below = depth_before
            prev_flag = None
            continue
        if t in ("|", ""):
            prev_flag = None
            continue
        if t.startswith("--"):
            out.append(t)
            prev_flag = t if "=" not in t and flags.get(t, "") else None
            continue
        if "|" in t:
            t = t.split("|")[0]
        if "…" in t or "..." in t:
            t = ",".join(p for p in t.split(",") if p and "…" not in p and "..." not in p) or "x"
        kind = flags.get(prev_flag, "") if prev_flag else ""
        if PLACEHOLDER.match(t) or t.startswith("$"):
            if kind.startswith("INT"):
                t = "8"
            elif kind.startswith("FLOAT"):
                t = "0.5"
        out.append(t)
        prev_flag = None
    return out


def check_commands(files, prune, root):
    problems, jobs = [], []
    for path in files:
        rel = os.path.relpath(path, root)
        code, _ = split_markdown(open(path, encoding="utf-8").read())
        for line_no, line in code:
            for args in prune_commands(line):
                where = "%s:%d" % (rel, line_no)
                # `prune/   criteria, schedules, …` in a layout listing is the folder, not a command: a command
                # names a subcommand or holds a flag (so a misspelt subcommand with its flags is still caught).
                if args and args[0] not in prune.subcommands and not any(a.lstrip("[(").startswith("-") for a in args):
                    continue
                found = static_problems(args, prune, root)
                problems += ["%s: %s  [%s]" % (where, p, line) for p in found]
                if not found:
                    jobs.append((where, line, args))

    def parse(job):
        where, line, args = job
        sub, _ = subcommand_of(args, prune)
        argv = concrete(args, prune)
        if sub != "config" and "--version" not in argv and "--help" not in argv:
            argv = argv + ["--dump-config"]
        key = tuple(argv)
        if key not in prune.parsed:
            prune.parsed[key] = prune.run(argv)
        r = prune.parsed[key]
        if r.returncode != 0:
            err = (r.stderr.strip().split("\n") or [""])[-1]
            return "%s: `prune %s` does not parse (exit %d): %s  [%s]" % (where, " ".join(argv), r.returncode, err,
                                                                          line)
        return None

    with ThreadPoolExecutor(max_workers=2) as pool:
        problems += [p for p in pool.map(parse, jobs) if p]
    return problems, len(jobs)


def check_links(files, root):
    problems, n = [], 0
    for path in files:
        rel = os.path.relpath(path, root)
        _, prose = split_markdown(open(path, encoding="utf-8").read())
        for line_no, line in prose:
            text = CODE_SPAN.sub("", line)
            targets = LINK.findall(text)
            m = REF_LINK.match(text)
            if m:
                targets.append(m.group(1))
            for target in targets:
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
                    continue
                n += 1
                file_part, _, anchor = target.partition("#")
                dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
                where = "%s:%d" % (rel, line_no)
                if not os.path.realpath(dest).startswith(os.path.realpath(root)):
                    problems.append("%s: link %s leaves the repository" % (where, target))
                elif not os.path.exists(dest):
                    problems.append("%s: broken link %s (no such file)" % (where, target))
                elif anchor and dest.endswith(".md") and anchor not in anchors_of(dest):
                    problems.append("%s: broken link %s (no heading with that anchor in %s)"
                                    % (where, target, os.path.relpath(dest, root)))
    return problems, n


def check_help(prune, root):
    problems = []
    for sub, text in prune.helps.items():
        last = [line for line in text.strip().split("\n") if line.strip()][-2:]
        guides = [line for line in last if line.startswith("Guide: ")]
        name = "prune %s--help" % (sub + " " if sub else "")
        if not guides:
            problems.append("`%s` does not end with a 'Guide: docs/....md' line (cli/guides.h)" % name)
        for doc in re.findall(r"(?:docs/[\w.-]+\.md|README\.md)", "\n".join(last)):
            if not os.path.isfile(os.path.join(root, doc)):
                problems.append("`%s` names %s, which does not exist" % (name, doc))
    return problems


def check(prune_path, root, prune=None):
    root = os.path.abspath(root)
    files = doc_files(root)
    if prune is None:
        prune = Prune(os.path.abspath(prune_path), root)
    prune.cwd = root
    problems, n_cmd = check_commands(files, prune, root)
    link_problems, n_links = check_links(files, root)
    problems += link_problems + check_help(prune, root)
    return problems, len(files), n_cmd, n_links


# ---------------------------------------------------------------------------------------------------------------
# Self-test: each planted bug must be reported.

def linked_files(root):
    """Every file the docs link to, relative to root (what a scratch copy needs)."""
    out = set()
    for path in doc_files(root):
        _, prose = split_markdown(open(path, encoding="utf-8").read())
        for _, line in prose:
            for target in LINK.findall(CODE_SPAN.sub("", line)):
                f = target.partition("#")[0]
                if f and not re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    dest = os.path.normpath(os.path.join(os.path.dirname(path), f))
                    if os.path.isfile(dest):
                        out.add(os.path.relpath(dest, root))
    return out


def scratch_copy(root, dest):
    for rel in {"README.md"} | linked_files(root):
        os.makedirs(os.path.dirname(os.path.join(dest, rel)) or dest, exist_ok=True)
        shutil.copy2(os.path.join(root, rel), os.path.join(dest, rel))
    for d in ("docs", "configs"):
        shutil.copytree(os.path.join(root, d), os.path.join(dest, d), dirs_exist_ok=True)


def plant(dest, pattern, replacement, link=False):
    """Replaces the first match of `pattern` in README.md or docs/*.md on a line the check reads for it (a command:
    a code line, not an inline span in prose or a table; a link: a prose line); the file and line it changed."""
    for path in doc_files(dest):
        text = open(path, encoding="utf-8").read()
        code, prose = split_markdown(text)
        wanted = {n for n, _ in (prose if link else code)}
        for m in re.finditer(pattern, text, re.M):
            if text.count("\n", 0, m.start()) + 1 in wanted:
                break
        else:
            m = None
        if m:
            open(path, "w", encoding="utf-8").write(text[:m.start()] + m.expand(replacement) + text[m.end():])
            return os.path.relpath(path, dest), text.count("\n", 0, m.start()) + 1
    sys.exit("docs_check self-test: nothing matches %r to plant a bug in" % pattern)


def self_test(prune_path, root):
    root = os.path.abspath(root)
    plants = [
        ("a stale flag", r"^([ \t]*prune --config \S+ )--target-heads 36", r"\1--target-headz 36", "--target-headz"),
        ("a stale --set key", r"--set prune\.recover_steps=", "--set prune.recover_step=", "prune.recover_step "),
        ("a broken link", r"\]\(docs/heads\.md\)", "](docs/head.md)", "docs/head.md"),
        ("a broken anchor", r"\]\(docs/heads\.md#measured\)", "](docs/heads.md#measures)", "#measures"),
        ("a config that is gone", r"--config sst2\.yaml --target-flops", "--config sst3.yaml --target-flops",
         "sst3.yaml"),
        ("a value the binary refuses", r"--precision int8$", "--precision int4", "int4"),
    ]
    failures = []
    prune = Prune(os.path.abspath(prune_path), root)
    problems, n_files, n_cmd, n_links = check(prune_path, root, prune)  # the tree itself first
    for p in problems:
        print(p)
    print("docs_check: %d files, %d prune commands parsed, %d links: %d problems" % (n_files, n_cmd, n_links,
                                                                                     len(problems)))
    if problems:
        failures.append("%s has %d problems (above)" % (root, len(problems)))
    with tempfile.TemporaryDirectory(prefix="hp_docs_") as tmp:
        clean_dir = os.path.join(tmp, "clean")
        scratch_copy(root, clean_dir)
        problems, *_ = check(prune_path, clean_dir, prune)  # the copy, unplanted, passes (answers reused)
        if problems:
            failures.append("the unplanted copy already fails:\n  " + "\n  ".join(problems))
        for i, (what, pattern, replacement, needle) in enumerate(plants):
            d = os.path.join(tmp, "plant%d" % i)
            scratch_copy(root, d)
            rel, line_no = plant(d, pattern, replacement, link=what.startswith("a broken"))
            problems, *_ = check(prune_path, d, prune)
            hits = [p for p in problems if needle.strip() in p and p.startswith("%s:%d" % (rel, line_no))]
            print("planted %s at %s:%d -> %s" % (what, rel, line_no, hits[0] if hits else "NOT REPORTED"))
            if not hits:
                failures.append("%s planted at %s:%d was not reported (got: %s)" % (what, rel, line_no, problems))
    for f in failures:
        print("FAIL: " + f)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--prune", required=True, help="the built prune binary")
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."),
                    help="the tree whose README.md and docs/ to check (default: this repository)")
    ap.add_argument("--self-test", action="store_true", help="plant bugs in scratch copies; each must be reported")
    a = ap.parse_args()
    if a.self_test:
        return self_test(a.prune, a.root)
    problems, n_files, n_cmd, n_links = check(a.prune, a.root)
    for p in problems:
        print(p)
    print("docs_check: %d files, %d prune commands parsed, %d links: %d problems" % (n_files, n_cmd, n_links,
                                                                                     len(problems)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
