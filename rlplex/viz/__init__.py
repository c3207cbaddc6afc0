"""Views of timelines: Gantt charts (HTML, PNG), DAG pictures, side-by-side comparison.

Everything here draws a :class:`rlplex.timeline.Timeline`, so predicted
(planner, simulator), measured (executor) and imported runs share one drawing
path. Light to import: matplotlib is loaded only when a PNG is drawn.
"""

from rlplex.viz.compare import Comparison, compare, write_comparison
from rlplex.viz.critical import StageRow, critical_path, stage_table
from rlplex.viz.layout import GanttLayout, build_layout
from rlplex.viz.views import stage_rows, write_views

__all__ = [
    "Comparison",
    "GanttLayout",
    "StageRow",
    "build_layout",
    "compare",
    "critical_path",
    "stage_rows",
    "stage_table",
    "write_comparison",
    "write_views",
]
