"""The strict YAML loader: merge keys (``<<:``) and the keys that override them."""

from __future__ import annotations

import pytest

from rlplex.errors import ConfigError
from rlplex.resources.yaml_io import load_yaml_text

MERGED = """\
defaults: &defaults
  lr: 1.0e-6
  epochs: 1
run:
  <<: *defaults
  epochs: 2
"""


def test_a_key_may_override_what_a_merge_key_brought() -> None:
    """YAML 1.1 merges: the mapping's own keys win over merged ones (NeMo RL's distillation
    configs override a merged ``policy`` this way)."""
    data = load_yaml_text(MERGED)
    assert data["run"] == {"lr": 1.0e-6, "epochs": 2}


def test_earlier_merged_mappings_win_over_later_ones() -> None:
    text = "a: &a {x: 1}\nb: &b {x: 2, y: 3}\nc:\n  <<: [*a, *b]\n"
    assert load_yaml_text(text)["c"] == {"x": 1, "y": 3}


def test_a_repeated_own_key_is_still_refused_beside_a_merge() -> None:
    text = MERGED + "  epochs: 3\n"
    with pytest.raises(ConfigError, match=r"t.yaml:7: key 'epochs' appears twice"):
        load_yaml_text(text, file="t.yaml")
