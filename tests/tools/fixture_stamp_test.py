#!/usr/bin/env python3
"""tools/fixture_stamp.py (#43): a fixture folder is reused only while its stamp matches the hash of its inputs.
Each check below fails if the hash ignores a byte of a file, a file's name, a file added to an input folder or an
option, or if a folder without a stamp (or with a stale one) counts as current."""
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import fixture_stamp as fs  # noqa: E402


def main():
    failures = []

    def check(cond, what):
        if not cond:
            failures.append(what)

    with tempfile.TemporaryDirectory() as root:
        data, out = os.path.join(root, "data"), os.path.join(root, "out")
        os.makedirs(os.path.join(data, "sub"))
        os.makedirs(out)
        one, two = os.path.join(data, "a.tsv"), os.path.join(data, "sub", "b.tsv")
        for path, text in ((one, "x\ty\n"), (two, "z\n")):
            with open(path, "w") as f:
                f.write(text)
        base = fs.input_hash([one, data], extra=["bpe", 97])
        check(base == fs.input_hash([one, data], extra=["bpe", 97]), "the hash is not repeatable")
        check(base != fs.input_hash([one, data], extra=["spm", 97]), "an option is ignored")
        check(not fs.is_current(out, base), "a folder without a stamp counts as current")
        fs.write(out, base)
        check(fs.is_current(out, base), "a folder stamped with the hash is not current")
        with open(two, "w") as f:
            f.write("Z\n")  # one byte of a file in an input folder
        changed = fs.input_hash([one, data], extra=["bpe", 97])
        check(changed != base, "a changed byte in an input folder is ignored")
        check(not fs.is_current(out, changed), "a stale stamp counts as current")
        os.rename(two, os.path.join(data, "sub", "c.tsv"))
        check(fs.input_hash([one, data], extra=["bpe", 97]) != changed, "a renamed file is ignored")
        before = fs.input_hash([data])
        fs.write(data, "anything")  # a stamp inside an input folder is not an input
        check(fs.input_hash([data]) == before, "the stamp file itself is hashed")
        with open(os.path.join(data, "new.tsv"), "w") as f:
            f.write("")
        check(fs.input_hash([data]) != before, "an added (empty) file is ignored")
    if failures:
        sys.exit("fixture_stamp: " + "; ".join(failures))
    print("fixture_stamp: 8 checks passed")


if __name__ == "__main__":
    main()
