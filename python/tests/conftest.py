"""Shared paths for the tests: the shared data (SIFT_SHARED, default ../shared beside the
checkout) and the sift CLI (SIFT_CLI, for the parity checks against `sift replay`)."""
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = pathlib.Path(os.environ.get("SIFT_SHARED", ROOT.parent / "shared"))


@pytest.fixture(scope="session")
def shared():
    if not SHARED.is_dir():
        pytest.fail(f"shared data not found at {SHARED} (set SIFT_SHARED)")
    return SHARED


@pytest.fixture(scope="session")
def sift_cli():
    p = os.environ.get("SIFT_CLI", str(ROOT / "build" / "sift"))
    if not os.path.isfile(p):
        pytest.fail(f"the sift CLI is not at {p} (set SIFT_CLI)")
    return p
