"""rlplex's estimates against published RL step times: the development corpus of issue 18.

Run: ``.venv/bin/python bench/published.py [--json] [--no-sweep] [--no-transfer]``. Plans every
config of ``bench/published/`` (native configs with no ``seconds`` and no
``states``: everything is estimated; each file's header names its source row
and every approximation) through the library (``load_config``, ``make_plan``),
and prints, per case, the predicted and published step and phase seconds with
the error, per pair (the same model and GPUs, colocated vs split one-step-off)
which member is faster and the speed-up, and the median and worst |step error|.

Phases: verl's ``generate_sequences`` (the rollout engine's time) is compared
with the ``generate`` stage, ``old_log_prob`` with ``old_logprob``,
``update_actor`` with ``train``; verl's colocated ``gen`` (engine wake-up,
weight resharding, generation, sleep) with ``generate`` + ``weight_sync``.
NeMo RL publishes only the step. verl's quickstart publishes per-stage seconds
and no step total.

Where the mean response length is not published (the verl cases), the case is
also planned over a plausible range of ``workload.response_tokens.mean``
(:func:`rlplex.reports.sweep.sweep_config`), and the report says whether the
published step (the quickstart: the sum of its published phases) lies inside
the range of planned steps.

Transfer: for each pair whose colocated member has a ``summary`` (a summary
record of its published figures, docs/record.md), ``rlplex calibrate`` fits
the costs on it and the other member is planned with them; its step is
compared with the published one (``--no-transfer`` skips it).

The published figures below are transcribed from the rows each config names
(also in ``../shared/data/published_runs.yaml`` and ``public_timings.md``).

Weight syncs (:data:`SYNC_CASES`): the corpus's published sync times between a trainer and a
rollout on disjoint GPUs (verl's fully-async ablation, with and without its checkpoint
engine), each planned as a config of its model, GPUs and method (:func:`sync_config`), the
estimate against the published seconds; :data:`HELDOUT_SYNC_CASES` holds published syncs
outside the corpus (NeMo RL's DeepSeek-V3 refit), reported apart.

Held-out runs (``Case.heldout``, configs ``bench/published/heldout_*.yaml``): published runs
that are NOT in the development corpus (issue 18: "the same accuracy on published runs the
project does not see"), each config's assumptions fixed from its source and recipe before it
was planned. They are reported in their own tables and their own median and worst |step error|;
the corpus summary line is computed on the corpus cases only.

Reruns (``Case.reruns``): where someone else published the same config run again (another
cluster, another day), its figures are printed beside the case with how far they lie from
the published step (the spread of the measurement itself) and the plan's error against them;
they are not scored.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CONFIGS = ROOT / "bench" / "published"
SWEEP_KEY = "workload.response_tokens.mean"


@dataclass(frozen=True)
class Rerun:
    """The same published config run again by someone else (another cluster, another day):
    how far two measurements of one config lie apart, the floor under any model's error."""

    source: str
    """Where the rerun's figures are published (repository, issue or file, and date)."""
    step_s: float
    """The rerun's step seconds."""
    phases: Mapping[str, float] = field(default_factory=dict)
    """The rerun's phase seconds, by the same names as the case's."""


@dataclass(frozen=True)
class Case:
    """One published run: its config and the figures its source publishes."""

    id: str
    config: str
    """File name under ``bench/published/``."""
    step_s: float | None
    """Published step seconds (None: not published)."""
    phases: Mapping[str, float]
    """Published phase seconds by the framework's name."""
    predicted_as: Mapping[str, tuple[str, ...]]
    """Each published phase: the stages whose planned seconds add up to it."""
    pair: str | None = None
    """Pair id: the members of a pair are compared (which is faster, the speed-up)."""
    sweep: tuple[float, ...] = ()
    """Response-length means to sweep when the mean is not published (empty: published)."""
    summary: Mapping[str, Any] | None = None
    """A summary record of the published figures (docs/record.md): the pair's other member
    is predicted with the costs ``rlplex calibrate`` fits on it (the transfer check)."""
    heldout: bool = False
    """A held-out run: not in the development corpus, reported in its own table and summary
    (the corpus figures are computed without it, so that they stay comparable)."""
    reruns: tuple[Rerun, ...] = ()
    """Published reruns of the same config (reported beside the case, not scored)."""


_VERL = {
    "generate_sequences": ("generate",),
    "old_log_prob": ("old_logprob",),
    "update_actor": ("train",),
}
_VERL_COLOCATED = {"gen": ("generate", "weight_sync"), **_VERL}
_VERL_SWEEP = (500.0, 700.0, 1400.0, 2800.0)
_NEMO_V03 = {
    "policy_training": ("train",),
    "refit": ("weight_sync",),
    "generation": ("generate", "reward"),
    "logprobs": ("old_logprob", "ref_logprob"),
}


def _nemo_959(
    step: float, training: float, refit: float, generation: float, logprobs: float
) -> Rerun:
    """A rerun from NVIDIA-NeMo/RL issue #959's table (its "(Our rerun)" rows)."""
    return Rerun(
        "NVIDIA-NeMo/RL#959 (2025-08-21)", step,
        {"policy_training": training, "refit": refit, "generation": generation,
         "logprobs": logprobs},
    )  # fmt: skip


_VERL_PPO_PHASES = {
    "gen": ("weight_sync", "generate", "old_logprob"), "ref": ("ref_logprob",),
    "values": ("values",), "update_critic": ("critic_train",), "update_actor": ("train",),
}  # fmt: skip
"""verl's PPO-with-critic phases of late 2024 (``timing/`` keys) as sums of stages."""


def _verl_timers_summary(phases: Mapping[str, float], step: float) -> dict:
    """The summary record of a verl row that publishes verl's own timers (``gen`` is verl's
    colocated generation timer, which also holds the colocated weight sync:
    :func:`summary_record` takes the sync's estimate off before the fit)."""
    return {"framework": "verl", "timing_s": {**phases, "step": step}}


def _verl_summary(generate_sequences: float, old: float, update: float, step: float) -> dict:
    """The summary record of a verl row: the engine's generation time is ``generate``."""
    return {
        "framework": "verl",
        "timing_s": {"generate_sequences": generate_sequences, "old_log_prob": old,
                     "update_actor": update, "step": step},
        "stages": {"generate_sequences": "generate"},
    }  # fmt: skip


CORPUS_CASES: tuple[Case, ...] = (
    Case(
        "verl-osp-7b-fsdp2-colocate-16xH20", "verl_osp_7b_fsdp2_colocate_16xh20.yaml", 749.0,
        {"gen": 321.0, "generate_sequences": 247.0, "old_log_prob": 88.0, "update_actor": 286.0},
        _VERL_COLOCATED, "verl-fsdp2", _VERL_SWEEP, _verl_summary(247.0, 88.0, 286.0, 749.0),
    ),
    Case(
        "verl-osp-7b-fsdp2-onestepoff-4gen12train-H20", "verl_osp_7b_fsdp2_4gen12train_h20.yaml",
        520.0, {"generate_sequences": 458.0, "old_log_prob": 108.0, "update_actor": 337.0},
        _VERL, "verl-fsdp2", _VERL_SWEEP,
    ),
    Case(
        "verl-osp-7b-megatron-colocate-16xH20", "verl_osp_7b_megatron_colocate_16xh20.yaml", 699.0,
        {"gen": 207.0, "generate_sequences": 162.0, "old_log_prob": 119.0, "update_actor": 344.0},
        _VERL_COLOCATED, "verl-megatron", _VERL_SWEEP, _verl_summary(162.0, 119.0, 344.0, 699.0),
    ),
    Case(
        "verl-osp-7b-megatron-onestepoff-4gen12train-H20",
        "verl_osp_7b_megatron_4gen12train_h20.yaml", 566.0,
        {"generate_sequences": 501.0, "old_log_prob": 120.0, "update_actor": 347.0},
        _VERL, "verl-megatron", _VERL_SWEEP,
    ),
    Case(
        "nemorl-v0.5-llama3.1-8b-onpolicy-16xH100", "nemorl_llama31_8b_onpolicy_16xh100.yaml",
        92.8, {}, {}, "nemorl-8b",
    ),
    Case(
        "nemorl-v0.5-llama3.1-8b-1off-8gen8train-H100",
        "nemorl_llama31_8b_1off_8gen8train_h100.yaml", 64.8, {}, {}, "nemorl-8b",
    ),
    Case(
        "verl-quickstart-qwen2.5-0.5b-1gpu", "verl_quickstart_qwen25_05b_1gpu.yaml", None,
        # the mean of the two published steps
        {"gen": 22.245, "ref": 4.341, "values": 5.8765, "update_critic": 15.655,
         "update_actor": 20.42},
        _VERL_PPO_PHASES, None,
    ),
)  # fmt: skip

