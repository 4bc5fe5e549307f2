"""Shared fixtures. The test suite never touches the network."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def multi30k_dir() -> Path:
    """The Multi30k corpus: $MULTI30K_DIR, else ../shared/data/multi30k beside the repo."""
    path = Path(os.environ.get("MULTI30K_DIR", REPO_ROOT.parent / "shared" / "data" / "multi30k"))
    if not (path / "val.en.gz").exists():
        pytest.skip(f"Multi30k not found at {path} (set MULTI30K_DIR to run this test)")
    return path
