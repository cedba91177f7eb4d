"""The vehicle's own body in its scans: self-return tables, their generator and the URDF reader."""
