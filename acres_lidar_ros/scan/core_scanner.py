"""``model: core`` behind the ``Scanner`` interface: ACRES Core's LiDAR (``core_scan``) giving ``Scan``s,
so ``acres-lidar scan`` and ``record`` write its scans with every output the full model has.

A core scan has one slot per beam; every beam is cast from the sensor pose at the scan stamp (no
motion distortion: ``time_offset_s`` is 0); clear air. The body's cells carry the body's class,
material and instance as the full model's do.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from acres_lidar_ros.body.self_returns import SELF_CLASS_ID, SELF_MATERIAL_ID, SelfReturnTable
from acres_lidar_ros.config.sensors import SensorConfig
from acres_lidar_ros.errors import ConfigError
from acres_lidar_ros.radiometry.returns import FLAG_FIRST, FLAG_LAST, FLAG_STRONGEST, Returns
from acres_lidar_ros.scan.core_cast import LIDAR_SELF
from acres_lidar_ros.scan.core_scan import CoreLidar, CoreOptions
from acres_lidar_ros.scan.scan_types import Scan, ScanOptions
from acres_lidar_ros.scan.scanner import Scanner
from acres_lidar_ros.scan.sweep import Sweep
from acres_lidar_ros.scene.instances import BODY_INSTANCE, NO_INSTANCE
from acres_lidar_ros.sensor.poses import PoseHistory

if TYPE_CHECKING:
    from acres_lidar_ros.scene.scene_model import Scene
    from acres_lidar_ros.tracing.trace import Tracer

MODELS = ("full", "core")
"""The LiDAR models a run can trace with: the spec's full model, or ACRES Core's (docs/calibration.md, ACRES Core's LiDAR)."""


def core_refusals(options: ScanOptions) -> list[str]:
    """The options set in ``options`` that ACRES Core's LiDAR has not: cell truth, the radiometry
    off, rain and fog (by their option names: the node's parameters)."""
    return [
        name
        for name, on in (
            ("truth", options.truth),
            ("radiometry", not options.radiometry),
            ("rain_mm_per_h", options.rain_mm_per_h > 0),
            ("visibility_m", options.visibility_m != float("inf")),
        )
        if on
    ]


def core_refusal_message(refused: Sequence[str]) -> str:
    return (
        f"model core with {', '.join(refused)} set: ACRES Core's LiDAR has no cell truth, always its radiometry "
        "and no rain or fog (truth false, radiometry true, rain_mm_per_h 0, visibility_m inf), or use model full"
    )


class CoreScanner(Scanner):
    """A ``Scanner`` whose scans are ACRES Core's (``CoreLidar``).

    ``options`` give the seed, ``foliage`` and ``self_returns``; ``core_noise`` is ``bNoise``
    (off by default, whatever ``options.noise`` says: the full model's noise is on by default,
    ACRES Core's is not).
    """

    model_name = "core"

    def __init__(
        self,
        config: SensorConfig,
        scene: Scene | None = None,
        options: ScanOptions = ScanOptions(),
        tracer: Tracer | None = None,
        self_table: SelfReturnTable | None = None,
        core_noise: bool = False,
    ) -> None:
        refused = core_refusals(options)
        if refused:
            raise ConfigError(core_refusal_message(refused))
        super().__init__(config, scene, options, tracer, self_table)
        self.core_noise = bool(core_noise)
        self._core: CoreLidar | None = None

    @property
    def core(self) -> CoreLidar:
        """The ACRES Core LiDAR of the current config (built on first use, again after a change), in
        the tracer's scene frame (``Tracer.T_scene_odom``: ``--odom-in-scene``)."""
        core = self._core
        if (
            core is None
            or core.config is not self.config
            or core.self_table is not self.self_table
            or core.caster.scene is not self.tracer.scene
            or core.caster.T_scene_odom is not self.tracer.T_scene_odom
        ):
            core = self._core = CoreLidar(self.config, self.tracer.scene, self.self_table, self.tracer.T_scene_odom)
        return core

    @property
    def core_options(self) -> CoreOptions:
        o = self.options
        return CoreOptions(noise=self.core_noise, foliage=o.foliage, self_returns=o.self_returns, seed=o.seed)

    @property
    def sub_rays(self) -> int:
        return 1

    def start_sweep(self, stamp_ns: int, boxes: Sequence = (), index: int | None = None) -> CoreSweep:
        """The sweep ending at ``stamp_ns`` as the node's loop traces it: a core scan has no columns
        to trace ahead (every beam is cast from the pose at the stamp), so the whole scan is traced
        by its ``finish`` (``CoreSweep``)."""
        if index is None:
            index = self._next_index
        self._next_index = int(index) + 1
        return CoreSweep(self, int(stamp_ns), tuple(boxes), int(index))

    @property
    def motion_on(self) -> bool:
        """False: a core scan casts every beam from the pose at its stamp (no motion distortion)."""
        return False

    def set_options(self, **changes: Any) -> None:
        """``Scanner.set_options``, refusing what ACRES Core's LiDAR does not have (``core_refusals``)."""
        refused = core_refusals(replace(self.options, **changes))
        if refused:
            raise ConfigError(core_refusal_message(refused))
        super().set_options(**changes)

    def warm_up(self) -> float:
        """Nothing to compile: the core model's passes are numpy and Embree (0 s)."""
        return 0.0

    def core_scan(self, T_world_base: np.ndarray, stamp_ns: int, boxes: tuple, index: int) -> Scan:
        """Scan ``index`` of ACRES Core stamped ``stamp_ns``, every beam from the base pose at the stamp."""
        core = self.core
        out = core.scan(T_world_base, index, tuple(boxes), self.core_options)
        beams, hits = out.beams, out.beams.hits
        n = core.cells
        r = out.range_exact_m
        valid = np.isfinite(r)
        body = out.material == LIDAR_SELF
        scene_return = valid & ~body
        signal = np.where(
            scene_return, np.clip(beams.measured_counts, 0.0, self.config.radiometry.saturation_counts), 0
        )
        returns = Returns(
            range_m=r[:, None].copy(),
            valid=valid[:, None],
            reflectivity=np.where(scene_return, beams.reflectance, 0.0)[:, None],
            signal=np.rint(signal).astype(np.uint16)[:, None],
            intensity=out.points[:, 3].astype(np.uint8)[:, None],
            class_id=np.where(body, SELF_CLASS_ID, np.where(scene_return, hits.class_id, 0)).astype(np.uint8)[:, None],
            material_id=np.where(
                body, SELF_MATERIAL_ID, np.where(scene_return, np.maximum(hits.material, 0), 0)
            ).astype(np.uint8)[:, None],
            instance=np.where(body, BODY_INSTANCE, np.where(scene_return, hits.instance, NO_INSTANCE)).astype(
                np.uint32
            )[:, None],
            return_flags=np.where(valid, FLAG_FIRST | FLAG_STRONGEST | FLAG_LAST, 0).astype(np.uint8)[:, None],
        )
        T_world_sensor = T_world_base @ self.pattern.T_base_sensor
        scan = Scan(
            index=index,
            stamp_ns=int(stamp_ns),
            columns=self.config.columns,
            rings=self.config.rings,
            returns=returns,
            points_sensor=self.pattern.points_sensor(returns.range_m),
            time_offset_s=np.zeros(self.config.columns),
            ring_rank=self.pattern.ring_rank,
            T_world_sensor=np.broadcast_to(T_world_sensor, (self.config.columns, 4, 4)).copy(),
            frame_id=self.config.frame_id,
            weather={"rain_mm_per_h": 0.0, "visibility_m": float("inf")},
            cells=self.pattern.cells,
        )
        assert scan.returns.range_m.shape == (n, 1)
        return scan


def model_scanner(
    config: SensorConfig,
    scene: Scene | None = None,
    options: ScanOptions = ScanOptions(),
    tracer: Tracer | None = None,
    self_table: SelfReturnTable | None = None,
    core_noise: bool = False,
) -> Scanner:
    """The scanner of ``config``'s ``lidar.model``: ``CoreScanner`` for ``core`` (``core_noise`` its
    ``bNoise``), the full model's ``Scanner`` otherwise."""
    if config.model == "core":
        return CoreScanner(config, scene, options, tracer, self_table, core_noise=core_noise)
    if core_noise:
        raise ConfigError("core noise needs lidar.model core (the full model's noise is the noise option)")
    return Scanner(config, scene, options, tracer, self_table)


class CoreSweep(Sweep):
    """A core scan as the node's loop traces a sweep (``runtime.sweeps.SweepTracer``): nothing is
    traced ahead of the stamp (``trace_covered`` traces no column: every beam is cast from the pose
    at the stamp), and ``finish`` traces the whole scan (``CoreScanner.core_scan``). One slice: partial
    output is the full model's (its columns are traced as their firing time comes). Nothing of the
    full model's sweep (its plan, blocks, noise draws) is built: ``Sweep.__init__`` is not called, and
    its block path (``trace_columns``, ``scan_so_far``) is refused."""

    def __init__(self, scanner: CoreScanner, stamp_ns: int, boxes: tuple, index: int) -> None:
        self.partial = False
        self.slice_count = 1
        self.scanner = scanner
        self.stamp_ns = stamp_ns
        self.boxes = boxes
        self.index = index
        self.traced = np.zeros(scanner.config.columns, bool)
        self.slices = [(0, np.arange(scanner.config.columns))]
        self.echoes = None  # the full model's echoes: a core scan has none

    @property
    def done(self) -> bool:
        return bool(self.traced.all())

    def trace_covered(self, poses: PoseHistory, min_columns: int = 1) -> int:
        """No column is traced ahead: the scan needs the pose at its stamp only. Returns 0."""
        return 0

    def ready_slices(self) -> list[tuple[int, np.ndarray]]:
        return []

    def trace_columns(self, poses: PoseHistory, columns: np.ndarray, extrapolate: bool = False) -> None:
        raise ConfigError("model core: a scan has no columns traced ahead; its finish casts every beam")

    def scan_so_far(self) -> Scan:
        raise ConfigError("model core: a scan is one slice, out at its finish")

    def finish(self, poses: PoseHistory, extrapolate: bool = False) -> Scan:
        """The whole core scan of this sweep, from the pose at its stamp."""
        T_world_base = poses.transforms(np.array([self.stamp_ns * 1e-9]), extrapolate=extrapolate)[0]
        scan = self.scanner.core_scan(T_world_base, self.stamp_ns, self.boxes, self.index)
        self.traced[:] = True
        return scan
