"""Read an RLinf config: ``cluster.num_nodes``, ``component_placement`` and ``node_groups``.

RLinf (RLinf/RLinf) places components with one mapping::

    cluster:
      num_nodes: 2
      component_placement:
        actor,rollout: all        # comma-joined keys share one placement
        inference: 0-3,8-11       # global accelerator ranks, inclusive ranges
        reward: 0-1:0-3           # resource ranks : process ranks

The file is composed first (``defaults:``, ``${...}``; see
:mod:`~rlplex.resources.importers.compose`). RLinf's rules, followed here,
with their source:

- Placement syntax (rlinf/scheduler/placement/placement.py,
  ``ComponentPlacement``): a key may join several components with commas;
  a component may appear under one key only. A placement is ``all`` or
  comma-separated segments ``RANKS[:PROCS]``; a resource rank listed twice, a
  descending range or a rank outside the cluster is an error; process ranks
  must be continuous from 0, and in each segment one count must be a multiple
  of the other. The dict form ``{node_group: LABEL, placement: ...}`` counts
  ranks inside the node group(s) named (comma-separated labels span groups
  in order).
- Node groups (rlinf/scheduler/cluster/config.py, ``NodeGroupConfig``):
  ``cluster.node_groups`` lists ``{label, node_ranks, hardware?}``; a
  group's GPU rank r is GPU ``r % gpus_per_node`` of its ``r //
  gpus_per_node``-th node. A group with ``hardware`` (robots ...) or
  ``ignore_hardware``, and the reserved label ``node``, place processes on
  non-GPU resources: such a component is a CPU role with one worker per
  process.
- GPUs per process, by runner. Reasoning and coding runs (``runner.task_type``
  ``reasoning`` / ``coding_online_rl``, or none given; rlinf/utils/placement.py,
  ``ModelParallelComponentPlacement``): every component holds one GPU per
  process except the rollout: ``rollout.tensor_parallel_size`` per process
  when actor and rollout share GPUs (collocated), ``tensor x pipeline``
  otherwise; placements must be collocated (actor GPUs == rollout GPUs) or
  fully disaggregated, actor and rollout GPUs continuous, and a ``reward``
  placement must exist ("Reward GPUs must be specified"); no inference
  placement in collocated mode, nor with ``algorithm.recompute_logprobs:
  false``. With ``cluster.auto_scheduler: true`` (and no critic) the
  placement must be actor -> rollout [-> inference] on consecutive GPUs from
  0 to the last, and the actor is then placed on all GPUs. Embodied runs
  (``HybridComponentPlacement``): one GPU per process unless process ranks
  say otherwise; several processes on one GPU count as one rlplex worker per
  GPU.
- Async (rlinf/workers/rollout/hf/async_huggingface_worker.py,
  ``wait_if_stale``): with ``algorithm.staleness_threshold: k`` the rollout
  runs up to k policy versions ahead: ``mode: async, max_staleness: k``.
  ``algorithm.loss_type: decoupled_actor_critic`` runs only under the async
  runner (examples/embodiment/train_async.py); without a threshold its rollout
  never waits, which rlplex models as ``max_staleness: 1`` (say otherwise with
  ``--set pipeline.max_staleness=K``). Other files launched with
  ``train_async.py``: pass ``--set pipeline.mode=async``.
- Not an RL step (rlinf/config.py ``validate_cfg``): ``runner.task_type`` of
  ``sft``, ``offline``, ``embodied_eval`` or ``reasoning_eval``,
  ``runner.only_eval: true``, or agent-lightning's top-level ``eval: true``
  (examples/agent/agentlightning/calc_x/main.py), is refused, saying which.
- GPUs per node: ``cluster.num_gpus_per_node`` (rlplex's key; RLinf
  discovers it at run time; default 8). Native cluster fields
  (``gpu_memory_gb`` ...) may be given in the same block.

Read for the estimator: ``rollout.model.model_path`` (else
``actor.model.model_path``) as ``model``; ``data.rollout_batch_size``,
``algorithm.group_size``, ``data.max_prompt_length``,
``algorithm.sampling_params.max_new_tokens`` (else ``runner.seq_length -
data.max_prompt_length``) as the workload, its micro-batch and optimizer steps
as RLinf's reasoning and coding runs set them (``validate_reasoning_cfg``:
``algorithm.training_batch_size_per_gpu``, ``algorithm.n_minibatches``; other
runs ``actor.micro_batch_size``); the actor's Megatron TP/PP/EP/CP and
recomputation, its ``offload_weight`` / ``offload_optimizer`` where it shares
GPUs with the rollout (RLinf offloads only then), the rollout's and the
inference component's TP/PP. A ``reward`` component without
``reward.use_reward_model: true`` scores with rules: a CPU role.

Components map to rlplex roles: ``actor`` -> ``actor_train``, ``rollout`` ->
``actor_infer``, ``inference`` -> ``inference`` (old log-probs, synced from the
actor), ``critic`` -> ``critic``, ``reference`` -> ``reference``, ``reward`` ->
``reward`` (rule-based unless ``reward.use_reward_model``: a CPU role);
others (``env``, ``agent`` ...) keep their name and hold no state.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from typing import Any

from rlplex.errors import ConfigError
from rlplex.resources.cluster import Cluster
from rlplex.resources.devices import DeviceSpecError, parse_devices
from rlplex.resources.importers.common import (
    DEFAULT_STATES,
    apply_costs,
    budgeted_turns,
    default_pipeline,
    flag,
    get_path,
    given_count,
    optional_int,
    parallel,
    parallel_sizes,
    positive_int,
    refuse_non_rl,
    remaining_tokens,
    reply_tokens,
    rollout,
    workload,
)
from rlplex.resources.importers.compose import compose
from rlplex.resources.placement import check_worker_layout

COMPONENT_ROLES = {
    "actor": "actor_train",
    "rollout": "actor_infer",
    "inference": "inference",
    "critic": "critic",
    "reference": "reference",
    "reward": "reward",
}
"""RLinf component name -> rlplex role name; other components keep their name."""

_NATIVE_CLUSTER_KEYS = (
    "gpu_memory_gb",
    "host_gb_per_s",
    "device_copy_gb_per_s",
    "network_gb_per_s",
)
_RANKS = re.compile(r"^\s*([0-9]+)\s*(?:-\s*([0-9]+)\s*)?$")


def _ranks(text: str, what: str) -> list[int]:
    match = _RANKS.match(text)
    if not match:
        raise ValueError(f"cannot parse {what} {text.strip()!r}; expected N or N-M")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    if last < first:
        raise ValueError(
            f"descending {what} range {text.strip()!r}: the start must not exceed the end"
        )
    from rlplex.resources.devices import MAX_GPUS

    if last >= MAX_GPUS:  # checked before the range is built
        raise ValueError(
            f"{what} {text.strip()!r} reaches rank {last}, past the largest cluster rlplex"
            f" plans ({MAX_GPUS:,} GPUs)"
        )
    return list(range(first, last + 1))


def parse_placement(value: Any, num_gpus: int) -> tuple[tuple[int, ...], int]:
    """Parse one RLinf placement into (global GPU ranks, GPUs per worker).

    Raises:
        ValueError: with RLinf's reason (duplicate rank, descending range,
            non-continuous process ranks, incompatible counts, out of range).
    """
    if isinstance(value, bool):
        raise ValueError("a placement is 'all', a rank, or ranges like 0-3,8-11")
    if isinstance(value, int):
        value = str(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a placement is 'all', a rank, or ranges like 0-3,8-11")
    if value.strip().lower() == "all":
        return tuple(range(num_gpus)), 1
    devices: list[int] = []
    procs: list[int] = []
    per_worker: set[int] = set()
    with_procs = None
    for segment in value.split(","):
        resource, sep, process = segment.partition(":")
        ranks = _ranks(resource, "resource rank")
        for rank in ranks:
            if rank in devices:
                raise ValueError(f"resource rank {rank} is listed twice")
            if rank >= num_gpus:
                raise ValueError(
                    f"resource rank {rank} is outside the cluster, which has GPUs 0-{num_gpus - 1}"
                )
        devices.extend(ranks)
        if with_procs is not None and with_procs != bool(sep):
            raise ValueError("give process ranks for every segment or for none")
        with_procs = bool(sep)
        if sep:
            segment_procs = _ranks(process, "process rank")
            big, small = max(len(ranks), len(segment_procs)), min(len(ranks), len(segment_procs))
            if big % small:
                raise ValueError(
                    f"segment {segment.strip()!r}: {len(ranks)} resources and"
                    f" {len(segment_procs)} processes; one count must be a multiple of the other"
                )
            procs.extend(segment_procs)
            per_worker.add(max(1, len(ranks) // len(segment_procs)))
    if procs:
        if sorted(procs) != list(range(len(procs))):
            raise ValueError(
                f"process ranks must be continuous from 0 to {len(procs) - 1}, each once"
                f" (got {procs})"
            )
        if len(per_worker) > 1:
            raise ValueError("every segment must give each process the same number of GPUs")
    return tuple(devices), per_worker.pop() if per_worker else 1


def _processes(value: Any, num_resources: int) -> int:
    """How many processes a (valid) placement starts: process ranks, else one per resource."""
    text = str(value).strip()
    if text.lower() == "all":
        return num_resources
    count = 0
    for segment in text.split(","):
        resource, sep, process = segment.partition(":")
        count += len(_ranks(process if sep else resource, "rank"))
    return count


def _components(key: Any) -> list[str]:
    return [part.strip() for part in str(key).split(",") if part.strip()]


_NON_RL_TASKS = {
    "sft": "an RLinf SFT config (runner.task_type: sft)",
    "offline": "an RLinf offline-RL config (runner.task_type: offline)",
    "embodied_eval": "an RLinf evaluation config (runner.task_type: embodied_eval)",
    "reasoning_eval": "an RLinf evaluation config (runner.task_type: reasoning_eval)",
}
_MODEL_PARALLEL_TASKS = ("reasoning", "coding_online_rl")
"""Task types placed by ModelParallelComponentPlacement (rlinf/utils/placement.py)."""

_MODEL_PARALLEL_COMPONENTS = (
    "actor",
    "rollout",
    "inference",
    "actor_inference",
    "critic",
    "critic_inference",
    "reward",
)
"""Components ModelParallelComponentPlacement knows (rlinf/utils/placement.py)."""

_ASYNC_ONLY_LOSSES = ("decoupled_actor_critic",)
"""Loss types only examples/embodiment/train_async.py runs (AsyncPPOEmbodiedRunner)."""


class _Groups:
    """RLinf node groups: a label -> (GPU-less?, global node ranks)."""

    def __init__(self, block: Mapping[str, Any], nodes: int, file: str) -> None:
        self.groups: dict[str, tuple[bool, list[int]]] = {}
        self.hardware: dict[str, int] = {}
        """Non-GPU resources of a hardware group: its ``hardware.configs`` entries, else nodes."""
        raw = block.get("node_groups") or []
        if not isinstance(raw, list):
            raise ConfigError(
                "must be a list of {label, node_ranks}", field="cluster.node_groups", file=file
            )
        for index, group in enumerate(raw):
            field = f"cluster.node_groups.{index}"
            if not isinstance(group, Mapping) or "label" not in group:
                raise ConfigError("must give a label and node_ranks", field=field, file=file)
            label = str(group["label"])
            try:
                node_ranks = parse_devices(group.get("node_ranks"), nodes)
            except DeviceSpecError as exc:
                reason = (
                    str(exc)
                    .replace("device", "node rank")
                    .replace(f"which has GPUs 0-{nodes - 1}", f"which has nodes 0-{nodes - 1}")
                )
                raise ConfigError(
                    reason, field=f"{field}.node_ranks", value=group.get("node_ranks"), file=file
                ) from None
            assert isinstance(node_ranks, tuple)
            hardware = group.get("hardware")
            ignore = flag(group.get("ignore_hardware"), field=f"{field}.ignore_hardware", file=file)
            cpu = bool(hardware) or bool(ignore)
            self.groups[label] = (cpu, list(node_ranks))
            configs = hardware.get("configs") if isinstance(hardware, Mapping) else None
            self.hardware[label] = len(configs) if isinstance(configs, list) else len(node_ranks)

    def resolve(self, labels: Any, field: str, file: str) -> tuple[bool, list[int] | None, int]:
        """(non-GPU placement?, global node ranks in rank order or None, non-GPU resources)."""
        if isinstance(labels, list):
            names = [str(x).strip() for x in labels]
        else:
            names = [x.strip() for x in str(labels).split(",") if x.strip()]
        if names == ["cluster"]:
            return False, None, 0
        if "node" in names:
            return True, None, 0
        nodes: list[int] = []
        cpu = False
        resources = 0
        for name in names:
            if name not in self.groups:
                known = ", ".join(self.groups) or "none"
                raise ConfigError(
                    f"no node group labelled {name!r} in cluster.node_groups (labels: {known})",
                    field=field,
                    value=labels,
                    file=file,
                )
            group_cpu, group_nodes = self.groups[name]
            cpu = cpu or group_cpu
            nodes.extend(group_nodes)
            resources += self.hardware[name]
        return cpu, nodes, resources


def _global(ranks: tuple[int, ...], nodes: list[int] | None, per_node: int) -> tuple[int, ...]:
    """Global GPU ranks of group-local ranks (RLinf counts ranks inside the node groups)."""
    if nodes is None:
        return ranks
    return tuple(nodes[r // per_node] * per_node + r % per_node for r in ranks)


def _continuous(devices: tuple[int, ...]) -> bool:
    return list(devices) == list(range(devices[0], devices[-1] + 1))


_PROMPT = "data.max_prompt_length"
_MAX_NEW = "algorithm.sampling_params.max_new_tokens"


def _response(data: Mapping[str, Any], file: str) -> tuple[Any, str]:
    """The response's maximum and the field it comes from: ``max_new_tokens``, else what
    ``runner.seq_length`` leaves after the prompt."""
    response = get_path(data, _MAX_NEW)
    if response is not None:
        return response, _MAX_NEW
    seq = "runner.seq_length"
    left = remaining_tokens(
        get_path(data, seq), get_path(data, _PROMPT), field=seq, prompt_field=_PROMPT, file=file
    )
    return left, seq


def _workload(data: Mapping[str, Any], *, model_parallel: bool, file: str) -> dict[str, Any] | None:
    response, response_field = _response(data, file)
    prompts = get_path(data, "data.rollout_batch_size")
    micro_field, mini_batch_prompts = "actor.micro_batch_size", None
    if model_parallel:
        # RLinf's reasoning and coding runs (rlinf/config.py, validate_reasoning_cfg) set
        # the actor's micro-batch to algorithm.training_batch_size_per_gpu and its global
        # batch to rollout_batch_size x group_size // algorithm.n_minibatches.
        micro_field = "algorithm.training_batch_size_per_gpu"
        split = "algorithm.n_minibatches"
        minibatches = given_count(get_path(data, split), field=split, file=file) or 1
        if optional_int(prompts) and minibatches > 1:
            mini_batch_prompts = max(1, prompts // minibatches)
    load = workload(
        file=file,
        fields={
            "prompts": "data.rollout_batch_size",
            "samples": "algorithm.group_size",
            "prompt_max": _PROMPT,
            "response_max": response_field,
            "micro_batch": micro_field,
            "mini_batch_prompts": "algorithm.n_minibatches",
        },
        prompts=prompts,
        samples=get_path(data, "algorithm.group_size"),
        prompt_max=get_path(data, _PROMPT),
        response_max=response,
        micro_batch=get_path(data, micro_field),
        mini_batch_prompts=mini_batch_prompts,
    )
    loop = get_path(data, "agentloop")
    if load is not None and isinstance(loop, Mapping):
        # The agent loops stop at `if max_turns and turns >= max_turns` (rstar2; searchr1
        # without the `and`): 0 or null is no limit, a negative count stops after the first
        # answer, a string fails there.
        most, assistant, user = (
            given_count(loop.get(key), field=f"agentloop.{key}", file=file, least=0)
            for key in ("max_turns", "max_assistant_turns", "max_user_turns")
        )
        turns = most or assistant or (user + 1 if user else None)
        if turns is not None:
            # RLinf's agent loops (rlinf/agents/*) answer up to max_turns (searchr1) or
            # max_assistant_turns (rstar2) times within the response budget, tool replies of
            # up to max_tool_response_length between them; a MultiAgentLoopWorker
            # (is_dynamic_rollout_batch, required for it) hands the trainer one sample per
            # turn (single_turn_outputs), an AgentLoopWorker the whole trajectory.
            reply_field = "agentloop.max_tool_response_length"
            reply_chars = given_count(loop.get("max_tool_response_length"), field=reply_field,
                                      file=file, least=0) or 0  # fmt: skip
            reply = reply_tokens(reply_chars)
            per_turn = flag(
                loop.get("is_dynamic_rollout_batch"),
                field="agentloop.is_dynamic_rollout_batch", file=file, default=False,
            )  # fmt: skip
            load |= budgeted_turns(
                turns, reply, load["response_tokens"]["max"],
                samples="turn" if per_turn else "trajectory",
            )  # fmt: skip
    if load is not None:
        # RLinf's workers hand the batch to one another through channels; no single
        # controller serializes it for every pass.
        load["controller"] = {"padding": "none"}
    return load


def _mode(data: Mapping[str, Any], file: str) -> tuple[str, int]:
    threshold = get_path(data, "algorithm.staleness_threshold")
    loss = get_path(data, "algorithm.loss_type")
    if threshold is not None:
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 0:
            raise ConfigError(
                "must be an integer >= 0",
                field="algorithm.staleness_threshold",
                value=threshold,
                file=file,
            )
        return "async", threshold
    if loss in _ASYNC_ONLY_LOSSES:
        return "async", 1
    return "sync", 0


def to_native(
    data: dict[str, Any],
    *,
    file: str,
    costs: dict[str, Any] | None = None,
    costs_file: str | None = None,
) -> dict[str, Any]:
    """Convert an RLinf config (as parsed YAML) into the native config dict.

    Raises:
        ConfigError: naming ``file`` and the RLinf field path, e.g.
            ``cluster.component_placement.actor,rollout``.
    """
    data = compose(data, file).data
    task = get_path(data, "runner.task_type")
    if task in _NON_RL_TASKS:
        refuse_non_rl(_NON_RL_TASKS[task], file=file, field="runner.task_type")
    if flag(get_path(data, "runner.only_eval"), field="runner.only_eval", file=file):
        refuse_non_rl("an RLinf evaluation run (runner.only_eval: true)", file=file)
    # examples/agent/agentlightning/calc_x/main.py: cfg.eval
    if flag(data.get("eval"), field="eval", file=file):
        refuse_non_rl("an RLinf agent-lightning evaluation run (eval: true)", file=file)
    block = data.get("cluster")
    if not isinstance(block, dict):
        raise ConfigError("must be a mapping", field="cluster", value=block, file=file)
    nodes = positive_int(block.get("num_nodes"), field="cluster.num_nodes", file=file)
    per_node = positive_int(
        block.get("num_gpus_per_node", 8), field="cluster.num_gpus_per_node", file=file
    )
    native_cluster = {k: block[k] for k in _NATIVE_CLUSTER_KEYS if k in block}
    cluster = Cluster(nodes=nodes, gpus_per_node=per_node)
    groups = _Groups(block, nodes, file)
    placement = block.get("component_placement")
    if not isinstance(placement, dict) or not placement:
        raise ConfigError(
            "must map components to placements",
            field="cluster.component_placement",
            value=placement,
            file=file,
        )
    # RLinf requires runner.task_type; a file without one is read as a reasoning run.
    model_parallel = task in _MODEL_PARALLEL_TASKS or task is None
    # component -> (field, devices or None for CPU, GPUs per process or CPU world size, procs given)
    placed: dict[str, tuple[str, tuple[int, ...] | None, int, bool]] = {}
    owner: dict[str, str] = {}
    for key, value in placement.items():
        field = f"cluster.component_placement.{key}"
        cpu, group_nodes, hardware = False, None, 0
        if isinstance(value, dict):
            if value.get("node_group") is not None:
                cpu, group_nodes, hardware = groups.resolve(
                    value["node_group"], f"{field}.node_group", file
                )
            if "placement" not in value:
                raise ConfigError("must give a placement", field=field, value=value, file=file)
            field, value = f"{field}.placement", value["placement"]
        components = _components(key)
        if not components:
            raise ConfigError("names no component", field=field, value=key, file=file)
        resources = len(group_nodes) * per_node if group_nodes is not None else cluster.num_gpus
        if cpu:
            resources = hardware if group_nodes is not None else nodes
        try:
            ranks, per_worker = parse_placement(value, resources)
            processes = _processes(value, resources)
        except ValueError as exc:
            raise ConfigError(str(exc), field=field, value=value, file=file) from None
        for component in components:
            if component in owner:
                raise ConfigError(
                    f"component {component!r} is already placed by"
                    f" 'cluster.component_placement.{owner[component]}'",
                    field=field,
                    file=file,
                )
            owner[component] = str(key)
            if cpu:
                placed[component] = (field, None, processes, True)
            else:
                devices = _global(ranks, group_nodes, per_node)
                placed[component] = (field, devices, per_worker, ":" in str(value))
    if "actor" not in placed:
        refuse_non_rl(
            "an RLinf run without an 'actor' component (data collection or teleoperation:"
            " nothing is trained)",
            file=file,
            field="cluster.component_placement",
        )
    for component in ("actor", "rollout"):
        if component not in placed or placed[component][1] is None:
            raise ConfigError(
                f"has no {component!r} component on GPUs; rlplex's step needs 'actor' and"
                " 'rollout'",
                field="cluster.component_placement",
                file=file,
            )
    if model_parallel:
        _model_parallel_rules(data, placed, cluster, file)
    roles: dict[str, dict[str, Any]] = {}
    reward_field = "reward.use_reward_model"
    rule_reward = not flag(get_path(data, reward_field), field=reward_field, file=file)
    collocated = placed["actor"][1] is not None and placed["actor"][1] == placed["rollout"][1]
    for component, (field, devices, count, _) in placed.items():
        name = COMPONENT_ROLES.get(component, component)
        if devices is None:
            roles[name] = {"world_size": count}
            continue
        if name == "reward" and rule_reward:
            # RLinf's reward worker scores with rules unless reward.use_reward_model
            # (rlinf/workers/reward): a process per GPU it is placed on, no model on it.
            roles[name] = {"world_size": len(devices)}
            continue
        layout_field = field
        if component == "rollout" and count > 1 and model_parallel:
            layout_field = "rollout.tensor_parallel_size"
        check_worker_layout(name, devices, count, cluster, file, field=layout_field)
        states = {} if name == "reward" else DEFAULT_STATES.get(name, {})
        role: dict[str, Any] = {
            "devices": list(devices),
            "num_gpus_per_worker": count,
            "states": dict(states),
        }
        spec = _parallel(data, component, file, collocated=collocated)
        if spec:
            role["parallel"] = spec
        engine = data.get("rollout") if name == "actor_infer" else None
        if isinstance(engine, Mapping):
            seqs = "max_running_requests" if "max_running_requests" in engine else "max_num_seqs"
            settings = rollout(
                file=file,
                fields={
                    "max_num_seqs": f"rollout.{seqs}",
                    "gpu_memory_utilization": "rollout.gpu_memory_utilization",
                    "enforce_eager": "rollout.enforce_eager",
                },
                max_num_seqs=engine.get(seqs),
                gpu_memory_utilization=engine.get("gpu_memory_utilization"),
                enforce_eager=engine.get("enforce_eager"),
            )
            if settings:
                role["rollout"] = settings
        roles[name] = role
    mode, staleness = _mode(data, file)
    native: dict[str, Any] = {
        "cluster": {**cluster.model_dump(exclude_unset=True), **native_cluster},
        "roles": roles,
        "pipeline": default_pipeline(roles, mode, staleness),
    }
    for path in ("rollout.model.model_path", "actor.model.model_path"):
        model = get_path(data, path)
        if isinstance(model, str) and model and "${" not in model:
            native["model"] = model
            break
    load = _workload(data, model_parallel=model_parallel, file=file)
    if load:
        native["workload"] = load
    return apply_costs(native, costs, costs_file)


def _parallel(
    data: Mapping[str, Any], component: str, file: str, *, collocated: bool = False
) -> dict[str, Any] | None:
    def sizes(base: str, **keys: str) -> dict[str, Any]:
        return parallel_sizes(get_path(data, base), base=base, file=file, **keys)

    def switch(field: str) -> bool:
        return bool(flag(get_path(data, field), field=field, file=file))

    if component == "rollout":
        return parallel(**sizes("rollout", tp="tensor_parallel_size", pp="pipeline_parallel_size"))
    if component == "inference":
        return parallel(
            **sizes(
                "inference.model",
                tp="tensor_model_parallel_size",
                pp="pipeline_model_parallel_size",
            )
        )
    if component in ("actor", "critic"):
        model = get_path(data, f"{component}.model") or {}
        if not isinstance(model, Mapping):
            return None
        backend = get_path(data, f"{component}.training_backend")
        # Megatron's distributed optimizer (``optim.use_distributed_optimizer``, true in
        # RLinf's Megatron examples) shards the optimizer state over the data-parallel ranks
        distributed = backend != "fsdp" and switch(f"{component}.optim.use_distributed_optimizer")
        # offload_weight / offload_optimizer act in collocated placement only: the weights
        # leave the GPU after the sync to the rollout and the optimizer state before it
        # (rlinf/workers/actor/megatron_actor_worker.py, model_state_offload_optimizer_and_grad)
        offload_weight = switch(f"{component}.offload_weight")
        offload_optimizer = switch(f"{component}.offload_optimizer")
        return parallel(
            **sizes(
                f"{component}.model",
                tp="tensor_model_parallel_size", pp="pipeline_model_parallel_size",
                ep="expert_model_parallel_size", sp="context_parallel_size",
            ),
            fsdp=backend == "fsdp",
            zero=1 if distributed else None,
            recompute=bool(model.get("recompute_granularity")),
            offload_params=collocated and offload_weight,
            offload_optimizer=collocated and offload_optimizer,
        )  # fmt: skip
    return None


def _recompute_logprobs(data: Mapping[str, Any], file: str) -> bool | None:
    """``algorithm.recompute_logprobs`` (None when not given), tested for truth as RLinf does."""
    field = "algorithm.recompute_logprobs"
    return flag(get_path(data, field), field=field, file=file)


def _model_parallel_rules(
    data: Mapping[str, Any],
    placed: dict[str, tuple[str, tuple[int, ...] | None, int, bool]],
    cluster: Cluster,
    file: str,
) -> None:
    """ModelParallelComponentPlacement's checks and GPUs per process (rlinf/utils/placement.py)."""
    if "reward" not in placed:
        raise ConfigError(
            "has no 'reward' component; RLinf's reasoning runners assert"
            ' "Reward GPUs must be specified in the component_placement config."',
            field="cluster.component_placement",
            file=file,
        )
    gpu = {c: set(p[1]) for c, p in placed.items() if p[1] is not None}
    for component in ("actor", "rollout", "inference", "critic"):
        devices = placed.get(component, ("", None, 1, False))[1]
        if devices and not _continuous(devices):
            raise ConfigError(
                f"{component} GPUs {list(devices)} must be continuous (RLinf asserts it)",
                field=placed[component][0],
                file=file,
            )
    # MultiAgentModelParallelComponentPlacement (extra engines such as ``rollout_judge``,
    # examples/agent/wideseek_r1) counts every placement as collocated.
    multi_agent = any(c not in _MODEL_PARALLEL_COMPONENTS for c in placed)
    collocated = gpu["actor"] == gpu["rollout"] or multi_agent
    sets = [gpu.get(c, set()) for c in ("actor", "rollout", "inference", "critic")]
    disaggregated = all(a.isdisjoint(b) for i, a in enumerate(sets) for b in sets[i + 1 :])
    if not collocated and not disaggregated:
        raise ConfigError(
            "actor, rollout, inference and critic must either share the same GPUs (actor =="
            " rollout, collocated) or use disjoint GPUs (disaggregated), as RLinf's"
            " ModelParallelComponentPlacement requires",
            field="cluster.component_placement",
            file=file,
        )
    field = "cluster.component_placement"
    if collocated and not multi_agent:
        for component in ("inference", "critic_inference", "actor_inference"):
            if component in placed:
                raise ConfigError(
                    f"{component} GPUs must not be given in collocated mode (actor and rollout"
                    " on the same GPUs), as RLinf asserts",
                    field=placed[component][0],
                    file=file,
                )
    elif "inference" in placed and _recompute_logprobs(data, file) is False:
        raise ConfigError(
            "algorithm.recompute_logprobs is false, which disables inference, so inference"
            " GPUs must not be given (RLinf asserts it)",
            field=placed["inference"][0],
            file=file,
        )
    auto = (
        flag(get_path(data, "cluster.auto_scheduler"), field="cluster.auto_scheduler", file=file)
        and "critic" not in placed
    )
    if auto:
        order = [c for c in ("actor", "rollout", "inference") if c in placed]
        spans = [placed[c][1] or () for c in order]
        ordered = (
            not collocated
            and spans[0][0] == 0
            and all(a[-1] + 1 == b[0] for a, b in itertools.pairwise(spans))
            and spans[-1][-1] == cluster.num_gpus - 1
        )
        if not ordered:
            raise ConfigError(
                "cluster.auto_scheduler needs the disaggregated placement actor -> rollout"
                " [-> inference] on consecutive GPUs from 0 to the last, as RLinf asserts",
                field=field,
                file=file,
            )
    tp = positive_int(
        get_path(data, "rollout.tensor_parallel_size", 1),
        field="rollout.tensor_parallel_size",
        file=file,
    )
    pp = positive_int(
        get_path(data, "rollout.pipeline_parallel_size", 1),
        field="rollout.pipeline_parallel_size",
        file=file,
    )
    for component, (field, devices, _, _) in list(placed.items()):
        if devices is None:
            continue
        # Packed placements: one GPU per process, the rollout's engines tp (x pp) GPUs each.
        count = (tp if collocated else tp * pp) if component == "rollout" else 1
        placed[component] = (field, devices, count, False)
    if auto:  # AUTO mode: "actor will be placed on all GPUs"
        placed["actor"] = (placed["actor"][0], tuple(range(cluster.num_gpus)), 1, False)
