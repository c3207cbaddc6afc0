"""Define a step DAG in Python, in one of two styles.

Builder style: each call returns the stage's name, so dependencies read as
data flow::

    b = PipelineBuilder()
    gen = b.stage("generate", role="actor_infer", seconds=120)
    rew = b.stage("reward", role="rewards", seconds=10, after=[gen])
    ...
    pipeline = b.build()

Decorator style (as in Hamilton): a function's parameter names are the stages
it runs after, and the function is the stage's implementation for the
executor, which passes each upstream stage's value by name. A parameter named
``ctx`` is not a dependency; the executor passes the step context there::

    @stage(role="actor_infer", seconds=120)
    def generate(ctx): ...

    @stage(role="rewards", seconds=10)
    def reward(generate): ...

    pipeline = define_pipeline(generate, reward)

Which parameters are dependencies follows from how the executor calls the
function (``rlplex.runtime.context.call_stage``): every upstream value goes in
by keyword, and ``**kwargs`` takes all of them. So

* a parameter without a default (positional or keyword) is a stage it runs after;
* a parameter with a default is an optional upstream: a stage it runs after
  when the pipeline has a stage of that name, else it keeps its default (as
  ``advantage`` takes ``values`` in PPO but not in GRPO);
* ``ctx``, ``*args`` and ``**kwargs`` are never dependencies;
* a positional-only parameter without a default is refused (nothing could be
  passed to it).

``after`` and ``needs`` take a list of names, or one name as a plain string.
Bad values raise :class:`StageDefinitionError` naming the stage and the field.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable, Mapping
from types import ModuleType
from typing import Any

from pydantic import ValidationError

from rlplex.dag.pipeline import Mode, Pipeline, PipelineError
from rlplex.dag.stage import Judge, Stage
from rlplex.errors import InvalidValueError, pydantic_message

CONTEXT_PARAMETER = "ctx"
"""The parameter name through which a decorated stage receives the step context."""

_STAGE_ATTR = "__rlplex_stage__"
_UPSTREAM_ATTR = "__rlplex_upstream__"
"""On a decorated function: ``(parameter, optional)`` for each parameter naming an upstream."""

_NO_VALUE: Any = object()


class StageDefinitionError(PipelineError):
    """A stage given to :class:`PipelineBuilder` or a decorator is wrong: a field refuses its
    value, or the function cannot be a stage (decorated twice, an unpassable parameter).

    Attributes:
        stage: the stage's name (as given, even when the name itself is at fault).
        field: the stage field at fault (``seconds``, ``after`` ...), if any.
        value: the offending value, when there is one.
    """

    def __init__(
        self, message: str, *, stage: str, field: str | None = None, value: Any = _NO_VALUE
    ) -> None:
        self.message = message
        self.value = value
        where = f"{field}: " if field else ""
        got = f" (got {value!r})" if value is not _NO_VALUE else ""
        super().__init__(f"stage {stage!r}: {where}{message}{got}", stage=stage, field=field)


def _first_error(exc: ValidationError) -> tuple[str | None, str, Any]:
    """(dotted field, message, value) of pydantic's first error."""
    first = exc.errors()[0]
    field = ".".join(str(p) for p in first["loc"]) or None
    value = first.get("input", _NO_VALUE) if first["type"] != "missing" else _NO_VALUE
    return field, pydantic_message(first), value


def _make_stage(fields: dict[str, Any]) -> Stage:
    """The Stage, or a :class:`StageDefinitionError` naming it and the field at fault."""
    try:
        return Stage.model_validate(fields)
    except ValidationError as exc:
        field, message, value = _first_error(exc)
        raise StageDefinitionError(
            message, stage=str(fields["name"]), field=field, value=value
        ) from None


def _names(value: str | Iterable[str], stage: str, field: str) -> tuple[str, ...]:
    """A list of names as a tuple; one name given as a string is a list of one."""
    if isinstance(value, str):
        return (value,)
    try:
        return tuple(value)
    except TypeError:
        raise StageDefinitionError(
            "must be a name or a list of names", stage=stage, field=field, value=value
        ) from None


def _make_pipeline(stages: tuple[Stage, ...], mode: Mode, max_staleness: int) -> Pipeline:
    """The pipeline (unchecked); a bad ``mode`` or ``max_staleness`` is an InvalidValueError."""
    try:
        return Pipeline(stages=stages, mode=mode, max_staleness=max_staleness)
    except ValidationError as exc:
        field, message, value = _first_error(exc)
        raise InvalidValueError(message, field=field, value=value) from None


