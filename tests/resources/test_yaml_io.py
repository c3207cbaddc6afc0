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


def test_exponent_floats_are_numbers_as_omegaconf_reads_them() -> None:
    # PyYAML (YAML 1.1) loads these as strings; OmegaConf, which loads every framework's
    # files, and YAML 1.2 read them as floats.
    data = load_yaml_text("a: 1e3\nb: 1e-6\nc: 2.0e1\nd: -1E+2\ne: 3.0e-5\n", file="x.yaml")
    assert data == {"a": 1000.0, "b": 1e-6, "c": 20.0, "d": -100.0, "e": 3e-5}
    kept = load_yaml_text("a: e3\nb: 1e\nc: '1e3'\nd: 12\ne: 1.5\n", file="x.yaml")
    assert kept == {"a": "e3", "b": "1e", "c": "1e3", "d": 12, "e": 1.5}


def test_overrides_set_a_key_or_a_mapping_above_it() -> None:
    from rlplex.resources.yaml_io import overrides_set

    key = "workload.response_tokens.mean"
    assert overrides_set(key, ["cluster.gpu=h100", "workload.response_tokens.mean=300"])
    assert overrides_set(key, ["workload.response_tokens={mean: 300, max: 1024}"])
    assert overrides_set(key, [" workload = {} "])
    assert not overrides_set(key, ["workload.response_tokens.max=1024"])
    assert not overrides_set(key, ["workload.response_tokens.mean_extra=1"])
    assert not overrides_set(key, [])