_HELDOUT_VERL: tuple[Case, ...] = (
    # Held-out: the verl team's own log of a 1,024 + 512-token Qwen2.5-0.5B run on one H20
    # (eric-haibin-lin/verl-data @ a7e3f99, mean of steps 0-4); no step total is printed.
    Case(
        "heldout-verl-qwen2.5-0.5b-1gpu-H20", "heldout_verl_qwen25_05b_1gpu_h20.yaml", None,
        {"gen": 18.985, "ref": 5.402, "values": 5.713, "update_critic": 16.244,
         "update_actor": 20.660},
        _VERL_PPO_PHASES, None, heldout=True,
    ),
    # Held-out: RLinf's GRPO run of DeepSeek-R1-Distill-Qwen-1.5B on 8 H100 (RLinf/RLinf
    # docs/source-en/rst_source/resources/blog/compare_with_verl.rst @ a3816b596); its
    # "generation time" is the rollout timer: weight sync + generation.
    Case(
        "heldout-rlinf-r1distill-qwen1.5b-collocated-8xH100",
        "heldout_rlinf_r1distill_qwen15b_collocated_8xh100.yaml", 346.33,
        {"generation": 266.08, "prev_logprob": 17.78, "training": 61.12},
        {"generation": ("weight_sync", "generate"), "prev_logprob": ("old_logprob",),
         "training": ("train",)},
        None, heldout=True,
    ),
    # Held-out (added 2026-11-25, configs written blind before either was planned): verl's
    # side of the same RLinf page. The list-table's VeRL column (verl v0.5.0, 8fdc4d3): the
    # 1.5B run on 8 H100, response mean 14,254.84 published.
    Case(
        "heldout-verl-r1distill-qwen1.5b-8xH100", "heldout_verl_r1distill_qwen15b_8xh100.yaml",
        363.55, {"gen": 260.92, "old_log_prob": 17.51, "update_actor": 66.53},
        _VERL_COLOCATED, None, heldout=True,
    ),
    # Its commented-out block (verl f252da3, 2025-07-22): DeepSeek-R1-Distill-Qwen-7B on 8
    # nodes x 8 GPUs (H100 assumed), response mean 10,425.77 published. verl averages
    # generate_sequences and reshard over ranks, so `gen` (the driver's timer) is compared.
    Case(
        "heldout-verl-r1distill-qwen7b-64xH100", "heldout_verl_r1distill_qwen7b_64xh100.yaml",
        447.36, {"gen": 325.09, "old_log_prob": 21.58, "ref": 20.74, "update_actor": 73.01},
        {**_VERL_COLOCATED, "ref": ("ref_logprob",)}, None, heldout=True,
    ),
)  # fmt: skip

