"""Recorded scans in: bags (rosbag2 sqlite3 and MCAP, ROS 1), their clouds, poses and mount (docs/calibration.md)."""
