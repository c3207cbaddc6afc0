"""Commands that estimate and calibrate costs: estimate, calibrate."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from rlplex.cli.app import WRITTEN, app, console, err_console, print_table, user_errors
from rlplex.cli.options import (
    CONFIG_HELP,
    NO_OPTIONS,
    NO_RECORD_OPTIONS,
    ConfigOptions,
    JsonOpt,
    RecordArg,
    RecordConfigOpt,
    RecordOptions,
    SetOpt,
    config_options,
    one_sweep,
    record_options,
)
from rlplex.plan.ids import op_name


def _si(value: float, unit: str) -> str:
    for scale, prefix in ((1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M")):
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}"
    return f"{value:.0f} {unit}" if value else "-"


def _plan_uses(cfg: Any, stage: Any) -> tuple[str, float | None]:
    """What the plan takes for ``stage``'s seconds: ``estimate``, ``model`` (a weight sync
    priced by the cluster's copy speeds) or ``given`` with the seconds given; the table's
    "plan uses" column and ``--json``'s ``plan_uses``."""
    if stage.is_weight_sync and stage.seconds is None:
        return "model", None
    if cfg.is_estimated(f"pipeline.stages.{stage.name}.seconds"):
        return "estimate", None
    return "given", stage.seconds


def _warn(lines: Any) -> None:
    for line in lines:
        err_console.print(f"[yellow]warning:[/] {escape(line)}", highlight=False, soft_wrap=True)


def _list_presets() -> None:
    from rlplex.estimate.formulas import active_params, total_params
    from rlplex.estimate.specs import gpu_presets, model_presets

    models = Table(title="model presets")
    for column in ("name", "params", "active", "layers", "hidden", "heads/kv", "experts"):
        models.add_column(column, justify="left" if column == "name" else "right")
    for name, s in model_presets().items():
        experts = f"{s.experts_per_token}/{s.num_experts}" if s.is_moe else "-"
        # A hybrid's layers: softmax attention + linear attention (Gated DeltaNet, Mamba-2);
        # Nemotron-H's blocks by kind; windowed softmax layers (gpt-oss, Gemma 3).
        linear = s.linear_attention_layers
        kind = "mamba" if s.linear_mixer == "mamba2" else "linear"
        layers = f"{s.attention_layers}+{linear} {kind}" if linear else str(s.num_layers)
        if s.mixer_only_layers or s.mlp_only_layers:
            mlp = "moe" if s.is_moe else "mlp"
            layers = f"{layers}, {s.mlp_layers} {mlp}"
        if s.sliding_window_layers:
            layers += f" ({s.sliding_window_layers} window {s.sliding_window})"
        models.add_row(
            name, f"{total_params(s) / 1e9:.2f}B", f"{active_params(s) / 1e9:.2f}B",
            layers, str(s.hidden_size), f"{s.num_heads}/{s.num_kv_heads}", experts,
        )  # fmt: skip
    print_table(models)
    gpus = Table(title="GPU presets")
    for column in ("name", "", "TFLOP/s bf16", "GB", "GB/s memory", "GB/s host", "GB/s NVLink"):
        gpus.add_column(column, justify="left" if column in ("name", "") else "right")
    for key, g in gpu_presets().items():
        gpus.add_row(
            key, g.name, f"{g.peak_tflops:g}", f"{g.memory_gb:g}", f"{g.memory_gb_per_s:g}",
            f"{g.host_gb_per_s:g}", f"{g.intra_node_gb_per_s:g}",
        )  # fmt: skip
    print_table(gpus)


