"""calibrate, replay and whatif use the lengths a record measured, not the config's guess."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_calibrate import ESTIMATED_COLOCATED
from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.reports.calibrate import calibrate
from rlplex.reports.records import RecordSource, replay_report, whatif_report

CONFIG: dict[str, Any] = ESTIMATED_COLOCATED
"""An estimated 7B step on 8 H100s whose config expects 500-token responses."""
TIMINGS = {"generate": 40.0, "reward": 8.0, "train": 30.0, "step": 80.0}


def _write(tmp_path: Path, name: str, data: dict[str, Any]) -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data))
    return path


def _config(tmp_path: Path, name: str = "run.yaml", **workload: Any) -> Path:
    data = copy.deepcopy(CONFIG)
    for key, value in workload.items():
        data["workload"][key] = value
    return _write(tmp_path, name, data)


def _summary(tmp_path: Path, **lengths: Any) -> Path:
    return _write(tmp_path, "summary.yaml", {"framework": "rlplex", "timing_s": TIMINGS, **lengths})


def test_calibrate_fits_with_the_measured_lengths(tmp_path: Path) -> None:
    """A record of 250-token responses fits the same parameters as a config that says 250:
    with the config's 500 the decode parameters would come out twice as fast."""
    record = _summary(tmp_path, response_length={"mean": 250, "max": 1000, "clip_ratio": 0.01},
                      prompt_length={"mean": 150, "max": 380})  # fmt: skip
    guessed = _config(tmp_path)
    stated = _config(
        tmp_path, "stated.yaml",
        prompt_tokens={"mean": 150, "max": 400},
        response_tokens={"mean": 250, "max": 1000, "clip_ratio": 0.01},
    )  # fmt: skip
    result, doc = calibrate(record, guessed)
    _, stated_doc = calibrate(record, stated)
    assert doc == stated_doc
    note = next(w for w in result.warnings if w.startswith("the record's lengths"))
    assert "response mean 250 tokens (the config: 500)" in note
    assert "cut at the max 1.00% (the config: the default shape)" in note
    assert "prompt mean 150 tokens (the config: 200)" in note
    # Without the record's lengths the fit differs (the test can fail).
    _, no_lengths = calibrate(_summary(tmp_path), guessed)
    assert no_lengths["efficiency"]["decode"] != pytest.approx(doc["efficiency"]["decode"])


def test_a_length_the_user_sets_wins(tmp_path: Path) -> None:
    record = _summary(tmp_path, response_length={"mean": 250})
    config = _config(tmp_path)
    result, doc = calibrate(record, config, overrides=["workload.response_tokens.mean=400"])
    _, stated = calibrate(_summary(tmp_path), _config(
        tmp_path, "stated.yaml", response_tokens={"mean": 400, "max": 1000}))  # fmt: skip
    assert doc == stated
    assert not any(w.startswith("the record's lengths") for w in result.warnings)


def test_lengths_of_another_config_or_a_multi_turn_run_are_not_used(tmp_path: Path) -> None:
    config = _config(tmp_path)
    longer = _summary(tmp_path, response_length={"mean": 700, "max": 2048})
    result, doc = calibrate(longer, config)
    note = next(w for w in result.warnings if w.startswith("the record's lengths"))
    assert "not used" in note and "workload.response_tokens.max (1000)" in note
    _, plain = calibrate(_summary(tmp_path), config)
    assert doc == plain
    turns = _config(tmp_path, "turns.yaml", turns={"mean": 2, "max": 3})
    result, _ = calibrate(_summary(tmp_path, response_length={"mean": 300}), turns)
    note = next(w for w in result.warnings if w.startswith("the record's lengths"))
    assert "not used: the workload is multi-turn" in note


def test_a_measured_share_no_distribution_of_that_mean_has_is_dropped(tmp_path: Path) -> None:
    # Half the responses at 1,000 tokens cannot average 250: the config stays as it was.
    record = _summary(tmp_path, response_length={"mean": 250, "clip_ratio": 0.5})
    result, doc = calibrate(record, _config(tmp_path))
    note = next(w for w in result.warnings if w.startswith("the record's lengths"))
    assert "not used" in note and "clip_ratio" in note
    _, plain = calibrate(_summary(tmp_path), _config(tmp_path))
    assert doc == plain


