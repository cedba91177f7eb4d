"""A small URDF reader: links, joints and collision geometry, and the transform of every link.

Only what the self-return generator needs, with ``xml.etree`` (no ROS, no third-party parser):

* ``<link>`` with its ``<collision>`` elements: ``<origin xyz rpy>`` and one ``<geometry>`` of
  ``<box size>``, ``<cylinder radius length>``, ``<sphere radius>`` or ``<mesh filename scale>``;
* ``<joint>`` with ``parent``, ``child`` and ``<origin>``. Every joint is taken at its zero
  position (revolute, continuous and prismatic joints sit at their origin), which is the pose of
  a parked vehicle's body.

Frames follow URDF: ``rpy`` is roll, pitch, yaw about fixed axes, ``R = Rz(yaw) Ry(pitch)
Rx(roll)`` (the same convention as the sensors file's ``rpy_deg``). ``T_a_b`` maps coordinates of
frame ``b`` into frame ``a``.

A ``.xacro`` file (or one whose elements use the xacro namespace) is expanded first with the
``xacro`` package from PyPI (``pip install xacro``; it needs no ROS); without it the reader refuses
the file with the command that expands it.

Mesh file names may be absolute, relative to the URDF, ``file://`` URIs or ``package://name/rest``
(resolved through the ament index when ROS is present, else through an ancestor directory of the
URDF that is the package: named ``name`` or holding a ``package.xml`` whose ``<name>`` is
``name``).
"""

from __future__ import annotations

import contextlib
import math
import shlex
import xml.etree.ElementTree as ET
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from acres_lidar_ros.config.input_files import read_regular_file
from acres_lidar_ros.errors import ConfigError, SceneError
from acres_lidar_ros.sensor.pattern import mount_rotation

#: Largest URDF file and mesh file it names, bytes (only regular files are read).
MAX_URDF_FILE_BYTES = 16 << 20
MAX_URDF_MESH_BYTES = 256 << 20

BASE_LINK = "base_footprint"
"""The default link of the vehicle frame the body is traced in (REP 105's ``base_footprint``): the
frame of the sensors file's mount and of the poses."""
XACRO_NAMESPACE = "{http://www.ros.org/wiki/xacro}"
LIDAR_LINK = "lidar"
"""The default link of the sensor; it and its children are not part of the traced body."""

GEOMETRY_KINDS = ("box", "cylinder", "sphere", "mesh")


def transform(xyz_m: np.ndarray, rpy_rad: np.ndarray) -> np.ndarray:
    """(4, 4) homogeneous transform of an URDF ``<origin>``."""
    T = np.eye(4)
    T[:3, :3] = mount_rotation(rpy_rad)  # URDF rpy: fixed axes, R = Rz Ry Rx, as the sensor mount
    T[:3, 3] = np.asarray(xyz_m, dtype=np.float64)
    return T


def rpy_of_rotation(R: np.ndarray) -> np.ndarray:
    """(3,) roll, pitch, yaw in radians with ``R = Rz(yaw) Ry(pitch) Rx(roll)`` (the inverse of
    ``mount_rotation``; pitch in [-pi/2, pi/2])."""
    pitch = math.asin(max(-1.0, min(1.0, -float(R[2, 0]))))
    roll = math.atan2(float(R[2, 1]), float(R[2, 2]))
    yaw = math.atan2(float(R[1, 0]), float(R[0, 0]))
    return np.array([roll, pitch, yaw])


def expanded_name(path: Path) -> Path:
    """Where ``xacro`` would put the URDF of ``path``: ``robot.urdf.xacro`` -> ``robot.urdf``."""
    stem = path.name.removesuffix(".xacro")
    return path.with_name(stem if stem.endswith(".urdf") else f"{stem}.urdf")


