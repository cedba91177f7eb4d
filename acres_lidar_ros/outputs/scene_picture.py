"""A scene seen from above (``acres-lidar scene-preview``): objects by class, the terrain's relief,
the crop patches, object names, a trajectory, a legend and a scale bar.

The picture is traced, not drawn from the triangles: one vertical ray per pixel from above the
scene (Open3D's RaycastingScene over the scene's triangles) gives the class of the top surface
there, so what the picture shows is what a ray from above meets. Drawn with matplotlib (the
optional ``plot`` extra).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from acres_lidar_ros.config.material_table import CLASS_ID, CLASS_NAMES
from acres_lidar_ros.errors import ConfigError, OutputError
from acres_lidar_ros.outputs.files import atomic_write
from acres_lidar_ros.outputs.preview import CLASS_RGB
from acres_lidar_ros.scene.scene_model import Scene

#: Largest picture side, px, and most object names written on it.
MAX_SIZE_PX = 4000
MAX_NAMED_OBJECTS = 40


def top_classes(scene: Scene, centre_xy_m: np.ndarray, half_width_m: float, size_px: int) -> tuple[np.ndarray, ...]:
    """(class (size, size) int64, -1 where no surface; height of the top surface (size, size)
    float64, m) at the pixel centres; row 0 is the north edge, column 0 the west edge."""
    import open3d as o3d

    metres_per_px = 2.0 * half_width_m / size_px
    offsets = (np.arange(size_px) + 0.5) * metres_per_px - half_width_m
    x = centre_xy_m[0] + offsets[None, :].repeat(size_px, 0)
    y = centre_xy_m[1] - offsets[:, None].repeat(size_px, 1)
    local = np.asarray(scene.vertices_m, float).mean(axis=0)  # float32 rays stay exact near the scene
    top = float(np.max(scene.vertices_m[:, 2])) + 1.0
    rays = np.zeros((size_px * size_px, 6), np.float32)
    rays[:, 0] = (x - local[0]).ravel()
    rays[:, 1] = (y - local[1]).ravel()
    rays[:, 2] = top - local[2]
    rays[:, 5] = -1.0
    caster = o3d.t.geometry.RaycastingScene()
    caster.add_triangles(
        o3d.core.Tensor.from_numpy(np.ascontiguousarray(scene.vertices_m - local, np.float32)),
        o3d.core.Tensor.from_numpy(np.ascontiguousarray(scene.triangles, np.uint32)),
    )
    hit = caster.cast_rays(o3d.core.Tensor.from_numpy(rays))
    t = hit["t_hit"].numpy().astype(np.float64)
    primitive = hit["primitive_ids"].numpy().astype(np.int64)
    found = np.isfinite(t)
    classes = np.full(t.shape, -1, np.int64)
    classes[found] = np.asarray(scene.triangle_class)[primitive[found]]
    height = np.where(found, top - t, np.nan)
    return classes.reshape(size_px, size_px), height.reshape(size_px, size_px)


def scene_picture_png(
    scene: Scene,
    centre_xy_m: np.ndarray,
    half_width_m: float,
    size_px: int = 900,
    trajectory_xy_m: np.ndarray | None = None,
    title: str = "",
) -> bytes:
    """PNG bytes of the scene from above (module docstring)."""
    if not (isinstance(size_px, int) and 64 <= size_px <= MAX_SIZE_PX):
        raise ConfigError(f"--size {size_px!r}: expected an integer from 64 to {MAX_SIZE_PX} px")
    if not (np.isfinite(half_width_m) and half_width_m > 0):
        raise ConfigError(f"--half-width {half_width_m!r}: expected a number of metres > 0")
    try:
        import matplotlib

        matplotlib.use("Agg", force=True)
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
    except ImportError as exc:
        raise OutputError(f"scene-preview needs matplotlib ({exc}); pip install 'acres_lidar_ros[plot]'") from exc
    classes, height = top_classes(scene, np.asarray(centre_xy_m, float), float(half_width_m), size_px)
    rgb = np.zeros(classes.shape + (3,))
    rgb[:] = [16 / 255, 16 / 255, 20 / 255]
    found = classes >= 0
    rgb[found] = CLASS_RGB[classes[found]] / 255.0
    ground = classes == CLASS_ID["ground"]
    if ground.any():  # the relief: darker low, lighter high
        z = height[ground]
        span = float(np.ptp(z))
        shade = 0.55 + 0.45 * (z - z.min()) / span if span > 1e-3 else np.ones_like(z)
        rgb[ground] *= shade[:, None]
    x0, y0 = centre_xy_m[0] - half_width_m, centre_xy_m[1] - half_width_m
    x1, y1 = centre_xy_m[0] + half_width_m, centre_xy_m[1] + half_width_m
    figure = Figure(figsize=(9, 9), dpi=size_px / 9)
    axes = figure.add_axes((0.07, 0.07, 0.9, 0.86))
    axes.imshow(rgb, extent=(x0, x1, y0, y1), origin="upper", interpolation="nearest")
    present = set(np.unique(classes[found]).tolist())
    crops = scene.crops
    if len(crops):
        inside = (np.abs(crops.centre_xy_m[:, 0] - centre_xy_m[0]) < half_width_m) & (
            np.abs(crops.centre_xy_m[:, 1] - centre_xy_m[1]) < half_width_m
        )
        if inside.any():
            colours = CLASS_RGB[crops.class_id[inside]] / 255.0
            axes.scatter(
                crops.centre_xy_m[inside, 0], crops.centre_xy_m[inside, 1], s=2, c=colours, marker="s", linewidths=0
            )
            present |= set(np.unique(crops.class_id[inside]).tolist())
    _names(axes, scene, centre_xy_m, half_width_m)
    if trajectory_xy_m is not None and len(trajectory_xy_m):
        axes.plot(*np.asarray(trajectory_xy_m).T, color="white", linewidth=1.2, label="trajectory")
        axes.plot(*trajectory_xy_m[0], marker="o", color="white", markersize=6)
    _scale_bar(axes, x0, y0, 2 * half_width_m)
    handles = [Patch(color=CLASS_RGB[c] / 255.0, label=f"{c} {CLASS_NAMES[c]}") for c in sorted(present)]
    if trajectory_xy_m is not None:
        handles.append(Patch(color="white", label="trajectory (o: start)"))
    axes.legend(handles=handles, loc="upper right", fontsize=8, framealpha=0.8)
    axes.set_xlim(x0, x1)
    axes.set_ylim(y0, y1)
    axes.set_xlabel("x (east), m")
    axes.set_ylabel("y (north), m")
    axes.set_title(title or "scene from above: classes of the top surface")
    from io import BytesIO

    buffer = BytesIO()
    figure.savefig(buffer, format="png")
    return buffer.getvalue()


def _names(axes, scene: Scene, centre_xy_m: np.ndarray, half_width_m: float) -> None:
    """The names of the scene's objects at their centres, when there are few."""
    count = len(scene.object_names)
    if count - 1 > MAX_NAMED_OBJECTS or count < 2:
        return
    instance = np.asarray(scene.triangle_instance)
    first = np.asarray(scene.triangles)[:, 0]
    sums = np.zeros((count, 2))
    np.add.at(sums, instance, scene.vertices_m[first, :2])
    n = np.bincount(instance, minlength=count)
    for oid in range(1, count):
        if n[oid] == 0:
            continue
        x, y = sums[oid] / n[oid]
        if abs(x - centre_xy_m[0]) < half_width_m and abs(y - centre_xy_m[1]) < half_width_m:
            axes.annotate(scene.object_names[oid], (x, y), color="white", fontsize=7, ha="center", va="bottom")


def _scale_bar(axes, x0: float, y0: float, width_m: float) -> None:
    """A bar of a round length (1, 2 or 5 x 10^k m, near a fifth of the width) at the bottom left."""
    target = width_m / 5.0
    power = 10.0 ** np.floor(np.log10(target))
    length = max(m * power for m in (1.0, 2.0, 5.0) if m * power <= target)
    x, y = x0 + 0.04 * width_m, y0 + 0.04 * width_m
    axes.plot([x, x + length], [y, y], color="white", linewidth=3)
    axes.annotate(f"{length:g} m", (x + length / 2, y + 0.012 * width_m), color="white", fontsize=9, ha="center")


def write_scene_picture(path: Path, png: bytes, overwrite: bool = False) -> Path:
    """Write the picture whole (``files.atomic_write``)."""
    return atomic_write(path, png, overwrite=overwrite)
