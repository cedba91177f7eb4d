"""The command-line flags of the output keys (``config/output_options.py``) for ``acres-lidar
scan`` and ``record``: each flag replaces one sensors-file key, validated by the schema.

Light imports only (argparse and the schema): ``apps.cli`` imports this before the signal
handlers are installed.
"""

from __future__ import annotations

import argparse
import math
from typing import TYPE_CHECKING, Any

from acres_lidar_ros.config.schema import LIDAR_PARAM
from acres_lidar_ros.errors import ConfigError

if TYPE_CHECKING:
    from acres_lidar_ros.config.sensors import SensorConfig

#: Flag -> the sensors-file key it replaces.
OUTPUT_FLAGS = {
    "--coordinates": "coordinates",
    "--output-frame": "output_frame",
    "--custom-frame": "custom_frame_xyz_rpy",
    "--custom-frame-id": "custom_frame_id",
    "--motion-compensation": "motion_compensation",
    "--include-invalid-points": "include_invalid_points",
    "--partial-output": "partial_output",
    "--partial-slices": "partial_slices",
    "--instant": "instant",
}
#: The previews' range when ``--preview-range`` is not given, m (``outputs.scan_files.PREVIEW_RANGE_M``).
PREVIEW_RANGE_M = 40.0
#: Flags whose values are numbers, by count (``apps.argv.mark_negative_numbers``).
OUTPUT_NUMBER_OPTIONS = {"--custom-frame": 6, "--partial-slices": 1, "--preview-range": 1}


def add_output_flags(parser: argparse.ArgumentParser) -> None:
    """The flags of ``OUTPUT_FLAGS`` (default: the sensors file's values)."""
    group = parser.add_argument_group("output (replace the sensors file's output keys; docs/outputs.md)")
    for flag, key in OUTPUT_FLAGS.items():
        param = LIDAR_PARAM[key]
        help_ = f"lidar.{key}: {param.description}"
        dest = f"output_{key}"
        if param.kind == "bool":
            group.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=None, help=help_)
        elif param.kind == "float_list":
            group.add_argument(
                flag, dest=dest, nargs=6, type=float, metavar=("X", "Y", "Z", "ROLL", "PITCH", "YAW"), help=help_
            )
        elif param.choices:
            group.add_argument(flag, dest=dest, choices=param.choices, help=help_)
        elif param.kind == "int":
            group.add_argument(flag, dest=dest, type=int, metavar="N", help=f"{help_} ({param.allowed()})")
        else:
            group.add_argument(flag, dest=dest, metavar="FRAME", help=help_)
    parser.add_argument(
        "--preview-range",
        dest="preview_range_m",
        type=float,
        metavar="M",
        help=f"range of the PNG previews, from the sensor to the edges (default {PREVIEW_RANGE_M:g} m, at most lidar.range_m)",
    )


def preview_range(args: argparse.Namespace, config: SensorConfig) -> float:
    """``--preview-range`` (default ``PREVIEW_RANGE_M``, or ``lidar.range_m`` where that is shorter);
    a range that is not > 0 and at most the sensor's ``lidar.range_m`` is refused."""
    value = getattr(args, "preview_range_m", None)
    if value is None:
        return min(PREVIEW_RANGE_M, float(config.range_m))
    if not (math.isfinite(value) and 0.0 < value <= config.range_m):
        raise ConfigError(
            f"--preview-range {value:g}: allowed a range > 0 and <= {config.range_m:g} m "
            f"(lidar.range_m of {config.source})"
        )
    return float(value)


def output_overrides(args: argparse.Namespace) -> dict[str, Any]:
    """The output keys the flags replace (the flags given)."""
    overrides: dict[str, Any] = {}
    for key in OUTPUT_FLAGS.values():
        value = getattr(args, f"output_{key}", None)
        if value is not None:
            overrides[key] = list(value) if isinstance(value, list) else value
    return overrides


def apply_output_flags(config: SensorConfig, args: argparse.Namespace) -> SensorConfig:
    """``config`` with the given flags' keys replaced; a bad value is refused with the sensors
    file's message for that key, prefixed with the flag."""
    overrides = output_overrides(args)
    flag_of = {key: flag for flag, key in OUTPUT_FLAGS.items()}
    for key, value in overrides.items():
        try:
            LIDAR_PARAM[key].validate(value, f"lidar.{key}")
        except ConfigError as exc:
            shown = " ".join(f"{v:g}" for v in value) if isinstance(value, list) else value
            raise ConfigError(f"{flag_of[key]} {shown}: {exc}") from exc
    return config.with_overrides(overrides) if overrides else config
