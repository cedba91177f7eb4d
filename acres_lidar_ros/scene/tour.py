"""The built-in vehicle tours of the farms: base_footprint trajectories sampled at 100 Hz.

Each farm layout of ``build_default_farm`` has its own tour (``default_tour(scene, layout)``).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.transform import Rotation

from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene.scene_model import Scene

TOUR_RATE_HZ = 100.0
# Layout "v1": loop from the farmyard: driveway, road, grass lane, field lane, grass lanes, yard exit.
TOUR_WAYPOINTS_XY_M = np.array(
    [
        [0.0, -35.0],
        [0.0, -196.0],
        [70.0, -196.0],
        [70.0, 5.0],
        [200.0, 5.0],
        [200.0, 66.0],
        [-160.0, 66.0],
        [-160.0, -35.0],
        [-10.0, -35.0],
    ]
)
TURN_RADIUS_M = 10.0
SPEED_MAX_M_S = 7.5
SPEED_MIN_M_S = 3.0
LATERAL_ACCEL_M_S2 = 1.5
LONGITUDINAL_ACCEL_M_S2 = 1.0
_ARC_STEP_M = 0.05

# Layout "v2" (``scene.farm_v2``): through the yard, the farm track along the open field, the
# headland north along the shelterbelt, west along the tree line, south on the crowned road and
# back into the yard; stops in the yard and at the field edge.
TOUR_V2_WAYPOINTS_XY_M = np.array(
    [
        [-28.0, 0.0],
        [90.0, 0.0],
        [90.0, 70.0],
        [-55.0, 70.0],
        [-55.0, 0.0],
        [-34.0, 0.0],
    ]
)
#: Stops on the way: (x, y) on the path (the nearest path point) and how long the vehicle waits, s.
TOUR_V2_STOPS: tuple[tuple[float, float, float], ...] = ((5.0, 0.0, 3.0), (60.0, 0.0, 2.0), (20.0, 70.0, 3.0))
TOUR_V2_SPEED_MAX_M_S = 7.0
TOUR_LAYOUTS = ("v1", "v2")


def rounded_path(waypoints: np.ndarray, turn_radius_m: float = TURN_RADIUS_M) -> tuple[np.ndarray, np.ndarray]:
    """Polyline with corners rounded by arcs of ``turn_radius_m``; returns points (m, 2) every ~5 cm
    and curvature (m,). ``check_corners`` says whether the arcs fit."""
    pts: list[np.ndarray] = [waypoints[:1]]
    curv: list[np.ndarray] = [np.zeros(1)]
    cur = waypoints[0]
    for a, b, c in zip(waypoints[:-2], waypoints[1:-1], waypoints[2:]):
        u = (b - a) / np.linalg.norm(b - a)
        v = (c - b) / np.linalg.norm(c - b)
        turn = np.arctan2(u[0] * v[1] - u[1] * v[0], u @ v)
        if turn == 0.0:  # a waypoint on a straight line: no arc
            continue
        cut = turn_radius_m * np.tan(abs(turn) / 2)
        p0 = b - cut * u
        n = max(int(np.linalg.norm(p0 - cur) / _ARC_STEP_M), 1)
        line = cur + np.outer(np.arange(1, n + 1) / n, p0 - cur)
        pts.append(line)
        curv.append(np.zeros(n))
        side = np.sign(turn)
        centre = p0 + side * turn_radius_m * np.array([-u[1], u[0]])
        start = np.arctan2(*(p0 - centre)[::-1])
        m = max(int(turn_radius_m * abs(turn) / _ARC_STEP_M), 1)
        ang = start + turn * np.arange(1, m + 1) / m
        arc = centre + turn_radius_m * np.stack([np.cos(ang), np.sin(ang)], 1)
        pts.append(arc)
        curv.append(np.full(m, 1.0 / turn_radius_m))
        cur = arc[-1]
    end = waypoints[-1]
    n = max(int(np.linalg.norm(end - cur) / _ARC_STEP_M), 1)
    pts.append(cur + np.outer(np.arange(1, n + 1) / n, end - cur))
    curv.append(np.zeros(n))
    return np.concatenate(pts), np.concatenate(curv)


def default_tour(scene: Scene, layout: str = "v2") -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The built-in tour of ``build_default_farm(seed, layout)``'s farm, sampled at 100 Hz.

    ``layout`` "v1": the vehicle starts at rest on the farmyard's driveway, drives the loop of
    ``TOUR_WAYPOINTS_XY_M`` at up to 7.5 m/s (3 m/s in turns, accelerating at 1 m/s^2) and
    stops at the end. ``layout`` "v2": the loop of ``TOUR_V2_WAYPOINTS_XY_M`` at up to 7 m/s,
    with the stops of ``TOUR_V2_STOPS``. z is on the ground; yaw follows the path; pitch and
    roll follow the ground slope.

    Returns
    -------
    times_s : (n,) float64, from 0 in steps of 0.01 s
    positions_m : (n, 3) float64, base_footprint in the world
    quaternions_xyzw : (n, 4) float64, base_footprint orientation (x forward, z up)
    """
    stops: tuple[tuple[float, float, float], ...]
    if layout == "v1":
        waypoints, stops, speed_max = TOUR_WAYPOINTS_XY_M, (), SPEED_MAX_M_S
    elif layout == "v2":
        waypoints, stops, speed_max = TOUR_V2_WAYPOINTS_XY_M, TOUR_V2_STOPS, TOUR_V2_SPEED_MAX_M_S
    else:
        raise SceneError(f"layout = {layout!r}: unknown farm layout; allowed: {', '.join(TOUR_LAYOUTS)}")
    return drive_along(scene, waypoints, speed_max, stops)


