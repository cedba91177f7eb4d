"""sensor_msgs/msg/PointCloud2 from a cloud of ``outputs.layouts``, and back.

The ``PointField`` list is derived from the cloud's numpy dtype (``outputs.layouts``), never
written by hand. ``pointcloud2_message`` builds the message itself and keeps the cloud's rows:
for rslidar_sdk's layouts height = columns, width = rings, one row per firing column.
(``sensor_msgs_py``'s ``create_cloud`` treats a 2-D array as (width, height),
ros2/common_interfaces issue #236.)

``decode_pointcloud2`` is a second, independent implementation: it rebuilds a dtype from the
message's ``PointField`` list only, so the tests compare the two directions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from acres_lidar_ros.errors import OutputError

# sensor_msgs/msg/PointField datatype codes.
INT8, UINT8, INT16, UINT16, INT32, UINT32, FLOAT32, FLOAT64 = range(1, 9)

# (numpy kind, itemsize) of a field's scalar type -> PointField datatype code.
_CODE_OF_SCALAR: dict[tuple[str, int], int] = {
    ("i", 1): INT8,
    ("u", 1): UINT8,
    ("i", 2): INT16,
    ("u", 2): UINT16,
    ("i", 4): INT32,
    ("u", 4): UINT32,
    ("f", 4): FLOAT32,
    ("f", 8): FLOAT64,
}

# PointField datatype code -> numpy scalar type without byte order (used by the decoder only).
_SCALAR_OF_CODE: dict[int, str] = {
    INT8: "i1",
    UINT8: "u1",
    INT16: "i2",
    UINT16: "u2",
    INT32: "i4",
    UINT32: "u4",
    FLOAT32: "f4",
    FLOAT64: "f8",
}

_INT32_MAX = 2**31 - 1


def point_fields(dtype: np.dtype) -> list[tuple[str, int, int, int]]:
    """The PointField list of a structured dtype.

    Parameters
    ----------
    dtype : numpy structured dtype
        Little-endian (or byte-order-free) scalar fields; a sub-array field gives ``count`` > 1.

    Returns
    -------
    list of (name, offset_bytes, datatype_code, count), in offset order.

    Raises
    ------
    OutputError
        A field's type has no PointField code, or it is big-endian.
    """
    dtype = np.dtype(dtype)
    layout = dtype.fields
    if dtype.names is None or layout is None:
        raise OutputError(f"dtype {dtype} has no named fields; a PointCloud2 needs a structured dtype")
    fields = []
    for name in dtype.names:
        field_dtype, offset = layout[name][:2]
        scalar = field_dtype.base
        code = _CODE_OF_SCALAR.get((scalar.kind, scalar.itemsize))
        if code is None:
            raise OutputError(
                f"field {name!r} has type {scalar}; PointField allows int8/16/32, uint8/16/32, float32/64"
            )
        if scalar != scalar.newbyteorder("<"):
            raise OutputError(f"field {name!r} of type {scalar} is big-endian; the outputs are little-endian")
        count = int(np.prod(field_dtype.shape)) if field_dtype.shape else 1
        fields.append((name, int(offset), code, count))
    return sorted(fields, key=lambda field: field[1])


def time_message(stamp_ns: int, typestore: Any) -> Any:
    """``builtin_interfaces/msg/Time`` of a stamp in ns (0 <= stamp < 2**31 s)."""
    stamp_ns = int(stamp_ns)
    sec, nanosec = divmod(stamp_ns, 1_000_000_000)
    if not 0 <= sec <= _INT32_MAX:
        raise OutputError(f"stamp_ns {stamp_ns} is outside builtin_interfaces/Time: allowed 0 to {_INT32_MAX} s")
    return typestore.types["builtin_interfaces/msg/Time"](sec=sec, nanosec=nanosec)


def default_typestore() -> Any:
    """rosbags' ROS 2 Jazzy typestore (the message definitions the bags are written with)."""
    from rosbags.typesys import Stores, get_typestore

    return get_typestore(Stores.ROS2_JAZZY)


def cloud_is_dense(cloud: np.ndarray) -> bool:
    """PointCloud2's ``is_dense``: no point of the cloud has a NaN x, y or z.

    A dense layout (``point_types.PROFILES[...].grid == "dense"``) drops the beams without a
    return, so it is always dense; an organised one keeps them as NaN cells and is not, unless
    every beam returned (ouster_ros sets the flag the same way).
    """
    names = cloud.dtype.names or ()
    return not any(np.isnan(cloud[axis]).any() for axis in ("x", "y", "z") if axis in names)


