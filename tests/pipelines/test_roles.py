"""The pipelines' ready configs: written as native files, they plan the same; sizes in GB."""

from __future__ import annotations

import pytest
import yaml

from rlplex.config import load_config
from rlplex.pipelines import grpo, ppo
from rlplex.pipelines.roles import cluster_config, native_config
from rlplex.plan import make_plan


@pytest.mark.parametrize("layout", ["colocated", "split", "async"])
@pytest.mark.parametrize("build", [grpo.build_pipeline, ppo.build_pipeline])
def test_native_config_plans_the_same_period(build, layout, tmp_path) -> None:
    """``rlplex calibrate`` reads the bench's Python-built config from this file: the file
    must plan exactly as the object does (measured stage seconds, copy speeds, overhead)."""
    pipeline = build()
    seconds = {s.name: 0.01 * (i + 1) for i, s in enumerate(pipeline.stages)}
    pipeline = pipeline.model_copy(
        update={
            "stages": tuple(
                s if s.is_weight_sync else s.model_copy(update={"seconds": seconds[s.name]})
                for s in pipeline.stages
            )
        }
    )
    config = cluster_config(pipeline, layout, scale_gb=0.411, host_gb_per_s=51.4)
    config = config.model_copy(
        update={
            "cluster": config.cluster.model_copy(
                update={"device_copy_gb_per_s": 1889.5, "dispatch_s": 0.004}
            )
        }
    )
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(native_config(config), sort_keys=False))
    loaded = load_config(path)
    assert make_plan(loaded).period_s == pytest.approx(make_plan(config).period_s, rel=1e-12)
    assert loaded.cluster.dispatch_s == 0.004
    assert loaded.roles["actor_train"].states == config.roles["actor_train"].states


def test_weights_gb_is_in_the_configs_gb() -> None:
    """The demo's state sizes are the policy's bytes over 10^9 (the config's GB), not GiB:
    the first GPU run planned 0.383 'GB' for 0.411 GB of weights."""
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from rlplex.pipelines.config import RLConfig
    from rlplex.pipelines.demo import weights_gb
    from rlplex.stages.models import build_causal_lm

    cfg = RLConfig()
    model = build_causal_lm(cfg.model)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    assert weights_gb(cfg) == pytest.approx(nbytes / 1e9, rel=1e-12)


def test_given_states_replace_the_ratios_of_the_roles_they_name() -> None:
    sized = {"actor_infer": {"weights": 0.4, "kv_cache": 0.1}}
    config = cluster_config(grpo.build_pipeline(), "colocated", scale_gb=0.5, states=sized)
    assert config.roles["actor_infer"].states == {"weights": 0.4, "kv_cache": 0.1}
    # The others keep the ratios times scale_gb, and the GPU's memory is scaled as before.
    assert config.roles["actor_train"].states == {"weights": 0.5, "optimizer": 1.0, "grads": 0.5}
    assert config.cluster.gpu_memory_gb == 2.5
