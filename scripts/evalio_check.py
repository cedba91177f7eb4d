"""LiDAR-inertial odometry through evalio (PyPI) on an ``acres-lidar record --point-type velodyne --imu`` run.

Run in a venv of its own (evalio ships compiled pipelines; it is not a dependency of the package;
``.ci/run`` makes ``.venv-evalio``):

    python3 -m venv .venv-evalio && .venv-evalio/bin/pip install evalio scipy rosbags
    acres-lidar record --duration 63 --still-start 3 --point-type velodyne --imu --files none --out runs/lio63
    .venv-evalio/bin/python scripts/evalio_check.py runs/lio63 dlio liosam kiss

The drive starts still (``--still-start 3``): DLIO averages its first 3 s of IMU samples as the
IMU at rest (``imu_calib_time``) and starts its trajectory where the vehicle is then (docs/imu.md).

Each cloud of the bag's ``/lidar/points`` becomes evalio's row-major grid (row = the ``ring``
field, column = the ``time`` field's firing tick; an empty cell is a zero point at its column's
time, so the grid's last point ends the sweep as LIO-SAM's ``timeScanEnd`` expects) and goes
through evalio's own PointCloud2 reader (``pc2_to_evalio``). The IMU is ``/imu/data``. The mounts
are read from the bag's ``/tf_static`` (base_footprint -> the LiDAR's and the IMU's frames), the
IMU noise from the IMU file ``--imu`` (default ``config/imu.json``). Every pipeline gets evalio's
default parameters (``default_params``) with the ``--param`` ones over them, and ``--min-range-m``
(default 2 m: the Polaris body's returns are all within 1.6 m, docs/self_returns.md).

Prints, per pipeline, the path length, the absolute trajectory error after a rigid alignment and
the final error with the start aligned (at the first pose the pipeline moved from its initial
one: DLIO repeats its initial pose while it calibrates the IMU), against ``trajectory_gt.tum`` (the IMU's origin on the
ground-truth base_footprint). With ``--max-final-error-pct X`` it exits 1 when a pipeline's final
error is above X % of the path (the divergence check of ``test/apps/test_evalio_lio.py``) and 2
when a pipeline gave no poses.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import evalio.pipelines as pl
import numpy as np
from evalio._cpp.helpers import DataType, Field, PointCloudMetadata, pc2_to_evalio
from evalio.types import SE3, SO3, ImuMeasurement, ImuParams, LidarParams, Stamp
from rosbags.highlevel import AnyReader
from scipy.spatial.transform import Rotation

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = {"liosam": pl.LioSAM, "dlio": pl.DLIO, "kiss": pl.KissICP}
VELODYNE = np.dtype(
    {
        "names": ["x", "y", "z", "intensity", "ring", "time"],
        "formats": ["<f4", "<f4", "<f4", "<f4", "<u2", "<f4"],
        "offsets": [0, 4, 8, 12, 16, 18],
        "itemsize": 22,
    }
)
GRID = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("intensity", "<f4"), ("t", "<f4"), ("row", "<u2")])
GRID_FIELDS = [
    Field(name=name, datatype=kind, offset=GRID.fields[name][1])
    for name, kind in (
        ("x", DataType.FLOAT32),
        ("y", DataType.FLOAT32),
        ("z", DataType.FLOAT32),
        ("intensity", DataType.FLOAT32),
        ("t", DataType.FLOAT32),
        ("row", DataType.UINT16),
    )
]


def _matrix(transform) -> np.ndarray:
    q, t = transform.rotation, transform.translation
    T = np.eye(4)
    T[:3, :3] = Rotation.from_quat([q.x, q.y, q.z, q.w]).as_matrix()
    T[:3, 3] = [t.x, t.y, t.z]
    return T


class Run:
    """The bag's clouds (as evalio grids), IMU samples and mounts, and the ground truth."""

    def __init__(self, run: Path, max_scans: int, rings: int, columns: int, period_s: float) -> None:
        self.rings, self.columns, self.period_s = rings, columns, period_s
        self.dropped = 0
        self.items: list = []
        mounts: dict[str, np.ndarray] = {}
        scans = 0
        with AnyReader([run / "bag"]) as reader:
            for c, _t, raw in reader.messages(connections=[c for c in reader.connections if c.topic == "/tf_static"]):
                for tr in reader.deserialize(raw, c.msgtype).transforms:
                    mounts[tr.child_frame_id] = _matrix(tr.transform)
            wanted = [c for c in reader.connections if c.topic in ("/lidar/points", "/imu/data")]
            for c, _t, raw in reader.messages(connections=wanted):
                if scans >= max_scans:
                    break
                m = reader.deserialize(raw, c.msgtype)
                stamp = Stamp(sec=m.header.stamp.sec, nsec=m.header.stamp.nanosec)
                if c.topic == "/imu/data":
                    w, f = m.angular_velocity, m.linear_acceleration
                    self.items.append(ImuMeasurement(stamp, np.array([w.x, w.y, w.z]), np.array([f.x, f.y, f.z])))
                    self.imu_frame = m.header.frame_id
                else:
                    self.items.append(self._grid(stamp, np.frombuffer(bytes(m.data), VELODYNE)))
                    self.lidar_frame = m.header.frame_id
                    scans += 1
        self.scans = scans
        self.T_base_lidar = mounts[self.lidar_frame]
        self.T_base_imu = mounts[self.imu_frame]
        self.truth = np.loadtxt(run / "trajectory_gt.tum")

    def _grid(self, stamp: Stamp, points: np.ndarray):
        grid = np.zeros(self.rings * self.columns, GRID)
        column_time_s = np.arange(self.columns) * (self.period_s / self.columns)
        grid["t"] = np.tile(column_time_s, self.rings)
        grid["row"] = np.repeat(np.arange(self.rings), self.columns)
        col = np.clip(np.rint(points["time"] / self.period_s * self.columns).astype(int), 0, self.columns - 1)
        cell = points["ring"].astype(int) * self.columns + col
        self.dropped += len(cell) - len(np.unique(cell))
        for name in ("x", "y", "z", "intensity"):
            grid[name][cell] = points[name]
        grid["t"][cell] = points["time"]
        meta = PointCloudMetadata(
            stamp=stamp,
            width=len(grid),
            height=1,
            point_step=GRID.itemsize,
            row_step=GRID.itemsize * len(grid),
            is_bigendian=0,
            is_dense=1,
        )
        return pc2_to_evalio(meta, GRID_FIELDS, grid.tobytes())


def run_pipeline(run: Run, name: str, imu: dict, params: dict, min_range_m: float) -> dict:
    T_imu_lidar = np.linalg.inv(run.T_base_imu) @ run.T_base_lidar
    q = Rotation.from_matrix(T_imu_lidar[:3, :3]).as_quat()
    pipe = PIPELINES[name]()
    pipe.set_imu_params(
        ImuParams(
            gyro=imu["gyroscope_noise_density"],
            accel=imu["accelerometer_noise_density"],
            gyro_bias=imu["gyroscope_random_walk"],
            accel_bias=imu["accelerometer_random_walk"],
            gravity=np.array([0.0, 0.0, -imu["gravity_mps2"]]),
            rate=imu["rate_hz"],
        )
    )
    pipe.set_lidar_params(
        LidarParams(
            num_rows=run.rings, num_columns=run.columns, min_range=min_range_m, max_range=150.0, rate=1 / run.period_s
        )
    )
    pipe.set_imu_T_lidar(SE3(SO3(qx=q[0], qy=q[1], qz=q[2], qw=q[3]), T_imu_lidar[:3, 3].copy()))
    # Every parameter, its default where not given: set_params({}) leaves the rest unset (LIO-SAM's
    # downsampleRate 0 is its division by zero, SIGFPE, on the first cloud).
    pipe.set_params({**PIPELINES[name].default_params(), **params})
    pipe.initialize()
    started = time.perf_counter()
    estimates = []
    for item in run.items:
        if isinstance(item, ImuMeasurement):
            pipe.add_imu(item)
        else:
            pipe.add_lidar(item)
        for stamp, pose in pipe.saved_estimates():
            estimates.append(
                (stamp.to_sec(), np.array(pose.trans), [pose.rot.qx, pose.rot.qy, pose.rot.qz, pose.rot.qw])
            )
    seconds = time.perf_counter() - started
    return {"name": name, "seconds": seconds, **errors(run, estimates)}


def errors(run: Run, estimates: list) -> dict:
    """Path length, ATE after a rigid (Umeyama) alignment, final error with the start aligned."""
    if len(estimates) < 2:
        return {"poses": len(estimates)}
    gt = run.truth
    R_wb = Rotation.from_quat(gt[:, 4:8]).as_matrix()
    p_imu = gt[:, 1:4] + R_wb @ run.T_base_imu[:3, 3]
    t_est = np.array([e[0] for e in estimates])
    p_est = np.array([e[1] for e in estimates])
    p_gt = np.stack([np.interp(t_est, gt[:, 0], p_imu[:, k]) for k in range(3)], 1)
    mu_e, mu_g = p_est.mean(0), p_gt.mean(0)
    U, _S, Vt = np.linalg.svd((p_gt - mu_g).T @ (p_est - mu_e))
    R = U @ np.diag([1, 1, np.sign(np.linalg.det(U @ Vt))]) @ Vt
    ate = np.linalg.norm((p_est - mu_e) @ R.T + mu_g - p_gt, axis=1)
    path_m = float(np.linalg.norm(np.diff(p_gt, axis=0), axis=1).sum())
    # The start: the first pose the pipeline has moved from its initial one (DLIO repeats its
    # initial pose while it calibrates the IMU; its attitude is gravity-aligned only after).
    q_est = np.array([e[2] for e in estimates])
    moved = np.flatnonzero((p_est != p_est[0]).any(axis=1) | (q_est != q_est[0]).any(axis=1))
    k0 = int(moved[0]) if moved.size else 0
    i0 = int(np.argmin(np.abs(gt[:, 0] - t_est[k0])))
    R_wi0 = R_wb[i0] @ run.T_base_imu[:3, :3]
    R_align = R_wi0 @ Rotation.from_quat(q_est[k0]).as_matrix().T
    start_aligned = (p_est - p_est[k0]) @ R_align.T + p_gt[k0]
    final_m = float(np.linalg.norm(start_aligned[-1] - p_gt[-1]))
    finite = bool(np.isfinite(p_est).all())
    return {
        "poses": len(estimates),
        "start_s": float(t_est[k0] - t_est[0]),
        "path_m": path_m,
        "ate_rmse_m": float(np.sqrt((ate**2).mean())),
        "ate_max_m": float(ate.max()),
        "final_m": final_m,
        "final_pct": 100.0 * final_m / path_m if finite and path_m > 0 else float("inf"),
    }


def _param(text: str) -> tuple[str, bool | int | float | str]:
    key, _, value = text.partition("=")
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            pass
    return key, {"true": True, "false": False}.get(value.lower(), value)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a record run directory (bag/, trajectory_gt.tum)")
    parser.add_argument("pipelines", nargs="+", choices=sorted(PIPELINES))
    parser.add_argument("--scans", type=int, default=10**9, help="at most this many scans")
    parser.add_argument("--imu", type=Path, default=ROOT / "config" / "imu.json", help="the run's IMU file")
    parser.add_argument("--param", action="append", default=[], help="PIPELINE:KEY=VALUE, a pipeline parameter")
    parser.add_argument(
        "--min-range-m", type=float, default=2.0, help="LiDAR min_range: the Polaris body is within 1.6 m"
    )
    parser.add_argument("--max-final-error-pct", type=float, default=None)
    args = parser.parse_args(argv)
    imu = json.loads((ROOT / "config" / "imu.json").read_text())
    imu.update(json.loads(args.imu.read_text()))
    sensors = json.loads((args.run / "config.json").read_text())["sensors"]["lidar"]
    run = Run(args.run, args.scans, sensors["rings"], sensors["columns"], 1.0 / sensors["hz"])
    print(f"{args.run}: {run.scans} scans, {run.dropped} points sharing a grid cell left out")
    worst = 0
    for name in args.pipelines:
        params = dict(_param(p.split(":", 1)[1]) for p in args.param if p.split(":", 1)[0] == name)
        r = run_pipeline(run, name, imu, params, args.min_range_m)
        if "path_m" not in r:
            print(f"{name}: {r['poses']} poses: no trajectory")
            worst = max(worst, 2)
            continue
        print(
            f"{name}: {r['poses']} poses in {r['seconds']:.0f} s; path {r['path_m']:.1f} m; "
            f"ATE rmse {r['ate_rmse_m']:.3f} m, max {r['ate_max_m']:.3f} m; "
            f"final error (aligned at {r['start_s']:.1f} s) {r['final_m']:.3f} m = {r['final_pct']:.2f} % of the path"
        )
        if args.max_final_error_pct is not None and not r["final_pct"] <= args.max_final_error_pct:
            print(f"{name}: final error {r['final_pct']:.2f} % is above {args.max_final_error_pct} %: diverged")
            worst = max(worst, 1)
    return worst


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
