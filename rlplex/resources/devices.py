"""Device-set syntax: the many ways configs name a set of GPU ranks.

Frameworks write GPU sets differently: ROLL uses Python expressions such as
``list(range(0,16))``, RLinf uses ``0-3,8-11`` and ``all``, hand-written
configs use lists. All of them are parsed here with regular expressions,
never ``eval``: anything that is not one of the documented forms is refused,
so a config file cannot run code.

Accepted forms (whitespace is ignored):

- ``[0, 1, 2]`` as a YAML list, or the text ``"[6, 7]"``, or ``"list([0,1,2,3])"``
- a single rank ``5`` or ``"5"``
- ranges ``"0-7"`` and unions ``"0-3,8-11"`` (inclusive ends)
- ``"range(0,8)"``, ``"range(0, 16, 2)"`` and ``"list(range(0,16))"`` (Python's half-open ranges)
- ``"all"``: every GPU of the cluster
- ``"auto"``: left to the planner's placement search (returned as :data:`AUTO`)

Ranks are checked against the cluster (or, without one, :data:`MAX_GPUS`)
*before* a range is expanded, so ``"0-99999999999"`` is refused at once
instead of filling memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

AUTO: Final = "auto"
MAX_GPUS: Final = 65_536
"""The most GPUs a cluster (and so a device set) may have: far past any RL job of today."""

_INT = r"\s*([0-9]+)\s*"  # ASCII only: \d also matches other scripts
_RANGE_CALL = re.compile(rf"^\s*range\({_INT}(?:,{_INT})?(?:,{_INT})?\)\s*$")
_LIST_OF_RANGE = re.compile(r"^\s*list\((.*)\)\s*$", re.DOTALL)
_BRACKETS = re.compile(r"^\s*\[(.*)\]\s*$", re.DOTALL)
_SPAN = re.compile(rf"^{_INT}(?:-{_INT})?$")

ALLOWED_FORMS = (
    '"0-7", "0-3,8-11", [0, 1, 2], "[6, 7]", "all", "auto", '
    '"range(0,8)", "list(range(0,16))", "list([0,1,2,3])"'
)


class DeviceSpecError(ValueError):
    """A device set could not be parsed or does not fit the cluster."""


def _check_bound(ranks: range, limit: int, text: str) -> None:
    """Refuse a rank past the cluster before ``ranks`` (a lazy range) is built."""
    if ranks and ranks[-1] >= limit:
        first = ranks[0] if ranks[0] >= limit else ranks[(limit - ranks[0]) // ranks.step]
        if first < limit:  # the step lands exactly on limit - 1: the next item is outside
            first += ranks.step
        raise DeviceSpecError(
            f"device {first} is outside the cluster, which has GPUs 0-{limit - 1}"
            if limit < MAX_GPUS
            else f"device {first} in {text[:40]!r} is past the largest cluster rlplex"
            f" plans ({MAX_GPUS:,} GPUs)"
        )


def _check_count(text: str, limit: int) -> None:
    """Refuse a list with more items than the cluster has GPUs, before splitting it."""
    if text.count(",") + 1 > limit:
        raise DeviceSpecError(
            f"the device set lists more than {limit:,} devices, more than the cluster has"
        )


def _parse_spans(text: str, limit: int) -> list[int]:
    _check_count(text, limit)
    ranks: list[int] = []
    for part in text.split(","):
        if not part.strip():
            raise DeviceSpecError(f"empty item in device set {text!r}")
        match = _SPAN.match(part)
        if not match:
            raise DeviceSpecError(
                f"cannot parse device item {part.strip()!r}; allowed forms: {ALLOWED_FORMS}"
            )
        first = int(match.group(1))
        last = int(match.group(2)) if match.group(2) is not None else first
        if last < first:
            raise DeviceSpecError(f"descending device range {part.strip()!r}")
        _check_bound(range(first, last + 1), limit, text)
        if len(ranks) + last - first + 1 > limit:
            raise DeviceSpecError(f"the device set {text[:40]!r} is larger than the cluster")
        ranks.extend(range(first, last + 1))
    return ranks


def _parse_range_call(match: re.Match[str], limit: int) -> list[int]:
    args = [int(g) for g in match.groups() if g is not None]
    if len(args) == 1:
        args = [0, args[0]]
    if len(args) == 3 and args[2] == 0:
        raise DeviceSpecError("range() step must not be zero")
    ranks = range(*args)  # a lazy range: its length and last item cost nothing
    _check_bound(ranks, limit, match.string)
    return list(ranks)


def _parse_text(text: str, limit: int) -> list[int]:
    inner = _LIST_OF_RANGE.match(text)
    if inner:
        # list(range(...)) or list([...]): unwrap once, then parse the inside.
        body = inner.group(1)
        range_match = _RANGE_CALL.match(body)
        if range_match:
            return _parse_range_call(range_match, limit)
        brackets = _BRACKETS.match(body)
        if brackets:
            return _parse_bracket_list(brackets.group(1), limit)
        raise DeviceSpecError(f"cannot parse device set {text!r}; allowed forms: {ALLOWED_FORMS}")
    range_match = _RANGE_CALL.match(text)
    if range_match:
        return _parse_range_call(range_match, limit)
    brackets = _BRACKETS.match(text)
    if brackets:
        return _parse_bracket_list(brackets.group(1), limit)
    return _parse_spans(text, limit)


def _parse_bracket_list(body: str, limit: int) -> list[int]:
    if not body.strip():
        return []
    _check_count(body, limit)
    ranks = []
    for item in body.split(","):
        if not re.fullmatch(_INT, item):
            raise DeviceSpecError(
                f"cannot parse device item {item.strip()!r}; allowed forms: {ALLOWED_FORMS}"
            )
        ranks.append(int(item))
    return ranks


def parse_devices(value: object, num_gpus: int | None = None) -> tuple[int, ...] | str:
    """Parse a device set into a tuple of global GPU ranks, in the order given.

    Args:
        value: the raw value from a config (string, int or list of ints).
        num_gpus: the cluster's GPU count; needed to expand ``"all"`` and to
            check that every rank exists.

    Returns:
        A tuple of ranks, or :data:`AUTO` for ``"auto"``.

    Raises:
        DeviceSpecError: for any other form, an empty set, a rank listed twice,
            or a rank outside ``range(num_gpus)``.
    """
    ranks: list[int]
    if num_gpus is not None and not 0 < num_gpus <= MAX_GPUS:
        raise DeviceSpecError(f"a cluster of {num_gpus} GPUs is outside 1-{MAX_GPUS:,}")
    limit = num_gpus if num_gpus is not None else MAX_GPUS
    if isinstance(value, bool):
        raise DeviceSpecError(f"a device set cannot be a boolean; allowed forms: {ALLOWED_FORMS}")
    if isinstance(value, int):
        ranks = [value]
    elif isinstance(value, (list, tuple)):
        if len(value) > limit:
            raise DeviceSpecError(
                f"the device list has {len(value):,} items, more than the cluster's {limit:,} GPUs"
            )
        ranks = []
        for item in value:
            if isinstance(item, bool) or not isinstance(item, int):
                raise DeviceSpecError(f"device list items must be integers, got {item!r}")
            ranks.append(item)
    elif isinstance(value, str):
        text = value.strip()
        if text.lower() == AUTO:
            return AUTO
        if text.lower() == "all":
            if num_gpus is None:
                raise DeviceSpecError('"all" needs the cluster size')
            return tuple(range(num_gpus))
        ranks = _parse_text(text, limit)
    else:
        raise DeviceSpecError(
            f"a device set must be a string, an integer or a list; allowed forms: {ALLOWED_FORMS}"
        )
    if not ranks:
        raise DeviceSpecError("the device set is empty")
    if any(r < 0 for r in ranks):
        raise DeviceSpecError("device ranks must be >= 0")
    seen: set[int] = set()
    for rank in ranks:
        if rank in seen:
            raise DeviceSpecError(f"device {rank} is listed twice")
        seen.add(rank)
    if num_gpus is not None:
        outside = [r for r in ranks if r >= num_gpus]
        if outside:
            raise DeviceSpecError(
                f"device {outside[0]} is outside the cluster, which has GPUs 0-{num_gpus - 1}"
            )
    return tuple(ranks)


def format_devices(ranks: Iterable[int]) -> str:
    """Render ranks compactly as ``"0-3,8-11"``; the inverse of :func:`parse_devices`.

    Order is kept: ``format_devices([4, 5, 0])`` is ``"4-5,0"``.
    """
    items: list[str] = []
    run: list[int] = []
    for rank in ranks:
        if run and rank == run[-1] + 1:
            run.append(rank)
            continue
        if run:
            items.append(_span_text(run))
        run = [rank]
    if run:
        items.append(_span_text(run))
    return ",".join(items)


def _span_text(run: Sequence[int]) -> str:
    return str(run[0]) if len(run) == 1 else f"{run[0]}-{run[-1]}"