class PipelineBuilder:
    """Collects stages one call at a time and builds a checked :class:`Pipeline`."""

    def __init__(self, mode: Mode = "sync", max_staleness: int = 0) -> None:
        _make_pipeline((), mode, max_staleness)  # refuse a bad mode here, not at build()
        self.mode: Mode = mode
        self.max_staleness = max_staleness
        self._stages: list[Stage] = []

    def stage(
        self,
        name: str,
        *,
        role: str,
        seconds: float | None = None,
        after: str | Iterable[str] = (),
        kind: str | None = None,
        at_devices: int | None = None,
        scaling: float = 1.0,
        memory_gb: float = 0.0,
        share: float = 1.0,
        judge: Judge | Mapping[str, Any] | None = None,
        micro_batch_size: int | None = None,
        micro_batch_tokens: int | None = None,
        packing: bool | None = None,
        needs: str | Iterable[str] | None = None,
        fn: Callable[..., Any] | None = None,
    ) -> str:
        """Add a stage; returns its name to use in later ``after`` lists.

        ``after`` and ``needs`` take a list of names, or one name as a string.

        Raises:
            StageDefinitionError: a field refuses its value (naming the stage and field).
        """
        fields: dict[str, Any] = {
            "name": name,
            "role": role,
            "seconds": seconds,
            "after": _names(after, name, "after"),
            "at_devices": at_devices,
            "scaling": scaling,
            "memory_gb": memory_gb,
            "share": share,
            "judge": judge,
            "micro_batch_size": micro_batch_size,
            "micro_batch_tokens": micro_batch_tokens,
            "packing": packing,
            "needs": _names(needs, name, "needs") if needs is not None else None,
            "fn": fn,
        }
        if kind is not None:
            fields["kind"] = kind
        self._stages.append(_make_stage(fields))
        return name

    def weight_sync(
        self,
        name: str = "weight_sync",
        *,
        from_: str,
        to: str,
        after: str | Iterable[str] = (),
        seconds: float | None = None,
        fn: Callable[..., Any] | None = None,
    ) -> str:
        """Add a weight sync from role ``from_`` to role ``to``; returns its name.

        ``after`` takes a list of names, or one name as a string.
        """
        self._stages.append(
            _make_stage(
                {
                    "name": name,
                    "kind": "weight_sync",
                    "from": from_,
                    "to": to,
                    "after": _names(after, name, "after"),
                    "seconds": seconds,
                    "fn": fn,
                }
            )
        )
        return name

    def build(self) -> Pipeline:
        """The pipeline, checked for duplicates, unknown dependencies and cycles."""
        pipeline = _make_pipeline(tuple(self._stages), self.mode, self.max_staleness)
        pipeline.check()
        return pipeline


def _upstream(fn: Callable[..., Any], stage: str) -> tuple[tuple[str, bool], ...]:
    """``(parameter, optional)`` for each parameter of ``fn`` naming an upstream stage
    (the rule is in the module docstring)."""
    try:
        parameters = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError) as exc:
        raise StageDefinitionError(
            f"cannot read the signature of {_function_name(fn)!r} ({exc})", stage=stage
        ) from None
    upstream = []
    for p in parameters:
        if p.name == CONTEXT_PARAMETER or p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        optional = p.default is not p.empty
        if p.kind is p.POSITIONAL_ONLY:
            if optional:
                continue
            raise StageDefinitionError(
                f"{_function_name(fn)!r} has the positional-only parameter {p.name!r}, which"
                " the executor cannot pass (it passes upstream values by name)",
                stage=stage,
                field="after",
            )
        if optional and p.name == stage:
            continue
        upstream.append((p.name, optional))
    return tuple(upstream)


def _function_name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)


def _mark(fn: Callable[..., Any], fields: dict[str, Any]) -> Callable[..., Any]:
    """Attach the stage ``fields`` describe (its ``after`` from ``fn``'s parameters) to ``fn``."""
    name = fields["name"]
    existing = getattr(fn, _STAGE_ATTR, None)
    # functools.wraps copies the attribute onto a wrapper; only fn's own stage is a repeat.
    if isinstance(existing, Stage) and existing.fn is fn:
        raise StageDefinitionError(
            f"function {_function_name(fn)!r} is already the stage {existing.name!r};"
            " decorate it with @rlplex.stage or @rlplex.weight_sync once",
            stage=name,
        )
    upstream = _upstream(fn, name)
    marked = _make_stage({**fields, "after": tuple(p for p, optional in upstream if not optional)})
    setattr(fn, _STAGE_ATTR, marked)
    setattr(fn, _UPSTREAM_ATTR, upstream)
    return fn


