"""Gazebo SDF worlds as scene geometry (docs/scene_format.md, "Gazebo worlds").

``read_sdf_world`` reads a world's ``<model>``s and ``<include>``s (nested models too) and turns
each link's ``<visual>`` geometry into triangles in the world frame: ``box``, ``cylinder``,
``sphere``, ``ellipsoid``, ``plane`` and ``mesh`` (``mesh_files.read_mesh_file``). Poses nest:
a model's ``<pose>`` is in its parent's frame (the world, or the enclosing model), a link's in its
model's, a visual's in its link's; an ``<include>``'s ``<pose>`` and ``<name>`` replace the
included model's. ``model://NAME/...`` resolves to the folder NAME under the search path (the
scene file's ``model_path`` entries, then ``GZ_SIM_RESOURCE_PATH``, then ``GAZEBO_MODEL_PATH``),
whose ``model.config`` names the model's SDF file (or ``model.sdf``). Other URIs are paths
relative to the file that names them, or ``file://`` paths: absolute, or (Gazebo classic's
``file://media/...``) relative to the file's folder, the search path or ``GAZEBO_RESOURCE_PATH``.
An ``<include>`` whose name is in ``skip`` is not looked for.

A ``<heightmap>`` visual is the ground, not an object: ``read_sdf_world`` collects it (its element,
world pose and file, ``SdfHeightmap``) where the caller asks for it, for ``sdf_heightmap`` to make the
scene's terrain grid of it; elsewhere it is refused with that route.

Refusals are ``SceneError``s that name the SDF file, the element (model, link and visual names)
and what is allowed; a model or link named in ``skip`` is left out whole.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from acres_lidar_ros.config.input_files import read_regular_file
from acres_lidar_ros.config.material_table import CLASS_NAMES, MATERIAL_NAMES
from acres_lidar_ros.errors import SceneError
from acres_lidar_ros.scene import scene_limits, shapes
from acres_lidar_ros.scene.boxes import QUATERNION_NORM_TOLERANCE, rotation_from_quaternion_xyzw
from acres_lidar_ros.scene.mesh_files import read_mesh_file
from acres_lidar_ros.scene.object_pose import rotation_rpy

if TYPE_CHECKING:
    from acres_lidar_ros.scene.builder import SceneBuilder
    from acres_lidar_ros.scene.scene_file import _Reader

#: Largest SDF or model.config file, bytes; deepest nesting of includes and models; most files.
MAX_SDF_FILE_BYTES = 16 << 20
MAX_SDF_DEPTH = 16
MAX_SDF_FILES = 1000
#: Environment variables of Gazebo's model search path, in the order they are searched.
MODEL_PATH_VARIABLES = ("GZ_SIM_RESOURCE_PATH", "GAZEBO_MODEL_PATH")
#: Gazebo classic's media folders, searched for a relative ``file://`` URI after the model path.
RESOURCE_PATH_VARIABLE = "GAZEBO_RESOURCE_PATH"
GEOMETRY_KINDS = ("box", "cylinder", "sphere", "ellipsoid", "capsule", "cone", "plane", "mesh")
#: Segments of a cylinder and subdivisions of a sphere or ellipsoid (1280 triangles).
CYLINDER_SEGMENTS = 64
SPHERE_SUBDIVISIONS = 3


@dataclass(frozen=True)
class SdfLink:
    """One link's visuals, in the world frame.

    Attributes
    ----------
    name : str
        The scoped name ``model::link`` (nested models ``outer::inner::link``).
    scopes : tuple of str
        The names a class or material map may use, most specific first: the scoped link name,
        the link name, then the models from the innermost out.
    vertices_m : (v, 3) float64
    triangles : (t, 3) int64
    """

    name: str
    scopes: tuple[str, ...]
    vertices_m: np.ndarray
    triangles: np.ndarray


@dataclass(frozen=True)
class SdfHeightmap:
    """One ``<heightmap>`` visual: its element, the visual's pose in the world and where it stands.

    Attributes
    ----------
    where : str
        The SDF file and the element's names, for messages.
    element : the ``<heightmap>`` element
    T_world_visual : (4, 4) float64
    file : Path
        The SDF file that holds it (its URIs are relative to it).
    """

    where: str
    element: ElementTree.Element
    T_world_visual: np.ndarray
    file: Path


def model_search_path(extra: list[Path]) -> list[Path]:
    """The folders searched for ``model://`` names: ``extra``, then the environment's."""
    folders = list(extra)
    for variable in MODEL_PATH_VARIABLES:
        folders += [Path(p) for p in os.environ.get(variable, "").split(os.pathsep) if p]
    return folders