@app.command()
@user_errors
@config_options
def estimate(
    config: Annotated[Path | None, typer.Argument(help=CONFIG_HELP)] = None,
    json_: JsonOpt = False,
    list_presets: Annotated[
        bool, typer.Option("--list-presets", help="List the model and GPU presets and exit.")
    ] = False,
    sweep: Annotated[
        list[str] | None,
        typer.Option(
            "--sweep",
            metavar="<str>",  # as a one-value option shows; it is not repeatable
            help="KEY=V1,V2,...: plan the config at each value of one dotted key (e.g."
            " workload.response_tokens.mean=500,1000,2000, or words: cluster.gpu=h100,h20)"
            " and print the step and each stage.",
        ),
    ] = None,
    png: Annotated[
        Path | None, typer.Option("--png", help="With --sweep: draw it to this PNG."), WRITTEN
    ] = None,
    options: ConfigOptions = NO_OPTIONS,
) -> None:
    """Estimate stage seconds and state GB from the model, the workload and the GPU.

    Prints per stage the seconds, FLOPs, bytes moved and what bounds it; per role
    the GB per device of each state and the peak; and every assumption used.
    Figures the config gives win in plan/show; here both are shown.
    """
    from rlplex.errors import ConfigError
    from rlplex.estimate.estimator import estimate_config

    if list_presets:
        given = {
            "CONFIG": config, "--sweep": sweep, "--png": png, "--json": json_ or None,
            "--set": options.overrides or None, "--format": options.format,
            "--costs": options.costs, "--env": options.env or None,
        }  # fmt: skip
        unused = [name for name, value in given.items() if value is not None]
        if unused:
            raise ConfigError(
                f"lists the presets and reads no config: drop {', '.join(unused)} or"
                " --list-presets",
                field="--list-presets",
            )
        _list_presets()
        return
    if config is None:
        raise ConfigError("give a CONFIG file (or --list-presets)", field="CONFIG")
    spec = one_sweep(sweep)
    if spec is not None:
        _sweep(config, spec, png, json_, options)
        return
    if png is not None:
        raise ConfigError("draws a sweep: give --sweep KEY=V1,V2,... too", field="--png")
    try:
        cfg = options.load(config)
    except ConfigError as exc:
        from rlplex.cli.misfit import print_misfit
        from rlplex.reports.misfit import is_fit_error, misfit_report

        if not is_fit_error(exc):
            raise
        report = misfit_report(
            config, exc, overrides=options.overrides, format=options.format,
            costs=options.costs, env=options.env,
        )  # fmt: skip
        print_misfit(report, json_)
        raise typer.Exit(2) from None
    result = estimate_config(cfg)
    _warn(w for w in dict.fromkeys(result.warnings) if w not in cfg.warnings)
    if json_:
        doc = result.to_json()
        for stage in cfg.pipeline.stages:
            source, given_s = _plan_uses(cfg, stage)
            doc["stages"][stage.name]["plan_uses"] = {"source": source, "given_s": given_s}
        print(json.dumps(doc, indent=2))
        return
    stages = Table(title=f"estimated stages of {escape(str(config))}")
    for column in ("stage", "kind", "seconds", "plan uses", "bound"):
        stages.add_column(
            column,
            justify="left" if column in ("stage", "kind", "bound") else "right",
            no_wrap=True,
        )
    term_names = ("compute", "memory", "latency", "communication", "overhead")
    terms = Table(title="seconds by term (a stage's seconds are their sum; docs/cost-model.md)")
    for column in ("stage", *term_names):
        terms.add_column(column, justify="left" if column == "stage" else "right", no_wrap=True)
    for stage in cfg.pipeline.stages:
        est = result.stages[stage.name]
        source, given_s = _plan_uses(cfg, stage)
        uses = f"{given_s:g} s given" if source == "given" else source
        estimated = est.bound != "given"  # CPU stages are priced only as rule rewards
        shown = f"{est.seconds:.2f} s" if est.seconds is not None and estimated else "-"
        stages.add_row(stage.name, est.kind, shown, uses, est.bound)
        if estimated:
            terms.add_row(
                stage.name, *(f"{est.terms[t]:.2f}" if t in est.terms else "-" for t in term_names)
            )
    print_table(stages)
    print_table(terms)
    from rlplex.cli.stage_lines import print_stage_lines

    print_stage_lines(result)
    roles = Table(title="estimated memory per GPU (GB)")
    kinds = ("weights", "optimizer", "grads", "kv_cache")
    headers = ("role", "tp/pp/dp", "weights", "optim", "grads", "kv", "act", "peak")
    for column in headers:
        roles.add_column(column, justify="left" if column == "role" else "right", no_wrap=True)
    cap = cfg.cluster.gpu_memory_gb
    for name, r in result.roles.items():
        cells = [
            f"{r.states[k]:.2f}"
            if k in r.states
            else f"{r.host_states[k]:.2f} host"
            if k in r.host_states
            else "-"
            for k in kinds
        ]
        label = name if cfg.is_estimated(f"roles.{name}.states") else f"{name} (plan: given)"
        peak = f"{r.peak_gb:.2f}" + (" [red](> GPU)[/]" if r.peak_gb > cap else "")
        roles.add_row(label, f"{r.tp}/{r.pp}/{r.dp}", *cells, f"{r.activations_gb:.2f}", peak)
    print_table(roles)
    console.print(
        f"GPU: {cap:g} GB each; act = the role's largest transient memory (activations of the"
        " largest micro-batch); peak = states + act; the plan offloads what does not fit"
        " (rlplex plan prints each GPU's peak); 'host' = kept in host memory, not on the GPU"
        " (a CPU optimizer). CPU and driver stages are not estimated.",
        highlight=False,
    )
    _print_assumptions(result.assumptions)


