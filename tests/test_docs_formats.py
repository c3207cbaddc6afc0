"""The docs and the --help texts name every config and record format, and every timing name.

Formats were added one at a time (OpenRLHF's launch scripts, wandb's CSV, summary records),
and each time a list somewhere kept the old set. Each list a user reads to choose a format
is checked against the constants the readers use: docs/importers.md's table of config
formats, docs/record.md's table of record formats and its table of verl's, ROLL's and
NeMo RL's timing names, README's sentence on ``--format``, and the ``--format`` help of the
commands.
"""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from rlplex.cli import app
from rlplex.config.formats import FORMATS
from rlplex.timeline.importers import RECORD_FORMATS
from rlplex.timeline.importers.nemo_rl import JOINT as NEMO_RL_JOINT
from rlplex.timeline.importers.nemo_rl import STAGES as NEMO_RL_STAGES
from rlplex.timeline.importers.nemo_rl import TOTAL as NEMO_RL_TOTAL
from rlplex.timeline.importers.openrlhf import JOINT as OPENRLHF_JOINT
from rlplex.timeline.importers.openrlhf import STAGES as OPENRLHF_STAGES
from rlplex.timeline.importers.openrlhf import TIMERS as OPENRLHF_TIMERS
from rlplex.timeline.importers.roll import STAGES as ROLL_STAGES
from rlplex.timeline.importers.roll import TOTAL_KEY
from rlplex.timeline.importers.verl import STAGES as VERL_STAGES

ROOT = Path(__file__).resolve().parents[1]


def _table_column(text: str, heading: str, column: int) -> list[str]:
    """The cells of ``column`` in the first table after ``heading`` (the line it starts)."""
    lines = text[text.index(heading) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    cells = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        cells.append(line.split("|")[column + 1].strip())
    return cells


def _codes(cells: list[str]) -> set[str]:
    """The backquoted words of the cells."""
    return {code for cell in cells for code in re.findall(r"`([^`]+)`", cell)}


def test_the_column_reader_reads_a_table() -> None:
    text = "# t\n\n| a | b |\n|---|---|\n| `x` | 1 |\n| `y`, `z` | 2 |\n\nafter\n"
    assert _codes(_table_column(text, "# t", 0)) == {"x", "y", "z"}
    assert _table_column(text, "# t", 1) == ["1", "2"]


def test_importers_md_lists_every_config_format() -> None:
    text = (ROOT / "docs" / "importers.md").read_text()
    assert _codes(_table_column(text, "# Reading", 2)) == set(FORMATS)


def test_record_md_lists_every_record_format() -> None:
    text = (ROOT / "docs" / "record.md").read_text()
    assert _codes(_table_column(text, "# Run records", 0)) == set(RECORD_FORMATS)


def test_record_md_maps_every_timing_name_to_its_stage() -> None:
    text = (ROOT / "docs" / "record.md").read_text()
    heading = "## Which stage each timing becomes"
    verl, roll, nemo, openrlhf, stages = (_table_column(text, heading, c) for c in range(5))
    rows = {c.strip("`"): s.strip("`") for c, s in zip(verl, stages, strict=True)}
    assert {k: v for k, v in rows.items() if k != "step"} == VERL_STAGES
    for key, stage in ROLL_STAGES.items():
        row = next(i for i, cell in enumerate(roll) if f"`{key}`" in cell)
        assert stages[row] == f"`{stage}`", key
    assert any(f"`{TOTAL_KEY}`" in cell for cell in roll)
    for key, stage in NEMO_RL_STAGES.items():
        row = next(i for i, cell in enumerate(nemo) if f"`{key}`" in cell)
        assert stages[row] == f"`{stage}`", key
    for key, members in NEMO_RL_JOINT.items():
        row = next(i for i, cell in enumerate(nemo) if f"`{key}`" in cell)
        assert stages[row] == f"`{members[0]}`" and f"`{members[1]}`" in nemo[row], key
        later = next(i for i, s in enumerate(stages) if s == f"`{members[1]}`")
        assert f"`{key}`" in nemo[later], key
    assert any(f"`{NEMO_RL_TOTAL}`" in cell for cell in nemo)
    # OpenRLHF: each timer on the row of its (first) stage, and every timer named.
    assert _codes(openrlhf) >= set(OPENRLHF_TIMERS)
    for key, stage in OPENRLHF_STAGES.items():
        row = next(i for i, cell in enumerate(openrlhf) if f"`{key}`" in cell)
        assert stages[row] == f"`{stage}`", key
    for key, members in OPENRLHF_JOINT.items():
        row = next(i for i, cell in enumerate(openrlhf) if f"`{key}`" in cell)
        first = next(m for m in members if stages[row] == f"`{m.partition('@')[0]}`")
        assert first, key


def test_readme_names_every_format_of_the_format_options() -> None:
    text = " ".join((ROOT / "README.md").read_text().split())
    assert "--format " + "|".join(FORMATS) in text
    assert "(`" + "|".join(RECORD_FORMATS) + "`)" in text


def test_the_format_options_help_names_every_format() -> None:
    runner = CliRunner()

    def options(command: str) -> str:
        return " ".join(runner.invoke(app, [command, "--help"]).stdout.replace("│", " ").split())

    configs = ", ".join(FORMATS[:-1]) + " or " + FORMATS[-1]
    records = ", ".join(RECORD_FORMATS[:-1]) + " or " + RECORD_FORMATS[-1]
    for command in ("validate", "estimate", "plan", "size", "simulate", "run", "show", "dag"):
        assert configs in options(command), command
    for command in ("replay", "whatif", "calibrate"):
        assert configs in options(command) and records in options(command), command
