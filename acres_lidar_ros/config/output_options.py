"""The output keys of the sensors file (the attribute list's "Output shaping and cadence") as one value.

``OutputConfig`` is what the cloud of a scan is made in: its coordinates (Cartesian x, y, z, or
spherical azimuth, elevation, range), its frame (the sensor, the world or a custom frame), with or
without motion compensation, with or without the beams that have no return, whole or in slices,
and whether the scan is traced at one pose (instant). ``outputs.shaping`` applies it;
docs/outputs.md says what each choice does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from acres_lidar_ros.config.param import Param

COORDINATES: tuple[str, ...] = ("cartesian", "spherical")
OUTPUT_FRAMES: tuple[str, ...] = ("sensor", "world", "custom")
OUTPUT_KEYS: tuple[str, ...] = (
    "coordinates",
    "output_frame",
    "custom_frame_xyz_rpy",
    "custom_frame_id",
    "motion_compensation",
    "include_invalid_points",
    "partial_output",
    "partial_slices",
    "instant",
)
"""The sensors-file keys of the block, all ``runtime`` (they change at the next scan)."""


@dataclass(frozen=True)
class OutputConfig:
    """The validated output keys.

    Attributes
    ----------
    coordinates : {"cartesian", "spherical"}
    output_frame : {"sensor", "world", "custom"}
    custom_frame_xyz_rpy : tuple of 6 floats
        The custom frame's pose in the world (the odometry frame): x, y, z (m), roll, pitch, yaw
        (rad, R = Rz Ry Rx); read only with ``output_frame = "custom"``.
    custom_frame_id : str
        The header frame of a cloud in the custom frame.
    motion_compensation : bool
        Each point moved into the frame at the scan stamp with the pose at its own firing time.
    include_invalid_points : bool
        True: each profile as its driver lays it out (organised ones keep a NaN cell for a beam
        without a return); False: every profile dense (height 1, returns only).
    partial_output : bool
        The scan leaves as ``partial_slices`` slices instead of one cloud.
    partial_slices : int
        Slices of a sweep's period with ``partial_output``.
    instant : bool
        The whole scan at one pose, the pose at the scan stamp; every time offset 0.
    """

    coordinates: str = "cartesian"
    output_frame: str = "sensor"
    custom_frame_xyz_rpy: tuple[float, ...] = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
    custom_frame_id: str = "custom"
    motion_compensation: bool = False
    include_invalid_points: bool = True
    partial_output: bool = False
    partial_slices: int = 10
    instant: bool = False

    @classmethod
    def from_values(cls, values: dict[str, Any]) -> OutputConfig:
        """From the validated sensors-file values (``schema`` names; the keys of ``OUTPUT_KEYS``)."""
        kwargs = {key: values[key] for key in OUTPUT_KEYS}
        kwargs["custom_frame_xyz_rpy"] = tuple(float(v) for v in values["custom_frame_xyz_rpy"])
        return cls(**kwargs)


def output_params(P: Callable[..., Param]) -> tuple[Param, ...]:
    """The schema's declarations of the output keys, made with ``schema.P`` (every one
    ``runtime``: the attribute list lets output settings change at the next scan)."""

    def runtime(name: str, kind: str, default: object, unit: str = "", **kw: Any) -> Param:
        return P(name, kind, default, unit, runtime=True, **kw)

    return (
        runtime(
            "coordinates",
            "str",
            "cartesian",
            choices=COORDINATES,
            description="The cloud's coordinates: x, y, z, or azimuth, elevation (rad) and range (m).",
        ),
        runtime(
            "output_frame",
            "str",
            "sensor",
            choices=OUTPUT_FRAMES,
            description="The frame the cloud is in (its header frame_id follows).",
        ),
        runtime(
            "custom_frame_xyz_rpy",
            "float_list",
            [0.0, 0.0, 0.0, 0.0, 0.0, 0.0],
            "m, rad",
            low=-1e6,
            high=1e6,
            length=6,
            description="Pose of the custom frame in the world: x, y, z (m), roll, pitch, yaw (rad, R = Rz Ry Rx).",
        ),
        runtime("custom_frame_id", "frame_name", "custom", description="Header frame of a cloud in the custom frame."),
        runtime(
            "motion_compensation",
            "bool",
            False,
            description="Move each point into the frame at the scan stamp, with the pose at its own firing time.",
        ),
        runtime(
            "include_invalid_points",
            "bool",
            True,
            description="Keep a NaN cell for a beam without a return (organised); false: dense, returns only.",
        ),
        runtime(
            "partial_output",
            "bool",
            False,
            description="Publish the sweep as partial_slices slices, each at its own end + delay_s, instead of one cloud.",
        ),
        runtime(
            "partial_slices",
            "int",
            10,
            low=1,
            high=3600,
            description="Slices of one sweep with partial_output (equal parts of the period).",
        ),
        runtime(
            "instant",
            "bool",
            False,
            description="The whole scan at one pose, the one at the scan stamp; every time offset 0.",
        ),
    )
