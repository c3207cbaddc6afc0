"""Checks of a config beyond one field's type: sizes, finiteness, references, ``--set`` targets.

Every check raises one :class:`~rlplex.errors.ConfigError` naming the file,
the dotted field and the value; :func:`validate_model` turns pydantic's first
error into one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rlplex.config.schema import MAX_STAGES
from rlplex.dag.pipeline import CycleError, Pipeline, PipelineError
from rlplex.errors import ConfigError, InvalidValueError, pydantic_message
from rlplex.resources.cluster import DRIVER, Role

_M = TypeVar("_M", bound=BaseModel)
_NOT_VALUES = ("missing", "extra_forbidden", "value_error", "assertion_error")


def validate_model(
    model: type[_M], data: Any, field: str, file: str | None, extra: Mapping[str, Any] | None = None
) -> _M:
    """Validate ``data`` as ``model``; the first problem becomes a ConfigError under ``field``
    (an :class:`~rlplex.errors.InvalidValueError` where one field refuses its value)."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise ConfigError("must be a mapping", field=field, value=data, file=file)
    try:
        return model.model_validate({**data, **(extra or {})})
    except ValidationError as exc:
        first = exc.errors()[0]
        # pydantic marks a dict key's own error with a "[key]" part; the key itself names it.
        loc = ".".join(str(p) for p in first["loc"] if p != "[key]")
        path = f"{field}.{loc}" if loc else field
        kwargs: dict[str, Any] = {}
        if first["type"] != "missing":
            kwargs["value"] = first.get("input")
        # pydantic's own checks (type, range, choice) refuse one value; a missing or unknown
        # key is no value, and a validator of ours (value_error) may weigh several fields.
        error = InvalidValueError if first["type"] not in _NOT_VALUES else ConfigError
        raise error(pydantic_message(first), field=path, file=file, **kwargs) from None


def check_pipeline(pipeline: Pipeline, roles: Mapping[str, Role], file: str | None) -> None:
    try:
        pipeline.check([*roles, DRIVER])
    except CycleError as exc:
        raise ConfigError(str(exc), field="pipeline.stages", value=exc.cycle, file=file) from None
    except PipelineError as exc:
        stage = pipeline.stage(exc.stage) if exc.stage in pipeline.names else None
        value: Any = ConfigError._NO_VALUE
        if stage is not None and exc.field:
            value = {
                "after": list(stage.after),
                "role": stage.role,
                "from": stage.from_role,
                "to": stage.to_role,
            }.get(exc.field, ConfigError._NO_VALUE)
        path = f"pipeline.stages.{exc.stage}" + (f".{exc.field}" if exc.field else "")
        raise ConfigError(str(exc), field=path, value=value, file=file) from None
    for stage in pipeline.stages:
        if stage.needs is None or stage.is_weight_sync:
            continue
        role = roles.get(stage.role or "")
        states = tuple(role.states) if role else ()
        for state in stage.needs:
            if state not in states:
                raise ConfigError(
                    f"role {stage.role!r} has no state {state!r}"
                    f" (it has: {', '.join(states) or 'none'})",
                    field=f"pipeline.stages.{stage.name}.needs",
                    value=list(stage.needs),
                    file=file,
                )
    for stage in pipeline.stages:
        if not stage.is_weight_sync:
            continue
        for key, name in (("from", stage.from_role), ("to", stage.to_role)):
            role = roles.get(name or "")
            if role is None or not role.is_gpu:
                # Weights live on GPUs: a sync from or to the driver or a CPU role is a typo.
                raise ConfigError(
                    f"weight_sync stage {stage.name!r} names {name!r}, which is not a GPU role",
                    field=f"pipeline.stages.{stage.name}.{key}",
                    value=name,
                    file=file,
                )


def check_finite(data: Any, file: str | None, field: str = "") -> None:
    """Refuse NaN and infinity anywhere in a parsed file, naming the dotted field.

    No config value means "not a number" or "unbounded": YAML's ``.nan`` and
    ``.inf`` are typos or attacks, and would flow into sums and comparisons
    that silently turn false (a plan "verified" with NaN sizes). Walks
    iteratively (nesting is already bounded by the YAML reader).
    """
    stack: list[tuple[str, Any]] = [(field, data)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, float) and not math.isfinite(value):
            raise ConfigError("must be a finite number", field=path or None, value=value, file=file)
        if isinstance(value, dict):
            stack.extend((f"{path}.{k}" if path else str(k), v) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(value))


def check_pipeline_size(pipeline: Pipeline, file: str | None) -> None:
    """Stage count, ``after`` lengths and ``max_staleness`` within their bounds."""
    if len(pipeline.stages) > MAX_STAGES:
        raise ConfigError(
            f"{len(pipeline.stages):,} stages, more than the limit of {MAX_STAGES:,}",
            field="pipeline.stages",
            file=file,
        )
    for stage in pipeline.stages:
        if len(stage.after) > len(pipeline.stages):
            raise ConfigError(
                f"lists {len(stage.after):,} stages, more than the pipeline has",
                field=f"pipeline.stages.{stage.name}.after",
                file=file,
            )


def check_override_targets(native: Mapping[str, Any], overrides: Sequence[str], file: str) -> None:
    """Refuse a ``--set`` that would create a role or a stage the config does not have.

    ``--set roles.actor_infr.devices=0-3`` (a typo) would otherwise add an unused
    role and leave the intended one unchanged without a word. New fields of
    existing roles and stages (``roles.critic.num_gpus_per_worker=2``) are fine.
    """
    pipeline = native.get("pipeline")
    containers = {
        ("roles",): native.get("roles") or {},
        ("pipeline", "stages"): (
            (pipeline.get("stages") or {}) if isinstance(pipeline, dict) else {}
        ),
    }
    for item in overrides:
        parts = item.partition("=")[0].strip().split(".")
        for prefix, existing in containers.items():
            n = len(prefix)
            if len(parts) > n + 1 and tuple(parts[:n]) == prefix and isinstance(existing, dict):
                name = parts[n]
                if name not in existing:
                    what = "role" if prefix == ("roles",) else "stage"
                    known = ", ".join(map(str, existing))
                    raise ConfigError(
                        f"the config has no {what} {name!r} (it has: {known})",
                        field="--set",
                        value=item,
                        file=file,
                    )