def read_sdf_world(
    path: Path,
    search_path: list[Path],
    skip: frozenset[str] = frozenset(),
    heightmaps: list[SdfHeightmap] | None = None,
) -> list[SdfLink]:
    """The links with visuals of the SDF world (or model) file ``path`` (module docstring); its
    ``<heightmap>`` visuals are appended to ``heightmaps`` (refused where it is None)."""
    reader = sdf_reader(search_path, skip, heightmaps)
    root = reader.parse(path)
    worlds = root.findall("world")
    if len(worlds) > 1:
        raise SceneError(f"{path}: has {len(worlds)} <world> elements: give a file with one world")
    holder = worlds[0] if worlds else root
    if not worlds and holder.find("model") is None:
        raise SceneError(f"{path}: <{root.tag}> holds no <world> and no <model>: not an SDF world or model file")
    reader.children(holder, np.eye(4), (), path, 0)
    return reader.links


def sdf_reader(search_path: list[Path], skip: frozenset[str], heightmaps: list[SdfHeightmap] | None) -> _SdfReader:
    """The reader of SDF files on ``search_path`` (its ``resource`` resolves a URI as Gazebo's)."""
    return _SdfReader(search_path, skip, heightmaps)


class _SdfReader:
    def __init__(self, search_path: list[Path], skip: frozenset[str], heightmaps: list[SdfHeightmap] | None) -> None:
        self.search_path = search_path
        self.skip = skip
        self.heightmaps = heightmaps
        self.links: list[SdfLink] = []
        self.files = 0

    def parse(self, path: Path) -> ElementTree.Element:
        self.files += 1
        if self.files > MAX_SDF_FILES:
            raise SceneError(f"{path}: more than {MAX_SDF_FILES} SDF files included: the limit")
        if not path.exists():
            raise SceneError(f"SDF file {path} does not exist")
        data = read_regular_file(path, "SDF file", MAX_SDF_FILE_BYTES, SceneError)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as err:
            raise SceneError(f"{path}: byte {err.start} is not UTF-8: an SDF file is UTF-8 XML") from err
        try:
            return ElementTree.fromstring(_declare_prefixes(text))
        except ElementTree.ParseError as err:
            raise SceneError(f"{path}: does not parse as XML: {err}") from err

    def children(self, holder: ElementTree.Element, T: np.ndarray, scope: tuple[str, ...], file: Path, depth: int):
        for element in holder:
            if element.tag == "model":
                self.model(element, T, scope, file, depth, None)
            elif element.tag == "include":
                self.include(element, T, scope, file, depth)

    def include(self, element: ElementTree.Element, T: np.ndarray, scope: tuple[str, ...], file: Path, depth: int):
        where = f"{file}: <include> in {'::'.join(scope) or 'the world'}"
        uri = _text(element, "uri", where)
        if uri is None:
            raise SceneError(f"{where}: has no <uri>")
        # Skipped by its <name> or its model:// name before it is looked for (e.g. a sun with no visuals).
        if (_text(element, "name", where) or _uri_model_name(uri)) in self.skip:
            return
        model_file = self.model_file(uri, file, where)
        root = self.parse(model_file)
        model = root.find("model")
        if model is None:
            raise SceneError(f"{model_file} (included as {uri!r} by {file}): holds no <model>")
        pose = element.find("pose")
        name = _text(element, "name", where) or model.get("name", "")
        self.model(model, T, scope, model_file, depth + 1, (name, pose))

    def model(self, element, T_parent, scope, file: Path, depth: int, override) -> None:
        if depth > MAX_SDF_DEPTH:
            raise SceneError(f"{file}: models and includes nest deeper than {MAX_SDF_DEPTH} levels")
        name = element.get("name", "") if override is None else override[0]
        if name in self.skip:
            return
        inner = (*scope, name)
        where = f"{file}: model '{'::'.join(inner)}'"
        pose = element.find("pose") if override is None or override[1] is None else override[1]
        T_model = T_parent @ _pose(pose, where)
        for link in element.findall("link"):
            self.link(link, T_model, inner, file, where)
        self.children(element, T_model, inner, file, depth + 1)

    def link(self, element, T_model: np.ndarray, scope: tuple[str, ...], file: Path, where_model: str) -> None:
        name = element.get("name", "")
        scoped = "::".join((*scope, name))
        if name in self.skip or scoped in self.skip:
            return
        where = f"{where_model} link '{name}'"
        T_link = T_model @ _pose(element.find("pose"), where)
        vertices, triangles, count = [], [], 0
        for visual in element.findall("visual"):
            at = f"{where} visual '{visual.get('name', '')}'"
            T = T_link @ _pose(visual.find("pose"), at)
            geometry = visual.find("geometry")
            if geometry is None:
                raise SceneError(f"{at}: has no <geometry>")
            heightmap = geometry.find("heightmap")
            if heightmap is not None and len(geometry) == 1:
                if self.heightmaps is None:
                    raise SceneError(
                        f"{at} <heightmap>: a heightmap is the ground: give this world as the scene file's "
                        "terrain.sdf_heightmap (its heightmap becomes the terrain grid), or name the model or link "
                        "in the sdf_world's skip list"
                    )
                self.heightmaps.append(SdfHeightmap(f"{at} <heightmap>", heightmap, T, file))
                continue
            v, t = self.geometry(geometry, file, at)
            vertices.append(v @ T[:3, :3].T + T[:3, 3])
            triangles.append(t + count)
            count += len(v)
        if vertices:
            scopes = (scoped, name, *reversed(scope))
            self.links.append(SdfLink(scoped, scopes, np.concatenate(vertices), np.concatenate(triangles)))

    def geometry(self, geometry: ElementTree.Element, file: Path, where: str) -> tuple[np.ndarray, np.ndarray]:
        kinds = [child for child in geometry if child.tag in GEOMETRY_KINDS or child.tag == "heightmap"]
        if len(kinds) != 1:
            found = ", ".join(f"<{c.tag}>" for c in geometry) or "nothing"
            raise SceneError(
                f"{where}: <geometry> holds {found}: allowed one of {', '.join(GEOMETRY_KINDS)}; or name the model "
                "or link in the sdf_world's skip list"
            )
        shape = kinds[0]
        at = f"{where} <{shape.tag}>"
        if shape.tag == "box":
            size = _numbers(shape, "size", 3, at, positive=True)
            v, t = shapes.box(size)
            return v - [0.0, 0.0, size[2] / 2], t
        if shape.tag == "cylinder":
            radius = _numbers(shape, "radius", 1, at, positive=True)[0]
            length = _numbers(shape, "length", 1, at, positive=True)[0]
            v, t = shapes.cylinder(radius, length, CYLINDER_SEGMENTS)
            return v - [0.0, 0.0, length / 2], t
        if shape.tag == "sphere":
            return shapes.sphere(_numbers(shape, "radius", 1, at, positive=True)[0], SPHERE_SUBDIVISIONS)
        if shape.tag == "ellipsoid":
            return shapes.ellipsoid(_numbers(shape, "radii", 3, at, positive=True), SPHERE_SUBDIVISIONS)
        if shape.tag in ("capsule", "cone"):
            radius = _numbers(shape, "radius", 1, at, positive=True)[0]
            length = _numbers(shape, "length", 1, at, positive=True)[0]
            if shape.tag == "cone":  # its base at -length / 2, its tip at +length / 2
                profile = np.array([[0.0, -length / 2], [radius, -length / 2], [0.0, length / 2]])
            else:  # a cylinder of the length between the centres of two half spheres
                polar = np.linspace(0.0, np.pi / 2, 9)
                cap = np.stack([radius * np.sin(polar), length / 2 + radius * np.cos(polar)], 1)
                profile = np.vstack([cap * [1, -1], cap[::-1]])  # bottom pole to top pole
            return shapes.lathe(profile, CYLINDER_SEGMENTS)
        if shape.tag == "plane":
            return _plane(shape, at)
        if shape.tag == "mesh":
            uri = _text(shape, "uri", at)
            if uri is None:
                raise SceneError(f"{at}: has no <uri>")
            if shape.find("submesh") is not None:
                raise SceneError(f"{at}: <submesh> is not read: export the sub-mesh as its own file")
            scale = _numbers(shape, "scale", 3, at, positive=True) if shape.find("scale") is not None else np.ones(3)
            v, t = read_mesh_file(self.resource(uri, file, at), at)
            return v * scale, t
        raise SceneError(
            f"{at}: <{shape.tag}> visuals are not read here: allowed {', '.join(GEOMETRY_KINDS)}; a heightmap "
            "alone in its <geometry> (terrain.sdf_heightmap); or name the model or link in the sdf_world's skip list"
        )

    def model_file(self, uri: str, file: Path, where: str) -> Path:
        target = self.resource(uri, file, where)
        if target.is_file():
            return target
        config = target / "model.config"
        if config.is_file():
            root = self.parse(config)
            names = [e.text.strip() for e in root.iter("sdf") if e.text and e.text.strip()]
            if not names:
                raise SceneError(f"{config}: names no <sdf> file")
            return target / names[0]
        if (target / "model.sdf").is_file():
            return target / "model.sdf"
        raise SceneError(f"{where}: {uri!r} resolves to {target}, which holds no model.config and no model.sdf")

    def resource(self, uri: str, file: Path, where: str) -> Path:
        if uri.startswith("model://"):
            rest = uri[len("model://") :]
            name, _, tail = rest.partition("/")
            for folder in self.search_path:
                if (folder / name).is_dir():
                    return folder / name / tail if tail else folder / name
            searched = ", ".join(str(f) for f in self.search_path) or "nothing"
            raise SceneError(
                f"{where}: {uri!r}: no folder {name!r} in the model path ({searched}); add its parent folder to the "
                f"sdf_world's model_path or to {' or '.join(MODEL_PATH_VARIABLES)}"
            )
        if uri.startswith("file://"):
            target = Path(uri[len("file://") :])
            if target.is_absolute():
                return target
            # Gazebo classic's file://media/...: relative to a resource folder (GAZEBO_RESOURCE_PATH).
            folders = [file.parent, *self.search_path]
            folders += [Path(f) for f in os.environ.get(RESOURCE_PATH_VARIABLE, "").split(os.pathsep) if f]
            return next((f / target for f in folders if (f / target).exists()), file.parent / target)
        if re.match(r"^[a-z][a-z0-9+.-]*://", uri):
            raise SceneError(
                f"{where}: {uri!r}: only model://, file:// and relative paths are read (nothing is downloaded); "
                "download the model (e.g. gz fuel download -u URL) and add its folder to the model path"
            )
        return file.parent / uri


