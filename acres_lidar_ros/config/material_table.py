"""Semantic classes and materials of the spec ("Materials", "Materials of sensors.json").

Class numbers and material numbers are the indices of ``CLASS_NAMES`` and ``MATERIAL_NAMES``;
the PLY ``class`` and ``material`` fields and ``episode.json`` use them.
"""

from __future__ import annotations

import numpy as np

#: The spec's class table ("Materials"), numbers 0 to 13.
SPEC_CLASS_NAMES: tuple[str, ...] = (
    "other",  # 0
    "ground",  # 1
    "tree_trunk",  # 2
    "building",  # 3
    "silo",  # 4
    "tree",  # 5
    "shrub",  # 6
    "corn",  # 7
    "soybean",  # 8
    "mud_clod",  # 9
    "ground_cover",  # 10
    "potato",  # 11
    "vehicle",  # 12
    "precipitation",  # 13
)
#: Classes of user scenes beyond the spec's, numbered after them so no spec number moves
#: (docs/scene_format.md, "Classes"): people and animals, poles and fences, and the parts of
#: vehicles a scene may hold apart from the vehicle class (towed implements, wheels).
USER_CLASS_NAMES: tuple[str, ...] = (
    "person",  # 14
    "animal",  # 15
    "pole",  # 16
    "fence",  # 17
    "implement",  # 18
    "wheel",  # 19
)
CLASS_NAMES: tuple[str, ...] = SPEC_CLASS_NAMES + USER_CLASS_NAMES
CLASS_ID: dict[str, int] = {name: i for i, name in enumerate(CLASS_NAMES)}

MATERIAL_NAMES: tuple[str, ...] = (
    "other",  # 0
    "soil",  # 1
    "grass",  # 2
    "gravel",  # 3
    "asphalt",  # 4
    "concrete",  # 5
    "water",  # 6
    "corn_leaf",  # 7
    "soybean_leaf",  # 8
    "tree_foliage",  # 9
    "bark",  # 10
    "shrub",  # 11
    "building",  # 12
    "metal_bin",  # 13
    "vehicle",  # 14
    "mud",  # 15
    "potato_leaf",  # 16
)
MATERIAL_ID: dict[str, int] = {name: i for i, name in enumerate(MATERIAL_NAMES)}

# Classes a sub-ray continues behind (spec: "The classes tree, shrub, corn, soybean, potato and
# ground_cover are foliage").
FOLIAGE_CLASS_NAMES: tuple[str, ...] = ("tree", "shrub", "corn", "soybean", "potato", "ground_cover")
IS_FOLIAGE_CLASS: np.ndarray = np.isin(np.arange(len(CLASS_NAMES)), [CLASS_ID[n] for n in FOLIAGE_CLASS_NAMES])

# Material of each class; ground (1) is resolved per hit by the ground rules, so it maps to -1.
_CLASS_MATERIAL = {
    "other": "other",
    "tree_trunk": "bark",
    "building": "building",
    "silo": "metal_bin",
    "tree": "tree_foliage",
    "shrub": "shrub",
    "corn": "corn_leaf",
    "soybean": "soybean_leaf",
    "potato": "potato_leaf",
    "mud_clod": "mud",
    "ground_cover": "grass",
    "vehicle": "vehicle",
    "precipitation": "other",
    # The user classes take the nearest material of the spec's table (none is foliage).
    "person": "other",
    "animal": "other",
    "pole": "metal_bin",
    "fence": "bark",
    "implement": "vehicle",
    "wheel": "vehicle",
}
MATERIAL_OF_CLASS: np.ndarray = np.array(
    [MATERIAL_ID[_CLASS_MATERIAL[name]] if name in _CLASS_MATERIAL else -1 for name in CLASS_NAMES],
    dtype=np.int16,
)

# Ground cover materials of the 4 m cover grid (spec "Ground", rule 1).
COVER_MATERIAL_NAMES: tuple[str, ...] = ("grass", "asphalt", "concrete", "gravel", "soil")
