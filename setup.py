"""ament_python package that also installs with plain ``pip install .`` on a machine without ROS."""

from glob import glob

from setuptools import find_packages, setup

PACKAGE = "acres_lidar_ros"

setup(
    name=PACKAGE,
    version="0.1.0",
    description="Physically based, ray-traced LiDAR simulator of the Polaris vehicle's RoboSense Helios",
    license="BSD-3-Clause",
    packages=find_packages(exclude=["test", "test.*"]),
    python_requires=">=3.10",
    install_requires=[
        "numpy>=1.24",
        "scipy>=1.10",
        "open3d>=0.18",
        # BagWriter.flush ends rosbags' MCAP chunk through its storage writer (no public call does):
        # the range it is tested with.
        "rosbags>=0.11,<0.12",
        "mcap>=1.1",
        "tqdm>=4.60",
        "numba>=0.59",
    ],
    extras_require={
        # GeoTIFF DEMs in scene files (scene/dem.py); .npy rasters need nothing more.
        "dem": ["tifffile>=2023.1"],
        # The PROSPECT-D and soil spectral models of a sensors file (GPL-3.0; the shipped spectra need nothing)
        "spectra": ["prosail>=2.0.5"],
        # COLLADA (.dae) meshes of scene files and SDF worlds (scene/mesh_files.py; BSD-3-Clause)
        "sdf": ["pycollada>=0.9"],
        # A mesh object's materials map: sub-meshes with their material names (scene/mesh_files.py; MIT)
        "meshes": ["trimesh>=4.0"],
        # LAS/LAZ point-cloud maps of cloud-to-scene (scene/cloud_surface.py; BSD-2-Clause)
        "clouds": ["laspy>=2.0"],
        "test": [
            "tifffile>=2023.1",
            "pycollada>=0.9",
            "trimesh>=4.0",
            "laspy>=2.0",
            "pytest>=7",
            "hypothesis>=6",
            "mcap-ros2-support>=0.5",
            "plyfile>=1.0",
            "pyyaml>=6",
            "pillow>=9.0",
            "ruff==0.17.6",
            "mypy==2.4.1",
            "matplotlib>=3.6",
            "ray>=2.9",
            "psutil>=5.9",
            "xacro>=2.0",
            "prosail>=2.0.5",
            "velodyne-decoder>=3.1",  # reads our Velodyne packets back (test/packets); BSD-3-Clause
            "pykitti>=0.3",  # the external reader of the KITTI / SemanticKITTI layouts (MIT)
            "opencv-python-headless>=4",  # pykitti imports cv2 (Apache-2.0)
        ],
        # self-table on .xacro files (BSD-3-Clause, no ROS needed)
        "urdf": ["xacro>=2.0"],
        # bench --scaling --plot: the log-log plot
        "plot": ["matplotlib>=3.6"],
        # acres-lidar dataset: drives as shards on a local or remote Ray cluster
        "dataset": ["ray>=2.9"],
    },
    data_files=[
        ("share/ament_index/resource_index/packages", [f"resource/{PACKAGE}"]),
        (f"share/{PACKAGE}", ["package.xml"]),
        (f"share/{PACKAGE}/config", glob("config/*")),
        (f"share/{PACKAGE}/launch", glob("launch/*.py")),
        (f"share/{PACKAGE}/urdf", glob("urdf/*")),
    ],
    zip_safe=True,
    entry_points={
        "console_scripts": [
            "acres-lidar = acres_lidar_ros.apps.cli:main",
            "lidar_node = acres_lidar_ros.ros.node:main",
            "demo_drive = acres_lidar_ros.ros.demo_drive:main",
        ],
    },
)
