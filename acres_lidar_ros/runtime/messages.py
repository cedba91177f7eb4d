"""What the node publishes of one scan: its cloud and, with the truth on, its truth cloud.

``pack_scan`` builds both with an injected message builder (rclpy's PointCloud2 in the node,
rosbags' in the schedule benchmark and the tests), so the loop's output is the same either way.
Both carry the same header stamp, so a subscriber can pair them (message_filters' exact time).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from acres_lidar_ros.outputs.layouts import point_cloud
from acres_lidar_ros.outputs.truth import truth_cloud
from acres_lidar_ros.scan import Scan

MessageBuilder = Callable[[np.ndarray, str, int], Any]
"""(cloud (H, W) structured array, frame_id, header stamp ns) -> a PointCloud2 message."""


@dataclass(frozen=True)
class ScanMessages:
    """The messages of one scan.

    Attributes
    ----------
    points : message
        The cloud in the point type's layout (``layouts.point_cloud``).
    truth : message or None
        The ``outputs.truth.TRUTH_POINT`` cloud (columns x rings) when the scan has its truth.
    """

    points: Any
    truth: Any | None = None


def pack_scan(scan: Scan, point_type: str, stamp_ns: int, message: MessageBuilder) -> ScanMessages:
    """The scan's messages, both stamped ``stamp_ns`` (the cloud's header stamp)."""
    points = message(point_cloud(scan, point_type, stamp_ns), scan.frame_id, stamp_ns)
    truth = None if scan.truth is None else message(truth_cloud(scan), scan.frame_id, stamp_ns)
    return ScanMessages(points, truth)
