"""Memory over time on one device class, for placing transfers and transient memory.

The scheduler appends ops in an order that is not their start order (a reload
can be placed earlier than ops already scheduled, as a prefetch), so each
device class keeps its memory use as sorted change events, and answers one
question: from when on do ``amount`` more GB fit, for good?
"""

from __future__ import annotations

import bisect


class MemoryProfile:
    """Memory profile of one device class: usage over time as sorted change events."""

    __slots__ = ("base", "events", "final")

    def __init__(self, base: float) -> None:
        self.base = base
        self.events: list[tuple[float, int, float, int]] = []  # time, alloc?, delta, op
        self.final = base

    def add(self, time: float, delta: float, op: int) -> None:
        bisect.insort(self.events, (time, 0 if delta < 0 else 1, delta, op))
        self.final += delta

    def earliest_fit(self, lb: float, amount: float, capacity: float) -> tuple[float, int]:
        """Earliest time >= lb from which ``amount`` more GB fit forever; and the op freeing it."""
        events = self.events
        cur = self.final
        limit = capacity + 1e-6
        for i in range(len(events) - 1, -1, -1):
            time = events[i][0]
            later = events[i + 1][0] if i + 1 < len(events) else None
            if later is not None and later <= lb:
                # Whatever overflows at or before lb, the answer is lb: the walk stops (the
                # events of a long unrolled schedule lie mostly before it).
                return lb, -1
            if (later is None or later > time) and cur + amount > limit:
                if later is None:
                    return float("inf"), -1
                return (later, events[i + 1][3]) if later > lb else (lb, -1)
            cur -= events[i][2]
        if cur + amount > limit and events:
            t0 = events[0][0]
            return (t0, events[0][3]) if t0 > lb else (lb, -1)
        return lb, -1
