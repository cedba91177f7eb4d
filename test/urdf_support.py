"""A one-box URDF for the body tests (the self-table generator, the CLI's ``self-table``)."""


def urdf_with(box_centre, box_size, lidar_xyz="0 0 1") -> str:
    return f"""<?xml version="1.0"?>
<robot name="one_box">
  <link name="base_footprint"/>
  <link name="thing">
    <collision><origin xyz="{" ".join(map(str, box_centre))}"/><geometry><box size="{" ".join(map(str, box_size))}"/></geometry></collision>
  </link>
  <link name="lidar"><collision><geometry><cylinder radius="0.05" length="0.1"/></geometry></collision></link>
  <joint name="thing_joint" type="fixed"><parent link="base_footprint"/><child link="thing"/></joint>
  <joint name="lidar_joint" type="fixed"><parent link="base_footprint"/><child link="lidar"/><origin xyz="{lidar_xyz}"/></joint>
</robot>
"""
