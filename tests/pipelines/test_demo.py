"""The demo writes its record, Gantt and reward curve (a short run; ``make demo`` runs it all)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.mark.slow
def test_demo_writes_its_outputs(ray_session, tmp_path):
    from rlplex.pipelines import demo
    from rlplex.timeline.record import Timeline

    assert demo.main(["--out", str(tmp_path), "--steps", "6"]) == 0
    record = Timeline.read_jsonl(tmp_path / "record.jsonl")
    assert sorted(record.metrics) == list(range(6))
    assert all("reward/mean" in m for m in record.metrics.values())
    assert {"offload", "reload"} <= {e.kind for e in record.events}
    html = (tmp_path / "gantt.html").read_text()
    assert "predicted" in html and "measured" in html
    assert (tmp_path / "reward.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == 6 and 0 <= summary["reward_first5"] <= 1


def test_import_rlplex_pipelines_config_is_light():
    import subprocess
    import sys

    code = (
        "import sys, rlplex, rlplex.pipelines, rlplex.stages;"
        "print('torch' in sys.modules, 'ray' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