def stage(
    *,
    role: str,
    seconds: float | None = None,
    kind: str | None = None,
    at_devices: int | None = None,
    scaling: float = 1.0,
    memory_gb: float = 0.0,
    share: float = 1.0,
    judge: Judge | Mapping[str, Any] | None = None,
    micro_batch_size: int | None = None,
    micro_batch_tokens: int | None = None,
    packing: bool | None = None,
    needs: str | Iterable[str] | None = None,
    name: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a function as a stage; its parameter names are its upstream stages.

    A parameter without a default is a stage it runs after; one with a default
    is an optional upstream (a dependency when the pipeline has a stage of that
    name); ``ctx`` receives the step context; ``*args`` and ``**kwargs`` are
    never dependencies (``**kwargs`` receives every upstream value the stage
    has). ``needs`` takes a list of state names, or one name as a string.

    Raises:
        StageDefinitionError: a field refuses its value, the function is already
            a stage, or it has a positional-only parameter without a default.
    """

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        stage_name = fn.__name__ if name is None else name
        fields: dict[str, Any] = {
            "name": stage_name,
            "role": role,
            "seconds": seconds,
            "at_devices": at_devices,
            "scaling": scaling,
            "memory_gb": memory_gb,
            "share": share,
            "judge": judge,
            "micro_batch_size": micro_batch_size,
            "micro_batch_tokens": micro_batch_tokens,
            "packing": packing,
            "needs": _names(needs, stage_name, "needs") if needs is not None else None,
            "fn": fn,
        }
        if kind is not None:
            fields["kind"] = kind
        return _mark(fn, fields)

    return mark


def weight_sync(
    *, from_: str, to: str, seconds: float | None = None, name: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a function as the weight sync from ``from_`` to ``to``; its parameters name
    its upstream stages as for :func:`stage`."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        return _mark(
            fn,
            {
                "name": fn.__name__ if name is None else name,
                "kind": "weight_sync",
                "from": from_,
                "to": to,
                "seconds": seconds,
                "fn": fn,
            },
        )

    return mark


def _stage_of(item: Any) -> Stage | None:
    marked = getattr(item, _STAGE_ATTR, None)
    return marked if isinstance(marked, Stage) else None


def _module_stages(module: ModuleType) -> list[Any]:
    """The decorated functions of ``module`` (its own and imported ones, each once), in
    source order where every one has a source file, else in definition order.

    Source order is per file: stages imported from other files come first (imports sit
    at the top of a module), each file's in its line order, files in the order their
    first stage is bound in the module; then the module's own, in line order. Line
    numbers of two files say nothing about each other."""
    members = [v for v in vars(module).values() if _stage_of(v) is not None]
    try:
        places = {id(f): (inspect.getsourcefile(f), inspect.getsourcelines(f)[1]) for f in members}
    except (OSError, TypeError):  # defined by exec, or not a plain function: no source lines
        return members
    own = getattr(module, "__file__", None)
    own_file = os.path.realpath(own) if own else None
    files: list[str | None] = []
    for f in members:  # definition (binding) order of each file's first stage
        file = places[id(f)][0]
        if file not in files:
            files.append(file)

    def place(f: Any) -> tuple[bool, int, int]:
        file, line = places[id(f)]
        is_own = file is not None and own_file is not None and os.path.realpath(file) == own_file
        return (is_own, files.index(file), line)

    named = [v for _, v in sorted(vars(module).items()) if _stage_of(v) is not None]
    return sorted(named, key=place)


def define_pipeline(
    *functions: Callable[..., Any] | ModuleType, mode: Mode = "sync", max_staleness: int = 0
) -> Pipeline:
    """Build a pipeline from decorated functions, or from every decorated function of modules.

    A function given twice (an alias, a stage imported into a module, or a module's
    stage also given by itself) counts once. A parameter with a default becomes a
    dependency here if the pipeline has a stage of that name.

    Raises:
        TypeError: a function was not decorated with :func:`stage` or :func:`weight_sync`.
        PipelineError: the DAG is malformed (see :meth:`Pipeline.check`).
    """
    members: list[Any] = []
    for item in functions:
        if isinstance(item, ModuleType):
            members.extend(_module_stages(item))
        elif _stage_of(item) is None:
            raise TypeError(
                f"{getattr(item, '__name__', item)!r} is not a stage; decorate it with"
                " @rlplex.stage(...) or @rlplex.weight_sync(...)"
            )
        else:
            members.append(item)
    seen: set[int] = set()
    unique = []
    for f in members:  # an alias, or a stage imported into several modules, counts once
        if id(f) not in seen:
            seen.add(id(f))
            unique.append(f)
    stages = [_stage_of(f) for f in unique]
    names = {s.name for s in stages if s is not None}
    resolved = []
    for f, marked in zip(unique, stages, strict=True):
        assert marked is not None
        upstream = getattr(f, _UPSTREAM_ATTR, None)
        if upstream and any(optional for _, optional in upstream):
            after = tuple(p for p, optional in upstream if not optional or p in names)
            marked = marked.model_copy(update={"after": after})
        resolved.append(marked)
    pipeline = _make_pipeline(tuple(resolved), mode, max_staleness)
    pipeline.check()
    return pipeline
