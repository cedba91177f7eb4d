"""Scene data, the scene file format, the built-in farm and its tour.

Each name has one import path, its own module's: ``scene.scene_model`` (``Scene``),
``scene.builder`` (``SceneBuilder``), ``scene.scene_file`` (``load_scene``), ``scene.farm_v1``
(``build_default_farm``), ``scene.tour`` (``default_tour``); docs/design.md lists them all.
"""
