"""`pytest python/` straight from a built checkout: when no installed sift package is on the
path, the tests use this folder's copy, and libsift from build/ when SIFT_LIBRARY is unset.
(CTest's python_pytest runs them against a pip-installed copy instead.)"""
import importlib.util
import os
import pathlib
import sys

_here = pathlib.Path(__file__).resolve().parent
if importlib.util.find_spec("sift") is None:
    sys.path.insert(0, str(_here))
if "SIFT_LIBRARY" not in os.environ and (_here.parent / "build" / "libsift.so").exists():
    os.environ["SIFT_LIBRARY"] = str(_here.parent / "build" / "libsift.so")
