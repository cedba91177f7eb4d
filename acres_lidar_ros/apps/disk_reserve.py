"""Stop a recording while its disk still has room to close it.

A recording that fills its disk can no longer write the bag's summary and ``metadata.yaml``; its
scans then need ``acres-lidar bag-repair`` (and free space for it). ``DiskReserve`` lets the
recorder stop first: before each scan it compares the free space with what the scans in flight
and the end of the run need (the largest scan written so far, the MCAP summary, the trajectory,
``episode.json``), and says why when it is short. Another process filling the disk at the same
time can still beat it; then the bag is repaired as after a kill.
"""

from __future__ import annotations

import shutil
from pathlib import Path

MIB = 1 << 20
END_OF_RUN_BYTES = 1 * MIB  # metadata.yaml, episode.json, config and a margin
SUMMARY_BYTES_PER_SCAN = 256  # MCAP chunk index and message index entries per flushed chunk
TUM_BYTES_PER_SAMPLE = 128  # one trajectory_gt.tum line


def scan_bytes(beams: int, point_bytes: int, files: str, returns_per_beam: int = 3) -> int:
    """An upper estimate of one scan's bytes: the bag's cloud, the PCD (16 bytes a beam), the PLY
    (31 bytes a return), and 1 MiB for the preview, the odometry and the row."""
    per_beam = point_bytes + (16 if files in ("pcd", "both") else 0)
    per_beam += 31 * returns_per_beam if files in ("ply", "both") else 0
    return beams * per_beam + MIB


class DiskReserve:
    """Free-space check of a run directory ``path``.

    ``first_scan_bytes`` is the estimate of a scan's bytes until one is written (``scan_bytes``);
    ``note_scan(bytes)`` records what one scan wrote (bag, files, row); ``shortage(...)`` answers
    None while there is room for ``in_flight`` more scans and the end of the run, else a message
    naming the free and the needed MiB.
    """

    def __init__(self, path: Path, first_scan_bytes: int) -> None:
        self.path = Path(path)
        self.first_scan_bytes = int(first_scan_bytes)
        self.largest_scan_bytes = 0

    def note_scan(self, nbytes: int) -> None:
        self.largest_scan_bytes = max(self.largest_scan_bytes, int(nbytes))

    def needed_bytes(self, in_flight: int, scans: int, samples: int) -> int:
        per_scan = self.largest_scan_bytes or self.first_scan_bytes
        end = END_OF_RUN_BYTES + SUMMARY_BYTES_PER_SCAN * (scans + in_flight) + TUM_BYTES_PER_SAMPLE * samples
        return in_flight * per_scan + end

    def shortage(self, in_flight: int, scans: int, samples: int) -> str | None:
        """None, or why the run must stop now to close its files whole."""
        free = shutil.disk_usage(self.path).free
        needed = self.needed_bytes(in_flight, scans, samples)
        if free >= needed:
            return None
        return (
            f"disk almost full: {free / MIB:.1f} MiB free under {self.path}, and {needed / MIB:.1f} MiB are needed "
            f"for the next scans and to close the run; stopped after {scans} scans, the bag and files are complete"
        )