def _sweep(config: Path, spec: str, png: Path | None, json_: bool, options: ConfigOptions) -> None:
    from rlplex.cli.sweep import draw_sweep, print_sweep, refuse_if_none_ran
    from rlplex.reports.sweep import parse_sweep, sweep_config

    key, values = parse_sweep(spec)
    if png is not None:
        from rlplex.viz.paths import check_png_path

        check_png_path(png)  # before the sweep, which takes a while
    result = sweep_config(
        config, key, values, overrides=options.overrides, format=options.format,
        costs=options.costs, env=options.env,
    )  # fmt: skip
    _warn(result.warnings)
    if json_:
        print(json.dumps(result.to_json(), indent=2))
    else:
        print_sweep(result)
    refuse_if_none_ran(result.period_range() is not None, spec)
    if png is not None:
        draw_sweep(result, png)
        if not json_:
            console.print(f"wrote {escape(str(png))}", highlight=False)


def _logprob_micro_batch(w: dict[str, Any]) -> str:
    """The forward-only passes' own micro-batch, when the config gives one."""
    keys = (("logprob_micro_batch_size", ""), ("logprob_micro_batch_tokens", " tokens"))
    parts = [f"{w[key]}{unit}" for key, unit in keys if w.get(key)]
    return f" (log-prob passes {', '.join(parts)})" if parts else ""


def _turns_line(t: dict[str, Any]) -> str:
    """The multi-turn assumptions: turns, what each adds, the environment's wait."""
    cap = f", at most {t['max_tokens']:,} tokens after the prompt" if t.get("max_tokens") else ""
    caching = "prefix caching" if t["prefix_caching"] else "no prefix caching (whole context)"
    trained = (
        "each turn trained as its own sample (the context before it and its answer)"
        if t.get("samples") == "turn"
        else "the trajectory trained as one sample"
    )
    return (
        f"turns: {t['mean']:g} mean / {t['max']} max per trajectory{cap}; each answer is the"
        f" response above, {t['observation_tokens']:g} observation tokens between turns"
        f" ({caching}); environment {t['env_s']:g} s per turn; {trained}"
    )


def _generated(w: dict[str, Any]) -> str:
    """The workload line's note on dynamic sampling, or nothing."""
    ratio = w.get("generated_per_trained", 1.0)
    if ratio <= 1.0:
        return ""
    return f" {ratio:g}x as many generated and scored (dynamic sampling drops the rest);"