HELDOUT_CASES: tuple[Case, ...] = _HELDOUT_VERL + tuple(
    # Held-out: NeMo RL v0.5 "H100 BF16 Benchmarks" rows (docs/about/performance-summary.md @
    # 6c7089300, tag v0.5.0) the corpus does not use; only the step is published.
    Case(case_id, config, step, {}, {}, pair, heldout=True)
    for case_id, config, step, pair in (
        ("heldout-nemorl-v0.5-qwen3-32b-onpolicy-32xH100",
         "heldout_nemorl_qwen3_32b_onpolicy_32xh100.yaml", 376.0, "heldout-nemorl-qwen3-32b"),
        ("heldout-nemorl-v0.5-qwen3-32b-1off-32gen32train-H100",
         "heldout_nemorl_qwen3_32b_1off_32gen32train_h100.yaml", 200.0,
         "heldout-nemorl-qwen3-32b"),
        ("heldout-nemorl-v0.5-qwen3-30b-a3b-onpolicy-32xH100",
         "heldout_nemorl_qwen3_30ba3b_onpolicy_32xh100.yaml", 198.0,
         "heldout-nemorl-qwen3-30b-a3b"),
        ("heldout-nemorl-v0.5-qwen3-30b-a3b-1off-16gen16train-H100",
         "heldout_nemorl_qwen3_30ba3b_1off_16gen16train_h100.yaml", 154.0,
         "heldout-nemorl-qwen3-30b-a3b"),
        ("heldout-nemorl-v0.5-qwen3-235b-a22b-onpolicy-128xH100",
         "heldout_nemorl_qwen3_235b_onpolicy_128xh100.yaml", 431.0,
         "heldout-nemorl-qwen3-235b"),
        ("heldout-nemorl-v0.5-qwen3-235b-a22b-1off-128gen128train-H100",
         "heldout_nemorl_qwen3_235b_1off_128gen128train_h100.yaml", 203.0,
         "heldout-nemorl-qwen3-235b"),
        # "GB200 BF16 Benchmarks" rows of the same table (added 2026-11-24 with the gb200
        # preset; configs written from the recipes before any was planned).
        ("heldout-nemorl-v0.5-llama3.1-8b-onpolicy-8xGB200",
         "heldout_nemorl_llama31_8b_onpolicy_8xgb200.yaml", 91.0,
         "heldout-nemorl-llama3.1-8b-gb200"),
        ("heldout-nemorl-v0.5-llama3.1-8b-1off-4gen4train-GB200",
         "heldout_nemorl_llama31_8b_1off_4gen4train_gb200.yaml", 71.1,
         "heldout-nemorl-llama3.1-8b-gb200"),
        ("heldout-nemorl-v0.5-qwen3-30b-a3b-onpolicy-16xGB200",
         "heldout_nemorl_qwen3_30ba3b_onpolicy_16xgb200.yaml", 232.0,
         "heldout-nemorl-qwen3-30b-a3b-gb200"),
        ("heldout-nemorl-v0.5-qwen3-30b-a3b-1off-16gen16train-GB200",
         "heldout_nemorl_qwen3_30ba3b_1off_16gen16train_gb200.yaml", 136.0,
         "heldout-nemorl-qwen3-30b-a3b-gb200"),
        ("heldout-nemorl-v0.5-qwen3-32b-onpolicy-16xGB200",
         "heldout_nemorl_qwen3_32b_onpolicy_16xgb200.yaml", 381.0,
         "heldout-nemorl-qwen3-32b-gb200"),
        ("heldout-nemorl-v0.5-qwen3-32b-1off-16gen16train-GB200",
         "heldout_nemorl_qwen3_32b_1off_16gen16train_gb200.yaml", 210.0,
         "heldout-nemorl-qwen3-32b-gb200"),
        ("heldout-nemorl-v0.5-deepseek-v3-onpolicy-128xGB200",
         "heldout_nemorl_deepseekv3_onpolicy_128xgb200.yaml", 128.0,
         "heldout-nemorl-deepseek-v3-gb200"),
        ("heldout-nemorl-v0.5-deepseek-v3-1off-128gen128train-GB200",
         "heldout_nemorl_deepseekv3_1off_128gen128train_gb200.yaml", 64.5,
         "heldout-nemorl-deepseek-v3-gb200"),
        ("heldout-nemorl-v0.5-qwen3-235b-a22b-onpolicy-64xGB200",
         "heldout_nemorl_qwen3_235b_onpolicy_64xgb200.yaml", 332.0,
         "heldout-nemorl-qwen3-235b-gb200"),
        ("heldout-nemorl-v0.5-qwen3-235b-a22b-1off-64gen64train-GB200",
         "heldout_nemorl_qwen3_235b_1off_64gen64train_gb200.yaml", 268.0,
         "heldout-nemorl-qwen3-235b-gb200"),
        # The table's DeepSeek-V3 rows on H100 and its "H100 FP8 Benchmarks" rows (added
        # 2026-11-25; configs written from the recipes before any was planned). The DAPO row
        # is left out: its dynamic sampling regenerates until a batch is full, which the
        # format cannot express.
        ("heldout-nemorl-v0.5-deepseek-v3-onpolicy-256xH100",
         "heldout_nemorl_deepseekv3_onpolicy_256xh100.yaml", 134.0,
         "heldout-nemorl-deepseek-v3"),
        ("heldout-nemorl-v0.5-deepseek-v3-1off-256gen256train-H100",
         "heldout_nemorl_deepseekv3_1off_256gen256train_h100.yaml", 64.9,
         "heldout-nemorl-deepseek-v3"),
        ("heldout-nemorl-v0.5-llama3.1-8b-fp8-1off-8gen8train-H100",
         "heldout_nemorl_llama31_8b_fp8_1off_8gen8train_h100.yaml", 53.0, None),
        ("heldout-nemorl-v0.5-deepseek-v3-fp8-1off-256gen256train-H100",
         "heldout_nemorl_deepseekv3_fp8_1off_256gen256train_h100.yaml", 67.6, None),
    )
) + (
    # Held-out (added 2026-11-25, configs written blind from the rows and their scripts before
    # any was planned): verl's fully-async ablation (volcengine/verl
    # verl/experimental/fully_async_policy/README.md @ b178a3cd5; the 7B tables since
    # b25bb7d4f, the 30B table since c711dd741). `step` is the mean step; the colocated rows'
    # phases are verl's timers (gen: wake-up, sync, generation, sleep), the fully-async rows
    # publish only update_actor (their `gen` is the trainer's wait). The 32-GPU pair's
    # update_actor values are the first publication's (b25bb7d4f: colocate 313.81, async
    # 269.80); 15a9b0f58 swapped them, leaving the async one above its own step. The mean
    # response length is not published: each config states the one it assumes, and the sweep
    # brackets it.
    *(
        Case(case_id, config, step, phases, _VERL_COLOCATED if "colocate" in config else _VERL,
             pair, (700.0, 1500.0, 3000.0, 6000.0),
             _verl_timers_summary(phases, step) if "colocate" in config else None, heldout=True)
        for case_id, config, step, phases, pair in (
            ("heldout-verl-fa-7b-colocate-128xH20", "heldout_verl_fa_7b_colocate_128xh20.yaml",
             356.30, {"gen": 177.85, "old_log_prob": 53.92, "update_actor": 113.81},
             "heldout-verl-fa-7b-128"),
            ("heldout-verl-fa-7b-async-64gen64train-H20",
             "heldout_verl_fa_7b_async_64gen64train_h20.yaml", 150.63,
             {"update_actor": 113.16}, "heldout-verl-fa-7b-128"),
            ("heldout-verl-fa-7b-colocate-64xH20", "heldout_verl_fa_7b_colocate_64xh20.yaml",
             365.28, {"gen": 150.72, "old_log_prob": 70.26, "update_actor": 133.41},
             "heldout-verl-fa-7b-64"),
            ("heldout-verl-fa-7b-async-32gen32train-H20",
             "heldout_verl_fa_7b_async_32gen32train_h20.yaml", 189.26,
             {"update_actor": 156.98}, "heldout-verl-fa-7b-64"),
            ("heldout-verl-fa-7b-colocate-32xH20", "heldout_verl_fa_7b_colocate_32xh20.yaml",
             790.10, {"gen": 357.41, "old_log_prob": 107.71, "update_actor": 313.81},
             "heldout-verl-fa-7b-32"),
            ("heldout-verl-fa-7b-async-16gen16train-H20",
             "heldout_verl_fa_7b_async_16gen16train_h20.yaml", 294.77,
             {"update_actor": 269.80}, "heldout-verl-fa-7b-32"),
        )
    ),
    Case(
        "heldout-verl-fa-30b-a3b-colocate-128xH20", "heldout_verl_fa_30ba3b_colocate_128xh20.yaml",
        497.89, {"gen": 348.05, "old_log_prob": 28.73, "ref": 20.86, "update_actor": 86.27},
        {**_VERL_COLOCATED, "ref": ("ref_logprob",)}, "heldout-verl-fa-30b-a3b",
        (1000.0, 1960.0, 3000.0, 4500.0),
        _verl_timers_summary(
            {"gen": 348.05, "old_log_prob": 28.73, "ref": 20.86, "update_actor": 86.27}, 497.89
        ),
        heldout=True,
    ),
    Case(
        "heldout-verl-fa-30b-a3b-async-96gen32train-H20",
        "heldout_verl_fa_30ba3b_async_96gen32train_h20.yaml", 282.75,
        {"ref": 50.05, "update_actor": 206.63}, {**_VERL, "ref": ("ref_logprob",)},
        "heldout-verl-fa-30b-a3b", (1000.0, 1960.0, 3000.0, 4500.0), heldout=True,
    ),
    # Held-out (added 2026-11-28 with multi-turn trajectories; configs written blind from the
    # rows and their scripts by a helper that ran only `rlplex validate`, registered before any
    # was planned): verl's fully-async multi-turn tool-calling run (volcengine/verl
    # docs/advance/fully_async.md, "Multi-Turn Tool Calling", first published at ea56e9ac4,
    # 2025-11-17): Qwen2.5-7B-Instruct after ReTool SFT, DAPO with a sandbox code tool, colocated
    # on 32 H20 vs 16 + 16. Lengths, turns and the sandbox's seconds are not published: each
    # config states what it assumes; the sweep is over one turn's mean answer.
    Case(
        "heldout-verl-fa-retool-7b-colocate-32xH20",
        "heldout_verl_fa_retool_7b_colocate_32xh20.yaml", 375.47,
        {"gen": 228.03, "old_log_prob": 35.19, "update_actor": 111.84}, _VERL_COLOCATED,
        "heldout-verl-fa-retool-7b", (600.0, 1200.0, 2400.0),
        _verl_timers_summary(
            {"gen": 228.03, "old_log_prob": 35.19, "update_actor": 111.84}, 375.47
        ),
        heldout=True,
    ),
    Case(
        "heldout-verl-fa-retool-7b-async-16gen16train-H20",
        "heldout_verl_fa_retool_7b_async_16gen16train_h20.yaml", 221.36,
        {"update_actor": 179.58}, _VERL, "heldout-verl-fa-retool-7b", (600.0, 1200.0, 2400.0),
        heldout=True,
    ),
    # NeMo RL v0.3's step-time breakdown (NVIDIA-NeMo/.github blog/posts/nemo-rl-v0.3/index.md
    # @ e0c825560, "Results", Megatron rows, DTensor rows and the 16K row; recipes at
    # NVIDIA-NeMo/RL v0.3.0), added 2026-11-25 (the DTensor rows in a later session), configs
    # written blind and registered before any was planned. Phases
    # are grpo.py's timers (v0.3.0): "Policy training" = policy_training (train); "Refit" =
    # prepare_for_generation (the weight sync, with the trainer's offloads and the engine's
    # wake-up around it; held against the weight_sync stage, whose estimate carries the
    # wake-up but not the plan's offload ops); "Generation" = generation (the rollout,
    # rewards scored inside it); "Get logprobs" = policy_and_reference_logprobs (both passes).
    # NVIDIA-NeMo/RL issue #959 (2025-08-21, "70B GRPO training is slower than reported")
    # reran the post's Llama commands on another cluster and published its table beside the
    # post's: the reruns below (each row's "(Our rerun)" line), not scored.
    *(
        Case(case_id, config, step, phases, _NEMO_V03, None, heldout=True, reruns=reruns)
        for case_id, config, step, phases, reruns in (
            ("heldout-nemorl-v0.3-llama3.1-8b-onpolicy-8xH100",
             "heldout_nemorl03_llama31_8b_onpolicy_8xh100.yaml", 112.0,
             {"policy_training": 28.0, "refit": 5.0, "generation": 58.0, "logprobs": 18.0},
             (_nemo_959(116.0, 27.0, 8.0, 56.0, 18.0),)),
            ("heldout-nemorl-v0.3-llama3.1-70b-onpolicy-64xH100",
             "heldout_nemorl03_llama31_70b_onpolicy_64xh100.yaml", 147.0,
             {"policy_training": 28.0, "refit": 14.0, "generation": 84.0, "logprobs": 18.0},
             (_nemo_959(178.0, 31.0, 26.0, 87.0, 20.0),)),
            ("heldout-nemorl-v0.3-qwen3-32b-onpolicy-64xH100",
             "heldout_nemorl03_qwen3_32b_onpolicy_64xh100.yaml", 213.0,
             {"policy_training": 68.0, "refit": 7.0, "generation": 96.0, "logprobs": 40.0}, ()),
            ("heldout-nemorl-v0.3-qwen3-30b-a3b-onpolicy-64xH100",
             "heldout_nemorl03_qwen3_30ba3b_onpolicy_64xh100.yaml", 167.0,
             {"policy_training": 50.0, "refit": 12.0, "generation": 78.0, "logprobs": 23.0}, ()),
            # The post's two "PyT DTensor" rows (FSDP2; the 70B with tensor parallel 8 and
            # dynamic batching), written blind and registered before either was planned.
            ("heldout-nemorl-v0.3-llama3.1-8b-dtensor-onpolicy-8xH100",
             "heldout_nemorl03_llama31_8b_dtensor_onpolicy_8xh100.yaml", 122.0,
             {"policy_training": 38.0, "refit": 4.0, "generation": 57.0, "logprobs": 19.0},
             (_nemo_959(129.0, 40.0, 6.0, 55.0, 19.0),)),
            ("heldout-nemorl-v0.3-llama3.1-70b-dtensor-onpolicy-64xH100",
             "heldout_nemorl03_llama31_70b_dtensor_onpolicy_64xh100.yaml", 230.0,
             {"policy_training": 97.0, "refit": 15.0, "generation": 82.0, "logprobs": 28.0},
             (_nemo_959(266.0, 117.0, 20.0, 88.0, 29.0),)),
            ("heldout-nemorl-v0.3-llama3.3-70b-16k-onpolicy-128xH100",
             "heldout_nemorl03_llama33_70b_16k_onpolicy_128xh100.yaml", 445.0,
             {"policy_training": 64.0, "refit": 17.0, "generation": 287.0, "logprobs": 75.0},
             ()),
        )
    ),
    # NeMo RL v0.6 (docs/about/performance-summary.md @ 69c7ca117, "NeMo RL v0.6" H100 BF16,
    # H100 FP8 and GB200 BF16 tables; recipes at the same commit; vLLM 0.17.1), added
    # 2026-11-25, configs written blind and registered before any was planned. Only the step is
    # published. Pairs: the on-policy and one-step-off rows on as many GPUs in all.
    *(
        Case(case_id, config, step, {}, {}, pair, heldout=True)
        for case_id, config, step, pair in (
            ("heldout-nemorl-v0.6-deepseek-v3-onpolicy-256xH100",
             "heldout_nemorl06_deepseekv3_onpolicy_256xh100.yaml", 134.0, None),
            ("heldout-nemorl-v0.6-deepseek-v3-onpolicy-512xH100",
             "heldout_nemorl06_deepseekv3_onpolicy_512xh100.yaml", 111.0,
             "heldout-nemorl06-deepseek-v3"),
            ("heldout-nemorl-v0.6-deepseek-v3-1off-256gen256train-H100",
             "heldout_nemorl06_deepseekv3_1off_256gen256train_h100.yaml", 64.1,
             "heldout-nemorl06-deepseek-v3"),
            ("heldout-nemorl-v0.6-qwen3-235b-a22b-onpolicy-128xH100",
             "heldout_nemorl06_qwen3_235b_onpolicy_128xh100.yaml", 395.0, None),
            ("heldout-nemorl-v0.6-qwen3-235b-a22b-onpolicy-256xH100",
             "heldout_nemorl06_qwen3_235b_onpolicy_256xh100.yaml", 312.0,
             "heldout-nemorl06-qwen3-235b"),
            ("heldout-nemorl-v0.6-qwen3-235b-a22b-1off-128gen128train-H100",
             "heldout_nemorl06_qwen3_235b_1off_128gen128train_h100.yaml", 231.0,
             "heldout-nemorl06-qwen3-235b"),
            ("heldout-nemorl-v0.6-qwen3-30b-a3b-onpolicy-32xH100",
             "heldout_nemorl06_qwen3_30ba3b_onpolicy_32xh100.yaml", 192.0,
             "heldout-nemorl06-qwen3-30b-a3b"),
            ("heldout-nemorl-v0.6-qwen3-30b-a3b-1off-16gen16train-H100",
             "heldout_nemorl06_qwen3_30ba3b_1off_16gen16train_h100.yaml", 152.0,
             "heldout-nemorl06-qwen3-30b-a3b"),
            ("heldout-nemorl-v0.6-qwen3-30b-a3b-8off-64gen128train-H100",
             "heldout_nemorl06_qwen3_30ba3b_8off_64gen128train_h100.yaml", 34.5, None),
            ("heldout-nemorl-v0.6-deepseek-v3-fp8-1off-256gen256train-H100",
             "heldout_nemorl06_deepseekv3_fp8_1off_256gen256train_h100.yaml", 59.2, None),
            ("heldout-nemorl-v0.6-deepseek-v3-onpolicy-128xGB200",
             "heldout_nemorl06_deepseekv3_onpolicy_128xgb200.yaml", 108.0, None),
            ("heldout-nemorl-v0.6-deepseek-v3-onpolicy-256xGB200",
             "heldout_nemorl06_deepseekv3_onpolicy_256xgb200.yaml", 98.7,
             "heldout-nemorl06-deepseek-v3-gb200"),
            ("heldout-nemorl-v0.6-deepseek-v3-1off-128gen128train-GB200",
             "heldout_nemorl06_deepseekv3_1off_128gen128train_gb200.yaml", 61.7,
             "heldout-nemorl06-deepseek-v3-gb200"),
            ("heldout-nemorl-v0.6-qwen3-235b-a22b-onpolicy-64xGB200",
             "heldout_nemorl06_qwen3_235b_onpolicy_64xgb200.yaml", 286.0, None),
            ("heldout-nemorl-v0.6-qwen3-235b-a22b-onpolicy-128xGB200",
             "heldout_nemorl06_qwen3_235b_onpolicy_128xgb200.yaml", 345.0,
             "heldout-nemorl06-qwen3-235b-gb200"),
            ("heldout-nemorl-v0.6-qwen3-235b-a22b-1off-64gen64train-GB200",
             "heldout_nemorl06_qwen3_235b_1off_64gen64train_gb200.yaml", 278.0,
             "heldout-nemorl06-qwen3-235b-gb200"),
            ("heldout-nemorl-v0.6-qwen3-30b-a3b-onpolicy-16xGB200",
             "heldout_nemorl06_qwen3_30ba3b_onpolicy_16xgb200.yaml", 221.0,
             "heldout-nemorl06-qwen3-30b-a3b-gb200"),
            ("heldout-nemorl-v0.6-qwen3-30b-a3b-1off-8gen8train-GB200",
             "heldout_nemorl06_qwen3_30ba3b_1off_8gen8train_gb200.yaml", 301.0,
             "heldout-nemorl06-qwen3-30b-a3b-gb200"),
        )
    ),
    # NeMo RL v0.4 (its first performance summary, docs/about/performance-summary.md @
    # cff17f83b, 2025-12-01, "Nemo RL v0.4", H100 BF16; recipes @ tag v0.4.0): other layouts and
    # lengths than v0.5's. Added 2026-11-25, configs written blind by a helper from the rows and
    # the recipes and committed (cc005c3) before any was planned. Only the step is published;
    # pairs as the table gives them (the Llama-3.1-8B rows are the corpus's settings, left out).
    *(
        Case(case_id, config, step, {}, {}, pair, heldout=True)
        for case_id, config, step, pair in (
            ("heldout-nemorl-v0.4-deepseek-v3-onpolicy-256xH100",
             "heldout_nemorl04_deepseekv3_onpolicy_256xh100.yaml", 154.0,
             "heldout-nemorl04-deepseek-v3"),
            ("heldout-nemorl-v0.4-deepseek-v3-1off-256gen256train-H100",
             "heldout_nemorl04_deepseekv3_1off_256gen256train_h100.yaml", 77.9,
             "heldout-nemorl04-deepseek-v3"),
            ("heldout-nemorl-v0.4-qwen3-235b-a22b-onpolicy-128xH100",
             "heldout_nemorl04_qwen3_235b_onpolicy_128xh100.yaml", 506.0,
             "heldout-nemorl04-qwen3-235b"),
            ("heldout-nemorl-v0.4-qwen3-235b-a22b-1off-128gen128train-H100",
             "heldout_nemorl04_qwen3_235b_1off_128gen128train_h100.yaml", 241.0,
             "heldout-nemorl04-qwen3-235b"),
            ("heldout-nemorl-v0.4-qwen3-30b-a3b-onpolicy-32xH100",
             "heldout_nemorl04_qwen3_30ba3b_onpolicy_32xh100.yaml", 225.0,
             "heldout-nemorl04-qwen3-30b-a3b"),
            ("heldout-nemorl-v0.4-qwen3-30b-a3b-1off-16gen16train-H100",
             "heldout_nemorl04_qwen3_30ba3b_1off_16gen16train_h100.yaml", 244.0,
             "heldout-nemorl04-qwen3-30b-a3b"),
            ("heldout-nemorl-v0.4-qwen3-32b-onpolicy-32xH100",
             "heldout_nemorl04_qwen3_32b_onpolicy_32xh100.yaml", 393.0,
             "heldout-nemorl04-qwen3-32b"),
            ("heldout-nemorl-v0.4-qwen3-32b-1off-32gen32train-H100",
             "heldout_nemorl04_qwen3_32b_1off_32gen32train_h100.yaml", 215.0,
             "heldout-nemorl04-qwen3-32b"),
        )
    ),
    # verl's DeepSeek-V3 671B GRPO on 96 H20 (docs/perf/dpsk.md @ b178a3cd5, row since
    # e2e4c35ec): step 1700 s, rollout 1050 s (verl's gen timer), mean response 1960 published.
    Case(
        "heldout-verl-dsv3-colocate-96xH20", "heldout_verl_dsv3_colocate_96xh20.yaml", 1700.0,
        {"gen": 1050.0}, {"gen": ("generate", "weight_sync")}, None, heldout=True,
    ),
    # AReaL v0.1 (ReaL), synchronous PPO without a critic, R1-Distill-Qwen-7B on 16 x 8 H800,
    # vLLM on 64 GPUs and training on 64 (examples/README.md @ 2963a6731, the 16-node log):
    # the mean of six steps' "#End to end# execution time"; lengths from the same log. Added
    # 2026-11-28, the config written from the recipe before it was planned.
    Case(
        "heldout-areal-v0.1-r1distill-qwen7b-64gen64train-H800",
        "heldout_areal_v01_r1distill_qwen7b_64gen64train_h800.yaml", 2260.19, {}, {}, None,
        heldout=True,
    ),
    # Twenty-ninth pass (added 2026-11-29, configs written from the sources before any was
    # planned). The verl team's run logs (eric-haibin-lin/verl-data, branch experiments, linked
    # from verl's docs/algo/baseline.md), two the project had not used: the mean of steps 1-4
    # and 6-9 (the first eight without validation); each GPU inferred from the log (header).
    Case(
        "heldout-verldata-qwen2-7b-fsdp2-grpo-8xH20",
        "heldout_verldata_qwen2_7b_fsdp2_grpo_8xh20.yaml", 170.244,
        {"gen": 42.871, "reward": 0.970, "old_log_prob": 25.422, "ref": 24.848,
         "update_actor": 75.903},
        {**_VERL_COLOCATED, "reward": ("reward",), "ref": ("ref_logprob",)}, None, heldout=True,
    ),
    Case(
        "heldout-verldata-deepseek-llm-7b-megatron-ppo-4xH20",
        "heldout_verldata_deepseek7b_megatron_ppo_4xh20.yaml", 161.211,
        {"gen": 45.644, "old_log_prob": 11.956, "ref": 11.707, "values": 16.455,
         "update_critic": 41.447, "update_actor": 33.811},
        {"gen": ("generate", "weight_sync"), "old_log_prob": ("old_logprob",),
         "ref": ("ref_logprob",), "values": ("values",), "update_critic": ("critic_train",),
         "update_actor": ("train",)},
        None, heldout=True,
    ),
    # AReaL v0.1's 7B recipe on 4 nodes (examples/README.md @ 2963a6731, "Total Time (Hours)"
    # 410 for 10 epochs of about 20 steps): a DERIVED step of 7,380 s, +-5 % (header).
    Case(
        "heldout-areal-v0.1-r1distill-qwen7b-16gen16train-H800",
        "heldout_areal_v01_r1distill_qwen7b_16gen16train_h800.yaml", 7380.0, {}, {}, None,
        heldout=True,
    ),
    # Thirtieth pass (added 2026-11-29, configs written from the sources alone and their
    # assumptions fixed before any was planned). verl PR #5596 (3f2fd075d, 2026-04-09):
    # Qwen3-8B GRPO on GSM8K on one GB200 NVL4 node, "Performance (steady state)": step ~400 s,
    # "Rollout" ~265 s (read as verl's gen timer), "Actor update" ~84 s. The mean response
    # length is not published: the config states the one it assumes (Qwen3 thinks by default,
    # capped at 1,024), and the sweep brackets it.
    Case(
        "heldout-verl-qwen3-8b-gsm8k-4xGB200", "heldout_verl_qwen3_8b_gsm8k_4xgb200.yaml", 400.0,
        {"gen": 265.0, "update_actor": 84.0},
        {"gen": ("generate", "weight_sync"), "update_actor": ("train",)}, None,
        (500.0, 700.0, 850.0, 1000.0), heldout=True,
    ),
    # verl's V1 trainer (docs/advance/v1_async_trainer.md @ 1dda039b9, from 890dfc3eb, PR
    # #7373): Qwen3.5-35B-A3B (a config.json under bench/published/) on DAPO with 32K
    # responses, `sync` on 4 hybrid nodes vs `separate_async` on 2 hybrid + 2 standalone (GPU
    # not stated: H100 assumed), and the switching table's `no-switch` row on 3 x 8 H100. Steps
    # DERIVED: the published 150- (100-) step training time / steps; mean responses published.
    Case(
        "heldout-verl-v1-qwen3.5-35b-a3b-sync-32xH100",
        "heldout_verl_v1_qwen35_35ba3b_sync_32xh100.yaml", 22.79 * 3600 / 150, {}, {},
        "heldout-verl-v1-qwen3.5-35b-a3b", heldout=True,
    ),
    Case(
        "heldout-verl-v1-qwen3.5-35b-a3b-sepasync-16gen16train-H100",
        "heldout_verl_v1_qwen35_35ba3b_sepasync_16gen16train_h100.yaml", 14.10 * 3600 / 150,
        {}, {}, "heldout-verl-v1-qwen3.5-35b-a3b", heldout=True,
    ),
    Case(
        "heldout-verl-v1-qwen3.5-35b-a3b-sepasync-8gen16train-H100",
        "heldout_verl_v1_qwen35_35ba3b_sepasync_8gen16train_h100.yaml", 13.15 * 3600 / 100,
        {}, {}, None, heldout=True,
    ),
)  # fmt: skip