def test_roll_clip_count_is_a_share_of_the_steps_responses(tmp_path: Path) -> None:
    record = _write(tmp_path, "roll.yaml", {
        "framework": "rlplex", "timing_s": TIMINGS,
        "token": {"response_length": {"mean": 300}, "total_response_length": {"clip": 41}},
    })  # fmt: skip
    result, _ = calibrate(record, _config(tmp_path))
    note = next(w for w in result.warnings if w.startswith("the record's lengths"))
    # 41 of 256 x 16 = 4,096 responses.
    assert "cut at the max 1.00%" in note


def test_replay_and_whatif_use_the_measured_lengths(tmp_path: Path) -> None:
    record = _summary(tmp_path, response_length={"mean": 250})
    source = RecordSource(record=record, config=_config(tmp_path))
    report = replay_report(source)
    assert report.config.workload is not None
    assert report.config.workload.response_tokens.mean == 250
    assert any("response mean 250 tokens (the config: 500)" in w for w in report.warnings)
    what = whatif_report(source, alts=["tp4: roles.actor_infer.num_gpus_per_worker=4"])
    assert what.config.workload is not None and what.config.workload.response_tokens.mean == 250
    alt = what.result.alternatives[0].config
    assert alt is not None and alt.workload is not None
    assert alt.workload.response_tokens.mean == 250
    assert any("response mean 250" in n for n in what.notes)
    # --config-set of the mean is the user's and wins.
    mine = RecordSource(record=record, config=source.config,
                        config_overrides=("workload.response_tokens.mean=600",))  # fmt: skip
    assert replay_report(mine).config.workload.response_tokens.mean == 600  # type: ignore[union-attr]


