"""Input stamps of the test fixtures that the reference Python writes into the build tree (#43).

A fixture folder (tokenizer ids, trained tokenizers, architecture models) is reused by `--if-missing` only while
the stamp inside it equals the hash of everything that made it: the generating scripts, the data and vocabulary
files they read, the library versions and the options. A changed script, data file or pin remakes the folder
instead of testing against a stale one; an unchanged one costs a hash of ~30 MB (a fraction of a second).
"""
import hashlib
import os

STAMP = "fixture_stamp.txt"


def input_hash(paths, extra=()):
    """sha256 over `extra` (strings), then over every file under `paths` (files or folders) by relative name and
    bytes; a missing path counts as its name only."""
    h = hashlib.sha256()
    for item in extra:
        h.update(str(item).encode() + b"\0")
    for p in paths:
        h.update(b"path\0" + os.path.basename(os.path.normpath(p)).encode() + b"\0")
        if os.path.isfile(p):
            files = [(os.path.basename(p), p)]
        else:
            files = sorted((os.path.relpath(os.path.join(r, f), p), os.path.join(r, f))
                           for r, _, names in os.walk(p) for f in names if f != STAMP)
        for rel, full in files:
            h.update(rel.encode() + b"\0")
            with open(full, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def versions(*packages):
    """"name==version" of each installed package ("name absent" where it is not), for a stamp's `extra`."""
    from importlib.metadata import PackageNotFoundError, version
    out = []
    for name in packages:
        try:
            out.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            out.append(f"{name} absent")
    return out


def is_current(folder, digest):
    """True when `folder` holds a stamp equal to `digest` (it was made from these inputs, and completely)."""
    try:
        with open(os.path.join(folder, STAMP)) as f:
            return f.read().strip() == digest
    except OSError:
        return False


def write(folder, digest):
    """Marks `folder` as made from `digest`: call last, once every file of the folder is written."""
    with open(os.path.join(folder, STAMP), "w") as f:
        f.write(digest + "\n")
