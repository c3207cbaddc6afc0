"""rlplex.reports.records: what-if alternatives as given."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.errors import ConfigError
from rlplex.reports.records import RecordSource, whatif_report

RECORDS = Path(__file__).resolve().parents[2] / "examples" / "records"


def test_each_alternative_has_its_own_label() -> None:
    """Two ``--alt`` of one label were two rows of one name in the table and one key of the
    sweep's and the JSON's periods (the second hid the first): refused, naming it (tour 30)."""
    source = RecordSource(RECORDS / "verl_quickstart.jsonl", RECORDS / "verl_quickstart.yaml")
    with pytest.raises(ConfigError) as info:
        whatif_report(source, alts=("a: pipeline.mode=async", "a: pipeline.max_staleness=0"))
    assert info.value.field == "--alt" and "names two alternatives" in str(info.value)
    with pytest.raises(ConfigError, match="recorded config's row"):
        whatif_report(source, alts=("as recorded: pipeline.mode=async",))
    report = whatif_report(source, alts=("a: pipeline.mode=async", "b: pipeline.mode=sync"))
    assert {o.label for o in report.result.alternatives} == {"a", "b", "as recorded"}


def test_a_devices_auto_config_s_modelled_stages_are_quoted_as_planned(tmp_path: Path) -> None:
    """A stage the record lacks is quoted at the seconds the replay models it with: of a
    recorded config whose roles the search placed (devices: auto; the rollout on 8 of 16
    GPUs), it was quoted at the whole cluster's figure scaled ("generate 78.72 s") where
    the plan runs it in 41.97 s, as the config with those devices given quotes it (rev31)."""
    from rlplex.config import load_config
    from rlplex.plan import plan_with_config
    from rlplex.sim import simulate

    seven_b = RECORDS.parent / "estimate_7b.yaml"
    base = ("cluster.nodes=2", "workload.prompts_per_step=64",
            "workload.response_tokens.mean=2048", "workload.response_tokens.max=4096",
            "pipeline.mode=async", "pipeline.max_staleness=1")  # fmt: skip
    roles = ("actor_train", "actor_infer", "reference")
    auto = (*base, *(f"roles.{r}.devices=auto" for r in roles))
    moved, plan = plan_with_config(load_config(seven_b, overrides=auto))
    timeline = simulate(plan, moved, steps=6)
    events = tuple(e for e in timeline.events if e.stage != "generate")
    timeline.model_copy(update={"events": events}).write_jsonl(tmp_path / "run.jsonl")
    chosen = (*base, *(f"roles.{r}.devices={','.join(map(str, plan.placement[r]))}"
                       for r in roles))  # fmt: skip
    generate = next(op for op in plan.ops if op.stage == "generate")
    quoted = f"replayed with the model: generate {generate.end_s - generate.start_s:.4g} s"
    for overrides in (auto, chosen):
        source = RecordSource(tmp_path / "run.jsonl", seven_b, config_overrides=overrides)
        report = whatif_report(source, alts=("sync: pipeline.mode=sync",))
        assert any(quoted in w for w in report.warnings), (overrides, report.warnings)