def pointcloud2_message(
    cloud: np.ndarray, frame_id: str, stamp_ns: int, typestore: Any = None, is_dense: bool | None = None
) -> Any:
    """A ``sensor_msgs/msg/PointCloud2`` of a 2-D structured array, rows as they are.

    Parameters
    ----------
    cloud : (H, W) structured array
        E.g. ``layouts.point_cloud(scan, point_type)``: H = columns, W = rings for rslidar_sdk's
        layouts; H = rings, W = columns for ``ouster``; H = 1 for the dense ones.
    frame_id : str
        Frame of the points (the lidar frame).
    stamp_ns : int
        Header stamp, ns.
    typestore : rosbags Typestore, optional
        Defaults to ``Stores.ROS2_JAZZY``.
    is_dense : bool, optional
        Default ``cloud_is_dense(cloud)``.

    Returns
    -------
    ``sensor_msgs__msg__PointCloud2`` with height H, width W, point_step = itemsize,
    row_step = W * point_step, is_bigendian False, data (H * W * itemsize,) uint8.
    """
    if typestore is None:
        typestore = default_typestore()
    cloud = np.asarray(cloud)
    if cloud.ndim != 2 or cloud.dtype.names is None:
        raise OutputError(
            f"cloud has shape {cloud.shape} and dtype {cloud.dtype}; a PointCloud2 needs a 2-D "
            "structured array (height, width: columns, rings for an organised cloud; 1, points for a dense one)"
        )
    height, width = cloud.shape
    point_step = cloud.dtype.itemsize
    point_field = typestore.types["sensor_msgs/msg/PointField"]
    header = typestore.types["std_msgs/msg/Header"](stamp=time_message(stamp_ns, typestore), frame_id=frame_id)
    data = np.ascontiguousarray(cloud).view(np.uint8).reshape(-1)
    return typestore.types["sensor_msgs/msg/PointCloud2"](
        header=header,
        height=height,
        width=width,
        fields=[
            point_field(name=name, offset=offset, datatype=code, count=count)
            for name, offset, code, count in point_fields(cloud.dtype)
        ],
        is_bigendian=False,
        point_step=point_step,
        row_step=width * point_step,
        data=data.copy(),
        is_dense=cloud_is_dense(cloud) if is_dense is None else bool(is_dense),
    )


def decode_pointcloud2(message: Any) -> np.ndarray:
    """The points of a PointCloud2 message as a (height, width) structured array.

    Works from the message's own description (fields, point_step, row_step, is_bigendian) only,
    so it also reads clouds that other software wrote. Accepts any object with the PointCloud2
    attributes (rosbags, mcap_ros2 or rclpy messages).

    Returns
    -------
    (height, width) structured array
        One field per PointField (a sub-array when count > 1), at its offset, itemsize point_step.
    """
    byte_order = ">" if message.is_bigendian else "<"
    names, formats, offsets = [], [], []
    for field in message.fields:
        if field.datatype not in _SCALAR_OF_CODE:
            raise OutputError(f"PointField {field.name!r} has datatype {field.datatype}; allowed 1 to 8")
        scalar = np.dtype(byte_order + _SCALAR_OF_CODE[field.datatype])
        names.append(field.name)
        formats.append(scalar if field.count == 1 else (scalar, (field.count,)))
        offsets.append(field.offset)
    height, width = int(message.height), int(message.width)
    point_step, row_step = int(message.point_step), int(message.row_step)
    dtype = np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": point_step})
    data = message.data
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = np.frombuffer(data, np.uint8)
    else:
        data = np.asarray(data, dtype=np.uint8).reshape(-1)
    if row_step < width * point_step or data.size < height * row_step:
        raise OutputError(
            f"PointCloud2 of {height} x {width} points of {point_step} bytes, row_step {row_step}, "
            f"has {data.size} data bytes; needs row_step >= width * point_step and height * row_step bytes"
        )
    rows = data[: height * row_step].reshape(height, row_step)[:, : width * point_step]
    return np.ascontiguousarray(rows).view(dtype).reshape(height, width)


def qos_profile_dict() -> dict[str, Any]:
    """QoS of the cloud topic, rslidar_sdk's publisher: reliable, volatile, keep last 100."""
    return {"reliability": "reliable", "durability": "volatile", "history": "keep_last", "depth": 100}
