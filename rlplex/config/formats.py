"""The formats a config file may be written in, and the registry that converts them.

A ROLL, RLinf, verl or NeMo RL file (or an OpenRLHF launch script's flags) is turned
into the native dict form by its importer (:mod:`rlplex.resources.importers`);
:data:`IMPORTERS` names them, so adding a format is one entry here, and every import is
an ordinary one that the package-order test sees. :func:`detect_format` guesses the
format from a file's keys (an OpenRLHF script is known by its command instead).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import ValidationError

from rlplex.errors import ConfigError, pydantic_message
from rlplex.resources.importers import nemo_rl, openrlhf, rlinf, roll, verl
from rlplex.resources.importers.common import apply_costs

ToNative = Callable[..., dict[str, Any]]
"""An importer: ``to_native(data, *, file, costs, costs_file)`` -> the native dict."""

IMPORTERS: dict[str, ToNative] = {
    "roll": roll.to_native,
    "rlinf": rlinf.to_native,
    "verl": verl.to_native,
    "nemo_rl": nemo_rl.to_native,
    "openrlhf": openrlhf.to_native,
}
"""The converter of each format other than native, by format name."""


ConfigFormat = Literal["native", "roll", "rlinf", "verl", "nemo_rl", "openrlhf"]
FORMATS: tuple[str, ...] = ("native", *IMPORTERS)
"""Every format ``--format`` accepts (the same names as :data:`ConfigFormat`)."""


def detect_format(data: Mapping[str, Any]) -> ConfigFormat:
    """Guess a config file's format from its keys.

    RLinf has ``cluster.component_placement``; verl-style files have
    ``resource_pool_spec``, a ``trainer`` block with ``n_gpus_per_node`` or verl's
    ``custom_reward_function``; ROLL
    has top-level role blocks with ``device_mapping``; NeMo RL has a ``policy`` section with
    its keys, or ``defaults`` naming parent files by path; anything else is native.
    """
    cluster = data.get("cluster")
    if isinstance(cluster, dict) and "component_placement" in cluster:
        return "rlinf"
    if (
        "resource_pool_spec" in data
        or (isinstance(data.get("trainer"), dict) and "n_gpus_per_node" in data["trainer"])
        or "custom_reward_function" in data  # verl's evaluation.yaml has no trainer block
    ):
        return "verl"
    if any(isinstance(v, dict) and "device_mapping" in v for v in data.values()):
        return "roll"
    if nemo_rl.is_nemo_rl(data):
        return "nemo_rl"
    return "native"


def to_native(
    fmt: str,
    data: dict[str, Any],
    file: str,
    costs: Mapping[str, Any] | None,
    costs_file: str | None = None,
) -> dict[str, Any]:
    """Turn a file of format ``fmt`` into the native dict form (costs merged in).

    A native file only gets its ``--costs`` merged; any other format goes
    through its importer in :data:`IMPORTERS`.
    """
    if fmt == "native":
        return apply_costs(data, costs, costs_file)
    try:
        return IMPORTERS[fmt](data, file=file, costs=costs, costs_file=costs_file)
    except ValidationError as exc:  # a model an importer builds refused a value it read
        first = exc.errors()[0]
        raise ConfigError(
            f"cannot be converted: {pydantic_message(first)}",
            field=".".join(str(p) for p in first["loc"]) or None,
            value=first.get("input"),
            file=file,
        ) from None
