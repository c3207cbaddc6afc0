"""Device-set parsing: every documented form, refusals, and the text round trip."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rlplex.resources.devices import AUTO, DeviceSpecError, format_devices, parse_devices


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("0-7", tuple(range(8))),
        ("0-3,8-11", (0, 1, 2, 3, 8, 9, 10, 11)),
        (" 0 - 1 , 4 ", (0, 1, 4)),
        ([0, 1, 2], (0, 1, 2)),
        (5, (5,)),
        ("5", (5,)),
        ("all", tuple(range(16))),
        ("list(range(0,16))", tuple(range(16))),
        ("range(0,8)", tuple(range(8))),
        ("range(0, 16, 2)", tuple(range(0, 16, 2))),
        ("range(4)", (0, 1, 2, 3)),
        ("[6, 7]", (6, 7)),
        ("list([0,1,2,3])", (0, 1, 2, 3)),
        ("4-5,0", (4, 5, 0)),
    ],
)
def test_accepted_forms(value: object, expected: tuple[int, ...]) -> None:
    assert parse_devices(value, 16) == expected


def test_auto() -> None:
    assert parse_devices("auto", 8) == AUTO


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("__import__('os').system('touch /tmp/x')", "cannot parse device item"),
        ("list(map(int, '12'))", "cannot parse device set"),
        ("0-3,,5", "empty item in device set"),
        ("7-4", "descending device range '7-4'"),
        ("0-3,2", "device 2 is listed twice"),
        ("0-16", "device 16 is outside the cluster, which has GPUs 0-15"),
        ([], "the device set is empty"),
        ("[]", "the device set is empty"),
        ([-1], "device ranks must be >= 0"),
        (True, "a device set cannot be a boolean"),
        ([0, "1"], "device list items must be integers, got '1'"),
        (1.5, "a device set must be a string, an integer or a list"),
        ("range(0,8,0)", "range() step must not be zero"),
        ("٣", "cannot parse device item"),
    ],
)
def test_refused(value: object, message: str) -> None:
    with pytest.raises(DeviceSpecError, match=None) as info:
        parse_devices(value, 16)
    assert message in str(info.value)


def test_code_is_never_run(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DeviceSpecError):
        parse_devices("__import__('os').system('touch pwned')", 8)
    with pytest.raises(DeviceSpecError):
        parse_devices("list(__import__('os').system('touch pwned'))", 8)
    assert not (tmp_path / "pwned").exists()


def test_all_needs_cluster_size() -> None:
    with pytest.raises(DeviceSpecError, match="needs the cluster size"):
        parse_devices("all")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=60, unique=True))
def test_format_parses_back(ranks: list[int]) -> None:
    text = format_devices(ranks)
    assert parse_devices(text) == tuple(ranks)
    assert parse_devices(text, 301) == tuple(ranks)


def test_format_is_compact() -> None:
    assert format_devices([0, 1, 2, 3, 8, 9, 10, 11]) == "0-3,8-11"
    assert format_devices([4, 5, 0]) == "4-5,0"
    assert format_devices([3]) == "3"
