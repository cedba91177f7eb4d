"""Outputs of a scan: each a pure function of a ``Scan`` (or of a few arrays).

Modules: ``point_types`` (the dtypes every output derives from), ``layouts`` (the clouds in them),
``pointcloud2`` (ROS message),
``pcd``, ``ply``, ``preview`` (PNG top view), ``records`` (lidar.jsonl rows, episode.json),
``tum`` (trajectories), ``bag`` (rosbag2 / MCAP), ``json_files`` (strict JSON text, JSON files and
lines) and ``files`` (whole-or-nothing writes, no overwrite unless asked).
Import the module you need; this package imports nothing heavy on its own.
"""
