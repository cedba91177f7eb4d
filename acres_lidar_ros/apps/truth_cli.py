"""``--truth`` of ``acres-lidar scan``, ``record`` and ``bench``: the per-cell truth of each scan.

Light at import (argparse only): ``cli`` imports it before the signal handlers are installed.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acres_lidar_ros.scan.scan_types import Scan


def add_truth_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--truth`` switch (``ScanOptions.truth``)."""
    parser.add_argument(
        "--truth",
        action="store_true",
        help="why each beam gave a return or none: lidar/scan_<time>.truth.npz per scan (docs/outputs.md); "
        "bench: the scan's cost with it against the plain scan, same run",
    )


def truth_summary(scan: Scan) -> str:
    """One line: how many cells have each reason code, e.g. ``truth: 36123 returned, 14638 no_surface``."""
    import numpy as np

    from acres_lidar_ros.radiometry.cell_truth import REASON_NAMES

    if scan.truth is None:
        return "truth: none"
    counts = np.bincount(scan.truth.reason, minlength=len(REASON_NAMES))
    return "truth: " + ", ".join(f"{int(n)} {name}" for name, n in zip(REASON_NAMES, counts) if n)