def _print_assumptions(a: dict[str, Any]) -> None:
    gpu = a["gpu"]
    w = a["workload"]
    eff = a["efficiency"]
    lines = [
        f"gpu: {gpu['preset']} ({gpu['name']}): {gpu['peak_tflops']:g} TFLOP/s bf16 dense,"
        f" {gpu['memory_gb_per_s']:g} GB/s memory, {gpu['memory_gb']:g} GB",
        f"workload: {w['prompts_per_step']} prompts x {w['samples_per_prompt']} samples;"
        f"{_generated(w)}"
        f" prompt {w['prompt_tokens']['mean']:g} mean / {w['prompt_tokens']['max']} max tokens;"
        f" {'answer per turn' if w.get('turns') else 'response'}"
        f" {w['response_tokens']['mean']:g} / {w['response_tokens']['max']};"
        f" micro-batch {w['micro_batch_size']}{_logprob_micro_batch(w)}; epochs {w['epochs']}",
        "efficiency: "
        + ", ".join(f"{k} {v:g}" for k, v in eff.items() if not isinstance(v, dict))
        + (f"; per stage {eff['stages']}" if "stages" in eff else ""),
        f"dispatch_s: {a['dispatch_s']:g} s per op; prefill chunk"
        f" {a['prefill_chunk_tokens']} tokens",
    ]
    lines.append(_controller_line(w["controller"], eff["controller_gb_s"]))
    length = a.get("response_length")
    if length:
        turns = length.get("turns")
        what = "trajectory after the prompt" if turns else "response length"
        lines.append(
            f"{what}: mean {length['mean']:g}, max {length['max']:g},"
            f" {length['clip_ratio'] * 100:.2f}% truncated at the max"
            + (" (given)" if length["clip_ratio_given"] else " (from the default shape)")
            + f"; {length['shape']}"
        )
        if turns:
            lines.append(_turns_line(turns))
    for role, r in a.get("rollout", {}).items():
        lines.append(
            f"{role} engine: max_num_seqs {r['max_num_seqs']}, gpu_memory_utilization"
            f" {r['gpu_memory_utilization']:g}, "
            + (
                "CUDA graphs"
                if r["cuda_graphs"]
                else "eager (no CUDA graphs)"
                if r["eager_layers"] == r["layers"]
                else f"eager (no CUDA graphs; its {r['layers']} layers issue the host work of"
                f" {r['eager_layers']:.1f} dense transformer layers, eager_layer_s each)"
            )
            + (
                f", vLLM V0 engine ({eff['decode_sequence_v0_s'] * 1e6:g} us of host work per"
                " running sequence per decode step)"
                if r.get("vllm_v0")
                else ""
            )
            + (
                f", serves LoRA adapters ({r['lora_kernels_per_layer']} more small kernels per"
                " layer and decode step, decode_layer_s / 8 each)"
                if r.get("lora_kernels_per_layer")
                else ""
            )
            + (
                "; partial rollouts: streams across steps at full slots, interrupted sequences"
                " prefilled again after each sync"
                if r.get("partial_rollout")
                else "; in-flight weight updates: decodes through each sync on its KV cache, the"
                " next steps' prompts admitted as the trainer's weights arrive"
                if r.get("in_flight_weight_updates")
                else ""
            )
        )
    for name, sync in a.get("weight_syncs", {}).items():
        lines.append(f"{name}: {_sync_line(sync)}")
    if a.get("stragglers"):
        lines.append(
            "data-parallel stragglers (the busiest group's FLOPs over the mean: longest"
            " sequences, their attention; or, where sharded ranks meet within every"
            " micro-batch cut by count, the fullest micro-batch): "
            + ", ".join(f"{name} {x:.2f}x" for name, x in a["stragglers"].items())
        )
    for role, m in a["models"].items():
        lines.append(
            f"{role}: {m['model']} {m['params_b']:g}B, {m['precision']}, tp {m['tp']} pp {m['pp']}"
            f" dp {m['dp']}, sharding {m['sharding']}"
            + (f", optimizer {m['optimizer']}" if m["optimizer"] else "")
            + (_OPTIMIZER_STEP[m["optimizer_step"]] if m.get("optimizer_step") else "")
            + (", recompute" if m["recompute"] else "")
            + _parallel_extras(m.get("parallel"))
            + _lora_extras(m.get("lora"), trained=bool(m["optimizer"]))
            + _linear_extras(m.get("linear_attention"))
            + _scores_extras(m.get("attention_scores"))
        )
    console.print("[bold]assumptions[/] (docs/cost-model.md):", highlight=False)
    for line in lines:
        console.print(f"  {escape(line)}", highlight=False, soft_wrap=True)


_OPTIMIZER_STEP = {
    "foreach": " (PyTorch's multi-tensor step, efficiency.optimizer_foreach)",
    "fused": " (a fused step, efficiency.optimizer_fused)",
}
"""How a role's optimizer step runs (``context.optimizer_kernel``), as the assumptions say it."""


def _scores_extras(scores: dict[str, Any] | None) -> str:
    """The score matrices a role's passes keep, where no flash kernel runs."""
    if not scores:
        return ""
    return (
        f", attention keeps its score matrices ({scores['why']}):"
        f" {scores['gb_per_layer']:g} GB a layer and micro-batch, {scores['layers']} layers"
    )