def test_the_cli_says_which_lengths_calibrate_used(tmp_path: Path) -> None:
    record = _summary(tmp_path, response_length={"mean": 250})
    out = CliRunner().invoke(
        app, ["calibrate", str(record), "--config", str(_config(tmp_path)),
              "--out", str(tmp_path / "costs.yaml")],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "response mean 250 tokens (the config: 500)" in out.output


def test_a_record_without_lengths_says_the_fit_uses_the_guess(tmp_path: Path) -> None:
    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "importers" / "verl" / "grpo.yaml"
    record = _write(tmp_path, "verl.yaml", {"framework": "verl", "timing_s": {
        "gen": 60.0, "old_log_prob": 20.0, "update_actor": 90.0, "step": 180.0}})  # fmt: skip
    result, _ = calibrate(record, fixture, overrides=["cluster.gpu=h100"])
    note = next(w for w in result.warnings if w.startswith("the record gives no response length"))
    assert "rlplex assumes a mean of" in note
    # A native config states its mean: nothing to say.
    result, _ = calibrate(_summary(tmp_path), _config(tmp_path))
    assert not any("no response length" in w for w in result.warnings)


def test_a_whole_alternative_config_is_priced_with_the_recorded_lengths(tmp_path: Path) -> None:
    """--alt-config of the recorded config itself changes nothing: the estimator's ratio of
    the alternative over the recorded config must not hold the record's lengths against the
    config's guess (it made the same config 34 % slower)."""
    record = _summary(tmp_path, response_length={"mean": 250})
    config = _config(tmp_path)
    same = _config(tmp_path, "same.yaml")
    what = whatif_report(RecordSource(record=record, config=config), alt_configs=[same])
    baseline = what.result.baseline
    alt = next(o for o in what.result.alternatives if o.label == "same.yaml")
    assert alt.config is not None and alt.config.workload is not None
    assert alt.config.workload.response_tokens.mean == 250
    assert alt.period_s == pytest.approx(baseline.period_s)


def test_an_alternative_the_recorded_lengths_do_not_fit_is_read_without_them(
    tmp_path: Path,
) -> None:
    """An alternative that caps responses below the record's mean is read with its own
    lengths and a note, not refused with a mean the user never wrote."""
    record = _summary(tmp_path, response_length={"mean": 250})
    config = _config(tmp_path, response_tokens={"mean": 100, "max": 1000})
    what = whatif_report(
        RecordSource(record=record, config=config),
        alts=["cap: workload.response_tokens.max=200"],
    )
    cap = next(o for o in what.result.alternatives if o.label == "cap")
    assert cap.error is None and cap.config is not None and cap.config.workload is not None
    assert cap.config.workload.response_tokens.mean == 100
    assert any(n.startswith("cap: the record's lengths") and "not used" in n for n in what.notes)
    assert what.config.workload is not None and what.config.workload.response_tokens.mean == 250


def test_the_recorded_share_cut_goes_with_the_recorded_mean(tmp_path: Path) -> None:
    """A share cut at the maximum belongs to the distribution of the mean it was measured
    with: where the user gives the mean, the record's share is not put with it."""
    record = _summary(tmp_path, response_length={"mean": 250, "clip_ratio": 0.2})
    _, doc = calibrate(record, _config(tmp_path), overrides=["workload.response_tokens.mean=400"])
    _, stated = calibrate(_summary(tmp_path), _config(
        tmp_path, "stated.yaml", response_tokens={"mean": 400, "max": 1000}))  # fmt: skip
    assert doc == stated


def _verl_log(tmp_path: Path, name: str, means: dict[int, float]) -> Path:
    import json

    path = tmp_path / name
    lines = [
        json.dumps({"step": s, "data": {
            "timing_s/gen": 40.0, "timing_s/reward": 8.0, "timing_s/update_actor": 30.0,
            "timing_s/step": 80.0, "response_length/mean": m}})
        for s, m in means.items()
    ]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def test_the_held_out_steps_are_predicted_with_their_own_lengths(tmp_path: Path) -> None:
    """Responses grow over a run: the steps held out are predicted with the lengths they
    had, not the fitting steps' (else the check reports the growth as the model's error)."""
    fit = {s: 200.0 for s in range(5)}
    grown = _verl_log(tmp_path, "grown.jsonl", {**fit, **{s: 400.0 for s in range(5, 9)}})
    flat = _verl_log(tmp_path, "flat.jsonl", {**fit, **{s: 200.0 for s in range(5, 9)}})
    config = _config(tmp_path)
    grown_fit, grown_doc = calibrate(grown, config)
    flat_fit, flat_doc = calibrate(flat, config)
    assert grown_fit.check_steps == (5, 6, 7, 8)
    assert grown_doc == flat_doc  # the same fitting steps, the same fit
    after = {s.stage: s.after_s for s in grown_fit.stages}
    flat_after = {s.stage: s.after_s for s in flat_fit.stages}
    assert after["generate"] > 1.2 * flat_after["generate"]
    assert grown_fit.period_after_s > flat_fit.period_after_s
    # The estimate before the fit is checked on the same lengths.
    before = {s.stage: s.before_s for s in grown_fit.stages}
    assert before["generate"] > 1.2 * {s.stage: s.before_s for s in flat_fit.stages}["generate"]
    assert grown_fit.period_before_s > flat_fit.period_before_s
    assert any(
        w.startswith("the held-out steps' own lengths (steps 5-8;") and "mean 400 tokens" in w
        for w in grown_fit.warnings
    )
    assert not any("held-out" in w for w in flat_fit.warnings)


def test_under_dynamic_sampling_the_note_says_whose_lengths_they_are(tmp_path: Path) -> None:
    """verl and ROLL log lengths over the trained batch, after dynamic sampling dropped groups
    the rollout also generated; NeMo RL's mean is its rollout's."""
    config = _config(tmp_path, generated_per_trained=2.0)
    verl = _summary(tmp_path, response_length={"mean": 250})
    result, _ = calibrate(verl, config)
    note = next(w for w in result.warnings if w.startswith("the record's lengths"))
    assert "measured on the trained samples" in note and "2x prompts" in note
    nemo = _write(tmp_path, "nemo.yaml", {"framework": "rlplex", "timing_s": TIMINGS,
                                          "train/mean_gen_tokens_per_sample": 250})  # fmt: skip
    result, _ = calibrate(nemo, config)
    note = next(w for w in result.warnings if w.startswith("the record's lengths"))
    assert "response mean 250" in note and "trained samples" not in note


def test_a_swept_length_is_the_users_as_a_config_set_one_is(tmp_path: Path) -> None:
    """``whatif --sweep workload.response_tokens.mean=...`` sets the mean as ``--config-set``
    does: the record's share cut at the maximum, measured with the record's mean, does not go
    with it (at 100 tokens a 20 % share at 1,000 would make the config refuse every recorded
    length, the prompt's too)."""
    from rlplex.reports.sweep import whatif_sweep

    record = _summary(tmp_path, response_length={"mean": 250, "clip_ratio": 0.2},
                      prompt_length={"mean": 100})  # fmt: skip
    source = RecordSource(record=record, config=_config(tmp_path))
    alts = ["tp4: roles.actor_infer.num_gpus_per_worker=4"]
    swept = whatif_sweep(source, "workload.response_tokens.mean", ["100", "400"], alts=alts)
    for point in swept.points:
        text = f"workload.response_tokens.mean={point.value:g}"
        set_ = whatif_report(
            RecordSource(record=record, config=source.config, config_overrides=(text,)),
            alts=alts,
        )  # fmt: skip
        assert point.periods == {o.label: o.period_s for o in set_.result.alternatives}
