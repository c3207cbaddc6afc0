"""Memory strips under the Gantt: PNG and HTML of ``rlplex plan``."""

from __future__ import annotations

from typer.testing import CliRunner

from rlplex.cli import app

runner = CliRunner()


# The colocated 7B of tests/plan/test_host_memory.py on 1 TB nodes.
COLOCATED_7B = """
cluster: {nodes: 1, gpus_per_node: 8, gpu_memory_gb: 80, host_gb_per_s: 25, host_memory_gb: 1024}
roles:
  actor_train: {devices: "0-7", states: {weights: 14, optimizer: 10.5, grads: 14}}
  actor_infer: {devices: "0-7", states: {weights: 14, kv_cache: 58}}
  reference: {devices: "0-7", states: {weights: 14}}
pipeline:
  stages:
    generate: {role: actor_infer, seconds: 100}
    ref_logprob: {role: reference, seconds: 20, after: [generate]}
    old_logprob: {role: actor_train, seconds: 20, after: [generate], needs: [weights]}
    advantage: {role: driver, seconds: 1, after: [ref_logprob, old_logprob]}
    train: {role: actor_train, seconds: 60, memory_gb: 20, after: [advantage]}
    weight_sync: {kind: weight_sync, from: actor_train, to: actor_infer, after: [train]}
"""


def test_plan_pictures_draw_gpu_and_host_memory(tmp_path):
    path = tmp_path / "colocated.yaml"
    path.write_text(COLOCATED_7B)
    png, page = tmp_path / "g.png", tmp_path / "g.html"
    result = runner.invoke(app, ["plan", str(path), "--png", str(png), "--gantt", str(page)])
    assert result.exit_code == 0, result.output
    assert png.stat().st_size > 20_000
    text = page.read_text()
    assert "memory over the step" in text
    assert "peak 72.5 GB at" in text and "during s0/train" in text
    assert "host of node 0" in text and "peak 308.0 GB" in text
    assert "capacity 80 GB" in text and "capacity 1024 GB" in text