def _uri_model_name(uri: str) -> str:
    """NAME of ``model://NAME/...`` (other URIs as they are)."""
    return uri[len("model://") :].split("/")[0] if uri.startswith("model://") else uri


def _declare_prefixes(text: str) -> str:
    """SDF files use prefixes such as ``gz:`` without declaring them (sdformat's XML reader does
    not check namespaces): declare each undeclared one on the root element so XML parses it."""
    prefixes = set(re.findall(r"</?([A-Za-z_][\w.-]*):[A-Za-z_]", text)) | set(
        re.findall(r"\s([A-Za-z_][\w.-]*):[A-Za-z_][\w.-]*\s*=", text)
    )
    prefixes -= {"xml", "xmlns"}
    missing = [p for p in sorted(prefixes) if not re.search(rf"xmlns:{re.escape(p)}\s*=", text)]
    if not missing:
        return text
    declarations = "".join(f' xmlns:{p}="urn:sdf-prefix:{p}"' for p in missing)
    match = re.search(r"<(?![?!])[A-Za-z_][\w.:-]*", text)
    if match is None:
        return text
    return text[: match.end()] + declarations + text[match.end() :]


def _text(element: ElementTree.Element, tag: str, where: str) -> str | None:
    child = element.find(tag)
    if child is None:
        return None
    value = (child.text or "").strip()
    if not value:
        raise SceneError(f"{where}: <{tag}> is empty")
    return value


