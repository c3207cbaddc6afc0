"""The Timeline record format, its writer, importers and exporters."""

from rlplex.timeline.record import Event, Timeline, TimelineWriter

__all__ = ["Event", "Timeline", "TimelineWriter"]
