"""What the node publishes of one scan: its cloud (or each slice's) and, with the truth on, its
truth cloud.

``pack_scan`` builds them with an injected message builder (rclpy's PointCloud2 in the node,
rosbags' in the schedule benchmark and the tests), so the loop's output is the same either way.
The truth cloud covers the whole scan, in the lidar frame, and goes beside the scan's last slice
(the whole scan without ``partial_output``) with that message's header stamp, so a subscriber can
pair them (message_filters' exact time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from acres_lidar_ros.outputs.layouts import point_cloud
from acres_lidar_ros.outputs.point_types import PointProfile
from acres_lidar_ros.outputs.shaping import ShapedScan
from acres_lidar_ros.outputs.truth_cloud import truth_cloud

MessageBuilder = Callable[[np.ndarray, str, int], Any]
"""(cloud (H, W) structured array, frame_id, header stamp ns) -> a PointCloud2 message."""


@dataclass(frozen=True)
class ScanMessages:
    """The messages of one scan or slice.

    Attributes
    ----------
    points : message
        The cloud in the profile's layout (``layouts.point_cloud``), in the output frame.
    truth : message or None
        The scan's ``outputs.truth.TRUTH_POINT`` cloud (columns x rings, lidar frame) beside its
        last slice when the scan has its truth; None otherwise.
    """

    points: Any
    truth: Any | None = None


def pack_scan(shaped: ShapedScan, profile: PointProfile, stamp_ns: int, message: MessageBuilder) -> ScanMessages:
    """The messages of a shaped scan or slice (``shaping.shaped_outputs``) in ``profile``'s
    layout, stamped ``stamp_ns``."""
    points = message(point_cloud(shaped, profile, stamp_ns), shaped.frame_id, stamp_ns)
    scan = shaped.scan
    last = shaped.last_slice
    truth = message(truth_cloud(scan), scan.frame_id, stamp_ns) if last and scan.truth is not None else None
    return ScanMessages(points, truth)
