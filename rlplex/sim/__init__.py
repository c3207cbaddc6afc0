"""The simulator: execute plans for many steps with modelled or recorded durations."""

from rlplex.sim.simulate import Pattern, extract_pattern, simulate

__all__ = ["Pattern", "extract_pattern", "simulate"]