def check_corners(waypoints_xy_m: np.ndarray, turn_radius_m: float, what: str) -> None:
    """Refuse waypoints whose rounded corners do not fit: two waypoints at one place, a turn of
    179 deg or more, or arcs of ``turn_radius_m`` longer than the legs between them."""
    xy = np.asarray(waypoints_xy_m, float)
    if xy.ndim != 2 or xy.shape[1] != 2 or len(xy) < 2 or not np.isfinite(xy).all():
        raise SceneError(f"{what}: {xy.shape} waypoints: need 2 or more finite [x, y] pairs")
    leg = np.diff(xy, axis=0)
    length = np.hypot(leg[:, 0], leg[:, 1])
    if (length == 0).any():
        k = int(np.argmax(length == 0))
        raise SceneError(f"{what}: waypoints {k + 1} and {k + 2} are both at {xy[k].tolist()}: drop one")
    u = leg / length[:, None]
    turn = np.arctan2(u[:-1, 0] * u[1:, 1] - u[:-1, 1] * u[1:, 0], np.einsum("ij,ij->i", u[:-1], u[1:]))
    if (np.abs(turn) >= np.radians(179.0)).any():
        k = int(np.argmax(np.abs(turn) >= np.radians(179.0)))
        raise SceneError(
            f"{what}: waypoint {k + 2} at {xy[k + 1].tolist()} turns back by {np.degrees(abs(turn[k])):.1f} deg: "
            "a turn must be less than 179 deg; add waypoints around the turn"
        )
    cut = np.concatenate([[0.0], turn_radius_m * np.tan(np.abs(turn) / 2), [0.0]])
    over = cut[:-1] + cut[1:] > length
    if over.any():
        k = int(np.argmax(over))
        raise SceneError(
            f"{what}: the leg from waypoint {k + 1} to {k + 2} is {length[k]:.2f} m: its turns of radius "
            f"{turn_radius_m:g} m need {cut[k] + cut[k + 1]:.2f} m; give a smaller turn radius or waypoints further apart"
        )


