"""Each loss and advantage function against the hand-computed example in its docstring."""

from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from rlplex.stages import advantages as A  # noqa: E402
from rlplex.stages import losses as L  # noqa: E402


def t(*rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_kl_estimators_match_docstring_example():
    logp, ref = t([-1.0]), t([-2.0])
    assert A.kl_estimate(logp, ref, "k1").item() == pytest.approx(1.0)
    assert A.kl_estimate(logp, ref, "k2").item() == pytest.approx(0.5)
    assert A.kl_estimate(logp, ref, "k3").item() == pytest.approx(math.exp(-1), abs=1e-6)
    # k3 is never negative and is 0 where the policies agree.
    assert A.kl_estimate(t([-3.0]), t([-3.0]), "k3").item() == pytest.approx(0.0)
    with pytest.raises(ValueError, match="unknown KL estimator"):
        A.kl_estimate(logp, ref, "k9")  # type: ignore[arg-type]


def test_token_rewards_put_score_on_last_token_minus_kl():
    rewards = A.token_rewards(t(1.0)[0:1], torch.tensor([[1, 1, 0]]), t([0.5, 0.25, 9.0]), 0.1)
    assert rewards.tolist()[0] == pytest.approx([-0.05, 0.975, 0.0])


def test_gae_matches_hand_computation():
    rewards, values, mask = t([0.0, 1.0]), t([0.5, 0.8]), torch.ones(1, 2)
    adv, ret = A.gae(rewards, values, mask, gamma=1.0, lam=1.0)
    assert adv.tolist()[0] == pytest.approx([0.5, 0.2])
    assert ret.tolist()[0] == pytest.approx([1.0, 1.0])
    adv, _ = A.gae(rewards, values, mask, gamma=1.0, lam=0.5)
    assert adv.tolist()[0] == pytest.approx([0.4, 0.2])


def test_gae_ignores_padding_after_eos():
    # Same sequence plus a padded column holding garbage: results must not change.
    rewards, values = t([0.0, 1.0, 7.0]), t([0.5, 0.8, 3.0])
    adv, ret = A.gae(rewards, values, torch.tensor([[1, 1, 0]]), gamma=1.0, lam=1.0)
    assert adv.tolist()[0] == pytest.approx([0.5, 0.2, 0.0])
    assert ret.tolist()[0] == pytest.approx([1.0, 1.0, 0.0])


def test_group_advantages_normalise_within_each_group():
    scores = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.5])
    group = torch.tensor([0, 0, 0, 0, 1, 1])
    adv = A.group_advantages(scores, group, torch.ones(6, 2))
    s = 0.5 / math.sqrt(1 / 3)
    assert adv[:, 0].tolist() == pytest.approx([s, -s, -s, s, 0.0, 0.0], abs=1e-4)
    assert adv[:, 1].tolist() == adv[:, 0].tolist()
    centred = A.group_advantages(scores, group, torch.ones(6, 1), norm_by_std=False)
    assert centred[:, 0].tolist() == pytest.approx([0.5, -0.5, -0.5, 0.5, 0.0, 0.0])


def test_masked_whiten_has_zero_mean_unit_variance():
    x = torch.tensor([[1.0, 2.0, 3.0, 100.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    w = A.masked_whiten(x, mask)
    assert w[0, :3].mean().item() == pytest.approx(0.0, abs=1e-6)
    assert (w[0, :3] ** 2).mean().item() == pytest.approx(1.0, abs=1e-4)
    assert w[0, 3].item() == 0.0


def test_policy_loss_matches_docstring_example():
    old = torch.zeros(1, 3)
    logp = t([0.2, -0.5, 0.2])
    adv = t([1.0, 1.0, -1.0])
    loss, stats = L.policy_loss(logp, old, adv, torch.ones(1, 3), clip_eps=0.2)
    expected = (-1.2 - math.exp(-0.5) + math.exp(0.2)) / 3
    assert loss.item() == pytest.approx(expected, abs=1e-5)
    assert loss.item() == pytest.approx(-0.1950, abs=1e-4)
    assert stats["clip_frac"] == pytest.approx(1 / 3)


def test_policy_loss_aggregations_differ_on_unequal_lengths():
    # Row 0 has one token of loss -1, row 1 three tokens of loss -2 (ratio 1).
    logp = torch.zeros(2, 3)
    adv = t([1.0, 0.0, 0.0], [2.0, 2.0, 2.0])
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]])
    token, _ = L.policy_loss(logp, logp, adv, mask, aggregation="token-mean")
    seq, _ = L.policy_loss(logp, logp, adv, mask, aggregation="seq-mean-token-mean")
    assert token.item() == pytest.approx(-(1 + 6) / 4)
    assert seq.item() == pytest.approx(-(1 + 2) / 2)


def test_policy_loss_gradient_pushes_up_positive_advantage():
    logp = torch.zeros(1, 2, requires_grad=True)
    loss, _ = L.policy_loss(logp, torch.zeros(1, 2), t([1.0, -1.0]), torch.ones(1, 2))
    loss.backward()
    assert logp.grad[0, 0] < 0 < logp.grad[0, 1]


def test_kl_loss_is_mean_estimate():
    kl = L.kl_loss(t([-1.0, -1.0]), t([-2.0, -1.0]), torch.ones(1, 2), "k1")
    assert kl.item() == pytest.approx(0.5)


def test_value_loss_matches_docstring_example():
    v, old, mask = t([1.0]), t([0.5]), torch.ones(1, 1)
    loss, _ = L.value_loss(v, old, t([0.8]), mask, clip=0.2)
    assert loss.item() == pytest.approx(0.02)
    loss, stats = L.value_loss(v, old, t([1.0]), mask, clip=0.2)
    assert loss.item() == pytest.approx(0.045)
    assert stats["value_clip_frac"] == 1.0
    loss, _ = L.value_loss(v, old, t([1.0]), mask, clip=None)
    assert loss.item() == pytest.approx(0.0)
