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
executor. A parameter named ``ctx`` is not a dependency; the executor passes
the step context there::

    @stage(role="actor_infer", seconds=120)
    def generate(ctx): ...

    @stage(role="rewards", seconds=10)
    def reward(generate): ...

    pipeline = define_pipeline(generate, reward)
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from types import ModuleType
from typing import Any

from rlplex.dag.pipeline import Mode, Pipeline
from rlplex.dag.stage import Stage

CONTEXT_PARAMETER = "ctx"
"""The parameter name through which a decorated stage receives the step context."""

_STAGE_ATTR = "__rlplex_stage__"


class PipelineBuilder:
    """Collects stages one call at a time and builds a checked :class:`Pipeline`."""

    def __init__(self, mode: Mode = "sync", max_staleness: int = 0) -> None:
        self.mode: Mode = mode
        self.max_staleness = max_staleness
        self._stages: list[Stage] = []

    def stage(
        self,
        name: str,
        *,
        role: str,
        seconds: float | None = None,
        after: Iterable[str] = (),
        kind: str | None = None,
        at_devices: int | None = None,
        scaling: float = 1.0,
        memory_gb: float = 0.0,
        needs: Iterable[str] | None = None,
        fn: Callable[..., Any] | None = None,
    ) -> str:
        """Add a stage; returns its name to use in later ``after`` lists."""
        fields: dict[str, Any] = {
            "name": name,
            "role": role,
            "seconds": seconds,
            "after": tuple(after),
            "at_devices": at_devices,
            "scaling": scaling,
            "memory_gb": memory_gb,
            "needs": tuple(needs) if needs is not None else None,
            "fn": fn,
        }
        if kind is not None:
            fields["kind"] = kind
        self._stages.append(Stage.model_validate(fields))
        return name

    def weight_sync(
        self,
        name: str = "weight_sync",
        *,
        from_: str,
        to: str,
        after: Iterable[str] = (),
        seconds: float | None = None,
        fn: Callable[..., Any] | None = None,
    ) -> str:
        """Add a weight sync from role ``from_`` to role ``to``; returns its name."""
        self._stages.append(
            Stage.model_validate(
                {
                    "name": name,
                    "kind": "weight_sync",
                    "from": from_,
                    "to": to,
                    "after": tuple(after),
                    "seconds": seconds,
                    "fn": fn,
                }
            )
        )
        return name

    def build(self) -> Pipeline:
        """The pipeline, checked for duplicates, unknown dependencies and cycles."""
        pipeline = Pipeline(
            stages=tuple(self._stages), mode=self.mode, max_staleness=self.max_staleness
        )
        pipeline.check()
        return pipeline


def _dependencies(fn: Callable[..., Any]) -> tuple[str, ...]:
    return tuple(p for p in inspect.signature(fn).parameters if p != CONTEXT_PARAMETER)


def stage(
    *,
    role: str,
    seconds: float | None = None,
    kind: str | None = None,
    at_devices: int | None = None,
    scaling: float = 1.0,
    memory_gb: float = 0.0,
    needs: Iterable[str] | None = None,
    name: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a function as a stage; its parameter names are its upstream stages."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fields: dict[str, Any] = {
            "name": name or fn.__name__,
            "role": role,
            "seconds": seconds,
            "after": _dependencies(fn),
            "at_devices": at_devices,
            "scaling": scaling,
            "memory_gb": memory_gb,
            "needs": tuple(needs) if needs is not None else None,
            "fn": fn,
        }
        if kind is not None:
            fields["kind"] = kind
        setattr(fn, _STAGE_ATTR, Stage.model_validate(fields))
        return fn

    return mark


def weight_sync(
    *, from_: str, to: str, seconds: float | None = None, name: str | None = None
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a function as the weight sync from ``from_`` to ``to``."""

    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        setattr(
            fn,
            _STAGE_ATTR,
            Stage.model_validate(
                {
                    "name": name or fn.__name__,
                    "kind": "weight_sync",
                    "from": from_,
                    "to": to,
                    "after": _dependencies(fn),
                    "seconds": seconds,
                    "fn": fn,
                }
            ),
        )
        return fn

    return mark


def define_pipeline(
    *functions: Callable[..., Any] | ModuleType, mode: Mode = "sync", max_staleness: int = 0
) -> Pipeline:
    """Build a pipeline from decorated functions, or from every decorated function of modules.

    Raises:
        TypeError: a function was not decorated with :func:`stage` or :func:`weight_sync`.
        PipelineError: the DAG is malformed (see :meth:`Pipeline.check`).
    """
    stages: list[Stage] = []
    for item in functions:
        if isinstance(item, ModuleType):
            members = [v for _, v in sorted(vars(item).items()) if hasattr(v, _STAGE_ATTR)]
            # Definition order reads best in plans; source line order recovers it.
            members.sort(key=lambda f: inspect.getsourcelines(f)[1])
            stages.extend(getattr(f, _STAGE_ATTR) for f in members)
            continue
        marked = getattr(item, _STAGE_ATTR, None)
        if marked is None:
            raise TypeError(
                f"{getattr(item, '__name__', item)!r} is not a stage; decorate it with"
                " @rlplex.stage(...) or @rlplex.weight_sync(...)"
            )
        stages.append(marked)
    pipeline = Pipeline(stages=tuple(stages), mode=mode, max_staleness=max_staleness)
    pipeline.check()
    return pipeline
