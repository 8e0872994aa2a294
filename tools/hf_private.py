"""Keeps Hugging Face's caches private to one process of the reference Python (#44).

transformers copies a remote-code model's modeling file into its modules cache (~/.cache/huggingface/modules
by default: one folder per model folder name, shared by every process, never removed), so each check left a
folder in the user's home and two runs shared (and raced on) one `model/` folder there. use_private_hf_home()
points HF_HOME and HF_MODULES_CACHE at a fresh temporary folder, removed at exit (SIGTERM included), and keeps
the hub offline: these tools only load local folders. Call it before transformers is imported, which reads
these variables once.
"""
import atexit
import os
import shutil
import signal
import sys
import tempfile


def use_private_hf_home() -> str:
    """The private folder (under TMPDIR), removed when the process exits."""
    folder = tempfile.mkdtemp(prefix="hp_hf_")
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # so that atexit runs
    os.environ["HF_HOME"] = folder
    os.environ["HF_MODULES_CACHE"] = os.path.join(folder, "modules")
    os.environ["HF_HUB_OFFLINE"] = "1"
    return folder
