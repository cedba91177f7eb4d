"""The dataset file of ``acres-lidar dataset``: which drives to record, validated before any work.

A dataset is the product of six lists; each combination is one drive, a *shard*::

    {
      "drives": {
        "tours": ["default", "poses/field_a.tum"],
        "farm_seeds": {"first": 0, "count": 20}   or [0, 1] (the built-in farm's seed; default [0])
        "seeds": [0, 1]                       or {"first": 0, "count": 8},
        "weather": [{"name": "clear"}, {"name": "rain", "rain_mm_per_h": 10, "visibility_m": 500}],
        "sensors": ["polaris"],
        "point_types": ["XYZI", "XYZIRT"]
      },
      "scene": "default",
      "duration_s": 20,
      "files": "pcd",
      "labels": true, "truth": true, "boxes": "tracks.json",
      "layouts": ["semantic_kitti", "kitti_objects"],
      "vary": {...}
    }

``labels``, ``truth``, ``boxes`` and ``files`` are ``record``'s ``--labels``, ``--truth``,
``--boxes`` and ``--files``; ``point_types`` its ``--point-type`` (any profile; checked with
``labels`` by ``apps.cmd_dataset``). ``layouts`` adds training layouts beside the shards
(``outputs.kitti_formats``); ``vary`` draws each shard's world (``config.dataset_draws``).
``packets`` is ``record --packets``: ``"pcap"`` (each shard's ``packets.pcap``, and
``sensor_metadata.json`` where the format needs one) or ``"bag"`` (packet messages in the shard's
bag); each sensor must have a packet format (checked by ``apps.cmd_dataset``); live ``udp`` is no
dataset output.

``tours``: ``"default"`` (the built-in farm tour) or TUM pose files; ``sensors``: a named sensor
(``polaris``, ``default``) or a sensors file; relative paths are relative to the dataset file.
``weather`` entries take the scan options ``rain_mm_per_h`` and ``visibility_m`` (their ranges
are the schema's) and an optional ``name``; ``duration_s`` (optional, > 0) cuts every drive,
``files`` is ``record --files``. Errors name the file, the key as a JSON path, the value and what
is allowed, as the sensors file's do.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from acres_lidar_ros.config.dataset_draws import Vary
from acres_lidar_ros.config.schema import check_option
from acres_lidar_ros.config.sensors import NAMED_SENSORS, load_sensor_config
from acres_lidar_ros.errors import ConfigError

FILE_CHOICES = ("pcd", "ply", "both", "none")
PACKET_CHOICES = ("pcap", "bag")
LAYOUTS = ("semantic_kitti", "kitti_objects")
MAX_SHARDS = 100_000
MAX_SEED_COUNT = 100_000
_TOP_KEYS = ("drives", "scene", "duration_s", "files", "labels", "truth", "boxes", "packets", "layouts", "vary")
_DRIVE_KEYS = ("tours", "farm_seeds", "seeds", "weather", "sensors", "point_types")
#: The crop fields of the built-in farm (``scene.farm_v2_ground.FIELDS``) that ``vary`` draws for.
FARM_CROP_FIELDS = ("corn_field", "soybean_field", "potato_field")
_WEATHER_KEYS = ("name", "rain_mm_per_h", "visibility_m")
_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,40}$")


@dataclass(frozen=True)
class ShardSpec:
    """One drive of a dataset: everything its recording depends on (absolute paths)."""

    tour: str  # "default" or an absolute TUM path
    seed: int
    weather: str  # the weather entry's name
    rain_mm_per_h: float
    visibility_m: float
    sensor: str  # a named sensor or an absolute sensors-file path
    point_type: str
    scene: str  # "default" or an absolute scene-file path
    duration_s: float | None
    files: str
    farm_seed: int | None = None  # the built-in farm's seed; None for a scene file
    labels: bool = False
    truth: bool = False
    boxes: str | None = None  # an absolute box-tracks file
    layouts: tuple[str, ...] = ()
    drawn: dict = field(default_factory=dict)  # what ``vary`` drew for this shard
    packets: str | None = None  # ``record --packets``: "pcap", "bag" or None

    def as_dict(self) -> dict:
        d = asdict(self)
        d["visibility_m"] = None if math.isinf(self.visibility_m) else self.visibility_m
        if self.packets is None:  # a shard without packets keeps the identity it had before the key
            del d["packets"]
        return d

    @property
    def digest(self) -> str:
        """sha256 of the spec's JSON: the shard's identity across runs."""
        return hashlib.sha256(json.dumps(self.as_dict(), sort_keys=True).encode()).hexdigest()

    @property
    def shard_id(self) -> str:
        """``<tour>[-f<farm seed>]-s<seed>-<weather>-<sensor>-<point type>-<digest>``, a directory name."""
        tour = "tour" if self.tour == "default" else Path(self.tour).stem
        sensor = self.sensor if self.sensor in NAMED_SENSORS else Path(self.sensor).stem
        farm = "" if self.farm_seed is None else f"-f{self.farm_seed}"
        name = f"{tour}{farm}-s{self.seed}-{self.weather}-{sensor}-{self.point_type}-{self.digest[:8]}"
        return re.sub(r"[^A-Za-z0-9_.-]", "_", name)


@dataclass(frozen=True)
class Dataset:
    """A validated dataset file: its path, its JSON (as read) and its shards in product order."""

    path: Path
    raw: dict
    shards: tuple[ShardSpec, ...]


def _fail(path: Path, where: str, value: Any, allowed: str) -> ConfigError:
    return ConfigError(f"dataset file {str(path)!r}: {where} = {value!r}: {allowed}")


def _list(path: Path, raw: dict, key: str) -> list:
    value = raw.get(key)
    if not isinstance(value, list) or not value:
        raise _fail(path, f"drives.{key}", value, "expected a non-empty list")
    return value


def _seeds(path: Path, value: Any, key: str = "seeds") -> list[int]:
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"first", "count"})
        if unknown:
            raise ConfigError(
                f"dataset file {str(path)!r}: drives.{key}.{unknown[0]}: unknown key; allowed: first, count"
            )
        first, count = value.get("first", 0), value.get("count")
        if isinstance(first, bool) or not isinstance(first, int) or first < 0:
            raise _fail(path, f"drives.{key}.first", first, "expected an integer >= 0")
        if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_SEED_COUNT:
            raise _fail(path, f"drives.{key}.count", count, f"expected an integer from 1 to {MAX_SEED_COUNT}")
        seeds = list(range(first, first + count))
    elif isinstance(value, list) and value:
        seeds = value
    else:
        raise _fail(path, f"drives.{key}", value, 'expected a non-empty list of integers or {"first": 0, "count": N}')
    out = []
    for i, seed in enumerate(seeds):
        try:
            out.append(int(check_option("seed", seed)))
        except ConfigError as exc:
            raise ConfigError(f"dataset file {str(path)!r}: drives.{key}[{i}]: {exc}") from exc
    if len(set(out)) != len(out):
        raise _fail(path, f"drives.{key}", out, "expected each seed once")
    return out


def _resolve(base: Path, value: str) -> Path:
    p = Path(value)
    return (p if p.is_absolute() else base / p).resolve()


def _tours(path: Path, raw: dict) -> list[str]:
    out = []
    for i, tour in enumerate(_list(path, raw, "tours")):
        where = f"drives.tours[{i}]"
        if not isinstance(tour, str) or not tour:
            raise _fail(path, where, tour, 'expected "default" or the path of a TUM pose file')
        if tour == "default":
            out.append(tour)
            continue
        file = _resolve(path.parent, tour)
        if not file.is_file():
            raise _fail(
                path, where, tour, f'the pose file {str(file)!r} does not exist; allowed: "default" or a TUM file'
            )
        out.append(str(file))
    return out


def _sensors(path: Path, raw: dict) -> list[str]:
    out = []
    for i, sensor in enumerate(_list(path, raw, "sensors")):
        where = f"drives.sensors[{i}]"
        allowed = f"unknown sensor; allowed: {', '.join(NAMED_SENSORS)} or a sensors file that exists"
        if not isinstance(sensor, str) or not sensor:
            raise _fail(path, where, sensor, allowed)
        name = sensor if sensor in NAMED_SENSORS else None
        if name is None:
            file = _resolve(path.parent, sensor)
            if not file.is_file():
                raise _fail(path, where, sensor, allowed)
            name = str(file)
        try:
            load_sensor_config(name)
        except ConfigError as exc:
            raise ConfigError(f"dataset file {str(path)!r}: {where} = {sensor!r}: {exc}") from exc
        out.append(name)
    return out


def _weather(path: Path, raw: dict) -> list[tuple[str, float, float]]:
    out = []
    for i, entry in enumerate(_list(path, raw, "weather")):
        where = f"drives.weather[{i}]"
        if not isinstance(entry, dict):
            raise _fail(path, where, entry, 'expected an object such as {"name": "rain", "rain_mm_per_h": 10}')
        unknown = sorted(set(entry) - set(_WEATHER_KEYS))
        if unknown:
            raise ConfigError(
                f"dataset file {str(path)!r}: {where}.{unknown[0]}: unknown key; allowed: {', '.join(_WEATHER_KEYS)}"
            )
        values = {}
        for key, default in (("rain_mm_per_h", 0.0), ("visibility_m", math.inf)):
            value = entry.get(key, default)
            value = math.inf if value is None and key == "visibility_m" else value
            try:
                values[key] = float(check_option(key, value))
            except ConfigError as exc:
                raise ConfigError(f"dataset file {str(path)!r}: {where}.{exc}") from exc
        name = entry.get("name", f"w{i}")
        if not isinstance(name, str) or not _NAME.match(name):
            raise _fail(path, f"{where}.name", name, "expected 1 to 40 letters, digits, '_', '.' or '-'")
        out.append((name, values["rain_mm_per_h"], values["visibility_m"]))
    names = [w[0] for w in out]
    if len(set(names)) != len(names):
        raise _fail(path, "drives.weather[].name", names, "expected a different name for each entry")
    return out


def load_dataset(path: str | Path) -> Dataset:
    """Read and validate a dataset file (``ConfigError`` naming the key and what is allowed)."""
    path = Path(path).resolve()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"dataset file {str(path)!r} cannot be read: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise ConfigError(f"dataset file {str(path)!r} is not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"dataset file {str(path)!r}: the top level must be an object with a 'drives' block")
    unknown = sorted(set(raw) - set(_TOP_KEYS))
    if unknown:
        raise ConfigError(f"dataset file {str(path)!r}: {unknown[0]}: unknown key; allowed: {', '.join(_TOP_KEYS)}")
    drives = raw.get("drives")
    if not isinstance(drives, dict):
        raise _fail(path, "drives", drives, f"expected an object with {', '.join(_DRIVE_KEYS)}")
    unknown = sorted(set(drives) - set(_DRIVE_KEYS))
    if unknown:
        raise ConfigError(
            f"dataset file {str(path)!r}: drives.{unknown[0]}: unknown key; allowed: {', '.join(_DRIVE_KEYS)}"
        )
    tours = _tours(path, drives)
    seeds = _seeds(path, drives.get("seeds"))
    weather = _weather(path, drives) if "weather" in drives else [("clear", 0.0, math.inf)]
    sensors = _sensors(path, drives)
    point_types = _list(path, drives, "point_types")
    for i, pt in enumerate(point_types):
        if not isinstance(pt, str) or not pt:
            raise _fail(path, f"drives.point_types[{i}]", pt, "expected a point type name (docs/outputs.md)")
    scene = raw.get("scene", "default")
    if not isinstance(scene, str) or not scene:
        raise _fail(path, "scene", scene, 'expected "default" or a scene file')
    if scene != "default":
        file = _resolve(path.parent, scene)
        if not file.is_file():
            raise _fail(
                path, "scene", scene, f'the scene file {str(file)!r} does not exist; allowed: "default" or a file'
            )
        scene = str(file)
    if "farm_seeds" in drives and scene != "default":
        raise _fail(path, "drives.farm_seeds", drives["farm_seeds"], 'only with "scene": "default" (the built-in farm)')
    farm_seeds: list[int | None] = (
        list(_seeds(path, drives["farm_seeds"], "farm_seeds")) if "farm_seeds" in drives else [0]
    )
    if scene != "default":
        farm_seeds = [None]
    duration = raw.get("duration_s")
    if duration is not None and (
        isinstance(duration, bool)
        or not isinstance(duration, (int, float))
        or not (math.isfinite(duration) and duration > 0)
    ):
        raise _fail(path, "duration_s", duration, "expected a number of seconds > 0, or null for the whole tour")
    files = raw.get("files", "pcd")
    if files not in FILE_CHOICES:
        raise _fail(path, "files", files, f"allowed: {', '.join(FILE_CHOICES)}")
    labels, truth = (_flag(path, raw, key) for key in ("labels", "truth"))
    packets = raw.get("packets")
    if packets is not None and packets not in PACKET_CHOICES:
        raise _fail(
            path, "packets", packets, f"allowed: {', '.join(PACKET_CHOICES)} (record --packets; udp sends live) or null"
        )
    boxes = raw.get("boxes")
    if boxes is not None:
        box_file = _resolve(path.parent, boxes) if isinstance(boxes, str) and boxes else None
        if box_file is None or not box_file.is_file():
            raise _fail(path, "boxes", boxes, "expected the path of a box-tracks file that exists (docs/outputs.md)")
        boxes = str(box_file)
    layouts = _layouts(path, raw, labels, files)
    vary = raw.get("vary")
    if vary is not None and not isinstance(vary, dict):
        raise _fail(path, "vary", vary, "expected an object (docs/datasets.md)")
    draws = Vary(vary or {}, lambda where, v, allowed: _fail(path, where, v, allowed), _unknown(path))
    if draws.world and scene != "default":
        raise _fail(
            path, "vary", sorted(vary or {}), 'crop_growth, harvested and soil_wetness only with "scene": "default"'
        )
    if draws.vehicles and boxes is not None:
        raise _fail(
            path, "vary.vehicles", "with boxes", "give the other vehicles either as a boxes file or as vary.vehicles"
        )
    if "weather" not in drives and draws.weather:
        weather = [("drawn", 0.0, math.inf)]
    n = len(tours) * len(farm_seeds) * len(seeds) * len(weather) * len(sensors) * len(point_types)
    if n > MAX_SHARDS:
        raise _fail(path, "drives", f"{n} shards", f"at most {MAX_SHARDS} shards in one dataset")
    shards = []
    for tour, farm, seed, w, sensor, pt in itertools.product(tours, farm_seeds, seeds, weather, sensors, point_types):
        spec = ShardSpec(
            tour=tour,
            seed=seed,
            weather=w[0],
            rain_mm_per_h=w[1],
            visibility_m=w[2],
            sensor=sensor,
            point_type=pt,
            scene=scene,
            duration_s=None if duration is None else float(duration),
            files=files,
            farm_seed=farm,
            labels=labels,
            truth=truth,
            boxes=boxes,
            layouts=layouts,
            packets=packets,
        )
        # Drawn from the spec without its packets: asking for the packets does not change the world.
        drawn = draws.draw(json.dumps(replace(spec, packets=None).as_dict(), sort_keys=True), FARM_CROP_FIELDS)
        if draws.weather:
            visibility = drawn.get("visibility_m", spec.visibility_m)
            spec = replace(
                spec,
                rain_mm_per_h=float(drawn.get("rain_mm_per_h", spec.rain_mm_per_h)),
                visibility_m=math.inf if visibility is None else float(visibility),
            )
        shards.append(replace(spec, drawn=drawn))
    ids = [s.shard_id for s in shards]
    if len(set(ids)) != len(ids):
        raise _fail(path, "drives", "repeated entries", "each tour, seed, weather, sensor and point type only once")
    return Dataset(path, raw, tuple(shards))


def _flag(path: Path, raw: dict, key: str) -> bool:
    value = raw.get(key, False)
    if not isinstance(value, bool):
        raise _fail(path, key, value, "expected true or false")
    return value


def _unknown(path: Path):
    def unknown(where: str, allowed: tuple[str, ...]) -> ConfigError:
        return ConfigError(f"dataset file {str(path)!r}: {where}: unknown key; allowed: {', '.join(allowed)}")

    return unknown


def _layouts(path: Path, raw: dict, labels: bool, files: str) -> tuple[str, ...]:
    layouts = raw.get("layouts", [])
    if not isinstance(layouts, list) or any(v not in LAYOUTS for v in layouts) or len(set(layouts)) != len(layouts):
        raise _fail(path, "layouts", layouts, f"expected a list of distinct layouts; allowed: {', '.join(LAYOUTS)}")
    if layouts and files not in ("pcd", "both"):
        raise _fail(path, "files", files, f"layouts {layouts} are made from the PCD files: expected pcd or both")
    if "semantic_kitti" in layouts and not labels:
        raise _fail(path, "labels", labels, "layouts semantic_kitti needs the labels: set labels to true")
    return tuple(layouts)


__all__ = ["FARM_CROP_FIELDS", "LAYOUTS", "Dataset", "ShardSpec", "load_dataset"]
