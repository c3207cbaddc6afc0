"""Read a ROLL pipeline config: its role blocks and their ``device_mapping``.

ROLL (alibaba/ROLL) writes one top-level block per worker role::

    num_gpus_per_node: 8
    actor_train:
      strategy_args: {strategy_name: megatron_train, ...}
      device_mapping: list(range(0,16))
    actor_infer:
      strategy_args:
        strategy_name: vllm
        strategy_config: {tensor_parallel_size: 2}
      device_mapping: list(range(0,12))
    rewards:
      math_rule: {world_size: 8}          # a CPU worker group

ROLL's own rules, followed here:

- ``device_mapping`` is a Python-looking list expression (parsed without eval);
  a block without it is a CPU worker group of ``world_size`` workers.
- ``num_gpus_per_worker`` defaults to 1; for a ``vllm`` strategy it is
  ``tensor_parallel_size * pipeline_parallel_size`` of the strategy config
  (``sglang``: its ``tp_size``), whatever the block says.
- ``world_size = len(device_mapping) // num_gpus_per_worker``, which must
  divide evenly; a given ``world_size`` must agree.
- ``num_gpus_per_node`` (default 8) lays global ranks on nodes; a worker
  never spans nodes. The node count is what the highest rank needs.
- ``async_generation_ratio > 0`` turns on async generation; rlplex reads it as
  ``max_staleness = ceil(ratio)``.

Roles map by name: ``actor_train``, ``actor_infer``, ``reference`` and
``critic`` keep theirs; reward workers under ``rewards`` become the CPU role
``rewards`` (world sizes added up) or, when placed on GPUs, the role
``reward`` (further ones ``reward_NAME``). Other blocks with a
``device_mapping`` keep their own name. Costs: see
:mod:`rlplex.resources.importers.common`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from rlplex.errors import ConfigError
from rlplex.resources.cluster import Cluster
from rlplex.resources.devices import DeviceSpecError, parse_devices
from rlplex.resources.importers.common import (
    apply_costs,
    default_pipeline,
    gpu_role,
    positive_int,
    resolve_ref,
)
from rlplex.resources.placement import check_worker_layout

_INFERENCE_STRATEGIES = ("vllm", "sglang")


def _gpus_per_worker(
    block: Mapping[str, Any], data: Mapping[str, Any], name: str, file: str
) -> int:
    """ROLL's rule: an inference engine's worker drives tp * pp GPUs."""
    strategy = resolve_ref(block.get("strategy_args"), data) or {}
    strategy_name = (
        resolve_ref(strategy.get("strategy_name"), data) if isinstance(strategy, dict) else None
    )
    if strategy_name in _INFERENCE_STRATEGIES:
        config = resolve_ref(strategy.get("strategy_config"), data) or {}
        if not isinstance(config, dict):
            config = {}
        base = f"{name}.strategy_args.strategy_config"
        if strategy_name == "vllm":
            tp_key, pp_key = "tensor_parallel_size", "pipeline_parallel_size"
        else:
            tp_key = "tp_size" if "tp_size" in config else "tensor_parallel_size"
            pp_key = "pp_size" if "pp_size" in config else "pipeline_parallel_size"
        tp = positive_int(
            resolve_ref(config.get(tp_key, 1), data), field=f"{base}.{tp_key}", file=file
        )
        pp = positive_int(
            resolve_ref(config.get(pp_key, 1), data), field=f"{base}.{pp_key}", file=file
        )
        return tp * pp
    value = resolve_ref(block.get("num_gpus_per_worker", 1), data)
    return positive_int(value, field=f"{name}.num_gpus_per_worker", file=file)


def _parse_mapping(value: Any, field: str, file: str) -> tuple[int, ...]:
    try:
        devices = parse_devices(value)
    except DeviceSpecError as exc:
        raise ConfigError(str(exc), field=field, value=value, file=file) from None
    if not isinstance(devices, tuple):
        raise ConfigError("must list GPU ranks", field=field, value=value, file=file)
    return devices


def _role_blocks(data: Mapping[str, Any]) -> list[tuple[str, str, Mapping[str, Any]]]:
    """(rlplex name, field path, block) of every worker block, in file order."""
    blocks: list[tuple[str, str, Mapping[str, Any]]] = []
    gpu_rewards = 0
    for key, block in data.items():
        if key == "rewards" and isinstance(block, dict):
            for sub, body in block.items():
                if not isinstance(body, dict):
                    continue
                if body.get("device_mapping") is not None:
                    name = "reward" if gpu_rewards == 0 else f"reward_{sub}"
                    gpu_rewards += 1
                else:
                    name = "rewards"
                blocks.append((name, f"rewards.{sub}", body))
        elif isinstance(block, dict) and "device_mapping" in block:
            blocks.append((str(key), str(key), block))
    return blocks


def to_native(
    data: dict[str, Any],
    *,
    file: str,
    costs: dict[str, Any] | None = None,
    costs_file: str | None = None,
) -> dict[str, Any]:
    """Convert a ROLL config (as parsed YAML) into the native config dict.

    Raises:
        ConfigError: naming ``file`` and the ROLL field path, e.g.
            ``actor_infer.device_mapping``.
    """
    per_node = positive_int(
        resolve_ref(data.get("num_gpus_per_node", 8), data), field="num_gpus_per_node", file=file
    )
    parsed: list[tuple[str, str, Mapping[str, Any], tuple[int, ...] | None, int]] = []
    for name, field, block in _role_blocks(data):
        raw = resolve_ref(block.get("device_mapping"), data)
        if raw is None:
            size = resolve_ref(block.get("world_size", 1), data)
            parsed.append(
                (
                    name,
                    field,
                    block,
                    None,
                    positive_int(size, field=f"{field}.world_size", file=file),
                )
            )
            continue
        devices = _parse_mapping(raw, f"{field}.device_mapping", file)
        parsed.append((name, field, block, devices, _gpus_per_worker(block, data, field, file)))
    names = {p[0] for p in parsed}
    for required in ("actor_train", "actor_infer"):
        if required not in names or next(p for p in parsed if p[0] == required)[3] is None:
            raise ConfigError(
                f"a ROLL config needs a {required!r} block with a device_mapping",
                field=required,
                file=file,
            )
    top = max(max(p[3]) for p in parsed if p[3])
    cluster = Cluster(nodes=top // per_node + 1, gpus_per_node=per_node)
    roles: dict[str, dict[str, Any]] = {}
    for name, field, block, devices, count in parsed:
        if devices is None:
            # CPU reward workers of every kind share the one ``rewards`` role.
            previous = roles.get(name, {}).get("world_size", 0)
            roles[name] = {"world_size": previous + count}
            continue
        if len(devices) % count:
            raise ConfigError(
                f"has {len(devices)} GPUs, not a multiple of num_gpus_per_worker {count}"
                " (world_size = len(device_mapping) // num_gpus_per_worker must divide)",
                field=f"{field}.device_mapping",
                value=block.get("device_mapping"),
                file=file,
            )
        check_worker_layout(name, devices, count, cluster, file, field=f"{field}.device_mapping")
        world_size = len(devices) // count
        given = resolve_ref(block.get("world_size"), data)
        if given is not None and given != world_size:
            raise ConfigError(
                f"disagrees with len(device_mapping) // num_gpus_per_worker ="
                f" {len(devices)} // {count} = {world_size}",
                field=f"{field}.world_size",
                value=given,
                file=file,
            )
        roles[name] = gpu_role(devices, count, name)
    ratio = resolve_ref(data.get("async_generation_ratio", 0), data) or 0
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or ratio < 0:
        raise ConfigError(
            "must be a number >= 0", field="async_generation_ratio", value=ratio, file=file
        )
    mode, staleness = ("async", max(1, math.ceil(ratio))) if ratio > 0 else ("sync", 0)
    native = {
        "cluster": cluster.model_dump(),
        "roles": roles,
        "pipeline": default_pipeline(roles, mode, staleness),
    }
    return apply_costs(native, costs, costs_file)
