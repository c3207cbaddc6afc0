"""Device classes: the GPUs that behave identically under a placement.

Every op occupies all devices of one or two roles, so two GPUs covered by the
same set of roles see exactly the same ops, memory and transfers. The planner
therefore schedules per *device class* (GPUs grouped by the roles on them),
not per GPU: a placement on 4,096 GPUs usually has a handful of classes, and
planning it costs no more than planning 8 GPUs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    """GPU roles' devices, grouped into classes of identically used GPUs."""

    placement: dict[str, tuple[int, ...]]
    """Sorted devices of each GPU role, in config order."""
    classes: tuple[tuple[int, ...], ...]
    """Devices of each class, classes ordered by their first device."""
    class_roles: tuple[tuple[str, ...], ...]
    """Roles covering each class, in config order."""
    role_classes: dict[str, tuple[int, ...]]
    """Class ids of each GPU role."""

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def devices_of(self, classes: Sequence[int]) -> tuple[int, ...]:
        """All devices of ``classes``, ascending."""
        if len(classes) == 1:
            return self.classes[classes[0]]
        return tuple(sorted(d for c in classes for d in self.classes[c]))


def group_device_classes(placement: Mapping[str, Sequence[int]]) -> Layout:
    """Group the devices of ``placement`` (role -> devices) into classes."""
    roles = list(placement)
    masks: dict[int, int] = {}
    for bit, role in enumerate(roles):
        flag = 1 << bit
        for device in placement[role]:
            masks[device] = masks.get(device, 0) | flag
    groups: dict[int, list[int]] = {}
    for device in sorted(masks):
        groups.setdefault(masks[device], []).append(device)
    ordered = sorted(groups.items(), key=lambda item: item[1][0])
    classes = tuple(tuple(devs) for _, devs in ordered)
    class_roles = tuple(
        tuple(r for bit, r in enumerate(roles) if mask >> bit & 1) for mask, _ in ordered
    )
    role_classes = {
        role: tuple(c for c, (mask, _) in enumerate(ordered) if mask >> bit & 1)
        for bit, role in enumerate(roles)
    }
    return Layout(
        placement={r: tuple(sorted(placement[r])) for r in roles},
        classes=classes,
        class_roles=class_roles,
        role_classes=role_classes,
    )
