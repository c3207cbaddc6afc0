"""The planner: placement, scheduling, offload/reload insertion, bounds and verification."""
