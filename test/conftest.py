"""Shared fixtures. Paths are relative to the repository so tests run from a clean clone."""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO
