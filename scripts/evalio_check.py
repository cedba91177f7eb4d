"""LiDAR-inertial odometry through evalio (PyPI) on an ``acres-lidar record --point-type velodyne --imu`` run.

Run in a venv of its own (evalio ships compiled pipelines; it is not a dependency of the package):

    python3 -m venv /tmp/evalio-venv && /tmp/evalio-venv/bin/pip install evalio scipy rosbags
    acres-lidar record --duration 60 --point-type velodyne --imu --files none --out runs/lio60
    /tmp/evalio-venv/bin/python scripts/evalio_check.py runs/lio60 dlio|liosam|kiss [MAX_SCANS]

The clouds are read from the bag with rosbags and handed over as evalio's row-major grid (row =
ring, column from the point's time in the sweep): evalio's own rosbag reader looks for a row
field named ``row`` or ``channel``, not velodyne's ``ring``. The mounts are the shipped Polaris
LiDAR's and IMU's (docs/imu.md). Prints the path length, the absolute trajectory error after a
rigid alignment and the final error with the start aligned, against ``trajectory_gt.tum``
(the IMU's origin on the ground-truth base_footprint).
"""

import sys
import time
from pathlib import Path

import evalio.pipelines as pl
import numpy as np
from evalio.types import SE3, SO3, Duration, ImuMeasurement, ImuParams, LidarMeasurement, LidarParams, Point, Stamp
from rosbags.highlevel import AnyReader
from scipy.spatial.transform import Rotation

DT = np.dtype(
    {
        "names": ["x", "y", "z", "intensity", "ring", "time"],
        "formats": ["<f4", "<f4", "<f4", "<f4", "<u2", "<f4"],
        "offsets": [0, 4, 8, 12, 16, 18],
        "itemsize": 22,
    }
)


def measurements(bag, max_scans):
    n = 0
    with AnyReader([Path(bag)]) as r:
        conns = [c for c in r.connections if c.topic in ("/lidar/points", "/imu/data")]
        for c, _t, raw in r.messages(connections=conns):
            m = r.deserialize(raw, c.msgtype)
            stamp = Stamp(sec=m.header.stamp.sec, nsec=m.header.stamp.nanosec)
            if c.topic == "/imu/data":
                yield ImuMeasurement(
                    stamp,
                    np.array([m.angular_velocity.x, m.angular_velocity.y, m.angular_velocity.z]),
                    np.array([m.linear_acceleration.x, m.linear_acceleration.y, m.linear_acceleration.z]),
                )
                continue
            a = np.frombuffer(bytes(m.data), DT)
            col = np.clip((a["time"] / 0.1 * 1800).astype(int), 0, 1799)
            grid = [Point() for _ in range(32 * 1800)]
            for x, y, z, i, ring, tt, cc in zip(
                a["x"].tolist(),
                a["y"].tolist(),
                a["z"].tolist(),
                a["intensity"].tolist(),
                a["ring"].tolist(),
                a["time"].tolist(),
                col.tolist(),
            ):
                rng = int(1000 * (x * x + y * y + z * z) ** 0.5)
                grid[ring * 1800 + cc] = Point(
                    x=x, y=y, z=z, intensity=i, t=Duration.from_sec(tt), range=rng, row=ring, col=cc
                )
            for k in range(32 * 1800):
                p = grid[k]
                if p.range == 0:
                    grid[k] = Point(row=k // 1800, col=k % 1800)
            yield LidarMeasurement(stamp, grid)
            n += 1
            if n >= max_scans:
                return


run = Path(sys.argv[1])
name = sys.argv[2]
max_scans = int(sys.argv[3]) if len(sys.argv) > 3 else 10**9
# Polaris mount and the shipped IMU (docs/imu.md): T_imu_lidar
R_bl = Rotation.from_euler("xyz", np.deg2rad([-1.518, 5.317, 0.0])).as_matrix()
t_bl = np.array([2.5, 0.0, 2.039])
t_bi = np.array([2.5, 0.0, 0.5])
R_il = R_bl
t_il = t_bl - t_bi
q = Rotation.from_matrix(R_il).as_quat()
imu_T_lidar = SE3(SO3(qx=q[0], qy=q[1], qz=q[2], qw=q[3]), t_il)
lidar_params = LidarParams(num_rows=32, num_columns=1800, min_range=0.5, max_range=160.0, rate=10.0)
imu_params = ImuParams(
    gyro=1.5636343949698187e-03,
    accel=3.9939570888238808e-03,
    gyro_bias=3.5640318696367613e-05,
    accel_bias=6.4356659353532566e-05,
    gravity=np.array([0, 0, -9.80665]),
    rate=200.0,
)
pipe = {"liosam": pl.LioSAM, "dlio": pl.DLIO, "kiss": pl.KissICP}[name]()
pipe.set_imu_params(imu_params)
pipe.set_lidar_params(lidar_params)
pipe.set_imu_T_lidar(imu_T_lidar)
pipe.set_params({})
pipe.initialize()
it = measurements(run / "bag", max_scans)
est = []
n = 0
t0 = time.time()
for data in it:
    if isinstance(data, ImuMeasurement):
        pipe.add_imu(data)
    else:
        pipe.add_lidar(data)
        n += 1
    for stamp, pose in pipe.saved_estimates():
        est.append(
            (stamp.to_sec(), np.array(pose.trans), np.array([pose.rot.qx, pose.rot.qy, pose.rot.qz, pose.rot.qw]))
        )
    if n >= max_scans:
        break
it.close()
gt = np.loadtxt(run / "trajectory_gt.tum")
# ground truth of the IMU: T_wb T_bi
Rwb = Rotation.from_quat(gt[:, 4:8]).as_matrix()
p_imu = gt[:, 1:4] + Rwb @ t_bi
t_est = np.array([e[0] for e in est])
p_est = np.array([e[1] for e in est])
p_gt = np.stack([np.interp(t_est, gt[:, 0], p_imu[:, k]) for k in range(3)], 1)
# align the estimate's frame (its start) to the truth: rigid Umeyama over all positions
mu_e, mu_g = p_est.mean(0), p_gt.mean(0)
U, S, Vt = np.linalg.svd((p_gt - mu_g).T @ (p_est - mu_e))
D = np.diag([1, 1, np.sign(np.linalg.det(U @ Vt))])
R = U @ D @ Vt
aligned = (p_est - mu_e) @ R.T + mu_g
err = np.linalg.norm(aligned - p_gt, axis=1)
path = np.linalg.norm(np.diff(p_gt, axis=0), axis=1).sum()
# and aligned at the start only (drift)
R0e = Rotation.from_quat(est[0][2]).as_matrix()
Rg0 = Rotation.from_quat(
    np.array([np.interp(t_est[0], gt[:, 0], gt[:, 4 + k]) for k in range(4)])
).as_matrix() @ np.eye(3)
start_aligned = (p_est - p_est[0]) @ (Rg0 @ R0e.T).T + p_gt[0]
final_drift = np.linalg.norm(start_aligned[-1] - p_gt[-1])
print(
    f"{name}: {n} scans, {len(est)} poses, {time.time() - t0:.0f} s; path {path:.1f} m; ATE rmse {np.sqrt((err**2).mean()):.3f} m, max {err.max():.3f} m; final error (start-aligned) {final_drift:.3f} m = {100 * final_drift / path:.2f} % of path"
)
