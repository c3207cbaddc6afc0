"""How a stage's time scales with its role's GPU count, according to the estimator.

``rlplex whatif`` scales recorded seconds from the d0 GPUs a role had to the d
it gets in an alternative as ``t * (d0/d)**s``. Without ``--scaling`` or
records at several GPU counts, s was 1 (ideal). When the config names a model,
a workload and a GPU, the estimator knows better: a train or log-prob pass is
compute-bound (s = 1), but generation that waits for its longest response
hardly speeds up with more replicas (s near 0). :func:`estimator_exponents`
gives s per stage from the estimate at d0 and 2 x d0 GPUs (more data-parallel
replicas, the same tensor/pipeline split).
"""

from __future__ import annotations

import math
from collections.abc import Iterable

from rlplex.errors import RlplexError


def estimator_exponents(config: object, stages: Iterable[str] | None = None) -> dict[str, float]:
    """Exponent s of each estimable stage of ``config`` (all, or those in ``stages``).

    Empty when the config lacks the estimator's inputs or the estimate fails
    (then the caller keeps its own default).
    """
    from rlplex.estimate.context import ESTIMATED_KINDS
    from rlplex.estimate.estimator import estimate

    base = _inputs(config)
    if base is None:
        return {}
    wanted = set(stages) if stages is not None else None
    # Each device d becomes 2d and 2d + 1: twice the GPUs, and roles that shared GPUs (or did
    # not) still do (or do not), which decides whether a partial-rollout engine streams.
    doubled = {
        n: r.with_devices(tuple(sorted(2 * d + i for d in r.devices for i in (0, 1))))
        if r.devices
        else r
        for n, r in base.roles.items()
    }
    bigger = base.model_copy(update={"roles": doubled})
    try:
        at_d0, at_2d0 = estimate(base), estimate(bigger)
    except RlplexError:
        return {}
    exponents: dict[str, float] = {}
    for name, est in at_d0.stages.items():
        if wanted is not None and name not in wanted:
            continue
        if est.kind not in ESTIMATED_KINDS:
            continue
        t0, t1 = est.seconds, at_2d0.stages[name].seconds
        if t0 and t1 and t0 > 0 and t1 > 0:
            exponents[name] = round(max(0.0, math.log2(t0 / t1)), 4)
    return exponents


def _inputs(config: object) -> object | None:
    """The estimator's inputs of ``config`` as placed (states it filled re-estimated)."""
    from rlplex.estimate.context import Inputs, missing_inputs, roles_afresh

    inputs = Inputs.of_config(config, roles_afresh(config))
    if missing_inputs(inputs) or any(r.auto for r in inputs.roles.values()):
        return None
    return inputs


def estimator_ratios(
    recorded: object, alternative: object, stages: Iterable[str]
) -> dict[str, float]:
    """For each of ``stages``: its estimated seconds under ``alternative`` over under ``recorded``.

    Both configs as placed, each with its own GPU counts *and* parallel sizes, so
    a what-if that changes tensor parallelism (``num_gpus_per_worker``,
    ``parallel.tp``) or the model is priced by the estimator, which a device-count
    exponent cannot do. Empty when either config lacks the estimator's inputs,
    has roles still to be placed, or cannot be estimated; only stages the
    estimator computes (train, log-prob, value and reward passes, generation, judges) are
    given.
    """
    from rlplex.estimate.context import ESTIMATED_KINDS
    from rlplex.estimate.estimator import estimate

    before, after = _inputs(recorded), _inputs(alternative)
    if before is None or after is None:
        return {}
    try:
        at_recorded, at_alternative = estimate(before), estimate(after)
    except RlplexError:
        return {}
    ratios: dict[str, float] = {}
    for name in stages:
        a, b = at_recorded.stages.get(name), at_alternative.stages.get(name)
        if a is None or b is None or a.kind not in ESTIMATED_KINDS:
            continue
        if a.seconds and b.seconds and a.seconds > 0 and b.seconds > 0:
            ratios[name] = b.seconds / a.seconds
    return ratios