CASES: tuple[Case, ...] = (*CORPUS_CASES, *HELDOUT_CASES)


@dataclass(frozen=True)
class SyncCase:
    """One published weight-sync time between a trainer and a rollout on disjoint GPUs."""

    id: str
    model: str
    gpu: str
    trainer_ranks: int
    rollout_ranks: int
    trainer_parallel: Mapping[str, int]
    """The trainer's layout (not published: the model split over all its ranks, assumed)."""
    method: str
    """``rollout.weight_sync``: how the framework moved the weights."""
    published_s: float
    engine_gpus: int | None = None
    """GPUs of one rollout engine (its tensor-parallel size); None: the rollout's ranks, at
    most one node's (``gpus_per_node``)."""
    heldout: bool = False
    """Not in the development corpus: reported apart, with its own error line."""
    published_range: tuple[float, float] | None = None
    """(least, most) seconds where the source gives a range; ``published_s`` is its middle."""
    gpus_per_node: int = 8
    """GPUs of one node (a GB200 compute tray holds 4; the gpu preset gives its NVLink domain)."""


_FULLY_ASYNC = "verl docs/advance/fully_async.md, checkpoint-engine ablation (corpus)"
SYNC_CASES: tuple[SyncCase, ...] = tuple(
    # The corpus's weight_sync_measurements (published_runs.yaml): verl fully-async, Megatron
    # trainer, H20; without the checkpoint engine verl broadcasts tensor by tensor
    # (per_tensor), with it in buckets, broadcast then loaded (bucketed; its default
    # overlap_broadcast_and_consume is false). Ranks as published; each trainer's layout is
    # assumed (tp 4 for the 7B, ep 8 x pp 2 for the 30B, ep 16 x pp 4 for the 235B).
    SyncCase(f"verl-fully-async-{name}-{ranks}to{ranks}-H20-{method}", model, "h20", ranks, ranks,
             parallel, method, seconds)
    for name, model, ranks, parallel, method, seconds in (
        ("qwen2.5-7b", "qwen2.5-7b", 4, {"tp": 4}, "per_tensor", 0.12),
        ("qwen2.5-7b", "qwen2.5-7b", 4, {"tp": 4}, "bucketed", 0.02),
        ("qwen3-30b-a3b", "qwen3-30b-a3b", 16, {"ep": 8, "pp": 2}, "per_tensor", 15.76),
        ("qwen3-30b-a3b", "qwen3-30b-a3b", 16, {"ep": 8, "pp": 2}, "bucketed", 4.38),
        ("qwen3-235b-a22b", "qwen3-235b-a22b", 64, {"ep": 16, "pp": 4}, "per_tensor", 58.57),
        ("qwen3-235b-a22b", "qwen3-235b-a22b", 64, {"ep": 16, "pp": 4}, "bucketed", 23.70),
    )
)  # fmt: skip
"""Source of every row: the corpus's ``weight_sync_measurements`` (""" + _FULLY_ASYNC + ")."

