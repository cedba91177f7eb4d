"""Instance labels: which object each hit, return and point comes from (the engine paper's labels).

Every instance label is a ``uint32``:

* ``0``: the terrain; ``1 .. n - 1``: the scene's objects, numbered as ``SceneBuilder`` adds them
  (the scene file's order, the built-in farm's seeded order), so the ids of a scene file and seed
  never change. A tree's trunk and crown share the tree's id; a crop field is one object.
* ``VEHICLE_INSTANCE_BASE + object_id``: a vehicle box (another vehicle, ``boxes.VehicleBox``)
  whose track or marker has ``object_id`` (0 to ``MAX_VEHICLE_OBJECT_ID``): one id per track.
* ``CLUTTER_INSTANCE``: precipitation clutter (the rain and fog slabs of ``radiometry.clutter``).
* ``BODY_INSTANCE``: the body of the vehicle that carries the sensor (``body.self_returns``).
* ``NO_INSTANCE``: an empty slot (no hit, no return).

The table of a run (``instance_table``) is four arrays, not a Python object per triangle or
per object: ``instance``, ``name``, ``class_id`` and ``type_id`` (``OBJECT_TYPES``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from acres_lidar_ros.config.material_table import CLASS_ID, CLASS_NAMES
from acres_lidar_ros.errors import SceneError

if TYPE_CHECKING:
    from acres_lidar_ros.scene.scene_model import Scene

NO_INSTANCE = 0xFFFFFFFF
"""Instance of an empty slot (no hit, no return)."""
BODY_INSTANCE = 0xFFFFFFFE
"""Instance of the body of the vehicle that carries the sensor (its self returns)."""
CLUTTER_INSTANCE = 0xFFFFFFFD
"""Instance of precipitation clutter (rain and fog returns)."""
VEHICLE_INSTANCE_BASE = 0x80000000
"""A vehicle box's instance is this plus its track's (or marker's) ``object_id``."""
MAX_VEHICLE_OBJECT_ID = 0x7FFFFFEF
"""Largest ``object_id`` of a vehicle box: its instance stays below the reserved top 16 ids."""
MAX_SCENE_OBJECTS = VEHICLE_INSTANCE_BASE
"""Scene objects (terrain included) a scene may hold: their ids stay below the vehicle boxes'."""

OBJECT_TYPES: tuple[str, ...] = (
    "terrain",  # 0
    "mesh",  # 1
    "box",  # 2
    "cylinder",  # 3
    "tree",  # 4
    "shrub",  # 5
    "crop_field",  # 6
    "mud_clod",  # 7
    "ground_cover",  # 8
    "vehicle_box",  # 9
    "body",  # 10
    "clutter",  # 11
)
"""What made each entry of the instance table (``type_id`` is the index)."""
OBJECT_TYPE_ID: dict[str, int] = {name: i for i, name in enumerate(OBJECT_TYPES)}


def vehicle_instance(object_id: int) -> int:
    """Instance of a vehicle box with ``object_id`` (0 to ``MAX_VEHICLE_OBJECT_ID``).

    Raises
    ------
    SceneError
        ``object_id`` is not an integer in that range.
    """
    if isinstance(object_id, bool) or not isinstance(object_id, (int, np.integer)):
        raise SceneError(f"object_id = {object_id!r}: must be an integer 0 to {MAX_VEHICLE_OBJECT_ID}")
    if not 0 <= int(object_id) <= MAX_VEHICLE_OBJECT_ID:
        raise SceneError(
            f"object_id = {int(object_id)}: must be 0 to {MAX_VEHICLE_OBJECT_ID} (its instance label is "
            f"{VEHICLE_INSTANCE_BASE} + object_id, below the reserved ids)"
        )
    return VEHICLE_INSTANCE_BASE + int(object_id)


@dataclass(frozen=True)
class InstanceTable:
    """The instance labels of a run: one row per object, as arrays.

    Attributes
    ----------
    instance : (n,) uint32
    name : (n,) str (numpy unicode)
    class_id : (n,) uint8
        The object's class (``materials.CLASS_NAMES``); a tree is ``tree`` (its trunk's points
        have class ``tree_trunk``).
    type_id : (n,) uint8
        Index in ``OBJECT_TYPES``.
    """

    instance: np.ndarray
    name: np.ndarray
    class_id: np.ndarray
    type_id: np.ndarray

    def __len__(self) -> int:
        return int(self.instance.size)

    def rows(self) -> dict[str, Any]:
        """The table for ``episode.json``: column names and one ``[instance, name, class, type]``
        list per row (a list of columns, so a scene of millions of objects stays compact)."""
        classes = np.array(CLASS_NAMES)[self.class_id]
        types = np.array(OBJECT_TYPES)[self.type_id]
        return {
            "columns": ["instance", "name", "class", "type"],
            "rows": [
                [i, n, c, t]
                for i, n, c, t in zip(self.instance.tolist(), self.name.tolist(), classes.tolist(), types.tolist())
            ],
        }


def instance_table(
    scene: Scene, vehicle_object_ids: Iterable[int] = (), body: bool = False, clutter: bool = False
) -> InstanceTable:
    """The instance table of a run over ``scene``.

    Parameters
    ----------
    scene : Scene
        Its objects (``object_names``, ``object_class``, ``object_type``), terrain first.
    vehicle_object_ids : iterable of int
        ``object_id`` of each vehicle box track of the run (``box_tracks``), in the file's order.
    body, clutter : bool
        Whether the run has the body's self returns and precipitation clutter.
    """
    ids = [int(i) for i in vehicle_object_ids]
    n = len(scene.object_names)
    instance = [np.arange(n, dtype=np.uint32), np.array([vehicle_instance(i) for i in ids], np.uint32)]
    names = [np.asarray(scene.object_names, dtype=str), np.array([f"vehicle_{i}" for i in ids], dtype=str)]
    class_id = [np.asarray(scene.object_class, np.uint8), np.full(len(ids), CLASS_ID["vehicle"], np.uint8)]
    type_id = [np.asarray(scene.object_type, np.uint8), np.full(len(ids), OBJECT_TYPE_ID["vehicle_box"], np.uint8)]
    for wanted, number, name, cls in (
        (clutter, CLUTTER_INSTANCE, "clutter", "precipitation"),
        (body, BODY_INSTANCE, "body", "vehicle"),
    ):
        if wanted:
            instance.append(np.array([number], np.uint32))
            names.append(np.array([name]))
            class_id.append(np.array([CLASS_ID[cls]], np.uint8))
            type_id.append(np.array([OBJECT_TYPE_ID[name]], np.uint8))
    return InstanceTable(
        np.concatenate(instance),
        np.concatenate(names),
        np.concatenate(class_id),
        np.concatenate(type_id),
    )