def expand_xacro(path: Path) -> bytes:
    """The URDF that the xacro file ``path`` expands to (the ``xacro`` package, no ROS needed).

    Raises ``ConfigError`` when xacro is not installed or fails (naming the file and the command
    that expands it)."""
    command = f"xacro {shlex.quote(str(path))} > {shlex.quote(str(expanded_name(path)))}"
    try:
        import xacro
    except ImportError as exc:
        raise ConfigError(
            f"URDF {str(path)!r} is a xacro file and the xacro package is not installed: "
            f"pip install xacro, or expand it yourself ({command}) and give the .urdf"
        ) from exc
    try:
        document = xacro.process_file(str(path))
    except Exception as exc:  # xacro raises its own XacroException, NameError, IOError...
        raise ConfigError(
            f"URDF {str(path)!r}: xacro cannot expand it ({type(exc).__name__}: {exc}); expand it where its "
            f"packages and arguments are known ({command}) and give the .urdf"
        ) from exc
    return document.toxml().encode("utf-8")


def _is_xacro(path: Path, data: bytes) -> tuple[bool, ET.Element | None]:
    """Whether the file needs xacro, and its plain XML root when it parses as it is."""
    if path.suffix == ".xacro":
        return True, None
    try:
        root = ET.fromstring(data)
    except ET.ParseError as exc:
        if b"xacro" in data:  # e.g. "unbound prefix" of a xacro:macro without its namespace
            return True, None
        raise ConfigError(f"URDF {str(path)!r} does not parse as XML: {exc}") from exc
    return any(element.tag.startswith(XACRO_NAMESPACE) for element in root.iter()), root


@dataclass(frozen=True)
class Collision:
    """One collision shape of a link.

    Attributes
    ----------
    link : str
        Name of the link that owns the shape.
    kind : str
        ``box``, ``cylinder``, ``sphere`` or ``mesh``.
    T_link_shape : (4, 4) float64
        The ``<origin>`` of the collision element: shape frame -> link frame.
    size_m : (3,) float64
        Box: full edge lengths along the shape axes. Cylinder: (radius, radius, length), the
        axis along shape z, centred on the origin. Sphere: (radius, radius, radius). Mesh: the
        ``scale`` attribute (unitless, default 1 1 1).
    mesh_path : Path or None
        Resolved file of a mesh (it exists).
    """

    link: str
    kind: str
    T_link_shape: np.ndarray
    size_m: np.ndarray
    mesh_path: Path | None = None


@dataclass(frozen=True)
class Joint:
    name: str
    kind: str
    parent: str
    child: str
    T_parent_child: np.ndarray  # (4, 4) at the joint's zero position


@dataclass(frozen=True)
class Robot:
    """A parsed URDF.

    Attributes
    ----------
    name : str
    path : Path
        The file it was read from.
    links : tuple[str, ...]
        Link names in file order.
    joints : dict[str, Joint]
        Joints by the name of their child link.
    collisions : tuple[Collision, ...]
        Collision shapes of all links, in file order.
    """

    name: str
    path: Path
    links: tuple[str, ...]
    joints: dict[str, Joint] = field(repr=False)
    collisions: tuple[Collision, ...] = field(repr=False)

    @property
    def root(self) -> str:
        """The link that is no joint's child."""
        roots = [link for link in self.links if link not in self.joints]
        return roots[0]

    def T_root_link(self, link: str) -> np.ndarray:
        """(4, 4) pose of ``link`` in the root link's frame (joints at zero)."""
        if link not in self.links:
            raise ConfigError(f"URDF {str(self.path)!r} has no link {link!r}; links: {', '.join(self.links)}")
        T = np.eye(4)
        while link in self.joints:
            joint = self.joints[link]
            T = joint.T_parent_child @ T
            link = joint.parent
        return T

    def T_link_link(self, frame: str, link: str) -> np.ndarray:
        """(4, 4) ``T_frame_link``: coordinates of ``link`` into ``frame``."""
        return np.linalg.inv(self.T_root_link(frame)) @ self.T_root_link(link)

    def descendants(self, link: str) -> set[str]:
        """``link`` and every link below it in the tree."""
        out = {link}
        changed = True
        while changed:
            changed = False
            for joint in self.joints.values():
                if joint.parent in out and joint.child not in out:
                    out.add(joint.child)
                    changed = True
        return out


