"""The point layouts' contract: one packed little-endian numpy dtype per layout, and the profiles.

The dtypes here are the only place where field names, types and byte offsets are written down;
PointCloud2 ``PointField`` lists, PCD headers and PLY headers are derived from them. Each
``point_type`` of the node and the CLI is a ``PointProfile``: its dtype, the cloud's shape, its
header-stamp convention and what a beam without a return becomes (docs/outputs.md gives the
consumers' sources: repository, file and commit). ``outputs.layouts`` fills them from a scan.
A name is resolved once where it comes in (``point_profile``: the CLI's options, the node's
parameter, a dataset file, ``layouts.point_cloud``) and the profile is passed on from there.
This module needs numpy only, so the CLI and the node's parameters list the profiles cheaply.

* ``XYZI``: rslidar_sdk's ``PointXYZI`` (x, y, z, intensity as float32; 16 bytes).
* ``XYZIRT``: rslidar_sdk's ``PointXYZIRT`` (``XYZI`` + ring uint16 + timestamp float64; 26 bytes).
* ``VELODYNE``: velodyne_pointcloud's ``PointXYZIRT``, as LIO-SAM and FAST-LIO read it (``XYZI``
  + ring uint16 + time float32, s after the header stamp; 22 bytes).
* ``OUSTER``: ouster_ros's ``Point`` (PCL point with a padded xyz; t uint32 ns after the header
  stamp, reflectivity, ring, ambient, range mm from the lidar origin as Ouster counts it; 48 bytes).
* ``NEBULA``: nebula's (Autoware's) ``PointXYZIRCAEDT`` (32 bytes).
* ``HESAI``: HesaiLidar_ROS_2.0's cloud (``XYZI`` + ring uint16, the channel index, + timestamp
  float64, absolute s; 26 bytes, packed: the fields of ``XYZIRT``, in a dense cloud).
* ``XYZIRT_LABELS``: the labelled profile: ``XYZIRT`` + class uint8 + instance uint32 (31 bytes),
  the point's semantic class and instance label (``scene.instances``) of its primary return.
* ``PLY_POINT``: the spec's point file record (31 bytes, see "Output Formats").
* ``PLY_POINT_LABELS``: ``PLY_POINT`` + instance uint32 (35 bytes), the point file of ``--labels``.

``labels`` (``--labels``, the node's ``labels`` parameter) selects ``XYZIRT_labels`` for the
rslidar_sdk layouts (``labelled_point_type``) and ``PLY_POINT_LABELS`` for the point file.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from acres_lidar_ros.errors import ConfigError

XYZI = np.dtype([("x", "<f4"), ("y", "<f4"), ("z", "<f4"), ("intensity", "<f4")])

XYZIRT = np.dtype(
    [
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("intensity", "<f4"),
        ("ring", "<u2"),
        ("timestamp", "<f8"),
    ]
)

# XYZIRT and the labels of the primary return, packed like XYZIRT.
XYZIRT_LABELS = np.dtype(XYZIRT.descr + [("class", "u1"), ("instance", "<u4")])

# velodyne_pointcloud adds its fields one after the other (sensor_msgs addPointField): packed.
VELODYNE = np.dtype(
    [
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("intensity", "<f4"),
        ("ring", "<u2"),
        ("time", "<f4"),
    ]
)

# ouster_ros::Point through pcl::toROSMsg: offsetof each member of the 16-byte aligned struct
# (PCL_ADD_POINT4D pads xyz to 16 bytes, range is 4-aligned), point_step = sizeof = 48.
OUSTER = np.dtype(
    {
        "names": ["x", "y", "z", "intensity", "t", "reflectivity", "ring", "ambient", "range"],
        "formats": ["<f4", "<f4", "<f4", "<f4", "<u4", "<u2", "<u2", "<u2", "<u4"],
        "offsets": [0, 4, 8, 16, 20, 24, 26, 28, 32],
        "itemsize": 48,
    }
)

# nebula's PointXYZIRCAEDT (alignas(16), no PCL padding): 32 bytes, fields naturally aligned.
NEBULA = np.dtype(
    [
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("intensity", "u1"),
        ("return_type", "u1"),
        ("channel", "<u2"),
        ("azimuth", "<f4"),
        ("elevation", "<f4"),
        ("distance", "<f4"),
        ("time_stamp", "<u4"),
    ]
)

# HesaiLidar_ROS_2.0 source_driver_ros2.hpp ToRosMsg: addPointField one after the other (packed).
HESAI = np.dtype(
    [
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("intensity", "<f4"),
        ("ring", "<u2"),
        ("timestamp", "<f8"),
    ]
)

PLY_POINT = np.dtype(
    [
        ("x", "<f4"),
        ("y", "<f4"),
        ("z", "<f4"),
        ("reflectivity", "<f4"),
        ("signal", "<u2"),
        ("intensity", "u1"),
        ("ring", "u1"),
        ("column", "<u2"),
        ("class", "u1"),
        ("material", "u1"),
        ("return_index", "u1"),
        ("num_returns", "u1"),
        ("return_flags", "u1"),
        ("time_offset_s", "<f4"),
    ]
)

PLY_POINT_LABELS = np.dtype(PLY_POINT.descr + [("instance", "<u4")])


CARTESIAN_FIELDS: tuple[str, str, str] = ("x", "y", "z")
SPHERICAL_FIELDS: tuple[str, str, str] = ("azimuth", "elevation", "range")


def spherical_dtype(dtype: np.dtype) -> np.dtype:
    """The spherical twin of a Cartesian layout: x, y, z renamed azimuth, elevation (rad) and
    range (m), same types and offsets, every other field as it is."""
    if dtype.names is None or dtype.fields is None:
        raise ConfigError(f"{dtype} is not a structured point layout")
    names = [SPHERICAL_FIELDS[CARTESIAN_FIELDS.index(n)] if n in CARTESIAN_FIELDS else n for n in dtype.names]
    fields = [dtype.fields[n] for n in dtype.names]
    return np.dtype(
        {
            "names": names,
            "formats": [f[0] for f in fields],
            "offsets": [f[1] for f in fields],
            "itemsize": dtype.itemsize,
        }
    )


# coordinates: spherical (the attribute list's elementsCoordsType). ouster (whose range is a uint32 in mm)
# and nebula (azimuth, elevation and distance beside x, y, z already) have no spherical twin.
XYZI_SPHERICAL = spherical_dtype(XYZI)
XYZIRT_SPHERICAL = spherical_dtype(XYZIRT)
VELODYNE_SPHERICAL = spherical_dtype(VELODYNE)
XYZIRT_LABELS_SPHERICAL = spherical_dtype(XYZIRT_LABELS)
PLY_POINT_SPHERICAL = spherical_dtype(PLY_POINT)
PLY_POINT_LABELS_SPHERICAL = spherical_dtype(PLY_POINT_LABELS)
SPHERICAL_POINT_TYPES: dict[str, np.dtype] = {
    "XYZI": XYZI_SPHERICAL,
    "XYZIRT": XYZIRT_SPHERICAL,
    "XYZIRT_labels": XYZIRT_LABELS_SPHERICAL,
    "velodyne": VELODYNE_SPHERICAL,
    "hesai": spherical_dtype(HESAI),
}
"""Point type -> its spherical layout, for the profiles that have one."""


@dataclass(frozen=True)
class PointProfile:
    """One ``point_type``: the layout a consumer reads and how the cloud is laid out in it.

    Attributes
    ----------
    name : str
        The ``point_type`` value.
    dtype : numpy structured dtype
        The contract: PointFields, point_step and the PCD header derive from it.
    grid : {"columns_by_rings", "rings_by_columns", "dense"}
        ``columns_by_rings``: height = columns, width = rings, one row per firing column
        (rslidar_sdk); ``rings_by_columns``: height = rings (row 0 = the highest beam), width =
        columns (ouster_ros); ``dense``: height 1, only the returns, beams in cell order and the
        returns of a beam in range order (velodyne_pointcloud with ``organize_cloud: false``,
        nebula).
    returns : {"primary", "all"}
        Organised layouts carry the primary return of each beam (the strongest, else the first);
        dense ones every return.
    stamp : {"sweep_end", "sweep_start"}
        Header stamp: ``sweep_end`` is the end of the sweep, or its start with ``ts_first_point``
        (rslidar_sdk); ``sweep_start`` is always the start of the sweep, which the profile's
        relative point times count from (ouster_ros and nebula stamp their first point; LIO-SAM and
        FAST-LIO need it).
    no_return : str
        What a beam without a return becomes, in words.
    """

    name: str
    dtype: np.dtype
    grid: str
    returns: str
    stamp: str
    no_return: str

    @property
    def organised(self) -> bool:
        return self.grid != "dense"

    @property
    def spherical(self) -> np.dtype | None:
        """The spherical twin of ``dtype`` (``SPHERICAL_POINT_TYPES``), or None for a profile
        without one (ouster, nebula)."""
        return SPHERICAL_POINT_TYPES.get(self.name)

    def dtype_in(self, coordinates: str = "cartesian") -> np.dtype:
        """The layout in ``coordinates``: ``dtype``, or with ``spherical`` its spherical twin.

        Raises
        ------
        ConfigError
            ``spherical`` for a profile without a spherical twin, or ``coordinates`` neither.
        """
        if coordinates == "cartesian":
            return self.dtype
        if coordinates == "spherical" and self.spherical is not None:
            return self.spherical
        if coordinates == "spherical":
            raise ConfigError(
                f"lidar.coordinates = 'spherical' with point_type {self.name!r}: allowed with "
                f"{', '.join(SPHERICAL_POINT_TYPES)} (ouster's range is its own uint32 field and nebula carries "
                "azimuth, elevation and distance beside x, y, z)"
            )
        raise ConfigError(f"lidar.coordinates = {coordinates!r}: expected one of cartesian, spherical")

    def stamps_sweep_start(self, ts_first_point: bool) -> bool:
        """Whether the cloud's header stamp is the start of the sweep: always for the profiles with
        relative point times (``stamp == "sweep_start"``), with ``ts_first_point`` for the others."""
        return self.stamp == "sweep_start" or bool(ts_first_point)

    def header_stamp_ns(self, sweep_end_ns: int, period_s: float, ts_first_point: bool = False) -> int:
        """Header stamp of a scan's cloud, ns: ``sweep_end_ns``, or one period before it when the
        cloud is stamped at the sweep start (``stamps_sweep_start``), as the node's scheduler does."""
        if self.stamps_sweep_start(ts_first_point):
            return int(sweep_end_ns) - int(round(period_s * 1e9))
        return int(sweep_end_ns)


