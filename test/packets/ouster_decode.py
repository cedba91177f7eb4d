"""Run by ouster-sdk's own Python (its venv, not ours): the pcap and sensor metadata decoded by
ouster-sdk into one .npz: per frame the range (mm, from the lidar origin), reflectivity, signal,
each column's timestamp, measurement id and status, the frame id, and the xyz of every pixel in
the lidar frame (ouster-sdk's ``XYZLut`` with the metadata's lidar-to-sensor transform undone:
the frame ouster-ros's ``os_lidar`` clouds are in).

Usage: python ouster_decode.py PCAP METADATA OUT.npz
"""

import sys

import numpy as np
from ouster.sdk import core
from ouster.sdk.pcap import PcapFrameSetSource

pcap, metadata, out = sys.argv[1:4]
with open(metadata) as f:
    info = core.SensorInfo(f.read())
source = PcapFrameSetSource(pcap, sensor_info=[info])
lidar_to_sensor = np.asarray(info.lidar_to_sensor_transform, dtype=np.float64).copy()
lidar_to_sensor[:3, 3] *= 1e-3  # mm -> m, as XYZLut applies it
sensor_to_lidar = np.linalg.inv(lidar_to_sensor)
lut = core.XYZLut(info)
parts = {
    k: [] for k in ("range_mm", "reflectivity", "signal", "timestamp_ns", "measurement_id", "status", "frame_id", "xyz")
}
for frames in source:
    for frame in frames:
        if frame is None:
            continue
        r = frame.field(core.ChanField.RANGE)
        xyz = lut(r)
        xyz = xyz @ sensor_to_lidar[:3, :3].T + sensor_to_lidar[:3, 3]
        parts["range_mm"].append(r.astype(np.uint32))
        parts["reflectivity"].append(frame.field(core.ChanField.REFLECTIVITY).astype(np.uint16))
        parts["signal"].append(frame.field(core.ChanField.SIGNAL).astype(np.uint16))
        parts["timestamp_ns"].append(np.asarray(frame.timestamp, dtype=np.uint64))
        parts["measurement_id"].append(np.asarray(frame.measurement_id, dtype=np.int64))
        parts["status"].append(np.asarray(frame.status, dtype=np.uint64))
        parts["frame_id"].append(np.int64(frame.frame_id))
        parts["xyz"].append(xyz)
np.savez(out, **{k: np.stack(v) for k, v in parts.items()})
