"""Which stages have code to run, and which are stubs that a run rehearses.

README's decorator example writes stage bodies as ``...``: a function that does nothing.
A run rehearses such a stage (it sleeps its planned time) as it does one with no function,
and the predicted period scales it the same way; both ask :func:`has_code`.
"""

from __future__ import annotations

import dis
from collections.abc import Callable
from typing import Any

from rlplex.dag.stage import Stage

_STUB_OPS = frozenset({"RESUME", "NOP", "LOAD_CONST", "RETURN_VALUE", "RETURN_CONST"})
"""The instructions a stub's body compiles to (``...``, ``pass``, a docstring alone)."""


def is_empty(fn: Callable[..., Any]) -> bool:
    """Whether a decorated stage's function has no code (its body ``...``, ``pass`` or a
    docstring, as README's example writes it): such a stage is rehearsed (it sleeps its
    planned time), as one without a function is. Read from its bytecode: nothing but
    returning None; a closure or a function that is not Python code counts as code."""
    code = getattr(fn, "__code__", None)
    if code is None or code.co_freevars:
        return False
    return all(
        i.opname in _STUB_OPS
        and (i.opname not in ("LOAD_CONST", "RETURN_CONST") or i.argval is None)
        for i in dis.get_instructions(code)
    )


def has_code(stage: Stage) -> bool:
    """Whether ``stage`` has a function that does something (else a run rehearses it)."""
    return stage.fn is not None and not is_empty(stage.fn)
