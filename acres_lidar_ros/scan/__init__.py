"""One LiDAR scan and what traces it: ``scan_types`` (``Scan``, every output is made from it, and
``ScanOptions``), ``scanner`` (``Scanner``, one sensor over one scene), ``scan_plan`` (the frozen plan
of one scan) and ``sweep`` (``Sweep``, a scan traced in tick blocks as poses arrive).

Cells are organised as the real driver lays them out: cell = column x rings + ring (a column is
a tick of the firing pattern, a ring an emitter).
"""