def _controller_line(c: dict[str, Any], gb_s: float) -> str:
    """How the single controller's batch moves were priced (``workload.controller``)."""
    if c["padding"] == "none":
        return "controller: the workers pass the batch among themselves (padding none): not priced"
    padded = {
        "max": "padded to the prompt max + the response max",
        "longest": "padded to the step's longest sequence",
        "packed": "unpadded (each sequence at its own length)",
    }[c["padding"]]
    ranks = " per tp/pp/cp rank"
    return (
        f"controller: every GPU pass's batch {padded}, {c['bytes_per_token']:g} bytes per token"
        f" slot sent{ranks if c['per_rank'] else ''}, {c['returned_bytes_per_token']:g}"
        f" returned{ranks if c.get('returned_per_rank') else ''}, at {gb_s:g} GB/s, both ways"
        " (one process)"
    )


def _resharded_line(sync: dict[str, Any], r: dict[str, Any]) -> str:
    """A ``resharded`` sync in words: the projections' slices, then the rest whole."""
    senders = f"from {r['senders']:g} sending {sync['from']} devices at {r['gb_per_s']:g} GB/s"
    if r["replicas"] > 1:
        arrives = (
            f"a 1/{r['replicas']} stripe {senders} ({r['receive_s']:.2f} s), the rest from the"
            f" other {r['replicas'] - 1} replicas ({r['replica_gather_s']:.2f} s)"
        )
    else:
        arrives = f"{senders} ({r['receive_s']:.2f} s)"
    rest = sync["full_model_gb"] - r["gb"]
    gather = sync.get("gather_gb")
    gathered = (
        f", which {sync['from']} first gathers where its shards lack it ({gather:.2f} GB,"
        f" {sync.get('gather_s', 0.0):.2f} s)"
        if gather
        else ""
    )
    return (
        f"every {sync['to']} device receives its {r['received_gb']:.2f} GB slice of the MLP"
        f" and expert projections ({r['share']:.1%} of the model: {arrives};"
        f" {r['transfers']:,} transfers, sync_tensor_s each), then the other {rest:.2f} GB"
        f" whole (at {sync['gb_per_s']:g} GB/s){gathered}; resharded ({sync['tensors']:,}"
        " checkpoint tensors loaded, load_tensor_s each)"
    )


def _sync_line(sync: dict[str, Any]) -> str:
    """How a weight sync was priced, in words (docs/cost-model.md, "Weight sync")."""
    gather = sync.get("gather_gb")
    gathered = (
        f"; {sync['from']} first gathers the {gather:.2f} GB its shards lack"
        f" ({sync.get('gather_s', 0.0):.2f} s)"
        if gather
        else ""
    )
    resharded = sync.get("resharded")
    if sync.get("path") == "broadcast" and resharded:
        return _resharded_line(sync, resharded)
    if sync.get("path") == "broadcast":
        what = "the LoRA adapters" if sync.get("adapters_only") else "the whole model"
        method = sync["method"]
        loads = {
            "per_tensor": "sync_tensor_s each",
            "bucketed": "load_tensor_s each, after their bucket arrives",
            "server_loaded": "through the engine's weight-update API: reshard_gb_s for the"
            " whole model and load_tensor_s each, beside the next bucket's moves;"
            " engine_switch_s for its KV cache",
        }.get(method, "load_tensor_s each, beside the next bucket's moves")
        return (
            f"every {sync['to']} device receives {what} ({sync['full_model_gb']:.2f} GB"
            f" at {sync['gb_per_s']:g} GB/s){gathered}; {method} ({sync['tensors']:,}"
            f" checkpoint tensors loaded in {sync.get('load_s', 0.0):.2f} s, {loads})"
        )
    colocated = ""
    if sync.get("colocated"):
        copies = (
            f", its weights copied to host memory and back ({sync['sleep_copy_s']:.2f} s,"
            " rollout.sleep_level 1)"
            if sync.get("sleep_level") == 1
            else ", its weights dropped while it sleeps (rollout.sleep_level 2)"
        )
        whole = (
            f"{sync['loaded_gb']:.2f} GB, every full tensor through its weight-update API, at "
            if sync.get("whole_model")
            else ""
        )
        colocated = (
            f"; loaded into the engine's layout ({whole}reshard_gb_s; its"
            f" {sync.get('tensors', 0):,} checkpoint tensors {sync.get('load_s', 0.0):.2f} s,"
            f" load_tensor_s), the engine woken and put back to sleep (engine_switch_s){copies}"
        )
    adapters = " (the LoRA adapters only)" if sync.get("adapters_only") else ""
    return (
        f"{sync['gb_per_device']:.2f} GB per {sync['to']} device{adapters} at"
        f" {sync['gb_per_s']:g} GB/s ({sync.get('path', 'network')}){gathered}{colocated}"
    )


