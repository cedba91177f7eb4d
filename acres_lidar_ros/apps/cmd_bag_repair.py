"""``acres-lidar bag-repair DIR``: a run directory (or a bag) made whole after a kill, a power cut
or a full disk.

``acres-lidar record`` flushes the bag to the disk before it appends a scan's ``lidar.jsonl`` row,
so every scan the jsonl lists is in the bag's complete chunks. After a SIGKILL, a power cut or a
full disk the bag lacks its MCAP summary and ``metadata.yaml``; this command

1. rebuilds them from the complete chunks (``outputs.bag_repair.repair_bag``, as ``ros2 bag
   reindex`` rebuilds ``metadata.yaml``), keeping every message written before the failure;
2. cuts ``lidar.jsonl`` back to its last complete row (``outputs.json_files.trim_jsonl``);
3. removes the temporary files a kill can leave (``.<name>.<random>.tmp`` of the file writers
   where the file system lacks ``O_TMPFILE``, ``metadata.yaml.tmp``, ``.<bag>.repair/``).

PCD, PLY and PNG files are written whole or not at all and need nothing. A bag that is readable
already is left as it is, so running the command twice is harmless.
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path
from typing import Any

from acres_lidar_ros.errors import OutputError

JSONL_NAME = "lidar.jsonl"


def _bag_dirs(path: Path) -> tuple[list[Path], bool]:
    """The bag directories under ``path`` and whether ``path`` is a run directory (not a bag)."""
    if (path / "metadata.yaml").exists() or any(path.glob("*.mcap")):
        return [path], False
    bags = [child for child in sorted(path.iterdir()) if child.is_dir() and any(child.glob("*.mcap"))]
    return bags, True


def remove_temporary_files(path: Path) -> list[Path]:
    """Remove the temporary files and folders a killed writer leaves under ``path``; return them."""
    removed = []
    for candidate in sorted(path.rglob(".*")):
        name = candidate.name
        if candidate.is_file() and name.endswith(".tmp") and name.count(".") >= 3:
            candidate.unlink()  # .<target name>.<random>.tmp of outputs.files.atomic_write
        elif candidate.is_dir() and name.endswith(".repair"):
            shutil.rmtree(candidate)  # a repair that was stopped
        else:
            continue
        removed.append(candidate)
    for candidate in sorted(path.rglob("metadata.yaml.tmp")):
        candidate.unlink()  # rosbags' writer stopped while writing the metadata
        removed.append(candidate)
    return removed


def repair_run(path: str | Path) -> list[str]:
    """Repair the run directory or bag directory ``path``; return one line per thing done.

    Raises
    ------
    OutputError
        ``path`` is not a directory, holds no bag, or a bag cannot be rebuilt.
    """
    from acres_lidar_ros.outputs.bag_repair import repair_bag
    from acres_lidar_ros.outputs.json_files import trim_jsonl

    path = Path(path)
    if not path.is_dir():
        raise OutputError(f"bag-repair DIR {path}: not a directory; give a run directory or a bag directory")
    bags, is_run = _bag_dirs(path)
    if not bags:
        raise OutputError(f"bag-repair DIR {path}: no bag found (a directory with a .mcap file, or a run with bag/)")
    lines = [f"removed {item}" for item in remove_temporary_files(path)]
    lines += [repair_bag(bag).line() for bag in bags]
    jsonl = path / JSONL_NAME
    if is_run and jsonl.is_file():
        cut = trim_jsonl(jsonl)
        rows = len(jsonl.read_bytes().splitlines())
        lines.append(f"{jsonl}: {rows} complete rows" + (f"; cut {cut} bytes of an unfinished row" if cut else ""))
    return lines


def add_bag_repair_parser(sub: Any) -> None:
    """The ``bag-repair`` subcommand on the CLI's subparsers."""
    repair = sub.add_parser(
        "bag-repair",
        help="make a run's bag readable after a kill, a power cut or a full disk",
        description="Rebuild the MCAP summary and metadata.yaml of the bag from its complete chunks (as "
        "`ros2 bag reindex` does), cut lidar.jsonl back to its last complete row and remove stray "
        "temporary files. Every scan listed in lidar.jsonl is in the repaired bag. A readable bag is "
        "left as it is.",
    )
    repair.add_argument("dir", type=Path, metavar="DIR", help="run directory (with bag/) or bag directory")


def cmd_bag_repair(args: argparse.Namespace) -> int:
    """``acres-lidar bag-repair DIR``: print one line per thing done."""
    for line in repair_run(args.dir):
        print(line)
    return 0
