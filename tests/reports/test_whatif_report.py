"""rlplex.reports.records: what-if alternatives as given."""

from __future__ import annotations

from pathlib import Path

import pytest

from rlplex.errors import ConfigError
from rlplex.reports.records import RecordSource, whatif_report

RECORDS = Path(__file__).resolve().parents[2] / "examples" / "records"


def test_each_alternative_has_its_own_label() -> None:
    """Two ``--alt`` of one label were two rows of one name in the table and one key of the
    sweep's and the JSON's periods (the second hid the first): refused, naming it (tour 30)."""
    source = RecordSource(RECORDS / "verl_quickstart.jsonl", RECORDS / "verl_quickstart.yaml")
    with pytest.raises(ConfigError) as info:
        whatif_report(source, alts=("a: pipeline.mode=async", "a: pipeline.max_staleness=0"))
    assert info.value.field == "--alt" and "names two alternatives" in str(info.value)
    with pytest.raises(ConfigError, match="recorded config's row"):
        whatif_report(source, alts=("as recorded: pipeline.mode=async",))
    report = whatif_report(source, alts=("a: pipeline.mode=async", "b: pipeline.mode=sync"))
    assert {o.label for o in report.result.alternatives} == {"a", "b", "as recorded"}