def _linear_extras(linear: dict[str, Any] | None) -> str:
    """A hybrid model's linear-attention layers, in words."""
    if not linear:
        return ""
    state = linear.get("state_mb_per_sequence")
    cache = f", {state:g} MB of state per sequence in place of their KV cache" if state else ""
    mixer = linear.get("mixer", "linear attention")
    blocks = linear.get("blocks")
    if blocks:  # each layer one block (Nemotron-H)
        names = {"moe": "MoE", "mlp": "MLP"}
        others = ", ".join(f"{n} {names.get(kind, kind)}" for kind, n in blocks.items() if n)
        return (
            f", {linear['of']} layers, each one block: {linear['layers']} {mixer}, {others}{cache}"
        )
    return f", {linear['layers']} of {linear['of']} layers {mixer}{cache}"


def _lora_extras(lora: dict[str, Any] | None, trained: bool) -> str:
    """A LoRA role's adapters, in words."""
    if not lora:
        return ""
    return (
        f", LoRA rank {lora['rank']} on {','.join(lora['targets'])}:"
        f" {lora['adapter_params'] / 1e6:,.1f}M adapter weights ({lora['share'] * 100:.2f}% of"
        " the model)" + (", the rest frozen" if trained else ", applied at run time")
    )


def _parallel_extras(par: dict[str, Any] | None) -> str:
    if not par:
        return ""
    extras = [f"ep {par['ep']}" if par.get("ep", 1) > 1 else "",
              f"sp {par['sp']}" if par.get("sp", 1) > 1 else "",
              "param offload" if par.get("offload_params") else "",
              "optimizer offload" if par.get("offload_optimizer") else "",
              "CPU optimizer" if par.get("cpu_optimizer") else ""]  # fmt: skip
    return "".join(f", {e}" for e in extras if e)


def _pct(value: float | None) -> str:
    return f"{value * 100:+.1f} %" if value is not None else "-"


