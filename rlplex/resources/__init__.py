"""Clusters, device sets and the roles placed on them."""

from rlplex.resources.cluster import (
    COPIED_STATES,
    DRIVER,
    SCRATCH_STATES,
    STATE_KINDS,
    Cluster,
    Role,
)
from rlplex.resources.devices import AUTO, DeviceSpecError, format_devices, parse_devices

__all__ = [
    "AUTO",
    "COPIED_STATES",
    "DRIVER",
    "SCRATCH_STATES",
    "STATE_KINDS",
    "Cluster",
    "DeviceSpecError",
    "Role",
    "format_devices",
    "parse_devices",
]