HELDOUT_SYNC_CASES: tuple[SyncCase, ...] = (
    # Held-out: NeMo RL's refit of DeepSeek-V3 (BF16) from a Megatron trainer (tp 1, pp 16,
    # ep 16 on 32 nodes of 8 H100) to one vLLM engine of tp 32 on 4 nodes, over its NCCL
    # collective path (the packed broadcast of full tensors from trainer rank 0 over a group
    # of every trainer and engine rank, two buffers in flight: overlapped). The page's "45,395
    # destination-local tensors ... 69.95 GiB" per rank describes its NIXL column
    # (shard_expert_weights is an option of refit_cfg.nixl); the NCCL path had no expert
    # sharding when the page was written (aa8bfb2e8, 2026-07-20; nccl_reshard_refit came in
    # e40aa046e, 2026-07-28), but the page does not say so of its NCCL column outright:
    # NVIDIA-NeMo/RL docs/guides/checkpoint-engine-refit.md @ 7ea279abf (added in aa8bfb2e8,
    # 2026-07-20), "DeepSeek-V3 Benchmark", row "| Dedicated async refit timer | 9.25 s |
    # 14.21 s | ..." (NCCL column). The same trainer layout as the v0.5/v0.6 DeepSeek-V3
    # one-step-off rows; looked for because those rows come out long (docs/benchmarks.md).
    SyncCase("heldout-nemorl-refit-deepseek-v3-256to32-H100-nccl", "deepseek-v3", "h100", 256, 32,
             {"pp": 16, "ep": 16}, "overlapped", 14.21, engine_gpus=32, heldout=True),
    # Held-out: NeMo RL's optimized non-colocated refit on DGX H100, BF16 (NVIDIA-NeMo/.github
    # discussions/posts/nemo-rl-async-refit-performance/index.md @ 72b4a40, 2026-02-26,
    # "Optimized Refit Time (s)": Qwen3-30B-A3B 1.5, Qwen3-235B-A22B 5, DeepSeek-V3 14). The
    # post gives no layouts: each is taken from the one-step-off performance recipe of NeMo
    # RL v0.5 (grpo-*-async-1off.yaml), whose trainer and engines are as many GPUs each.
    *(
        SyncCase(f"heldout-nemorl-refit-{name}-{ranks}to{ranks}-H100-blog", model, "h100",
                 ranks, ranks, parallel, "overlapped", seconds, engine_gpus=engine,
                 heldout=True)
        for name, model, ranks, parallel, engine, seconds in (
            ("qwen3-30b-a3b", "qwen3-30b-a3b", 16, {"pp": 2, "ep": 8}, 2, 1.5),
            ("qwen3-235b-a22b", "qwen3-235b-a22b", 128, {"tp": 4, "pp": 8, "ep": 16}, 8, 5.0),
            ("deepseek-v3", "deepseek-v3", 256, {"pp": 16, "ep": 16}, 32, 14.0),
        )
    ),
    # Held-out: NeMo RL's shard-to-shard refit (refit_transport: nccl_reshard, experimental;
    # rollout.weight_sync: resharded), BF16, non-colocated, the page's "Expected Performance"
    # (NVIDIA-NeMo/RL docs/design-docs/nccl-reshard-refit.md @ 36b5999a7, 2026-08-19), rows
    # "| H100 | QWEN3 4B (dense) | BF16 | DP8 → TP8 | 66.9% | 0.21–0.34s |", "| H100 | QWEN3
    # 30B | BF16 | EP8×PP2 → TP8×DP2 | 95.0% | 0.74–1.00s |", "| H100 | DSV3 | BF16 |
    # PP16×EP16 → TP32×DP8 | 97.6% | 2.39s-2.83s |" and "| GB200 | DSV3 | BF16 | (same) |
    # 97.6% | 1.93s-2.59s |": the trainer's and engines' layouts as the rows give them, as
    # many GPUs each (not stated); compared with the middle of each range. Left out: the FP8
    # row (FP8 trainer to FP8 engine, which rlplex's sync moves as bf16) and the models
    # without a preset (Qwen3.5-397B, Nemotron Ultra). Added 2026-11-28 with the method,
    # first written from the page's design section before these rows were planned; then,
    # after seeing them, revised from NeMo RL's transfer code (stripes, replica all-gather,
    # two pipeline stages at a time): held-out-informed, disclosed in docs/benchmarks.md.
    *(
        SyncCase(f"heldout-nemorl-reshard-{name}-{ranks}to{ranks}-{gpu.upper()}", model, gpu,
                 ranks, ranks, parallel, "resharded", (low + high) / 2, engine_gpus=engine,
                 heldout=True, published_range=(low, high), gpus_per_node=per_node)
        for name, model, gpu, ranks, parallel, engine, low, high, per_node in (
            ("qwen3-4b", "qwen3-4b", "h100", 8, {}, 8, 0.21, 0.34, 8),
            ("qwen3-30b-a3b", "qwen3-30b-a3b", "h100", 16, {"ep": 8, "pp": 2}, 8, 0.74, 1.00, 8),
            ("deepseek-v3", "deepseek-v3", "h100", 256, {"pp": 16, "ep": 16}, 32, 2.39, 2.83, 8),
            ("deepseek-v3", "deepseek-v3", "gb200", 256, {"pp": 16, "ep": 16}, 32, 1.93, 2.59,
             4),
        )
    ),
    # Held-out: verl's full-weight broadcast through its checkpoint engine (2026-02 on:
    # actor_rollout_ref.rollout.checkpoint_engine.backend=nccl; rollout.weight_sync:
    # server_loaded), the baselines of verl-project/verl docs/advance/delta_weight_sync.md @
    # 1dda039b9 (2026-08-22; "Last updated: 07/10/2026"), "Measured results". First table: H100
    # nodes, V1 separate_async, SGLang, FSDP2 trainers (veomni for the MoE rows), param and
    # optimizer offload on unless the row says off; the middle of each range. Second table:
    # A100/A800 80GB, one_step_off_policy, offload off, on nodes the page says differ (the
    # HSDP and FSDP-engine rows ran on faster ones); left out: its FSDP1 row (the page's
    # misconfiguration, paging the model back every sync) and its repeated 34.26 s. Plus the
    # 7B row of verl PR #7005 (b7ff88e3d, 2026-07-10; 8 + 8 H100, offload on, after the fix).
    # The engines' tensor-parallel sizes are stated for the 72B (8) and 235B (16) only;
    # assumed elsewhere (they change no term of this method). Trainer layouts as the rows give
    # them (FSDP over all trainer GPUs; EP 8). Added 2026-11-29 with the method, which was
    # written after reading these rows: held-out-informed, disclosed in docs/benchmarks.md.
    *(
        SyncCase(f"heldout-verl-ckpt-engine-{name}-{train}to{rollout}-{gpu.upper()}", model, gpu,
                 train, rollout, parallel, "server_loaded", (low + high) / 2,
                 engine_gpus=engine, heldout=True,
                 published_range=(low, high) if low != high else None)
        for name, model, gpu, train, rollout, parallel, engine, low, high in (
            ("qwen2.5-7b-offload", "qwen2.5-7b", "h100", 8, 8, {"fsdp": True}, 4, 5.5, 6.0),
            ("qwen2.5-7b-offload-pr7005", "qwen2.5-7b", "h100", 8, 8, {"fsdp": True}, 4, 3.36,
             3.49),
            ("qwen2.5-32b-offload", "qwen2.5-32b", "h100", 16, 16, {"fsdp": True}, 8, 17.7,
             18.1),
            ("qwen2.5-32b", "qwen2.5-32b", "h100", 16, 16, {"fsdp": True}, 8, 14.2, 14.2),
            ("qwen2.5-72b", "qwen2.5-72b", "h100", 32, 32, {"fsdp": True}, 8, 28.5, 29.1),
            ("qwen3-30b-a3b-offload", "qwen3-30b-a3b", "h100", 8, 8, {"ep": 8, "fsdp": True},
             8, 32.2, 32.2),
            ("qwen3-235b-a22b-offload", "qwen3-235b-a22b", "h100", 64, 16,
             {"ep": 8, "fsdp": True}, 16, 246.0, 266.0),
            ("qwen3-8b", "qwen3-8b", "a100", 16, 16, {"fsdp": True}, 8, 34.26, 34.26),
            ("qwen3-8b-hsdp", "qwen3-8b", "a100", 16, 16, {"tp": 2, "fsdp": True}, 8, 10.24,
             10.24),
            ("qwen3-8b-1node", "qwen3-8b", "a100", 8, 8, {"fsdp": True}, 8, 11.0, 11.0),
            ("qwen3-30b-a3b", "qwen3-30b-a3b", "a100", 16, 16, {"ep": 8, "fsdp": True}, 8,
             43.43, 43.43),
            ("qwen3-0.6b", "qwen3-0.6b", "a100", 4, 4, {"fsdp": True}, 4, 0.61, 0.61),
            ("qwen3-8b-fsdp-engine", "qwen3-8b", "a100", 16, 16, {"fsdp": True}, 8, 38.58,
             38.58),
        )
    ),
    # Held-out (added 2026-11-29, the row written from the source before it was estimated):
    # the full-sync baseline of verl PR #7181 (48ca9eed2, 2026-07-30, "[megatron] feat:
    # delta_sharded on Megatron-Bridge param mappings"), test table row "| **235B-A22B
    # TP4×EP16×PP1 + grouped_gemm** (16 trainer GPUs + TP16 rollout) | seed 107.6s/437.9GB;
    # steady uw **23.6/23.7s**, ...; same-shape NCCL full sync: **235.0–237.6s/step** ...":
    # the checkpoint engine's nccl backend moving the whole model (server_loaded), a Megatron
    # trainer of tp 4 x ep 16 on 16 GPUs to one engine of tp 16; the middle of the range. The
    # PR names no GPU: H100 nodes of 8 assumed, as the series' earlier PRs state for their
    # runs (#6974 903d90cc4 and #7144 b9873ee98: "H100, GSM8K GRPO, V1 separate_async"; #7085
    # ce195c95e's 235B baseline on 8 + 2 nodes, gen TP16); the engine spans two nodes. The
    # trainer's optimizer is not stated: first written without one, the row was refused as not
    # fitting (AdamW's 194 GB per GPU; no seconds were estimated), then given what 16 H100s
    # need: Megatron's distributed optimizer with its step on the CPU (verl's
    # optimizer_cpu_offload, as its Qwen3.5 Megatron examples set it): zero 1, cpu_optimizer.
    SyncCase("heldout-verl-ckpt-engine-qwen3-235b-a22b-megatron-16to16-H100", "qwen3-235b-a22b",
             "h100", 16, 16, {"tp": 4, "ep": 16, "zero": 1, "cpu_optimizer": True},
             "server_loaded", (235.0 + 237.6) / 2,
             engine_gpus=16, heldout=True, published_range=(235.0, 237.6)),
)  # fmt: skip
"""Published sync times outside the corpus (:data:`SYNC_CASES` holds the corpus's)."""


