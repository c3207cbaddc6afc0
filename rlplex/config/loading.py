"""Reading a config file: its format, ``--set`` routed to the file or the native form, ``--costs``.

:func:`load_config` is the one entry point: read the YAML, detect the format
(:mod:`rlplex.config.formats`), apply the overrides that name the file's own
keys, convert, apply the others (:func:`load_native`, which ``rlplex size``
also uses to rewrite the native form), then build and check
(:mod:`rlplex.config.build`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from rlplex.config.build import config_from_dict
from rlplex.config.checks import check_override_targets
from rlplex.config.formats import FORMATS, detect_format, to_native
from rlplex.config.schema import TOP_LEVEL_KEYS, Config
from rlplex.errors import ConfigError
from rlplex.resources.cluster import Cluster
from rlplex.resources.devices import AUTO, DeviceSpecError, parse_devices
from rlplex.resources.importers.launch_script import is_launch_script
from rlplex.resources.yaml_io import apply_overrides, load_yaml_file, overrides_set


def device_counts(native: Mapping[str, Any]) -> dict[str, int]:
    """GPU count of each role of a native dict whose devices parse (others left out).

    A role left to the search (``devices: auto``) counts the whole cluster: its given
    seconds are measured there (:func:`~rlplex.plan.costs.reference_devices`), also once
    ``--set`` gives it devices of its own."""
    try:
        cluster = Cluster.model_validate(native.get("cluster") or {})
    except ValidationError:
        return {}
    out: dict[str, int] = {}
    roles = native.get("roles")
    for name, body in roles.items() if isinstance(roles, dict) else ():
        spec = body.get("devices") if isinstance(body, dict) else None
        if spec is None:
            continue
        try:
            devices = parse_devices(spec, cluster.num_gpus)
        except (DeviceSpecError, TypeError, ValueError):
            continue
        if devices == AUTO:
            out[str(name)] = cluster.num_gpus
        elif isinstance(devices, tuple) and devices:
            out[str(name)] = len(devices)
    return out


@dataclass(frozen=True)
class NativeForm:
    """A config file read into rlplex's native form, before it is built and checked."""

    data: dict[str, Any]
    """The native config as a dict: converted, ``--set`` and ``--costs`` applied, estimates
    asked for where an imported file gives no seconds."""
    file: str
    """The file it came from (named in every error)."""
    fmt: str
    """The file's format: ``native``, ``roll``, ``rlinf``, ``verl``, ``nemo_rl`` or ``openrlhf``."""
    file_devices: dict[str, int]
    """Each role's GPU count as the file gives it (stage seconds are measured there)."""
    defaults_note: str | None
    """What an imported file's missing costs were replaced with, if anything."""
    unread: tuple[str, ...] = ()
    """``--set`` overrides of an imported file's own keys that changed nothing its importer
    reads (a typo, a key rlplex does not read, or the value the file already had)."""
    base_dir: str | None = None
    """Where the config's relative paths start: the file's folder, or the folder a launch
    script runs from (its ``$(pwd)``)."""
    assumed: tuple[str, ...] = ()
    """What rlplex assumed where an imported file is silent and the guess moves the estimate
    most (the mean response length, :func:`assumed_length_note`)."""
    lacking: tuple[str, ...] = ()
    """What an imported file leaves the estimator short of (``workload.prompt_tokens`` ...),
    as :attr:`defaults_note` names it: a workload without its prompt is held back whole, so
    the built config alone would say the whole workload is missing."""

    @property
    def notes(self) -> tuple[str, ...]:
        """The warnings reading the file gave: unread overrides, the assumptions, then the
        defaults note."""
        return (
            *self.unread, *self.assumed, *([self.defaults_note] if self.defaults_note else [])
        )  # fmt: skip


