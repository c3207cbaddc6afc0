"""The garbage-collector pause of bulk passes: off inside, restored after."""

from __future__ import annotations

import gc

import pytest

from rlplex.bulk import gc_paused


def test_gc_is_off_inside_and_back_on_after():
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner exit leaves the outer pause alone
    assert gc.isenabled()
    assert gc.get_freeze_count() == 0  # nothing is left out of later collections


def test_gc_comes_back_after_an_error():
    with pytest.raises(ValueError), gc_paused():
        raise ValueError("boom")
    assert gc.isenabled()


def test_a_disabled_gc_stays_disabled():
    gc.disable()
    try:
        with gc_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_cycles_made_during_the_pause_are_still_collected():
    class Node:
        pass

    with gc_paused():
        a, b = Node(), Node()
        a.other, b.other = b, a
        ids = {id(a), id(b)}
        del a, b
    gc.collect()
    assert not ids & {id(o) for o in gc.get_objects() if isinstance(o, Node)}