def _numbers(element: ElementTree.Element, tag: str, count: int, where: str, positive: bool = False) -> np.ndarray:
    text = _text(element, tag, where)
    if text is None:
        raise SceneError(f"{where}: has no <{tag}>")
    try:
        values = np.array([float(v) for v in text.split()])
    except ValueError:
        values = np.array([])
    if len(values) != count or not np.isfinite(values).all() or (positive and not (values > 0).all()):
        raise SceneError(f"{where} <{tag}> = {text[:60]!r}: must be {count} finite numbers{' > 0' if positive else ''}")
    return values


def _pose(element: ElementTree.Element | None, where: str) -> np.ndarray:
    """(4, 4) of an SDF ``<pose>``: x y z roll pitch yaw (radians, or degrees with
    ``degrees="true"``), or x y z qx qy qz qw with ``rotation_format="quat_xyzw"``."""
    T = np.eye(4)
    if element is None or not (element.text or "").strip():
        return T
    relative = element.get("relative_to", "")
    if relative:
        raise SceneError(
            f"{where}: <pose relative_to={relative!r}>: frames other than the parent's are not read; give the pose "
            "in the parent's frame"
        )
    quaternion = element.get("rotation_format", "euler_rpy") == "quat_xyzw"
    values = _numbers_text(element.text or "", 7 if quaternion else 6, f"{where} <pose>")
    T[:3, 3] = values[:3]
    if quaternion:
        q = values[3:]
        if abs(float(np.linalg.norm(q)) - 1.0) > QUATERNION_NORM_TOLERANCE:
            raise SceneError(f"{where} <pose>: quaternion {q.tolist()} has norm {np.linalg.norm(q):.9g}: must be 1")
        T[:3, :3] = rotation_from_quaternion_xyzw(q)
    else:
        angles = values[3:]
        if element.get("degrees", "false").strip().lower() in ("true", "1"):
            angles = np.radians(angles)
        T[:3, :3] = rotation_rpy(*(float(a) for a in angles))
    return T


