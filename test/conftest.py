"""Shared fixtures. Paths are relative to the repository so tests run from a clean clone."""

import os
from pathlib import Path

import pytest

# Any ROS 2 participant a test makes (in this process or a child) sees only this machine and
# this run: parallel runs and other work on the machine stay apart.
os.environ.setdefault("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
os.environ.setdefault("ROS_DOMAIN_ID", str(1 + os.getpid() % 100))

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO


@pytest.fixture(scope="session")
def plane_tracer():
    """Flat ground at z = 0, 600 m square (``loop_support.flat_plane_tracer``), for the loop tests;
    a module with a plane of its own size defines its own ``plane_tracer``."""
    from loop_support import flat_plane_tracer

    return flat_plane_tracer()
