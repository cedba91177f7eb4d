"""``--labels`` of ``acres-lidar scan``, ``record`` and ``bench``: instance labels on every point.

With ``--labels`` the PLY files add ``instance`` (uint32) to the spec's 31-byte record, the
clouds (bag, PCD) are the labelled profile ``XYZIRT_labels`` (``point_types.labelled_point_type``)
and ``episode.json`` carries the instance table; ``bench`` times the labelled packing against the
plain one on the same scans.

Light at import (argparse only): ``cli`` imports it before the signal handlers are installed.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from acres_lidar_ros.outputs.point_types import PointProfile


def add_labels_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--labels`` switch."""
    parser.add_argument(
        "--labels",
        action="store_true",
        help="instance labels on every point: PLY adds instance (uint32), clouds use the XYZIRT_labels layout "
        "(XYZIRT + class + instance; --point-type XYZI or XYZIRT), episode.json lists the instances "
        "(docs/outputs.md); bench: the labelled packing against the plain one, same scans",
    )


def run_point_type(point_type: str, labels: bool, what: str = "--point-type") -> PointProfile:
    """The profile of the run's clouds, resolved once from the name the run was given:
    ``point_type``'s (``--point-type``, the sensors file's or a dataset shard's, named by
    ``what``), or the labelled profile with ``--labels`` (``ConfigError`` for an unknown profile or
    a layout that has no room for labels)."""
    from acres_lidar_ros.outputs.point_types import labelled_point_type

    return labelled_point_type(point_type, labels, what)