def sync_config(case: SyncCase) -> dict[str, Any]:
    """A native config whose ``weight_sync`` is the published one: the trainer on the first
    ranks, the rollout (one engine over its ranks) on the next; the other stages are tiny."""
    gpus = case.trainer_ranks + case.rollout_ranks
    per_node = min(case.gpus_per_node, gpus)
    last = case.trainer_ranks - 1
    return {
        "model": case.model,
        "workload": {"prompts_per_step": 1, "samples_per_prompt": 1,
                     "prompt_tokens": {"mean": 16, "max": 16},
                     "response_tokens": {"mean": 16, "max": 16}},
        "cluster": {"nodes": gpus // per_node, "gpus_per_node": per_node, "gpu": case.gpu},
        "roles": {
            "actor_train": {"devices": f"0-{last}", "parallel": dict(case.trainer_parallel)},
            "actor_infer": {"devices": f"{last + 1}-{gpus - 1}",
                            "num_gpus_per_worker": case.engine_gpus or min(per_node,
                                                                           case.rollout_ranks),
                            "rollout": {"weight_sync": case.method}},
        },
        "pipeline": {"mode": "sync", "stages": {
            "generate": {"role": "actor_infer"},
            "train": {"role": "actor_train", "after": ["generate"]},
            "weight_sync": {"kind": "weight_sync", "from": "actor_train", "to": "actor_infer",
                            "after": ["train"]},
        }},
    }  # fmt: skip


def run_sync_case(case: SyncCase) -> dict[str, Any]:
    """Estimate one published weight sync."""
    import tempfile

    import yaml

    from rlplex.config import load_config
    from rlplex.estimate.estimator import estimate_config

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{case.id}.yaml"
        path.write_text(yaml.safe_dump(sync_config(case)), encoding="utf-8")
        est = estimate_config(load_config(path)).stages["weight_sync"]
    seconds = float(est.seconds or 0.0)
    return {
        "id": case.id, "method": case.method, "predicted_s": seconds,
        "published_s": case.published_s, "error": rel_error(seconds, case.published_s),
        "terms": dict(est.terms), "tensors": est.detail.get("tensors"), "heldout": case.heldout,
        "published_range": list(case.published_range) if case.published_range else None,
    }  # fmt: skip


# --- pure functions -------------------------------------------------------------------------


def rel_error(predicted: float, published: float) -> float:
    """Signed relative error: ``predicted / published - 1`` (+0.5: 50 % too long)."""
    if published <= 0:
        raise ValueError(f"a published time must be > 0 s, got {published!r}")
    return predicted / published - 1.0


def median_abs(errors: Sequence[float]) -> float | None:
    """Median of |error| (None for no errors)."""
    return statistics.median(abs(e) for e in errors) if errors else None


def worst_abs(errors: Sequence[float]) -> float | None:
    """The error of largest magnitude, sign kept (None for no errors)."""
    return max(errors, key=abs) if errors else None


def faster(steps: Mapping[str, float]) -> str | None:
    """The member with the shortest step (None on a tie or fewer than two members)."""
    if len(steps) < 2:
        return None
    ordered = sorted(steps.items(), key=lambda kv: kv[1])
    if ordered[0][1] == ordered[1][1]:
        return None
    return ordered[0][0]


def speedup(steps: Mapping[str, float]) -> float | None:
    """Slowest step over fastest step of a pair (>= 1; None for fewer than two members)."""
    if len(steps) < 2:
        return None
    return max(steps.values()) / min(steps.values())


def in_range(value: float, low: float, high: float) -> bool:
    """Whether ``value`` lies in [low, high]."""
    return low <= value <= high


# --- running the cases ----------------------------------------------------------------------


@dataclass(frozen=True)
class CaseResult:
    id: str
    config: str
    predicted_step_s: float
    published_step_s: float | None
    step_error: float | None
    phases: dict[str, dict[str, float]]
    """Published phase -> {predicted, published, error}."""
    sweep: dict[str, Any] | None = None
    """When swept: values, planned steps, the target and whether it lies inside."""
    heldout: bool = False
    """Not in the development corpus (:attr:`Case.heldout`)."""
    reruns: tuple[dict[str, Any], ...] = ()
    """Each published rerun (:attr:`Case.reruns`): its step, how far it lies from the
    published step (``spread``) and the planned step's error against it."""


@dataclass(frozen=True)
class PairResult:
    pair: str
    members: tuple[str, ...]
    published_faster: str | None
    predicted_faster: str | None
    published_speedup: float | None
    predicted_speedup: float | None
    transfer: dict[str, Any] | None = None
    """Calibrated on one member's summary record: the other member's step, predicted."""
    heldout: bool = False
    """Every member is a held-out run."""

    @property
    def verdict_right(self) -> bool:
        return self.published_faster == self.predicted_faster

    @property
    def speedup_error(self) -> float | None:
        if self.published_speedup is None or self.predicted_speedup is None:
            return None
        # compare the speed-up of the published faster member over the other
        return rel_error(self.predicted_speedup, self.published_speedup)


@dataclass(frozen=True)
class Report:
    cases: tuple[CaseResult, ...]
    pairs: tuple[PairResult, ...]
    median_step_error: float | None
    """Over the corpus cases only (held-out ones excluded)."""
    worst_step_error: float | None
    phase_errors: dict[str, float] = field(default_factory=dict)
    """Corpus cases' phases."""
    heldout_median_step_error: float | None = None
    """Over the held-out cases only."""
    heldout_worst_step_error: float | None = None
    heldout_phase_errors: dict[str, float] = field(default_factory=dict)
    """Held-out cases' phases."""
    syncs: tuple[dict[str, Any], ...] = ()
    """Published weight-sync times (:data:`SYNC_CASES`) against the estimate."""


def _outside_phases(config: Any) -> dict[str, float]:
    """Seconds of each stage that stand for time outside every stage
    (:attr:`~rlplex.estimate.context.StageEstimate.outside_s`): not in a framework's phase."""
    from rlplex.estimate.estimator import estimate_config

    return {name: stage.outside_s for name, stage in estimate_config(config).stages.items()}


def run_case(case: Case, sweep: bool = True) -> CaseResult:
    """Plan one case and compare it with its published figures."""
    from rlplex.config import load_config
    from rlplex.reports.sweep import plan_point, sweep_config

    path = CONFIGS / case.config
    config = load_config(path)
    period, stages = plan_point(config)
    outside = _outside_phases(config) if case.phases else {}
    phases = {}
    for name, published in case.phases.items():
        # A framework's phase times its own call: the per-step overhead the estimator puts on
        # a stage (time outside every stage: docs/cost-model.md) is not in it.
        predicted = sum(stages[s] - outside.get(s, 0.0) for s in case.predicted_as[name])
        phases[name] = {
            "predicted": predicted,
            "published": published,
            "error": rel_error(predicted, published),
        }
    swept = None
    if sweep and case.sweep:
        result = sweep_config(path, SWEEP_KEY, [f"{v:g}" for v in case.sweep])
        span = result.period_range()
        target = case.step_s if case.step_s is not None else sum(case.phases.values())
        swept = {
            "key": SWEEP_KEY,
            "values": list(case.sweep),
            "steps": [p.period_s for p in result.points],
            "target": target,
            "target_is": "step" if case.step_s is not None else "sum of published phases",
            "inside": span is not None and in_range(target, *span),
        }
    return CaseResult(
        id=case.id,
        config=str(path.relative_to(ROOT)),
        predicted_step_s=period,
        published_step_s=case.step_s,
        step_error=rel_error(period, case.step_s) if case.step_s is not None else None,
        phases=phases,
        sweep=swept,
        heldout=case.heldout,
        reruns=tuple(rerun_result(r, case.step_s, period) for r in case.reruns),
    )


def rerun_result(rerun: Rerun, published_s: float | None, predicted_s: float) -> dict[str, Any]:
    """A rerun's step against the published one (``spread``) and against the plan."""
    return {
        "source": rerun.source,
        "step_s": rerun.step_s,
        "phases": dict(rerun.phases),
        "spread": rel_error(rerun.step_s, published_s) if published_s is not None else None,
        "error": rel_error(predicted_s, rerun.step_s),
    }


def _calibrate() -> Any:
    try:  # where the structural moves put it
        from rlplex.reports.calibrate import calibrate
    except ImportError:
        from rlplex.reports.calibrate import calibrate
    return calibrate


def summary_record(source: Case) -> dict[str, Any]:
    """``source``'s summary record as calibrate reads it. A published timer that holds
    several stages (``predicted_as``: verl's colocated ``gen`` is generation and the weight
    sync) is given to its first stage less the estimates of the others, which the plan keeps:
    otherwise the fit would count them twice."""
    record = dict(source.summary or {})
    timing = dict(record.get("timing_s", {}))
    mixed = {n: source.predicted_as[n] for n in timing if len(source.predicted_as.get(n, ())) > 1}
    if not mixed:
        return record
    from rlplex.config import load_config
    from rlplex.estimate.estimator import estimate_config

    estimate = estimate_config(load_config(CONFIGS / source.config))
    stages = dict(record.get("stages", {}))
    for name, (first, *others) in mixed.items():
        held = sum(float(estimate.stages[o].seconds or 0.0) for o in others if o in estimate.stages)
        timing[name] = round(max(0.0, timing[name] - held), 6)
        stages[name] = first
    return {**record, "timing_s": timing, "stages": stages}


def transfer(source: Case, target: Case) -> dict[str, Any]:
    """Calibrate on ``source``'s summary record; predict ``target``'s step with those costs."""
    import tempfile

    import yaml

    from rlplex.config import load_config
    from rlplex.plan import make_plan

    with tempfile.TemporaryDirectory() as tmp:
        record = Path(tmp) / "summary.yaml"
        record.write_text(yaml.safe_dump(summary_record(source)), encoding="utf-8")
        fit, doc = _calibrate()(record, CONFIGS / source.config)
        costs = Path(tmp) / "costs.yaml"
        costs.write_text(yaml.safe_dump(doc), encoding="utf-8")
        period = make_plan(load_config(CONFIGS / target.config, costs=costs)).period_s
    assert target.step_s is not None
    return {
        "calibrated_on": source.id,
        "predicted": target.id,
        "fitted": doc,
        "fitted_period_s": fit.period_after_s,
        "predicted_step_s": period,
        "published_step_s": target.step_s,
        "error": rel_error(period, target.step_s),
    }


def pair_results(
    cases: Sequence[Case], results: Sequence[CaseResult], transfers: bool = True
) -> tuple[PairResult, ...]:
    """Each pair's verdict (which member is faster) and speed-up, published vs predicted."""
    by_id = {r.id: r for r in results}
    pairs: dict[str, list[Case]] = {}
    for case in cases:
        if case.pair is not None and case.step_s is not None:
            pairs.setdefault(case.pair, []).append(case)
    out = []
    for pair, members in pairs.items():
        published = {c.id: float(c.step_s or 0.0) for c in members}
        predicted = {c.id: by_id[c.id].predicted_step_s for c in members}
        pub_fast = faster(published)
        # The predicted speed-up of the published faster member over the other (< 1: slower).
        pred_speedup = None
        if pub_fast is not None and len(members) == 2:
            other = next(c.id for c in members if c.id != pub_fast)
            pred_speedup = predicted[other] / predicted[pub_fast]
        moved = None
        source = next((c for c in members if c.summary is not None), None)
        if transfers and source is not None and len(members) == 2:
            moved = transfer(source, next(c for c in members if c is not source))
        out.append(
            PairResult(
                pair=pair,
                members=tuple(c.id for c in members),
                published_faster=pub_fast,
                predicted_faster=faster(predicted),
                published_speedup=speedup(published),
                predicted_speedup=pred_speedup,
                transfer=moved,
                heldout=all(c.heldout for c in members),
            )
        )
    return tuple(out)


def run(cases: Sequence[Case] = CASES, sweep: bool = True, transfers: bool = True) -> Report:
    results = tuple(run_case(c, sweep) for c in cases)
    corpus = [r for r in results if not r.heldout]
    errors = [r.step_error for r in corpus if r.step_error is not None]
    held = [r.step_error for r in results if r.heldout and r.step_error is not None]
    phase_errors = {f"{r.id}/{n}": p["error"] for r in corpus for n, p in r.phases.items()}
    held_phases = {
        f"{r.id}/{n}": p["error"] for r in results if r.heldout for n, p in r.phases.items()
    }
    return Report(
        cases=results,
        pairs=pair_results(cases, results, transfers),
        median_step_error=median_abs(errors),
        worst_step_error=worst_abs(errors),
        phase_errors=phase_errors,
        heldout_median_step_error=median_abs(held),
        heldout_worst_step_error=worst_abs(held),
        heldout_phase_errors=held_phases,
        syncs=tuple(run_sync_case(c) for c in (*SYNC_CASES, *HELDOUT_SYNC_CASES)),
    )


# --- output ---------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return f"{x * 100:+.0f}%" if x is not None else "-"


def _abs_pct(x: float | None) -> str:
    return f"{abs(x) * 100:.0f}%" if x is not None else "-"


def short_name(member: str | None, members: Sequence[str]) -> str:
    """``member`` without the dash-separated words every member starts with."""
    if member is None:
        return "tie"
    words = [m.split("-") for m in members]
    common = 0
    while all(len(w) > common + 1 and w[common] == words[0][common] for w in words):
        common += 1
    return "-".join(member.split("-")[common:])


def _s(x: float | None) -> str:
    return f"{x:.1f}" if x is not None else "-"


def _cases_table(title: str, cases: Sequence[CaseResult]) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for column in ("case", "what", "predicted s", "published s", "error"):
        table.add_column(column, justify="left" if column in ("case", "what") else "right")
    for r in cases:
        table.add_row(
            r.id, "step", _s(r.predicted_step_s), _s(r.published_step_s), _pct(r.step_error),
            style="bold",
        )  # fmt: skip
        for name, p in r.phases.items():
            table.add_row("", name, _s(p["predicted"]), _s(p["published"]), _pct(p["error"]))
    return table


def _pairs_table(title: str, pairs: Sequence[PairResult]) -> Any:
    from rich.table import Table

    table = Table(title=title)
    for column in ("pair", "published faster", "predicted faster", "verdict", "speed-up pub",
                   "speed-up pred", "error"):  # fmt: skip
        table.add_column(column, justify="left" if column.startswith("p") else "right")
    for p in pairs:
        table.add_row(
            p.pair, short_name(p.published_faster, p.members),
            short_name(p.predicted_faster, p.members),
            "right" if p.verdict_right else "[red]WRONG[/]",
            f"{p.published_speedup:.2f}x" if p.published_speedup else "-",
            f"{p.predicted_speedup:.2f}x" if p.predicted_speedup else "-",
            _pct(p.speedup_error),
        )  # fmt: skip
    return table


def _published_sync(row: Mapping[str, Any]) -> str:
    """A sync's published seconds: the figure, or the range and the middle compared with."""
    low_high = row.get("published_range")
    if low_high:
        return f"{low_high[0]:.2f}-{low_high[1]:.2f} ({row['published_s']:.2f})"
    return f"{row['published_s']:.2f}"


def print_report(report: Report) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(width=160)
    corpus = [r for r in report.cases if not r.heldout]
    corpus_pairs = [p for p in report.pairs if not p.heldout]
    console.print(_cases_table("rlplex (no calibration) vs published RL step times", corpus))
    console.print(_pairs_table("pairs: which member is faster, and by how much", corpus_pairs))
    _print_transfers(console, "transfer", corpus_pairs)
    no_transfer = [p.pair for p in corpus_pairs if not p.transfer]
    if no_transfer:
        console.print(
            f"no transfer check for {', '.join(no_transfer)}: only the step is published"
            " (calibrate fits per-stage times)",
            highlight=False,
        )
    _print_sweeps(console, [r for r in corpus if r.sweep], "unpublished mean response length")
    console.print(
        f"step error over {sum(1 for r in corpus if r.step_error is not None)} corpus cases:"
        f" median |error| {_abs_pct(report.median_step_error)},"
        f" worst {_pct(report.worst_step_error)};"
        f" phases: median |error| {_abs_pct(median_abs(list(report.phase_errors.values())))},"
        f" worst {_pct(worst_abs(list(report.phase_errors.values())))};"
        f" verdicts right {sum(p.verdict_right for p in corpus_pairs)} of {len(corpus_pairs)}",
        highlight=False,
    )
    if report.syncs:
        syncs = Table(title="weight sync between disjoint GPUs: rlplex vs published seconds")
        for column in ("sync", "method", "tensors", "predicted s", "published s", "error"):
            syncs.add_column(column, justify="left" if column in ("sync", "method") else "right")
        for row in report.syncs:
            syncs.add_row(
                row["id"], row["method"], f"{row['tensors'] or 0:,}", f"{row['predicted_s']:.2f}",
                _published_sync(row), _pct(row["error"]),
            )  # fmt: skip
        console.print(syncs)
        for label, rows in (
            ("published syncs", [r for r in report.syncs if not r.get("heldout")]),
            ("HELD-OUT syncs", [r for r in report.syncs if r.get("heldout")]),
        ):
            errors = [row["error"] for row in rows]
            if errors:
                console.print(
                    f"weight sync error over {len(errors)} {label}: median |error|"
                    f" {_abs_pct(median_abs(errors))}, worst {_pct(worst_abs(errors))}",
                    highlight=False,
                )
    held = [r for r in report.cases if r.heldout]
    held_phases = report.heldout_phase_errors
    if held:
        held_pairs = [p for p in report.pairs if p.heldout]
        console.print(
            _cases_table("HELD-OUT runs (not in the corpus): rlplex vs published step", held)
        )
        if held_pairs:
            console.print(_pairs_table("held-out pairs: which member is faster", held_pairs))
            _print_transfers(console, "HELD-OUT transfer", held_pairs)
        _print_sweeps(
            console, [r for r in held if r.sweep], "held-out, unpublished mean response length"
        )
        console.print(
            f"held-out step error over {sum(1 for r in held if r.step_error is not None)} cases:"
            f" median |error| {_abs_pct(report.heldout_median_step_error)},"
            f" worst {_pct(report.heldout_worst_step_error)};"
            f" phases: median |error| {_abs_pct(median_abs(list(held_phases.values())))},"
            f" worst {_pct(worst_abs(list(held_phases.values())))};"
            f" verdicts right {sum(p.verdict_right for p in held_pairs)} of {len(held_pairs)}",
            highlight=False,
        )
    _print_reruns(console, report.cases)


def _print_reruns(console: Any, cases: Sequence[CaseResult]) -> None:
    """Published configs run again elsewhere: how far the two measurements lie apart, and
    the planned step against each."""
    from rich.table import Table

    rows = [(r, rerun) for r in cases for rerun in r.reruns]
    if not rows:
        return
    table = Table(title="the same published configs run again by others: measurement spread")
    for column in ("case", "rerun source", "published s", "rerun s", "spread", "predicted s",
                   "error vs published", "error vs rerun"):  # fmt: skip
        table.add_column(column, justify="left" if column in ("case", "rerun source") else "right")
    for r, rerun in rows:
        table.add_row(
            r.id, rerun["source"], _s(r.published_step_s), _s(rerun["step_s"]),
            _pct(rerun["spread"]), _s(r.predicted_step_s), _pct(r.step_error),
            _pct(rerun["error"]),
        )  # fmt: skip
    console.print(table)
    spreads = [rerun["spread"] for _, rerun in rows if rerun["spread"] is not None]
    console.print(
        f"reruns: {len(rows)}, spread median |error| {_abs_pct(median_abs(spreads))},"
        f" largest {_pct(worst_abs(spreads))}",
        highlight=False,
    )


def _print_transfers(console: Any, title: str, pairs: Sequence[PairResult]) -> None:
    """The pairs calibrated on one member's summary record: the other member's step, the
    published one, and what ``rlplex calibrate`` fitted."""
    from rich.table import Table

    moved = [p for p in pairs if p.transfer]
    if not moved:
        return
    table = Table(title=f"{title}: calibrated on one member's summary record (rlplex"
                  " calibrate), the other member predicted with the fitted costs")  # fmt: skip
    for column in ("pair", "calibrated on", "predicted", "step pred s", "published s",
                   "error", "fitted"):  # fmt: skip
        table.add_column(column, justify="right" if " s" in column or column == "error"
                         else "left")  # fmt: skip
    for p in moved:
        t = p.transfer or {}
        fitted = t["fitted"]
        eff = {k: v for k, v in fitted.get("efficiency", {}).items() if k != "stages"}
        text = ", ".join(f"{k} {v:.3g}" for k, v in eff.items())
        text += f"; dispatch_s {fitted.get('cluster', {}).get('dispatch_s', 0):.3g}"
        table.add_row(
            p.pair, short_name(t["calibrated_on"], p.members),
            short_name(t["predicted"], p.members), _s(t["predicted_step_s"]),
            _s(t["published_step_s"]), _pct(t["error"]), text,
        )  # fmt: skip
    console.print(table)
    errors = [float((p.transfer or {})["error"]) for p in moved]
    console.print(
        f"{title}: {len(moved)} pairs, median |error| {_abs_pct(median_abs(errors))},"
        f" worst {_pct(worst_abs(errors))}",
        highlight=False,
    )


def _print_sweeps(console: Any, swept: Sequence[CaseResult], title: str) -> None:
    """Each case planned over its swept response-length means: does the range hold the step?"""
    from rich.table import Table

    if not swept:
        return
    sweeps = Table(title=f"{title}: planned step over {SWEEP_KEY}")
    for column in ("case", "values", "planned steps s", "published", "inside"):
        sweeps.add_column(column)
    inside = 0
    for r in swept:
        sw = r.sweep or {}
        inside += bool(sw["inside"])
        sweeps.add_row(
            r.id, ", ".join(f"{v:g}" for v in sw["values"]),
            ", ".join(_s(s) for s in sw["steps"]), f"{sw['target']:.1f} ({sw['target_is']})",
            "yes" if sw["inside"] else "[red]no[/]",
        )  # fmt: skip
    console.print(sweeps)
    console.print(f"published step inside the swept range: {inside} of {len(swept)}")


def to_json(report: Report) -> dict[str, Any]:
    return {
        "cases": [asdict(c) for c in report.cases],
        "pairs": [
            {**asdict(p), "verdict_right": p.verdict_right, "speedup_error": p.speedup_error}
            for p in report.pairs
        ],
        "median_step_error": report.median_step_error,
        "worst_step_error": report.worst_step_error,
        "phase_errors": report.phase_errors,
        "heldout_median_step_error": report.heldout_median_step_error,
        "heldout_worst_step_error": report.heldout_worst_step_error,
        "syncs": list(report.syncs),
        "heldout_phase_errors": report.heldout_phase_errors,
    }


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.add_argument("--no-sweep", action="store_true", help="skip the length sweeps")
    parser.add_argument(
        "--no-transfer", action="store_true", help="skip the calibrate-and-transfer check"
    )
    args = parser.parse_args(argv)
    report = run(sweep=not args.no_sweep, transfers=not args.no_transfer)
    if args.json:
        print(json.dumps(to_json(report), indent=2))
    else:
        print_report(report)


if __name__ == "__main__":
    main()
