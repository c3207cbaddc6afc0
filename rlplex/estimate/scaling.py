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
    from rlplex.estimate.estimator import Inputs, estimate, missing_inputs

    cfg = config
    base = Inputs(
        cluster=cfg.cluster,  # type: ignore[attr-defined]
        roles={  # states filled by the loader are re-estimated at each size
            n: r.model_copy(update={"states": {}})
            if cfg.is_estimated(f"roles.{n}.states")  # type: ignore[attr-defined]
            else r
            for n, r in cfg.roles.items()  # type: ignore[attr-defined]
        },
        pipeline=cfg.pipeline,  # type: ignore[attr-defined]
        model=cfg.model,  # type: ignore[attr-defined]
        workload=cfg.workload,  # type: ignore[attr-defined]
        efficiency=cfg.efficiency,  # type: ignore[attr-defined]
        file=cfg.source,  # type: ignore[attr-defined]
    )
    if missing_inputs(base) or any(r.auto for r in base.roles.values()):
        return {}
    wanted = set(stages) if stages is not None else None
    doubled = {
        n: r.with_devices(tuple(range(2 * len(r.devices)))) if r.devices else r
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
        if est.kind not in ("train", "forward", "generate"):
            continue
        t0, t1 = est.seconds, at_2d0.stages[name].seconds
        if t0 and t1 and t0 > 0 and t1 > 0:
            exponents[name] = round(max(0.0, math.log2(t0 / t1)), 4)
    return exponents
