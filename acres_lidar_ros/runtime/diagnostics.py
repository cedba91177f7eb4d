"""The node's ``diagnostic_msgs/DiagnosticStatus`` from the loop's counters, ROS-free."""

from __future__ import annotations

import math
from typing import Any

from acres_lidar_ros.runtime.scheduler import COUNT_KEYS

DIAGNOSTIC_KEYS = (
    ("scans_published", "published"),
    ("scans_late", "late"),
    ("scans_dropped_busy", "dropped_busy"),
    ("scans_extrapolated", "extrapolated"),
    ("scans_skipped_no_pose", "skipped_no_pose"),
    ("scans_skipped_pose_start", "skipped_pose_start"),
    ("scans_skipped_pose_gap", "skipped_pose_gap"),
    ("scans_skipped_time_jump", "skipped_time_jump"),
    ("scans_abandoned", "abandoned"),
    ("scans_failed", "failed"),
    ("scans_in_work", "in_work"),
)

POSE_REJECTION_KINDS = ("invalid", "wrong_frame", "out_of_order", "duplicate", "time_jump")
"""``PoseTracker`` outcomes reported as ``pose_rejected_<kind>`` (``current["pose_<kind>"]``);
a ``time_jump`` sample is kept but clears the history, so it is reported with them."""
POSE_MOTION_KINDS = (
    ("pose_jumps", "jump"),
    ("pose_accelerations", "acceleration"),
    ("pose_below_terrain", "below_terrain"),
    ("pose_above_terrain", "above_terrain"),
)
"""Samples beyond the speed limit (the history restarts at them) or the acceleration limit, and
poses below the terrain or high above it (``GroundWatch``): kept, counted, WARN."""


def diagnostic_status(
    current: dict[str, Any], previous: dict[str, Any] | None
) -> tuple[str, str, list[tuple[str, str]]]:
    """Level (``OK``, ``WARN``, ``ERROR``), message and key/value pairs of the node's
    ``diagnostic_msgs/DiagnosticStatus`` from two successive ``ScanScheduler.diagnostics()``
    (with the pose tracker's counts as ``pose_<kind>``, ``NodeLoop.diagnostics``).

    WARN when scans were dropped, late, extrapolated or skipped, or odometry was rejected (other
    than duplicates) since the previous report; ERROR when a trace failed or nothing was
    published in the interval though scans were due.
    """
    previous = previous or {}
    delta = {k: current.get(k, 0) - previous.get(k, 0) for k in COUNT_KEYS}
    rejected = {k: current.get(f"pose_{k}", 0) - previous.get(f"pose_{k}", 0) for k in POSE_REJECTION_KINDS}
    if delta["failed"] or (delta["due"] and not delta["published"] and not current.get("in_work")):
        level = "ERROR"
    elif (
        delta["dropped_busy"]
        or delta["late"]
        or delta["extrapolated"]
        or delta["skipped_no_pose"]
        or delta["skipped_pose_start"]
        or delta["skipped_pose_gap"]
        or delta["skipped_time_jump"]
        or delta["abandoned"]
        or any(n for k, n in rejected.items() if k != "duplicate")
        or any(current.get(f"pose_{k}", 0) - previous.get(f"pose_{k}", 0) for _, k in POSE_MOTION_KINDS)
    ):
        level = "WARN"
    else:
        level = "OK"
    message = (
        f"{delta['published']} published, {delta['late']} late, {delta['dropped_busy']} dropped (busy), "
        f"{delta['skipped_no_pose']} without pose, "
        f"{delta['skipped_pose_start'] + delta['skipped_pose_gap']} not covered by the poses since the last report"
    )
    values = [(key, str(int(current.get(name, 0)))) for key, name in DIAGNOSTIC_KEYS]
    values += [(f"pose_rejected_{k}", str(int(current.get(f"pose_{k}", 0)))) for k in POSE_REJECTION_KINDS]
    values += [(key, str(int(current.get(f"pose_{k}", 0)))) for key, k in POSE_MOTION_KINDS]
    trace_ms, rtf = current.get("trace_ms", math.nan), current.get("real_time_factor", math.nan)
    values.append(("trace_ms", "nan" if math.isnan(trace_ms) else f"{trace_ms:.1f}"))
    values.append(("real_time_factor", "nan" if math.isnan(rtf) else f"{rtf:.2f}"))
    return level, message, values
