"""Passes over large records without the cyclic garbage collector's pauses.

Reading and drawing a record of 300,000 ops makes millions of small objects
(events, bars, rows) that never form reference cycles. CPython's cyclic
collector still walks every live object on each of its full collections,
which it triggers more and more often as objects accumulate: about a third of
the time of ``rlplex viz`` on such a record went there. :func:`gc_paused`
switches it off for one bulk pass and restores it after; reference counting
still frees everything as usual.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the body with the cyclic garbage collector off (nested uses are fine)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            # Re-enabled as is, the collector would walk every object the pass made on its
            # next allocation (a second or so after a large record). Moving them all to the
            # oldest generation first (freeze, then unfreeze) leaves them for the next full
            # collection, which CPython runs only once the old generation has grown by a
            # quarter: cycles made during the pass are still collected, just later.
            gc.freeze()
            gc.unfreeze()
            gc.enable()