def drive_along(
    scene: Scene,
    waypoints_xy_m: np.ndarray,
    speed_max_m_s: float,
    stops: tuple[tuple[float, float, float], ...] = (),
    turn_radius_m: float = TURN_RADIUS_M,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A drive through ``waypoints_xy_m`` (n, 2), draped on the scene's ground as the built-in
    tours are, sampled at 100 Hz.

    The corners are rounded by arcs of ``turn_radius_m``; the vehicle starts and ends at rest,
    drives at up to ``speed_max_m_s``, slower in turns (lateral acceleration at most
    ``LATERAL_ACCEL_M_S2``, but not below ``SPEED_MIN_M_S`` or the top speed), accelerates and
    brakes at ``LONGITUDINAL_ACCEL_M_S2``, and waits at ``stops`` ((x, y, dwell_s), the nearest
    path point). z is on the ground, yaw follows the path, pitch and roll the ground's slope over
    +-1 m. Returns as ``default_tour``.
    """
    waypoints = np.asarray(waypoints_xy_m, float)
    speed_max = float(speed_max_m_s)
    xy, curvature = rounded_path(waypoints, turn_radius_m)
    step = np.linalg.norm(np.diff(xy, axis=0), axis=1)
    s = np.concatenate([[0.0], np.cumsum(step)])
    with np.errstate(divide="ignore"):
        v_curve = np.minimum(np.sqrt(LATERAL_ACCEL_M_S2 / curvature), speed_max)
    v = np.maximum(v_curve, min(SPEED_MIN_M_S, speed_max))
    v[0] = v[-1] = 0.0
    stop_index = [int(np.argmin(np.hypot(*(xy - [x, y]).T))) for x, y, _ in stops]
    v[stop_index] = 0.0
    # Acceleration limits forward and backward: v^2 <= v_prev^2 + 2 a ds.
    ds = np.diff(s)
    for order in (1, -1):
        vv = v[::order].copy()
        dd = ds[::order] if order == 1 else ds[::-1]
        for i in range(1, len(vv)):
            vv[i] = min(vv[i], np.sqrt(vv[i - 1] ** 2 + 2 * LONGITUDINAL_ACCEL_M_S2 * dd[i - 1]))
        v = vv[::order]
    v_mid = np.maximum((v[1:] + v[:-1]) / 2, 1e-3)
    t = np.concatenate([[0.0], np.cumsum(ds / v_mid)])
    # A stop holds the path point for its dwell: the point twice, the dwell apart.
    s_at_t = s
    for k in sorted(range(len(stops)), key=lambda k: -stop_index[k]):
        i, dwell_s = stop_index[k], stops[k][2]
        t = np.concatenate([t[: i + 1], t[i:] + dwell_s])
        s_at_t = np.insert(s_at_t, i, s_at_t[i])
    times_s = np.arange(0.0, t[-1], 1.0 / TOUR_RATE_HZ)
    sx = np.interp(times_s, t, s_at_t)
    x = np.interp(sx, s, xy[:, 0])
    y = np.interp(sx, s, xy[:, 1])
    heading = np.arctan2(
        np.interp(sx + 0.5, s, xy[:, 1]) - np.interp(sx - 0.5, s, xy[:, 1]),
        np.interp(sx + 0.5, s, xy[:, 0]) - np.interp(sx - 0.5, s, xy[:, 0]),
    )
    z = scene.height_at(x, y)
    # Ground normal from height differences over +-1 m.
    e = 1.0
    dzdx = (scene.height_at(x + e, y) - scene.height_at(x - e, y)) / (2 * e)
    dzdy = (scene.height_at(x, y + e) - scene.height_at(x, y - e)) / (2 * e)
    up = np.stack([-dzdx, -dzdy, np.ones_like(x)], 1)
    up /= np.linalg.norm(up, axis=1, keepdims=True)
    fwd = np.stack([np.cos(heading), np.sin(heading), np.zeros_like(x)], 1)
    fwd -= np.einsum("ij,ij->i", fwd, up)[:, None] * up
    fwd /= np.linalg.norm(fwd, axis=1, keepdims=True)
    left = np.cross(up, fwd)
    q = Rotation.from_matrix(np.stack([fwd, left, up], axis=2)).as_quat()
    q *= np.where(q[:, 3:4] < 0, -1.0, 1.0)  # w >= 0, a fixed sign convention
    return times_s, np.stack([x, y, z], 1), q