def _numbers_text(text: str, count: int, where: str) -> np.ndarray:
    try:
        values = np.array([float(v) for v in text.split()])
    except ValueError:
        values = np.array([])
    if len(values) != count or not np.isfinite(values).all():
        raise SceneError(f"{where} = {text.strip()[:60]!r}: must be {count} finite numbers")
    return values


def _plane(shape: ElementTree.Element, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Two triangles of the plane's ``<size>`` about its origin, normal ``<normal>``."""
    normal = _numbers(shape, "normal", 3, where) if shape.find("normal") is not None else np.array([0.0, 0.0, 1.0])
    size = _numbers(shape, "size", 2, where, positive=True)
    n = normal / np.linalg.norm(normal) if np.linalg.norm(normal) > 0 else None
    if n is None:
        raise SceneError(f"{where} <normal>: must not be 0 0 0")
    # The turn taking +z to n (about z x n); +z itself when n is +z, a half turn about x when -z.
    axis = np.cross([0.0, 0.0, 1.0], n)
    sin, cos = float(np.linalg.norm(axis)), float(n[2])
    if sin < 1e-12:
        turn = np.eye(3) if cos > 0 else np.diag([1.0, -1.0, -1.0])
    else:
        k = axis / sin
        K = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
        turn = np.eye(3) + sin * K + (1 - cos) * K @ K
    hx, hy = size / 2
    corners = np.array([[-hx, -hy, 0.0], [hx, -hy, 0.0], [hx, hy, 0.0], [-hx, hy, 0.0]]) @ turn.T
    return corners, np.array([[0, 1, 2], [0, 2, 3]], np.int64)


#: Keys of a scene file's ``sdf_world`` object.
SDF_WORLD_KEYS = {"type", "name", "path", "model_path", "class", "material", "classes", "materials", "skip"}


def add_sdf_world(r: _Reader, b: SceneBuilder, obj: dict, key: str) -> None:
    """The scene file's ``{"type": "sdf_world", ...}`` object: each link with visuals becomes one
    mesh object named ``model::link``, its class and material from ``classes`` and ``materials``
    (by scoped link name, link name or model name, the most specific first) or the defaults."""
    rel = r.required(obj, "path", key)
    if not isinstance(rel, str) or not rel or "\0" in rel:
        raise r.fail(f"{key}.path", rel, "must be the path of an SDF world file relative to the scene file")
    folders = _strings(r, obj, "model_path", key, "folders relative to the scene file")
    skip = frozenset(_strings(r, obj, "skip", key, "model or link names"))
    default_class = r.name_of(obj, "class", key, CLASS_NAMES, default="other") or "other"
    default_material = r.name_of(obj, "material", key, MATERIAL_NAMES)
    classes = _name_map(r, obj, "classes", key, CLASS_NAMES)
    materials = _name_map(r, obj, "materials", key, MATERIAL_NAMES)
    file = r.base_dir / rel
    # The world whose heightmap is the scene's terrain (terrain.sdf_heightmap): its heightmaps are left out here.
    ground: list[SdfHeightmap] | None = (
        [] if r.sdf_heightmap_file is not None and r.sdf_heightmap_file == file.resolve() else None
    )
    try:
        links = read_sdf_world(file, model_search_path([r.base_dir / f for f in folders] + [file.parent]), skip, ground)
    except SceneError as err:
        raise SceneError(f"{r.path}: {key}.path = {rel!r}: {err}") from err
    if not links:
        raise SceneError(f"{r.path}: {key}.path = {rel!r}: {file} has no link with a <visual> (after skip)")
    known = {s for link in links for s in link.scopes}
    for table_name, table in (("classes", classes), ("materials", materials)):
        unknown = sorted(set(table) - known)
        if unknown:
            raise r.fail(
                f"{key}.{table_name}",
                unknown[0],
                f"names no model or link of {file}; names: {', '.join(sorted(known))[:400]}",
            )
    prefix = f"{obj['name']}/" if isinstance(obj.get("name"), str) else ""
    top = scene_limits.MAX_SCENE_NUMBER
    for link in links:
        if not (np.abs(link.vertices_m) <= top).all():
            raise SceneError(f"{r.path}: {key}: {file}: link {link.name!r} reaches beyond {top:g} m")
        cls = next((classes[s] for s in link.scopes if s in classes), default_class)
        material = next((materials[s] for s in link.scopes if s in materials), default_material)
        b.add_mesh(link.vertices_m, link.triangles, cls, material, False, prefix + link.name)


def _strings(r: _Reader, obj: dict, name: str, key: str, what: str) -> list[str]:
    value: Any = obj.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise r.fail(f"{key}.{name}", value, f"must be a list of {what}")
    return list(value)


def _name_map(r: _Reader, obj: dict, name: str, key: str, allowed: tuple[str, ...]) -> dict[str, str]:
    value: Any = obj.get(name, {})
    if not isinstance(value, dict):
        raise r.fail(f"{key}.{name}", value, "must be an object of model or link name -> name")
    for k, v in value.items():
        if not isinstance(v, str) or v not in allowed:
            raise r.fail(f"{key}.{name}.{k}", v, f"allowed: {', '.join(allowed)}")
    return dict(value)