PROFILES: dict[str, PointProfile] = {
    p.name: p
    for p in (
        PointProfile("XYZI", XYZI, "columns_by_rings", "primary", "sweep_end", "kept: NaN x, y, z and intensity 0"),
        PointProfile(
            "XYZIRT",
            XYZIRT,
            "columns_by_rings",
            "primary",
            "sweep_end",
            "kept: NaN x, y, z, intensity 0, ring and timestamp filled",
        ),
        PointProfile(
            "XYZIRT_labels",
            XYZIRT_LABELS,
            "columns_by_rings",
            "primary",
            "sweep_end",
            "kept: NaN x, y, z, intensity 0, class 0, instance 4294967295; ring and timestamp filled",
        ),
        PointProfile("velodyne", VELODYNE, "dense", "all", "sweep_start", "dropped"),
        PointProfile(
            "ouster",
            OUSTER,
            "rings_by_columns",
            "primary",
            "sweep_start",
            "kept: NaN x, y, z, range 0, intensity 0, reflectivity 0; t and ring filled",
        ),
        PointProfile("nebula", NEBULA, "dense", "all", "sweep_start", "dropped"),
        PointProfile("hesai", HESAI, "dense", "all", "sweep_start", "dropped"),
    )
}

# Name -> dtype of every point type (the profiles' contract).
POINT_TYPES: dict[str, np.dtype] = {name: p.dtype for name, p in PROFILES.items()}


