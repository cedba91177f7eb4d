"""Two sets of scans at the same stamps compared beam by beam (the spec's "Comparison with the Game";
docs/calibration.md, "Comparing two runs").

Scans pair by stamp. The body is not in the beam comparison: a cell where either run ever has a
return nearer than ``lidar_stats.BODY_RANGE_M`` is left out of the return shares, range
differences and agreement (it is compared as the body mask instead).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from acres_lidar_ros.config.material_table import CLASS_ID, CLASS_NAMES
from acres_lidar_ros.errors import RecordingError
from acres_lidar_ros.recordings.cloud_cells import BeamTable
from acres_lidar_ros.recordings.lidar_stats import (
    LOWER_RINGS_MAX_ELEVATION_DEG,
    body_stats,
    finite_or_none,
    fit_beam_table,
    lower_rings,
    mask_iou,
    points_per_scan,
    return_rate_per_ring,
    stack_ranges,
)
from acres_lidar_ros.recordings.recorded_scans import RecordedScan, Recording

AGREE_RELATIVE = 0.15
"""Two ranges agree within 15 % (of A's), or when neither scan has a return."""
WITHIN_M = 0.1
CLASS_GROUPS = {
    "ground": ("ground",),
    "building": ("building", "silo"),
    "crop": ("corn", "soybean", "potato", "ground_cover"),
    "tree": ("tree", "tree_trunk", "shrub"),
    "vehicle": ("vehicle",),
    "other": ("other", "mud_clod", "precipitation"),
}
_GROUP_OF_CLASS = np.full(len(CLASS_NAMES), -1, np.int64)
for _g, (_name, _members) in enumerate(CLASS_GROUPS.items()):
    for _member in _members:
        _GROUP_OF_CLASS[CLASS_ID[_member]] = _g


def pair_scans(a: Recording, b: Recording) -> list[tuple[RecordedScan, RecordedScan]]:
    """The scans of ``a`` and ``b`` with the same stamp, in ``a``'s order."""
    by_stamp = {s.stamp_ns: s for s in b.scans}
    pairs = [(s, by_stamp[s.stamp_ns]) for s in a.scans if s.stamp_ns in by_stamp]
    if not pairs:
        stamps_a = [s.stamp_ns for s in a.scans[:3]]
        stamps_b = [s.stamp_ns for s in b.scans[:3]]
        raise RecordingError(
            f"the two runs share no scan stamp (A: {len(a.scans)} scans from {stamps_a} ns, B: {len(b.scans)} from "
            f"{stamps_b} ns); compare needs scans at the same poses and stamps"
        )
    return pairs


def _stats(values: np.ndarray) -> dict:
    if values.size == 0:
        return {"beams": 0, "median_m": None, "median_abs_m": None, "within_0_1_m": None}
    return {
        "beams": int(values.size),
        "median_m": float(np.median(values)),
        "median_abs_m": float(np.median(np.abs(values))),
        "within_0_1_m": float(np.mean(np.abs(values) <= WITHIN_M)),
    }


def _class_stack(scans: Sequence[RecordedScan]) -> np.ndarray | None:
    labels = [s.cells.class_id for s in scans]
    return None if any(c is None for c in labels) else np.stack([c for c in labels if c is not None])


def _classes(scans_a: Sequence[RecordedScan], scans_b: Sequence[RecordedScan]) -> np.ndarray | None:
    """(scans, cells) class group of each beam: A's class where A returned, else B's; None without labels."""
    ca, cb = _class_stack(scans_a), _class_stack(scans_b)
    if ca is None and cb is None:
        return None
    if ca is None or cb is None:
        merged = ca if cb is None else cb
    else:
        merged = np.where(ca >= 0, ca, cb)
    assert merged is not None
    return np.where(merged >= 0, _GROUP_OF_CLASS[np.clip(merged, 0, len(CLASS_NAMES) - 1)], -1)


def compare_recordings(a: Recording, b: Recording, table: BeamTable) -> dict:
    """The comparison of B against A (B minus A) as plain data (``compare.json``)."""
    pairs = pair_scans(a, b)
    scans_a = [p[0] for p in pairs]
    scans_b = [p[1] for p in pairs]
    ra, rb = stack_ranges(scans_a, table), stack_ranges(scans_b, table)
    body_a, body_b = body_stats(scans_a, table), body_stats(scans_b, table)
    body_cells = (body_a.p_self > 0) | (body_b.p_self > 0)
    lower = np.tile(lower_rings(table.elevations_rad), table.columns)
    keep = ~body_cells
    has_a, has_b = np.isfinite(ra), np.isfinite(rb)
    groups = {"lower": keep & lower, "upper": keep & ~lower}
    limit = f"{LOWER_RINGS_MAX_ELEVATION_DEG:g} deg"
    shares = [
        {
            "rings": f"at or below {limit}" if name == "lower" else f"above {limit}",
            "beams": int(cells.sum()) * len(pairs),
            "a": float(has_a[:, cells].mean()) if cells.any() else None,
            "b": float(has_b[:, cells].mean()) if cells.any() else None,
        }
        for name, cells in groups.items()
    ]
    both = has_a & has_b
    diff = rb - ra
    classes = _classes(scans_a, scans_b)
    rows = []
    names = list(CLASS_GROUPS) if classes is not None else ["all"]
    for g, name in enumerate(names):
        for ring_group, cells in groups.items():
            sel = both & cells[None, :]
            if classes is not None:
                sel &= classes == g
            if sel.any():
                rows.append({"class": name, "rings": ring_group, **_stats(diff[sel])})
    none_both = ~has_a & ~has_b
    with np.errstate(invalid="ignore"):
        close = both & (np.abs(diff) <= AGREE_RELATIVE * ra)
    agree = (none_both | close)[:, keep]
    fit_a, fit_b = fit_beam_table(scans_a, table), fit_beam_table(scans_b, table)
    d_el = np.rad2deg(fit_b.elevation_rad - fit_a.elevation_rad)
    d_az = np.rad2deg(fit_b.azimuth_offset_rad - fit_a.azimuth_offset_rad)
    rate_a, rate_b = return_rate_per_ring(scans_a, table), return_rate_per_ring(scans_b, table)
    pts_a, pts_b = points_per_scan(scans_a), points_per_scan(scans_b)
    return {
        "a": a.summary(),
        "b": b.summary(),
        "scans": len(pairs),
        "unmatched_a": len(a.scans) - len(pairs),
        "unmatched_b": len(b.scans) - len(pairs),
        "body_cells_left_out": int(body_cells.sum()),
        "beams_with_return": shares,
        "range_difference_b_minus_a": rows,
        "agree_share": float(agree.mean()) if agree.size else None,
        "beam_table": {
            "elevation_difference_deg": finite_or_none(d_el),
            "azimuth_offset_difference_deg": finite_or_none(d_az),
            "worst_elevation": _worst(d_el),
            "worst_azimuth_offset": _worst(d_az),
            "a": fit_a.as_dict(),
            "b": fit_b.as_dict(),
        },
        "body_mask_iou": mask_iou(body_a.mask, body_b.mask),
        "body_mask_cells": {"a": int(body_a.mask.sum()), "b": int(body_b.mask.sum())},
        "return_rate_per_ring_percent": {
            "a": rate_a.tolist(),
            "b": rate_b.tolist(),
            "mean_abs_difference_points": float(np.mean(np.abs(rate_b - rate_a))),
        },
        "points_per_scan": {
            "a_mean": float(pts_a.mean()),
            "b_mean": float(pts_b.mean()),
            "relative_difference": float((pts_b.mean() - pts_a.mean()) / pts_a.mean()) if pts_a.mean() else None,
        },
    }


def _worst(values: np.ndarray) -> dict:
    finite = np.isfinite(values)
    if not finite.any():
        return {"ring": None, "abs_deg": None}
    ring = int(np.nanargmax(np.where(finite, np.abs(values), -1.0)))
    return {"ring": ring, "abs_deg": float(abs(values[ring]))}


def _f(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def compare_markdown(result: dict, label_a: str = "A", label_b: str = "B") -> str:
    """``compare.md``: the spec's tables of "Comparison with the Game", then the beam table and body."""
    lines = [
        f"# {label_b} against {label_a}",
        "",
        f"{label_a}: {result['a'].get('path', '-')}, {label_b}: {result['b'].get('path', '-')}.",
        f"{result['scans']} scans at the same stamps; the body ({result['body_cells_left_out']} cells) is not in "
        "the beam comparison.",
        "",
        f"| Measure | {label_a} | {label_b} |",
        "| --- | --- | --- |",
    ]
    for row in result["beams_with_return"]:
        lines.append(f"| Beams with a return, rings {row['rings']} | {_f(row['a'], '.3f')} | {_f(row['b'], '.3f')} |")
    lines += [
        "",
        f"| Range difference, {label_b} minus {label_a} | Median | Median absolute | Within 0.1 m |",
        "| --- | --- | --- | --- |",
    ]
    for row in result["range_difference_b_minus_a"]:
        within = "-" if row["within_0_1_m"] is None else f"{100 * row['within_0_1_m']:.1f} %"
        lines.append(
            f"| {row['class']}, {row['rings']} rings ({row['beams']} beams) | {_f(row['median_m'], '.4f')} m | "
            f"{_f(row['median_abs_m'], '.4f')} m | {within} |"
        )
    agree = result["agree_share"]
    lines += [
        "",
        f"{_f(None if agree is None else 100 * agree, '.1f')} % of the beams agree: the two ranges are within "
        f"{100 * AGREE_RELATIVE:.0f} %, or the two scans have no return.",
        "",
        "| Measure | Value |",
        "| --- | --- |",
    ]
    bt = result["beam_table"]
    for key, name in (("worst_elevation", "Beam elevation"), ("worst_azimuth_offset", "Ring azimuth offset")):
        worst = bt[key]
        lines.append(f"| {name}, worst ring | {_f(worst['abs_deg'], '.4f')} deg (ring {worst['ring']}) |")
    rate = result["return_rate_per_ring_percent"]["mean_abs_difference_points"]
    points = result["points_per_scan"]["relative_difference"]
    lines += [
        f"| Body mask IoU | {result['body_mask_iou']:.3f} |",
        f"| Return rate for each ring, mean absolute difference | {rate:.2f} points |",
        f"| Points in a scan, relative difference | {_f(points, '.4f')} |",
        "",
    ]
    return "\n".join(lines)
