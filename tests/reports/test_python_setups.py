"""``rlplex run``'s role setups come from the config as loaded (issue 13)."""

from __future__ import annotations

from pathlib import Path

from rlplex.config import load_config
from rlplex.reports.run import python_setups

MODULE = """
import builtins
builtins.IMPORTS_{tag} = getattr(builtins, "IMPORTS_{tag}", 0) + 1

from rlplex.dag import PipelineBuilder


def pipeline():
    b = PipelineBuilder()
    b.stage("generate", role="actor", seconds=1)
    return b.build()


def setups():
    return {{"actor": lambda info: "{tag}"}}
"""

CONFIG = """
cluster: {nodes: 1, gpus_per_node: 1}
roles:
  actor: {devices: "0", states: {weights: 1}}
pipeline: {python: "first.py:pipeline"}
"""


def test_setups_follow_set_and_the_module_is_imported_once(tmp_path: Path) -> None:
    import builtins

    for tag in ("first", "second"):
        (tmp_path / f"{tag}.py").write_text(MODULE.format(tag=tag))
    config = tmp_path / "c.yaml"
    config.write_text(CONFIG)
    cfg = load_config(config, overrides=["pipeline.python=second.py:pipeline"])
    setups = python_setups(cfg)
    assert setups is not None and setups["actor"](None) == "second"  # --set is honoured
    assert builtins.IMPORTS_second == 1  # type: ignore[attr-defined]  # imported once
    assert not hasattr(builtins, "IMPORTS_first")
