"""Tracing rays through the scene: Open3D/Embree casts and their compiled bookkeeping."""