def point_profile(point_type: PointProfile | str, where: str = "point_type") -> PointProfile:
    """The profile of a ``point_type``: a name (a key of ``PROFILES``) resolved, or one of the
    profiles as it is; ``ConfigError`` naming ``where`` (the option or key) and listing the
    profiles otherwise. The entry points that take a name call it once and pass the profile on."""
    if isinstance(point_type, str) and point_type in PROFILES:
        return PROFILES[point_type]
    if isinstance(point_type, PointProfile) and PROFILES.get(point_type.name) == point_type:
        return point_type
    raise ConfigError(f"{where} {point_type!r} is not a point type; allowed: {', '.join(PROFILES)}")


LABELLED_POINT_TYPE = "XYZIRT_labels"
"""The profile ``labels`` selects."""
LABELLED_FROM = ("XYZI", "XYZIRT", LABELLED_POINT_TYPE)
"""The point types ``labels`` turns into ``LABELLED_POINT_TYPE`` (rslidar_sdk's layouts)."""


def labelled_point_type(point_type: PointProfile | str, labels: bool, what: str = "point_type") -> PointProfile:
    """The profile a run publishes: ``point_type``'s (a name is resolved here, ``point_profile``),
    or with ``labels`` the labelled one.

    Raises
    ------
    ConfigError
        ``point_type`` is no profile, or ``labels`` is on with a consumer's layout that has no room for labels (velodyne, ouster,
        nebula, hesai); ``what`` names the setting in the message.
    """
    profile = point_profile(point_type)
    if not labels or profile.name == LABELLED_POINT_TYPE:
        return profile
    if profile.name not in LABELLED_FROM:
        raise ConfigError(
            f"{what} {profile.name!r} with labels: labels publish the {LABELLED_POINT_TYPE} layout (XYZIRT + class + "
            f"instance); allowed with labels: {', '.join(LABELLED_FROM)}"
        )
    return PROFILES[LABELLED_POINT_TYPE]
