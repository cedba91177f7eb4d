"""One LiDAR scan and what traces it: ``Scan`` (every output is made from it), ``ScanOptions``,
``Scanner`` (one sensor over one scene) and ``Sweep`` (a scan traced in tick blocks as poses arrive).

Cells are organised as the real driver lays them out: cell = column x rings + ring (a column is
a tick of the firing pattern, a ring an emitter).
"""

from acres_lidar_ros.scan.scan_types import Scan, ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scan.sweep import Sweep

__all__ = ["Scan", "ScanOptions", "Scanner", "Sweep"]