@app.command()
@user_errors
@record_options
def calibrate(
    record: RecordArg,
    config: RecordConfigOpt,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-o", help="Write the fitted costs file (for --costs) here."),
        WRITTEN,
    ] = None,
    fit_steps: Annotated[
        int | None,
        typer.Option("--fit-steps", help="Steps to fit on, after warm-up (default: half)."),
    ] = None,
    warmup: Annotated[
        int | None,
        typer.Option("--warmup", help="Leading steps to ignore (default: 1 if >= 4 steps)."),
    ] = None,
    json_: JsonOpt = False,
    set_: SetOpt = None,
    options: RecordOptions = NO_RECORD_OPTIONS,
) -> None:
    """Fit efficiency factors, given stages' seconds and dispatch_s to a record.

    Fits on the record's first steps and reports the error per stage and of the
    period on the remaining ones, before and after. The costs file it writes
    is taken by plan, simulate, replay and whatif (--costs).
    """
    import yaml

    from rlplex.cli.render import reading_record
    from rlplex.reports.calibrate import calibrate as fit

    with reading_record(record, "fitting to"):
        result, doc = fit(
            record, config, overrides=set_ or (), config_format=options.config_format,
            costs=options.costs, env=options.env, record_format=options.record_format,
            skip_bad_lines=options.skip_bad_lines, fit_steps=fit_steps, warmup=warmup,
        )  # fmt: skip
    _warn(result.warnings)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        given = "".join(
            f" {flag} {shlex.quote(str(v))}"
            for flag, v in (("--format", options.record_format),
                            ("--config-format", options.config_format),
                            ("--costs", options.costs))
            if v is not None
        ) + "".join(f" --set {shlex.quote(o)}" for o in set_ or ()) + "".join(
            f" --env {shlex.quote(f'{k}={v}')}" for k, v in options.env.items()
        )  # fmt: skip
        header = (
            f"# written by: rlplex calibrate {record} --config {config}{given}\n"
            f"# fitted on steps {list(result.fit_steps)}, checked on {list(result.check_steps)}\n"
        )
        out.write_text(header + yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    if json_:
        print(
            json.dumps(
                {**result.to_json(), "costs": doc, "out": str(out) if out else None}, indent=2
            )
        )
        return
    fit_s, check_s = result.fit_steps, result.check_steps
    title = (
        f"calibration on {escape(str(record))} ({result.format}): fitted on steps"
        f" {fit_s[0]}-{fit_s[-1]}, checked on "
        + (f"{check_s[0]}-{check_s[-1]}" if check_s else "the same steps")
    )
    table = Table(title=title)
    for column in ("stage", "fit", "measured", "before", "error", "after", "error"):
        table.add_column(column, justify="left" if column in ("stage", "fit") else "right")
    for s in result.stages:
        measured = f"{s.measured_check_s:.3f} s" if s.measured_check_s is not None else "-"
        table.add_row(
            s.stage, s.how, measured, f"{s.before_s:.3f} s", _pct(s.error_before),
            f"{s.after_s:.3f} s", _pct(s.error_after),
        )  # fmt: skip
    table.add_row(
        "period",
        f"dispatch {result.dispatch_s:.4g} s/op"
        if result.overhead_ratio is None
        else f"overhead x{result.overhead_ratio:.3g}",
        # 0: the record has no step times (a summary without `step`), nothing measured.
        f"{result.measured_period_s:.3f} s" if result.measured_period_s > 0 else "-",
        f"{result.period_before_s:.3f} s", _pct(result.period_error_before),
        f"{result.period_after_s:.3f} s", _pct(result.period_error_after), style="bold",
    )  # fmt: skip
    print_table(table)
    if result.efficiency:
        console.print(f"efficiency: {result.efficiency}", highlight=False, soft_wrap=True)
    if out is not None:
        console.print(
            f"wrote {escape(str(out))} (use: --costs {escape(str(out))})", highlight=False
        )
    if result.lengths:
        # The costs file holds no lengths: planning the config with it alone plans the
        # config's guessed lengths, not the recorded run's.
        given = " ".join(f"--set {escape(o)}" for o in result.lengths)
        console.print(
            "'after' is planned with the record's lengths; the costs file does not hold them"
            f" (they are the run's): plan the recorded run with {given}",
            highlight=False,
            soft_wrap=True,
        )


def print_plan_memory(peaks: Any, cfg: Any) -> None:
    """``rlplex plan``'s memory table: peak GB and headroom per GPU, and what is estimated.

    ``peaks``: :attr:`rlplex.reports.plan.PlanReport.memory`. GPUs with the same
    peak, moment and residents share one row.
    """
    from rlplex.resources.devices import format_devices

    if not peaks:
        return
    rows: dict[tuple[Any, ...], list[int]] = {}
    for d, m in peaks.items():
        key = (round(m.peak_gb, 3), m.during, tuple(sorted(m.resident.items())), m.transient_gb)
        rows.setdefault(key, []).append(d)
    table = Table(title="memory per GPU at its peak (GB)")
    for column in ("GPUs", "peak", "headroom", "during", "resident at the peak"):
        table.add_column(column, justify="right" if column in ("peak", "headroom") else "left")
    for (peak, during, resident, transient), devices in rows.items():
        m = peaks[devices[0]]
        parts = []
        for key, gb in resident:
            role = key.split(".")[0]
            mark = "*" if cfg.is_estimated(f"roles.{role}.states") else ""
            parts.append(f"{key} {gb:.2f}{mark}")
        if transient:
            stage = op_name(during) if during else ""
            mark = "*" if cfg.is_estimated(f"pipeline.stages.{stage}.memory_gb") else ""
            parts.append(f"transient {transient:.2f}{mark}")
        table.add_row(
            format_devices(tuple(devices)), f"{peak:.2f}", f"{m.headroom_gb:.2f}",
            during or "-", " + ".join(parts) or "-",
        )  # fmt: skip
    print_table(table)
    if cfg.estimated:
        seconds = sum(1 for p in cfg.estimated if p.endswith(".seconds"))
        states = sum(1 for p in cfg.estimated if p.startswith("roles."))
        console.print(
            f"* estimated: {seconds} stage times, {states} roles' states"
            + (", cluster figures from cluster.gpu" if any(
                p.startswith("cluster.") for p in cfg.estimated) else "")
            + " (rlplex estimate shows how)",
            highlight=False, soft_wrap=True,
        )  # fmt: skip
