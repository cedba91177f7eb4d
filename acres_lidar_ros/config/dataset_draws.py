"""The ``vary`` block of a dataset file: worlds drawn per shard from distributions, seeded.

::

    "vary": {
      "seed": 7,
      "crop_growth": {"uniform": [0.2, 1.0]},
      "harvested": {"choice": [0, 0, 0.5, 1]},
      "soil_wetness": {"uniform": [-0.2, 0.4]},
      "rain_mm_per_h": {"choice": [0, 0, 0, 8, 25]},
      "visibility_m": null,
      "vehicles": {"count": {"integers": [0, 3]}, "speed_m_s": {"uniform": [0, 6]},
                   "distance_m": {"uniform": [8, 40]}, "heading_deg": {"uniform": [-180, 180]},
                   "half_extents_m": [2.3, 1.0, 0.9], "kitti_type": "Car"}
    }

A distribution is a number (always that value), ``{"uniform": [LOW, HIGH]}``, ``{"integers":
[LOW, HIGH]}`` (both ends included) or ``{"choice": [V1, V2, ...]}`` (one of them, each as
likely). Keys (all optional):

* ``crop_growth``: the growth stage ``G`` (0 to 1) of each crop field of the built-in farm, one
  draw per field;
* ``harvested``: the fraction (0 to 1) of each crop field harvested, from its west edge, one draw
  per field (harvested cells keep 3 % of the crop's height, the spec's harvested state);
* ``soil_wetness``: added to the farm's soil wetness map (-1 to 1; the sum is kept in 0 to 1, the
  range of a wetness);
* ``rain_mm_per_h`` (0 to 500) and ``visibility_m`` (>= 10, or null for clear air): the shard's
  weather, replacing the weather entry's values;
* ``vehicles``: other vehicles, each a box driving a straight line: ``count`` (0 to 50),
  ``speed_m_s`` (0 to 40), ``distance_m`` from the sensor's start (1 to 500) in a direction
  drawn uniformly around it, ``heading_deg`` (-360 to 360), fixed ``half_extents_m`` (each > 0,
  default a car's 2.3, 1.0, 0.8) and ``kitti_type`` (the KITTI object type of their labels,
  default ``Car``).

Each shard draws with its own generator, seeded by ``seed`` (default 0) and the shard's spec
before the draw, so a shard's draw does not depend on the others, and the drawn values are part
of the shard's spec (its manifest entry): any shard can be remade alone.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from typing import Any

import numpy as np

VARY_KEYS = ("seed", "crop_growth", "harvested", "soil_wetness", "rain_mm_per_h", "visibility_m", "vehicles")
VEHICLE_KEYS = ("count", "speed_m_s", "distance_m", "heading_deg", "half_extents_m", "kitti_type")
KITTI_TYPES = ("Car", "Van", "Truck", "Pedestrian", "Person_sitting", "Cyclist", "Tram", "Misc")
DEFAULT_HALF_EXTENTS_M = (2.3, 1.0, 0.8)
MAX_VEHICLES = 50
_RANGES = {  # key -> (low, high, integer)
    "crop_growth": (0.0, 1.0, False),
    "harvested": (0.0, 1.0, False),
    "soil_wetness": (-1.0, 1.0, False),
    "rain_mm_per_h": (0.0, 500.0, False),
    "visibility_m": (10.0, 1e6, False),
    "count": (0, MAX_VEHICLES, True),
    "speed_m_s": (0.0, 40.0, False),
    "distance_m": (1.0, 500.0, False),
    "heading_deg": (-360.0, 360.0, False),
}
_KINDS = ("uniform", "integers", "choice")
#: ``fail(where, value, allowed)`` and ``unknown(where, allowed keys)``: the dataset file's errors.
Fail = Callable[[str, Any, str], Exception]
Unknown = Callable[[str, tuple[str, ...]], Exception]


class Distribution:
    """One validated distribution: ``draw(rng)`` gives a float (or an int for integer keys)."""

    def __init__(self, where: str, value: Any, low: float, high: float, integer: bool, fail: Fail) -> None:
        self.kind, self.values = self._parse(where, value, low, high, integer, fail)
        self.integer = integer

    @staticmethod
    def _number(where: str, v: Any, low: float, high: float, integer: bool, fail) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not low <= v <= high:
            raise fail(where, v, f"expected {'an integer' if integer else 'a number'} from {low:g} to {high:g}")
        if integer and int(v) != v:
            raise fail(where, v, f"expected an integer from {low:g} to {high:g}")
        return float(v)

    def _parse(self, where, value, low, high, integer, fail) -> tuple[str, list[float]]:
        if not isinstance(value, dict):
            return "constant", [self._number(where, value, low, high, integer, fail)]
        if len(value) != 1 or next(iter(value)) not in _KINDS:
            raise fail(
                where,
                value,
                'expected a number, {"uniform": [LOW, HIGH]}, {"integers": [LOW, HIGH]} or {"choice": [V1, V2, ...]}',
            )
        kind, args = next(iter(value.items()))
        if not isinstance(args, list) or not args or (kind != "choice" and len(args) != 2):
            raise fail(f"{where}.{kind}", args, "expected [LOW, HIGH]" if kind != "choice" else "a non-empty list")
        numbers = [
            self._number(f"{where}.{kind}[{i}]", v, low, high, integer or kind == "integers", fail)
            for i, v in enumerate(args)
        ]
        if kind != "choice" and numbers[0] > numbers[1]:
            raise fail(f"{where}.{kind}", args, "expected LOW <= HIGH")
        return kind, numbers

    def draw(self, rng: np.random.Generator) -> float | int:
        if self.kind == "constant":
            value = self.values[0]
        elif self.kind == "uniform":
            value = float(rng.uniform(self.values[0], self.values[1]))
        elif self.kind == "integers":
            value = int(rng.integers(int(self.values[0]), int(self.values[1]), endpoint=True))
        else:
            value = self.values[int(rng.integers(len(self.values)))]
        return int(value) if self.integer or self.kind == "integers" else float(value)


class Vary:
    """A validated ``vary`` block; ``draw(key_json, fields)`` gives one shard's drawn values."""

    def __init__(self, raw: dict, fail: Fail, unknown: Unknown) -> None:
        extra = sorted(set(raw) - set(VARY_KEYS))
        if extra:
            raise unknown(f"vary.{extra[0]}", VARY_KEYS)
        seed = raw.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2**63:
            raise fail("vary.seed", seed, "expected an integer from 0 to 2**63 - 1")
        self.seed = seed
        self.dists: dict[str, Distribution] = {}
        for key in ("crop_growth", "harvested", "soil_wetness", "rain_mm_per_h", "visibility_m"):
            if key in raw and raw[key] is not None:
                self.dists[key] = Distribution(f"vary.{key}", raw[key], *_RANGES[key], fail)
        self.clear_air = "visibility_m" in raw and raw["visibility_m"] is None
        self.vehicles: dict[str, Distribution] = {}
        self.half_extents_m = DEFAULT_HALF_EXTENTS_M
        self.kitti_type = "Car"
        vehicles = raw.get("vehicles")
        if vehicles is not None:
            if not isinstance(vehicles, dict):
                raise fail("vary.vehicles", vehicles, f"expected an object with {', '.join(VEHICLE_KEYS)}")
            extra = sorted(set(vehicles) - set(VEHICLE_KEYS))
            if extra:
                raise unknown(f"vary.vehicles.{extra[0]}", VEHICLE_KEYS)
            if "count" not in vehicles:
                raise fail("vary.vehicles.count", None, f"expected a distribution of integers 0 to {MAX_VEHICLES}")
            for key, default in (("count", None), ("speed_m_s", 0.0), ("distance_m", 20.0), ("heading_deg", 0.0)):
                self.vehicles[key] = Distribution(
                    f"vary.vehicles.{key}", vehicles.get(key, default), *_RANGES[key], fail
                )
            half = vehicles.get("half_extents_m", list(DEFAULT_HALF_EXTENTS_M))
            if (
                not isinstance(half, list)
                or len(half) != 3
                or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v <= 50 for v in half)
            ):
                raise fail("vary.vehicles.half_extents_m", half, "expected 3 numbers, each > 0 and <= 50 m")
            self.half_extents_m = (float(half[0]), float(half[1]), float(half[2]))
            kitti_type = vehicles.get("kitti_type", "Car")
            if kitti_type not in KITTI_TYPES:
                raise fail("vary.vehicles.kitti_type", kitti_type, f"allowed: {', '.join(KITTI_TYPES)}")
            self.kitti_type = kitti_type

    @property
    def weather(self) -> bool:
        return "rain_mm_per_h" in self.dists or "visibility_m" in self.dists or self.clear_air

    @property
    def world(self) -> bool:
        """Whether it draws the built-in farm's crops or wetness."""
        return any(k in self.dists for k in ("crop_growth", "harvested", "soil_wetness"))

    def draw(self, key_json: str, fields: tuple[str, ...]) -> dict:
        """One shard's draw: ``key_json`` is its spec before the draw (the generator's seed with
        ``seed``); ``fields`` the crop fields the crop keys are drawn for."""
        digest = hashlib.sha256(f"{self.seed}\0{key_json}".encode()).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:16], "little"))
        drawn: dict[str, Any] = {}
        for key in ("crop_growth", "harvested"):
            if key in self.dists:
                drawn[key] = {name: self.dists[key].draw(rng) for name in fields}
        for key in ("soil_wetness", "rain_mm_per_h", "visibility_m"):
            if key in self.dists:
                drawn[key] = self.dists[key].draw(rng)
        if self.clear_air:
            drawn["visibility_m"] = None
        if self.vehicles:
            n = int(self.vehicles["count"].draw(rng))
            drawn["vehicles"] = [
                {
                    "object_id": k + 1,
                    "bearing_deg": float(rng.uniform(-180.0, 180.0)),
                    **{key: self.vehicles[key].draw(rng) for key in ("distance_m", "heading_deg", "speed_m_s")},
                    "half_extents_m": list(self.half_extents_m),
                    "kitti_type": self.kitti_type,
                }
                for k in range(n)
            ]
        return drawn


__all__ = ["KITTI_TYPES", "VARY_KEYS", "Distribution", "Vary"]