def _floats(text: str | None, count: int, where: str, default: tuple[float, ...] | None = None) -> np.ndarray:
    if text is None:
        if default is None:
            raise ConfigError(f"{where}: missing; expected {count} numbers")
        return np.array(default, dtype=np.float64)
    try:
        values = [float(v) for v in text.split()]
    except ValueError as exc:
        raise ConfigError(f"{where} = {text!r}: expected {count} numbers") from exc
    if len(values) != count or not all(math.isfinite(v) for v in values):
        raise ConfigError(f"{where} = {text!r}: expected {count} finite numbers")
    return np.array(values, dtype=np.float64)


def _origin(element: ET.Element, where: str) -> np.ndarray:
    origin = element.find("origin")
    if origin is None:
        return np.eye(4)
    xyz = _floats(origin.get("xyz"), 3, f"{where} origin xyz", (0.0, 0.0, 0.0))
    rpy = _floats(origin.get("rpy"), 3, f"{where} origin rpy", (0.0, 0.0, 0.0))
    return transform(xyz, rpy)


def _positive(value: np.ndarray, where: str) -> np.ndarray:
    if (value <= 0).any():
        raise ConfigError(f"{where} = {value.tolist()}: expected positive sizes")
    return value


def resolve_mesh_path(filename: str, urdf_path: Path) -> Path:
    """The file a mesh ``filename`` of ``urdf_path`` names; ``SceneError`` if it does not exist."""
    candidates: list[Path] = []
    if filename.startswith("package://"):
        package, _, rest = filename[len("package://") :].partition("/")
        try:
            from ament_index_python.packages import get_package_share_directory

            candidates.append(Path(get_package_share_directory(package)) / rest)
        except Exception:
            pass
        for ancestor in urdf_path.resolve().parents:
            manifest = ancestor / "package.xml"
            named = ancestor.name == package
            if manifest.is_file():
                with contextlib.suppress(ET.ParseError):
                    named = named or ET.parse(manifest).getroot().findtext("name") == package
            if named:
                candidates.append(ancestor / rest)
                break
    elif filename.startswith("file://"):
        candidates.append(Path(filename[len("file://") :]))
    else:
        path = Path(filename)
        candidates.append(path if path.is_absolute() else urdf_path.parent / path)
    for candidate in candidates:
        if candidate.is_file():
            return candidate
    tried = ", ".join(repr(str(c)) for c in candidates) or "no candidate location"
    raise SceneError(f"URDF {str(urdf_path)!r}: mesh {filename!r} does not exist (looked for {tried})")


def _collision(link: str, element: ET.Element, index: int, urdf_path: Path) -> Collision:
    where = f"URDF {str(urdf_path)!r}: link {link!r} collision {index}"
    geometry = element.find("geometry")
    shapes = [] if geometry is None else [g for g in geometry if g.tag in GEOMETRY_KINDS]
    if len(shapes) != 1:
        raise ConfigError(f"{where}: expected one geometry of {', '.join(GEOMETRY_KINDS)}, found {len(shapes)}")
    shape = shapes[0]
    T = _origin(element, where)
    if shape.tag == "box":
        size = _positive(_floats(shape.get("size"), 3, f"{where} box size"), f"{where} box size")
        return Collision(link, "box", T, size)
    if shape.tag == "cylinder":
        radius = _positive(_floats(shape.get("radius"), 1, f"{where} cylinder radius"), f"{where} cylinder radius")
        length = _positive(_floats(shape.get("length"), 1, f"{where} cylinder length"), f"{where} cylinder length")
        return Collision(link, "cylinder", T, np.array([radius[0], radius[0], length[0]]))
    if shape.tag == "sphere":
        radius = _positive(_floats(shape.get("radius"), 1, f"{where} sphere radius"), f"{where} sphere radius")
        return Collision(link, "sphere", T, np.full(3, radius[0]))
    filename = shape.get("filename")
    if not filename:
        raise ConfigError(f"{where}: mesh without a filename")
    scale = _positive(_floats(shape.get("scale"), 3, f"{where} mesh scale", (1.0, 1.0, 1.0)), f"{where} mesh scale")
    return Collision(link, "mesh", T, scale, resolve_mesh_path(filename, urdf_path))


