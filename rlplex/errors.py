"""Errors that rlplex raises for input a user can fix.

Every error a user can act on derives from :class:`RlplexError`. The CLI turns
them into one readable message and exit status 2, never a traceback. Errors
about a configuration file name the file, the dotted field path and the
offending value, so the message alone says what to change.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class RlplexError(Exception):
    """Base class of the errors a user can fix by changing their input."""


class ConfigError(RlplexError):
    """A configuration value is wrong.

    Attributes:
        message: what is wrong, in words.
        field: dotted path of the offending field, e.g. ``roles.actor_infer.devices``.
        value: the offending value, when there is one.
        file: the file the value came from, when it came from a file.
        line: the 1-based line in ``file``, when known.
    """

    _NO_VALUE = object()

    def __init__(
        self,
        message: str,
        *,
        field: str | None = None,
        value: Any = _NO_VALUE,
        file: str | None = None,
        line: int | None = None,
    ) -> None:
        self.message = message
        self.field = field
        self.value = value
        self.file = file
        self.line = line
        super().__init__(str(self))

    @property
    def has_value(self) -> bool:
        return self.value is not ConfigError._NO_VALUE

    def with_file(self, file: str) -> ConfigError:
        """The same error, attributed to ``file`` (keeps a file already set)."""
        return type(self)(
            self.message,
            field=self.field,
            value=self.value,
            file=self.file or file,
            line=self.line,
        )

    def __str__(self) -> str:
        where = ""
        if self.file:
            where = self.file + (f":{self.line}" if self.line else "") + ": "
        field = f"{self.field}: " if self.field else ""
        value = f" (got {self.value!r})" if self.has_value else ""
        return f"{where}{field}{self.message}{value}"


class InvalidValueError(ConfigError):
    """A value its own field refuses (its type or range: a negative floor, a share above 1).

    Unlike a config that does not fit or does not hold together, no other value elsewhere
    in the config makes it right: a ``--sweep`` through such a value is refused whole.
    """


class InfeasibleError(RlplexError):
    """No valid plan exists: some role or stage cannot fit on its GPUs.

    The message names the role, the stage and the GB figures involved.
    """


def pydantic_message(error: Mapping[str, Any]) -> str:
    """One of pydantic's errors (an item of ``ValidationError.errors()``) in rlplex's words:
    "unknown key", "is required", a validator's own sentence, "must be ..." for the rest.
    Here, at the bottom of the package, so that every layer words them the same."""
    if error["type"] == "extra_forbidden":
        return "unknown key"
    if error["type"] == "missing":
        return "is required"
    if error["type"] == "value_error":
        # A validator's own sentence, without pydantic's "Value error, " in front of it.
        return str(error["msg"]).removeprefix("Value error, ")
    return str(error["msg"]).replace("Input should be", "must be")