def raw_file(
    path: str | Path, overrides: Sequence[str] = (), env: Mapping[str, str] | None = None
) -> Any:
    """A config file's own content before any conversion, ``overrides`` applied: a YAML
    file's mapping; a launch script's Hydra file with the script's overrides (the mapping a
    ``--set`` of the script's keys reaches), its ``defaults:`` composed, the script read
    with the variables ``env`` gives (``--env``; :func:`check_env`).

    Raises:
        ConfigError: the file cannot be read (naming it).
    """
    if is_launch_script(path):
        from rlplex.resources.importers.compose import compose
        from rlplex.resources.importers.launch_script import launch_config

        openrlhf = _openrlhf_flags(Path(path), env)
        if openrlhf is not None:
            return apply_overrides(openrlhf[1], list(overrides))
        config, written = launch_config(Path(path), env)
        data = load_yaml_file(config)
        if not isinstance(data, dict):
            return data
        data = apply_overrides(data, [*written, *overrides])
        return compose(data, str(config)).data if "defaults" in data else data
    check_env(path, env)
    data = load_yaml_file(path)
    return apply_overrides(data, list(overrides)) if isinstance(data, dict) else data


def load_config(
    path: str | Path,
    *,
    overrides: Sequence[str] = (),
    format: str | None = None,
    costs: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> Config:
    """Read, convert, override and check a config file.

    Args:
        path: a native, ROLL, RLinf, verl-style or NeMo RL YAML file, or a verl or
            OpenRLHF launch script.
        overrides: ``KEY=VALUE`` strings with dotted keys (see :func:`load_native`).
        format: ``native``, ``roll``, ``rlinf``, ``verl``, ``nemo_rl`` or ``openrlhf``;
            detected when None (an OpenRLHF launch script: ``openrlhf``).
        costs: a YAML file with ``stages:`` costs (see :func:`load_native`).
        env: the environment a launch script starts with (see :func:`load_native`).

    Raises:
        ConfigError: anything wrong, naming the file, the field and the value.
    """
    form = load_native(path, overrides=overrides, format=format, costs=costs, env=env)
    config = config_from_dict(
        form.data,
        file=form.file,
        base_dir=Path(form.base_dir) if form.base_dir else Path(path).resolve().parent,
        fmt=form.fmt,
        file_devices=form.file_devices,
    )
    if form.notes or form.lacking:
        return config.model_copy(
            update={"warnings": (*config.warnings, *form.notes), "lacking": form.lacking}
        )
    return config


def load_native(
    path: str | Path,
    *,
    overrides: Sequence[str] = (),
    format: str | None = None,
    costs: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> NativeForm:
    """Read, convert and override a config file into its native form (not yet checked).

    Args:
        path: a native, ROLL, RLinf, verl-style or NeMo RL YAML file, or a verl or
            OpenRLHF launch script.
        overrides: ``KEY=VALUE`` strings with dotted keys. A key whose first part
            is in the file, or (for a ROLL / RLinf / verl / NeMo RL file) is not one of
            ``cluster``, ``roles``, ``pipeline``, applies to the file as
            written; any other applies to the native form (so
            ``pipeline.mode=async`` works on a ROLL file).
        format: ``native``, ``roll``, ``rlinf``, ``verl``, ``nemo_rl`` or ``openrlhf``;
            detected when None (an OpenRLHF launch script: ``openrlhf``).
        costs: a YAML file with ``stages:`` costs (and optional ``states:`` and
            ``cluster:``) merged over an imported config's defaults, or over a
            native file's own values.
        env: ``NAME: VALUE`` variables a launch script starts with (``--env DEVICE=gpu``:
            what its ``${DEVICE:-...}`` reads; its own assignments win, as in the shell).
            rlplex reads no environment of its own, so that a config means the same on
            every machine; refused for a YAML file (:func:`check_env`).

    Raises:
        ConfigError: anything wrong, naming the file, the field and the value.
    """
    if is_launch_script(path):
        return _load_launch_script(
            Path(path), overrides=overrides, format=format, costs=costs, env=env
        )
    check_env(path, env)
    return _load_file(path, overrides=overrides, format=format, costs=costs)


def parse_env(items: Sequence[str], option: str = "--env") -> dict[str, str]:
    """``--env NAME=VALUE`` items as a mapping (a later item for a name wins, as a later
    ``--set`` does); ``VALUE`` may be empty, as an environment variable's may.

    Raises:
        ConfigError: an item without ``=``, or whose ``NAME`` is not a shell variable name
            (letters, digits and ``_``, not starting with a digit), naming ``option``.
    """
    from rlplex.resources.importers.launch_script import is_shell_name

    env: dict[str, str] = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not is_shell_name(name):
            raise ConfigError(
                "expects NAME=VALUE, NAME a shell variable name (letters, digits and _, not"
                " starting with a digit)",
                field=option, value=item,
            )  # fmt: skip
        env[name] = value
    return env


def check_env(path: str | Path, env: Mapping[str, str] | None) -> None:
    """Refuse ``--env`` for a file that is not a launch script: a YAML config runs no shell,
    so a variable given would silently change nothing.

    Raises:
        ConfigError: ``env`` is not empty and ``path`` is not a launch script.
    """
    if env and not is_launch_script(path):
        refuse_env(path, env)


def refuse_env(path: str | Path, env: Mapping[str, str] | None) -> None:
    """Refuse a given ``--env`` for ``path``, a file that is not a launch script (a YAML
    config, a timeline), naming the option and the file.

    Raises:
        ConfigError: ``env`` is not empty.
    """
    if env:
        yaml = Path(path).suffix.lower() in (".yaml", ".yml")
        what = "a YAML config" if yaml else "not a launch script (.sh)"
        raise ConfigError(f"--env applies to launch scripts; {path} is {what}")


def check_env_any(paths: Sequence[str | Path], env: Mapping[str, str] | None) -> None:
    """Refuse ``--env`` for a command that reads several files (``compare A B``) when none
    of them is a launch script, naming the first; each then takes it through
    :func:`env_for`.

    Raises:
        ConfigError: ``env`` is not empty and no file of ``paths`` is a launch script.
    """
    if env and paths and not any(is_launch_script(p) for p in paths):
        refuse_env(paths[0], env)


def env_for(path: str | Path, env: Mapping[str, str] | None) -> Mapping[str, str] | None:
    """``env`` for a launch script, None for a YAML file: what a command that reads several
    files (``whatif``'s ``--alt-config``) gives each, once one of them took ``--env``."""
    return env if is_launch_script(path) else None


def _load_launch_script(
    script: Path,
    *,
    overrides: Sequence[str],
    format: str | None,
    costs: str | Path | None,
    env: Mapping[str, str] | None = None,
) -> NativeForm:
    """A verl launch script: its Hydra config with the script's overrides as the file as
    written (so they are never reported unread), then ``overrides``; errors name the
    script (:mod:`rlplex.resources.importers.launch_script`). An OpenRLHF one: its flags
    (:func:`_load_openrlhf`). ``env``: the variables the script starts with."""
    from rlplex.resources.importers.launch_script import launch_config

    openrlhf = _openrlhf_flags(script, env)
    if openrlhf is not None:
        return _load_openrlhf(
            script, openrlhf, overrides=overrides, format=format, costs=costs, env=env
        )
    config, written = launch_config(script, env)
    try:
        form = _load_file(config, overrides=overrides, format=format, costs=costs, written=written)
    except ConfigError as exc:
        ours = exc.file in (None, str(config))
        where = f" (verl's {config.name} with the script's overrides)" if ours else ""
        unknown = _unknown_variable(script, exc, env) if ours else None
        raise type(exc)(
            unknown or exc.message + where, field=exc.field, value=exc.value,
            file=str(script) if ours else exc.file, line=None if ours else exc.line,
        ) from None  # fmt: skip
    from rlplex.resources.importers.launch_script import launch_root

    form = replace(form, file=str(script), base_dir=launch_root(script, env))
    return _with_env_unread(form, script, env)


def _with_env_unread(form: NativeForm, script: Path, env: Mapping[str, str] | None) -> NativeForm:
    """``form`` with a warning for each ``--env`` variable the script never took the value
    of (a misspelt name, or one the script assigns itself): like a ``--set`` that changed
    nothing, it is said rather than refused, since one set of ``--env`` may serve several
    scripts (``bench/import_corpus.py --env``)."""
    if not env:
        return form
    from rlplex.resources.importers.launch_script import script_launch

    notes = tuple(
        f"--env {name}={env[name]} changed nothing: {script.name} never reads ${name} from"
        " the environment before its trainer command (it does not look it up, or sets it"
        " itself first)"
        for name in script_launch(script, env).env_unread
    )
    return replace(form, unread=(*form.unread, *notes)) if notes else form


def _unknown_variable(
    script: Path, exc: ConfigError, env: Mapping[str, str] | None = None
) -> str | None:
    """Why a value the error names holds a script variable left as written because the
    script assigns it inside a block rlplex cannot follow (``${NGPUS_PER_NODE}`` set in a
    ``case "${DEVICE}"``): said instead of the error's own reason, which can only guess
    (an unset environment variable); None when the value holds no such variable."""
    from rlplex.resources.importers.launch_script import script_launch, variables_in

    if not exc.has_value or not isinstance(exc.value, str) or "$" not in exc.value:
        return None
    unknown = {u.name: u for u in script_launch(script, env).unknown}
    for name in variables_in(exc.value):
        if name in unknown:
            why = unknown[name]
            # A variable already given with --env decides nothing more (the block's word
            # may come from a command that reads it).
            inputs = [n for n in why.inputs if n not in (env or {})]
            given = (
                f", or the environment variable{'s' if len(inputs) > 1 else ''} that"
                f" decide{'' if len(inputs) > 1 else 's'} it with"
                f" {' '.join(f'--env {n}=...' for n in inputs)} (rlplex reads no"
                " environment of its own)"
                if inputs else ""
            )  # fmt: skip
            key = (exc.field or "KEY").removeprefix("--")  # an OpenRLHF flag: its --set key
            return (
                f"${{{name}}}: the script assigns {name} {why.reason}; give the value with"
                f" --set {key}=...{given}"
            )
    return None


def _openrlhf_flags(
    script: Path, env: Mapping[str, str] | None = None
) -> tuple[str | None, dict[str, Any]] | None:
    """(the folder the script runs from, its flags nested at their dots) when a launch
    script runs OpenRLHF (:func:`rlplex.resources.importers.openrlhf.script_data`); None
    when it runs verl.

    Raises:
        ConfigError: the script cannot be read, runs neither, or runs an OpenRLHF entry
            point other than ``train_ppo_ray`` (SFT, DPO ... are refused as not RL).
    """
    from rlplex.resources.importers import openrlhf
    from rlplex.resources.importers.launch_script import is_openrlhf_module, script_launch

    launch = script_launch(script, env)
    if not is_openrlhf_module(launch.module):
        return None
    return launch.root, openrlhf.script_data(launch, file=str(script))


def _load_openrlhf(
    script: Path,
    flags: tuple[str | None, dict[str, Any]],
    *,
    overrides: Sequence[str],
    format: str | None,
    costs: str | Path | None,
    env: Mapping[str, str] | None = None,
) -> NativeForm:
    """An OpenRLHF launch script: its flags are the file as written (``--set
    vllm.num_engines=8`` reaches them), read by the ``openrlhf`` importer; errors name the
    script and the flag. ``env``: what the script was read with (said in a refusal)."""
    if format not in (None, "openrlhf"):
        raise ConfigError(
            "is an OpenRLHF launch script: it is read as openrlhf (leave --format out)",
            field="--format", value=format, file=str(script),
        )  # fmt: skip
    root, data = flags
    try:
        form = _load_file(script, overrides=overrides, format="openrlhf", costs=costs, data=data)
    except ConfigError as exc:
        # a flag's value left as written by a block rlplex cannot follow: say why
        unknown = _unknown_variable(script, exc, env) if exc.file == str(script) else None
        if unknown is None:
            raise
        raise type(exc)(unknown, field=exc.field, value=exc.value, file=exc.file) from None
    return _with_env_unread(replace(form, base_dir=root), script, env)


def check_format(format: str | None, option: str = "--format") -> str | None:
    """``format`` when it is one a config can be read as, or None (detected).

    ``option``: what the command calls it (``--config-format`` where ``--format`` is
    another file's format).

    Raises:
        ConfigError: an unknown format, naming ``option``.
    """
    if format is not None and format not in FORMATS:
        raise ConfigError(
            f"unknown format (expected one of: {', '.join(FORMATS)})", field=option, value=format
        )
    return format


def _load_file(
    path: str | Path,
    *,
    overrides: Sequence[str] = (),
    format: str | None = None,
    costs: str | Path | None = None,
    written: Sequence[str] = (),
    data: dict[str, Any] | None = None,
) -> NativeForm:
    """:func:`load_native` of a YAML file; ``written``: overrides that count as part of it
    (a launch script's); ``data``: the file's content when it is read otherwise (an
    OpenRLHF script's flags)."""
    file = str(path)
    data = load_yaml_file(path) if data is None else data
    if not isinstance(data, dict):
        raise ConfigError("the config must be a mapping", value=data, file=file)
    if written:
        try:
            data = apply_overrides(data, list(written))
        except ConfigError as exc:  # the script's own override, not a --set of the user's
            raise ConfigError(
                f"the script's override: {exc.message}", value=exc.value, file=file
            ) from None
    check_format(format)
    detected = format or detect_format(data)
    if detected == "native" and "defaults" in data:
        # A Hydra file (verl, ROLL, RLinf) may get its telling keys from its defaults.
        from rlplex.resources.importers.compose import compose

        detected = detect_format(compose(data, file).data)
    imported = detected != "native"

    def to_file(override: str) -> bool:
        # A key the file has applies to it as written; so does any key that is not
        # native (cluster/roles/pipeline) when the file is another framework's. A native
        # cluster field that the framework's own ``cluster`` block lacks (cluster.gpu on an
        # RLinf file) applies to the native form.
        parts = override.partition("=")[0].strip().split(".")
        head = parts[0]
        block = data.get(head)
        if (
            imported
            and head == "cluster"
            and len(parts) == 2
            and parts[1] in Cluster.model_fields
            and not (isinstance(block, dict) and parts[1] in block)
        ):
            return False
        return head in data or (imported and head not in TOP_LEVEL_KEYS)

    file_overrides = [o for o in overrides if to_file(o)]
    native_overrides = [o for o in overrides if not to_file(o)]
    if not imported:
        check_override_targets(data, file_overrides, file)
    written = data
    data = apply_overrides(data, file_overrides)
    fmt = format or (detect_format(data) if detected == "native" else detected)
    cost_data = None
    if costs is not None:
        from rlplex.resources.importers.common import check_costs

        cost_data = check_costs(load_yaml_file(costs), str(costs))
    costs_file = str(costs) if costs is not None else None
    native = to_native(fmt, data, file, cost_data, costs_file)
    unread = (
        _unread_overrides(fmt, written, file_overrides, native, file, cost_data, costs_file)
        if imported
        else ()
    )
    file_devices = device_counts(native)
    if overrides:
        # Stage seconds are measured on the devices the file gives (DESIGN: at_devices
        # defaults to the role's device count in the config), not those of --set.
        with contextlib.suppress(ConfigError):  # a file fixed by its overrides
            file_devices = device_counts(
                to_native(format or detect_format(written), written, file, cost_data, costs_file)
            )
    check_override_targets(native, native_overrides, file)
    assumed = assumed_length_note(fmt, native, native_overrides) if imported else None
    native = apply_overrides(native, native_overrides)
    defaults_note = None
    lacking: tuple[str, ...] = ()
    if fmt != "native" and not (native.get("pipeline") or {}).get("python"):
        from rlplex.estimate.fill import estimator_lacks, use_estimates

        lacking = tuple(estimator_lacks(native))
        native, defaults_note = use_estimates(native, cost_data)
    if assumed and not _estimates_a_stage(native):
        # Every stage's seconds are rlplex's defaults or the --costs file's: the mean moves
        # no figure, and the warning's sweep would show nothing.
        assumed = None
    return NativeForm(
        native, file, fmt, file_devices, defaults_note, unread,
        assumed=(assumed,) if assumed else (), lacking=lacking,
    )  # fmt: skip


ASSUMED_MEAN = "workload.response_tokens.mean"
"""What :func:`assumed_length_note`'s warning starts with (then a colon)."""


def _estimates_a_stage(native: Mapping[str, Any]) -> bool:
    """Whether the estimator prices a stage of ``native`` (one without ``seconds``, a weight
    sync aside), or a Python pipeline's stages, which the file does not show."""
    pipeline = native.get("pipeline")
    if not isinstance(pipeline, Mapping):
        return False
    if pipeline.get("python"):
        return True
    stages = pipeline.get("stages")
    return isinstance(stages, Mapping) and any(
        isinstance(body, Mapping) and "seconds" not in body and body.get("kind") != "weight_sync"
        for body in stages.values()
    )


def assumed_length_note(
    fmt: str, native: Mapping[str, Any], overrides: Sequence[str]
) -> str | None:
    """The warning that an imported file's mean response length is rlplex's guess, or None
    (no workload, or ``overrides`` give the mean).

    Frameworks set maximum lengths only, so the importers take half of each maximum as the
    mean (docs/importers.md); a step's time follows the mean response length more than any
    other input, and a real run's is often a small fraction of its budget. The warning
    names the value and how to give or sweep it (a range of means that load: a multi-turn
    answer's is bounded by the trajectory's budget over its turns).
    """
    workload = native.get("workload")
    if not isinstance(workload, Mapping) or overrides_set(
        "workload.response_tokens.mean", overrides
    ):
        return None
    response = workload.get("response_tokens")
    if not isinstance(response, Mapping) or "mean" not in response or "max" not in response:
        return None
    mean, most = response["mean"], response["max"]
    turns = workload.get("turns")
    per = " per answer" if turns else ""
    values = _sweep_values(_largest_mean(most, turns))
    sweep = (
        f" or see the range (rlplex estimate --sweep workload.response_tokens.mean={values})"
        if "," in values
        else ""
    )
    return (
        f"{ASSUMED_MEAN}: the {fmt} file sets only the maximum ({_tokens(most)}"
        f" tokens); rlplex assumes a mean of {_tokens(mean)}{per}, and the step's time follows"
        f" it: give your run's (--set workload.response_tokens.mean=N){sweep}"
    )


def _tokens(value: float) -> str:
    """A token count as written: whole, never in exponent form (2000000, not 2e+06)."""
    return format(round(float(value), 3), ",.10g").replace(",", "")


def _largest_mean(most: float, turns: Any) -> float:
    """The largest mean answer that loads: the response max, or with ``turns`` what the
    trajectory's cap leaves each of its mean turns after the observations between them."""
    if not isinstance(turns, Mapping):
        return float(most)
    from rlplex.resources.inputs import TokenLength, Turns, continuation

    try:
        parsed = Turns.model_validate(turns)
        cap = continuation(TokenLength(mean=1, max=int(most)), parsed)[1]
    except (ValidationError, TypeError, ValueError):
        return float(most)
    room = (cap - (parsed.mean - 1) * parsed.observation_tokens) / parsed.mean
    return max(0.0, min(float(most), room))


def _sweep_values(most: float) -> str:
    """A few plausible means up to ``most`` tokens, for the warning's example (one value
    where ``most`` leaves no range)."""
    values = sorted({max(1, round(most * share)) for share in (0.125, 0.25, 0.5)})
    return ",".join(str(v) for v in values)


def _unread_overrides(
    fmt: str,
    written: dict[str, Any],
    overrides: Sequence[str],
    native: dict[str, Any],
    file: str,
    costs: Mapping[str, Any] | None,
    costs_file: str | None,
) -> tuple[str, ...]:
    """The overrides of an imported file whose removal leaves its native form as it is.

    An importer reads some of a framework's keys and passes over the rest, so a misspelt
    key (``--set actor_rollout_ref.rollout.tensor_model_paralel_size=4``) would change
    nothing without a word: each override is taken out in turn and the file converted
    again (milliseconds each).
    """
    notes = []
    # Taken out cumulatively: two overrides that each look redundant beside the other (the
    # same key twice, a key and its fallback) are not both unread.
    kept = list(overrides)
    for override in overrides:
        others = list(kept)
        others.remove(override)
        try:
            without = to_native(fmt, apply_overrides(written, others), file, costs, costs_file)
        except ConfigError:
            continue  # the override is what makes the file convert: it is read
        if without == native:
            kept = others
            key = override.partition("=")[0].strip()
            notes.append(
                f"--set {override} changed nothing rlplex reads (the {fmt} importer does not"
                f" read {key}, or the file or its defaults already give that value)"
            )
    return tuple(notes)
