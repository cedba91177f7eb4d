"""``--model full|core`` and ``--core-noise`` of ``acres-lidar scan`` and ``record``: which LiDAR model
traces the run (``scan.core_scanner``; ACRES Core's LiDAR: docs/calibration.md)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from acres_lidar_ros.scan.scanner import Scanner


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model",
        choices=("full", "core"),
        default=None,
        help="replaces lidar.model of the sensors file (default full). full: the spec's LiDAR model; core: ACRES Core's simplified one (one sub-ray and one "
        "return per beam, crowns passed by a hash, no crops, ground cover, weather or motion distortion)",
    )
    parser.add_argument(
        "--core-noise",
        action="store_true",
        help="with --model core: its range and signal noise (bNoise; off by default, from a hash of the seed and cell)",
    )


def make_scanner(args: argparse.Namespace, config: Any, options: Any, tracer: Any, self_table: Any) -> Scanner:
    """The run's ``Scanner``: the full model's, or ACRES Core's with ``--model core`` or the sensors
    file's ``lidar.model: core`` (the flag wins)."""
    from acres_lidar_ros.errors import ConfigError
    from acres_lidar_ros.scan.scanner import Scanner

    model = getattr(args, "model", None) or config.model
    if model != config.model:
        config = config.with_overrides({"model": model})
    if getattr(args, "core_noise", False) and model != "core":
        raise ConfigError("--core-noise needs --model core (the full model's noise is on unless --no-noise)")
    if model == "core":
        refused = [
            flag
            for flag, on in (
                ("--truth", options.truth),
                ("--no-radiometry", not options.radiometry),
                ("--rain", options.rain_mm_per_h > 0),
                ("--visibility", options.visibility_m != float("inf")),
            )
            if on
        ]
        if refused:
            raise ConfigError(
                f"--model core with {', '.join(refused)}: ACRES Core's LiDAR has no cell truth, always its "
                "radiometry and no rain or fog; leave these out or use --model full"
            )
        from acres_lidar_ros.scan.core_scanner import CoreScanner

        return CoreScanner(config, options=options, tracer=tracer, self_table=self_table, core_noise=args.core_noise)
    return Scanner(config, options=options, tracer=tracer, self_table=self_table)
