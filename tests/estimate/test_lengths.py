"""The response-length distribution: shape-2 gamma body, truncated at the cap."""

from __future__ import annotations

import math

import pytest

from rlplex.errors import ConfigError
from rlplex.estimate.lengths import response_lengths


def test_scale_and_truncated_share_by_hand() -> None:
    # theta 100, cap 1000 (u = 10): P(X > cap) = e^-10 (1 + 10); the capped mean is
    # theta (2 - e^-10 (u^2 + 2u + 2)) + cap * P(X > cap).
    tail = math.exp(-10) * 11
    mean = 100 * (2 - math.exp(-10) * 122) + 1000 * tail
    dist = response_lengths(mean, 1000)
    assert dist.theta == pytest.approx(100, rel=1e-6)
    assert dist.clip_ratio == pytest.approx(tail, rel=1e-6)


def test_representative_lengths_keep_the_mean_and_the_share() -> None:
    dist = response_lengths(1000, 4096, 0.05)
    lengths = dist.lengths(2000)
    assert sum(lengths) / len(lengths) == pytest.approx(1000, rel=0.02)
    assert sum(1 for x in lengths if x == 4096) / len(lengths) == pytest.approx(0.05, abs=1e-3)
    assert max(x for x in lengths if x < 4096) < 4096


def test_longest_of_n() -> None:
    dist = response_lengths(300, 600, 0.1)
    assert dist.longest_of(10) == 600  # one in ten is truncated
    free = response_lengths(300, 6000, 0.0)
    assert free.longest_of(10) < free.longest_of(1000) < 6000


def test_bad_share_names_the_field() -> None:
    with pytest.raises(ConfigError) as err:
        response_lengths(100, 1000, 0.5, field="workload.response_tokens", file="c.yaml")
    assert "workload.response_tokens.clip_ratio" in str(err.value)
