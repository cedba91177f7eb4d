"""The commands on recorded scans: ``compare`` and ``calibrate`` (docs/calibration.md)."""

from __future__ import annotations

from typing import Any

from acres_lidar_ros.apps.cmd_calibrate import add_calibrate_parser, cmd_calibrate
from acres_lidar_ros.apps.cmd_compare import add_compare_parser, cmd_compare

RECORDINGS_COMMANDS = {"compare": cmd_compare, "calibrate": cmd_calibrate}


def add_recordings_parsers(sub: Any) -> None:
    add_compare_parser(sub)
    add_calibrate_parser(sub)