def _joint_link(element: ET.Element, role: str, links: Collection[str], where: str) -> str:
    """The link a joint's ``<parent>`` or ``<child>`` names; ``ConfigError`` unless it is a link of the file."""
    found = element.find(role)
    link = None if found is None else found.get("link")
    if link is None or link not in links:
        raise ConfigError(f"{where}: {role} link {link!r} is not a link of the file; links: {', '.join(links)}")
    return link


def load_urdf(path: str | Path, required_links: tuple[str, ...] = ()) -> Robot:
    """Parse a URDF file.

    Parameters
    ----------
    path : the ``.urdf`` file, or a ``.xacro`` one (expanded with the ``xacro`` package).
    required_links : links that must exist (e.g. ``("base_footprint", "lidar")``).

    Raises
    ------
    ConfigError
        The file cannot be read or is not XML, it is xacro and xacro is missing or fails, the root is not ``<robot>``, a joint names an
        unknown link, the links do not form one tree, a number is malformed, or a required link is
        missing (the message names the file and the link).
    SceneError
        A mesh it names does not exist (the message names the file and the mesh).
    """
    path = Path(path)
    data = read_regular_file(path, "URDF", MAX_URDF_FILE_BYTES, ConfigError)  # no FIFO, no device
    needs_xacro, root = _is_xacro(path, data)
    if needs_xacro or root is None:
        try:
            root = ET.fromstring(expand_xacro(path))
        except ET.ParseError as exc:
            raise ConfigError(f"URDF {str(path)!r}: its xacro expansion does not parse as XML: {exc}") from exc
    if root.tag != "robot":
        raise ConfigError(f"URDF {str(path)!r}: the root element is <{root.tag}>; expected <robot>")

    links: list[str] = []
    collisions: list[Collision] = []
    for element in root.findall("link"):
        name = element.get("name")
        if not name:
            raise ConfigError(f"URDF {str(path)!r}: a <link> has no name")
        if name in links:
            raise ConfigError(f"URDF {str(path)!r}: link {name!r} is defined twice")
        links.append(name)
        for i, collision in enumerate(element.findall("collision")):
            collisions.append(_collision(name, collision, i, path))

    joints: dict[str, Joint] = {}
    for element in root.findall("joint"):
        name = element.get("name", "")
        where = f"URDF {str(path)!r}: joint {name!r}"
        parent, child = (_joint_link(element, role, links, where) for role in ("parent", "child"))
        if child in joints:
            raise ConfigError(f"{where}: link {child!r} is already the child of joint {joints[child].name!r}")
        joints[child] = Joint(name, element.get("type", "fixed"), parent, child, _origin(element, where))

    roots = [link for link in links if link not in joints]
    if len(roots) != 1:
        raise ConfigError(
            f"URDF {str(path)!r}: the links must form one tree with one root; roots found: {roots or 'none (a cycle)'}"
        )
    robot = Robot(root.get("name", ""), path, tuple(links), joints, tuple(collisions))
    reached = robot.descendants(roots[0])
    if len(reached) != len(links):
        raise ConfigError(f"URDF {str(path)!r}: links {sorted(set(links) - reached)} are in a joint cycle")
    for link in required_links:
        if link not in links:
            raise ConfigError(f"URDF {str(path)!r} has no link {link!r}; links: {', '.join(links)}")
    return robot
