"""The session log: one ``lidar.jsonl`` row per scan and ``episode.json`` (spec "Scan Row and Preview").

A row holds the point counts, the counts per class and per material (by name), the sensor pose,
the sweep timing and the weather of one scan. ``episode.json`` holds the class table, the
material table, a short description of each model part and the run's counters.

Everything returned is plain JSON data (``dict``/``list``/``int``/``float``/``str``/``None``);
non-finite numbers become ``None`` (e.g. ``visibility_m`` of clear air), so the files are strict
JSON. ``json_files`` writes them (``append_jsonl``, ``write_json``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.config.material_table import CLASS_NAMES, IS_FOLIAGE_CLASS, MATERIAL_NAMES, MATERIAL_OF_CLASS
from acres_lidar_ros.errors import OutputError
from acres_lidar_ros.scan.scan_types import Scan
from acres_lidar_ros.scene.instances import InstanceTable

# One short text per model part, for episode.json.
MODEL_PARTS: dict[str, str] = {
    "pattern": "Rings at the elevation table (or evenly between the limits), columns evenly over 360 deg "
    "in the azimuth order, plus each ring's azimuth offset; beams start at the lens centre off the spin "
    "axis and are turned by the mount roll, pitch and yaw.",
    "sub_rays": "A beam is one ray, or seven sub-rays (centre weight 0.25, six at 0.35 beta weight 0.125) "
    "that sample the beam divergence.",
    "timing": "Each column fires at dt_c = phi_c / (2 pi) T - T before the stamp (the end of the sweep), "
    "from the start azimuth in the spin direction; all rings of a column fire together.",
    "motion_distortion": "Each column is traced from the sensor pose at its firing time (linear position, "
    "slerp rotation); points stay in the sensor frame of their firing time, as a real driver gives them.",
    "tracing": "Rays are traced against the scene; foliage hits let the search continue a step behind "
    "the hit, giving several hits per sub-ray.",
    "radiometry": "Backscatter from the material reflectance (Minnaert incidence term and specular lobe), "
    "signal from the range equation with the near-field overlap, echo stretch of grazing footprints.",
    "detection": "An echo is a return when its noisy signal reaches the threshold that gives the spec "
    "detection probability at the 10 % reflectance point.",
    "range_noise": "Gaussian range noise from sigma_0 at high signal to sigma_low at low signal-to-noise.",
    "return_mode": "The return mode picks the points of a beam among its echoes (strongest, first, last "
    "or a dual or triple mode); flags mark first, strongest, last and second strongest.",
    "intensity": "Reported reflectivity rho_rep, the saturated 16-bit signal and the intensity byte.",
    "weather": "Rain and fog attenuate the beam (extinction from rain rate and visibility) and rain adds "
    "near-range clutter returns of class precipitation.",
    "self_returns": "The vehicle's body in its own scans from the measured per-cell table: a return from "
    "the body, a blocked beam, or the scene.",
    "noise": "Random numbers come from the PCG32 stream of the seed and from SplitMix64 hashes of the "
    "seed and the cell, so a scan repeats with its seed.",
}


def _number(value: Any) -> float | None:
    """A float for JSON, ``None`` when not finite."""
    value = float(value)
    return value if math.isfinite(value) else None


def _counts_by_name(ids: np.ndarray, names: Sequence[str], what: str) -> dict[str, int]:
    ids = np.asarray(ids, dtype=np.int64)
    if ids.size and (ids.min() < 0 or ids.max() >= len(names)):
        bad = ids[(ids < 0) | (ids >= len(names))][0]
        raise OutputError(f"{what} number {bad} is not in the {what} table (0 to {len(names) - 1})")
    counts = np.bincount(ids, minlength=len(names))
    return {name: int(count) for name, count in zip(names, counts)}


def pose_dict(T_world_sensor: np.ndarray) -> dict[str, list[float]]:
    """``position_m`` and ``quaternion_xyzw`` of a (4, 4) pose."""
    T = np.asarray(T_world_sensor, dtype=np.float64)
    if T.shape != (4, 4) or not np.all(np.isfinite(T)):
        raise OutputError(f"sensor pose must be a finite (4, 4) matrix, got shape {T.shape}")
    quaternion = Rotation.from_matrix(T[:3, :3]).as_quat()
    if quaternion[3] < 0:
        quaternion = -quaternion  # one of the two signs, w >= 0
    return {"position_m": [float(v) for v in T[:3, 3]], "quaternion_xyzw": [float(v) for v in quaternion]}


def scan_row(
    scan: Scan,
    delay_s: float,
    period_s: float | None = None,
    *,
    T_world_sensor_stamp: np.ndarray | None = None,
    files: Sequence[str] = (),
    pose_coverage: str = "covered",
) -> dict[str, Any]:
    """The ``lidar.jsonl`` row of a scan.

    Parameters
    ----------
    scan : Scan
    delay_s : float
        ``lidar.delay_s``: ``available_time_s = sample_time_s + delay_s``.
    period_s : float, optional
        Scan period ``T = 1 / hz``, s (``None`` in the row when not given).
    T_world_sensor_stamp : (4, 4) float64, optional
        Sensor pose at the stamp. Default: the pose of the column that fires last (closest to
        the stamp; the pose of every column without motion distortion).
    files : sequence of str
        Names of the scan's files (e.g. ``lidar/scan_<time>.ply``), written as given.
    pose_coverage : str
        How the poses covered the sweep (``sensor.poses.sweep_coverage``): ``covered``, or
        ``before_first_pose`` (the scan held the first pose) or ``gap`` (interpolated across a
        pose gap longer than ``MAX_POSE_GAP_S``): a flagged scan.

    Returns
    -------
    dict with sample_time_s, available_time_s, stamp_ns, scan_index, frame_id, points (returns),
    beams, beams_with_return, class_counts and material_counts (every name, returns of each),
    sensor_pose (position_m, quaternion_xyzw of the sensor in the world), sweep (period_s,
    first_firing_time_s, last_firing_time_s, absolute s; pose_coverage), weather (rain_mm_per_h, visibility_m;
    None when unknown or not finite) and files.
    """
    valid = np.asarray(scan.returns.valid, dtype=bool)
    time_offset_s = scan.cell_time_offset_s
    if T_world_sensor_stamp is None:
        T_world_sensor_stamp = scan.T_world_sensor_of(np.array([int(np.argmax(time_offset_s))]))[0]
    sample_time_s = scan.stamp_ns * 1e-9
    return {
        "scan_index": int(scan.index),
        "stamp_ns": int(scan.stamp_ns),
        "sample_time_s": sample_time_s,
        "available_time_s": sample_time_s + float(delay_s),
        "frame_id": scan.frame_id,
        "points": int(valid.sum()),
        "beams": int(valid.shape[0]),
        "beams_with_return": int(valid.any(axis=1).sum()),
        "class_counts": _counts_by_name(scan.returns.class_id[valid], CLASS_NAMES, "class"),
        "material_counts": _counts_by_name(scan.returns.material_id[valid], MATERIAL_NAMES, "material"),
        "sensor_pose": pose_dict(T_world_sensor_stamp),
        "sweep": {
            "period_s": None if period_s is None else _number(period_s),
            "first_firing_time_s": sample_time_s + float(time_offset_s.min()),
            "last_firing_time_s": sample_time_s + float(time_offset_s.max()),
            "pose_coverage": str(pose_coverage),
        },
        "weather": {
            key: (None if scan.weather.get(key) is None else _number(scan.weather[key]))
            for key in ("rain_mm_per_h", "visibility_m")
        },
        "files": [str(name) for name in files],
    }


def episode_dict(
    counters: Mapping[str, int] | None = None,
    *,
    material_table: Any = None,
    model_parts: Mapping[str, str] = MODEL_PARTS,
    extra: Mapping[str, Any] | None = None,
    instances: InstanceTable | None = None,
    **more_counters: int,
) -> dict[str, Any]:
    """The ``episode.json`` content of a run.

    Parameters
    ----------
    counters : mapping of str to int, optional
        Run counters, e.g. ``lidar_busy`` (scans dropped because two were in work), ``scans``.
    **more_counters : int
        More counters as keywords: ``episode_dict(scans=120, lidar_busy=3)``.
    material_table : config.MaterialTable, optional
        The effective material parameters (``names`` and (M,) arrays); without it the table lists
        numbers and names only.
    model_parts : mapping of str to str
        Part name -> short text (default ``MODEL_PARTS``).
    extra : mapping, optional
        More JSON data to include under its own keys (e.g. the effective config).
    instances : InstanceTable, optional
        The run's instance labels (``scene.instances.instance_table``), under ``instances``: column
        names and one ``[instance, name, class, type]`` row per object.
    """
    counters = {**(counters or {}), **more_counters}
    bad = {
        key: value
        for key, value in counters.items()
        if isinstance(value, bool) or not isinstance(value, (int, np.integer))
    }
    if bad:
        raise OutputError(f"episode counters must be integers, got {bad}")
    classes = [
        {
            "number": number,
            "name": name,
            "foliage": bool(IS_FOLIAGE_CLASS[number]),
            "material": MATERIAL_NAMES[MATERIAL_OF_CLASS[number]] if MATERIAL_OF_CLASS[number] >= 0 else None,
        }
        for number, name in enumerate(CLASS_NAMES)
    ]
    if material_table is None:
        materials = [{"number": number, "name": name} for number, name in enumerate(MATERIAL_NAMES)]
    else:
        if tuple(material_table.names) != MATERIAL_NAMES:
            raise OutputError(f"material table names {tuple(material_table.names)} differ from {MATERIAL_NAMES}")
        columns = {
            "reflectivity": material_table.reflectivity,
            "specular": material_table.specular,
            "specular_width_deg": np.degrees(material_table.specular_width_rad),
            "transmission": material_table.transmission,
            "wet_darkening": material_table.wet_darkening,
            "incidence_exponent": material_table.incidence_exponent,
            "micro_slope_deg": np.degrees(material_table.micro_slope_rad),
            "reflectivity_sd": material_table.reflectivity_sd,
            "roughness_m": material_table.roughness_m,
        }
        materials = [
            {"number": number, "name": name} | {key: _number(values[number]) for key, values in columns.items()}
            for number, name in enumerate(MATERIAL_NAMES)
        ]
    episode = {
        "classes": classes,
        "materials": materials,
        "model": dict(model_parts),
        "counters": {key: int(value) for key, value in counters.items()},
    }
    if instances is not None:
        episode["instances"] = instances.rows()
    if extra:
        clash = set(extra) & set(episode)
        if clash:
            raise OutputError(f"extra episode keys {sorted(clash)} clash with the episode's own keys")
        episode |= dict(extra)
    return episode
