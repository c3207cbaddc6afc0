"""A record's measured lengths in place of the config's guess, for the workflows on records.

Time per step follows the response length more than anything else, and before a run it is
a guess: an imported file gives only the maximum (rlplex takes half of it as the mean), and
a native file states what its author expected. A record says what the run produced
(:mod:`rlplex.timeline.lengths`). ``calibrate`` must fit with those lengths, or its
physical parameters absorb the difference and stop carrying to other runs; ``replay`` and
``whatif`` re-estimate stages under other placements, which only means something for the
work the run did. :func:`length_overrides` turns the measured lengths into ``--set``
overrides that go before the user's own (a length the user sets wins), with one note
saying what changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from rlplex.config import Config
from rlplex.config.loading import ASSUMED_MEAN
from rlplex.errors import ConfigError
from rlplex.resources.yaml_io import overrides_set
from rlplex.timeline.importers.base import RecordedRun
from rlplex.timeline.lengths import RecordedLengths, recorded_lengths

KEPT_BATCH_MEANS = ("response_length/mean", "token/response_length/mean")
"""Mean response lengths logged over the trained batch only (verl, ROLL), after dynamic
sampling dropped its groups; NeMo RL's ``mean_gen_tokens_per_sample`` is its rollout's, over
the samples generated before the filter."""

RESPONSE_MEAN = "workload.response_tokens.mean"
CLIP_RATIO = "workload.response_tokens.clip_ratio"
PROMPT_MEAN = "workload.prompt_tokens.mean"

_CHANGE = 0.01
"""A measured figure within 1 % of the config's (or 0.01 of a share) is not reported as a
change (a summary record copied from the config, rounding)."""


@dataclass(frozen=True)
class LengthOverrides:
    """The overrides that put a record's lengths into its config, and what they say."""

    overrides: tuple[str, ...] = ()
    """``KEY=VALUE`` items to apply before the user's own."""
    note: str | None = None
    """One line for the user: the lengths used and the config's they replace, or why the
    record's were not used."""


def _steps_text(steps: Sequence[int]) -> str:
    if not steps:
        return "no step"
    if len(steps) == 1:
        return f"step {steps[0]}"
    if list(steps) == list(range(steps[0], steps[-1] + 1)):
        return f"steps {steps[0]}-{steps[-1]}"
    return f"{len(steps)} steps"


def length_overrides(
    run: RecordedRun,
    config: Config,
    user: Sequence[str] = (),
    steps: Sequence[int] | None = None,
) -> LengthOverrides:
    """The overrides that give ``config`` (read without them) the lengths ``run`` measured
    over ``steps`` (default: all): the mean response length, the share cut at the maximum
    and the mean prompt length, each unless one of ``user``'s overrides sets it (the share
    goes with the mean it was measured with: not where the user gives the mean). The
    maxima stay the config's: they are settings (the cap), and a record's longest
    response is only the longest that happened. Under dynamic sampling the note says that
    verl's and ROLL's lengths are the trained samples'.

    Nothing is applied, with a note saying why, when the config has no workload, when its
    workload is multi-turn (a record's response length counts a trajectory's observations
    too), or when the record's longest response or prompt is above the config's maximum (a
    record of another config).
    """
    lengths = recorded_lengths(run, steps)
    w = config.workload
    if lengths is None or w is None:
        return LengthOverrides()
    where = f"the record's lengths ({_steps_text(lengths.steps)}; {', '.join(lengths.keys)})"
    if w.turns is not None:
        return LengthOverrides(
            note=f"{where} are not used: the workload is multi-turn, where a record's"
            " response length holds a trajectory's observations too"
        )
    for measured, cap, key in (
        (lengths.response_max, w.response_tokens.max, "workload.response_tokens.max"),
        (lengths.prompt_max, w.prompt_tokens.max, "workload.prompt_tokens.max"),
    ):
        if measured is not None and measured > cap:
            return LengthOverrides(
                note=f"{where} are not used: the record's longest is {measured:g} tokens,"
                f" above the config's {key} ({cap}); is this the config of the recorded run?"
            )
    # The share cut at the maximum belongs to the distribution of the mean it was measured
    # with: where the user gives the mean, the record's share does not go with it.
    users_mean = overrides_set(RESPONSE_MEAN, user)
    if (
        not users_mean
        and lengths.response_mean is not None
        and lengths.response_mean > w.response_tokens.max
    ):
        return LengthOverrides(
            note=f"{where} are not used: the record's mean response, {lengths.response_mean:g}"
            f" tokens, is above the config's workload.response_tokens.max"
            f" ({w.response_tokens.max}); is this the config of the recorded run?"
        )
    clip = None if users_mean else lengths.clip_ratio
    if clip is None and lengths.clip_count is not None and not users_mean:
        # ROLL counts the responses cut over the step's whole batch: its prompts x samples.
        clip = min(1.0, lengths.clip_count / w.trajectories())
    wanted: list[tuple[str, float | None, float | None, str]] = [
        (RESPONSE_MEAN, lengths.response_mean, w.response_tokens.mean, "response mean"),
        (CLIP_RATIO, clip, w.response_tokens.clip_ratio, "cut at the max"),
        (PROMPT_MEAN, lengths.prompt_mean, w.prompt_tokens.mean, "prompt mean"),
    ]
    overrides: list[str] = []
    changes: list[str] = []
    for key, measured, had, label in wanted:
        if measured is None or overrides_set(key, user):
            continue
        if key == PROMPT_MEAN:
            measured = min(measured, float(w.prompt_tokens.max))
        # A length rounded to a tenth of a token, but never to 0 (the workload needs > 0).
        value = round(measured, 4) if key == CLIP_RATIO else max(round(measured, 1), 0.1)
        overrides.append(f"{key}={value:g}")
        if key == CLIP_RATIO:
            before = "the default shape" if had is None else f"{had:.2%}"
            if had is None or abs(value - had) > _CHANGE:
                changes.append(f"{label} {value:.2%} (the config: {before})")
        elif abs(value - float(had or 0.0)) > _CHANGE * max(value, float(had or 0.0)):
            changes.append(f"{label} {value:g} tokens (the config: {float(had or 0.0):g})")
    if not overrides:
        return LengthOverrides()
    note = f"{where} are used: " + ("; ".join(changes) if changes else "as the config has them")
    if (
        w.generated_per_trained > 1
        and any(o.startswith(RESPONSE_MEAN + "=") for o in overrides)
        and lengths.keys[0] in KEPT_BATCH_MEANS
    ):
        # verl's compute_data_metrics and ROLL's add_token_metrics run on the batch that is
        # trained, after dynamic sampling dropped its groups: the dropped groups, which the
        # rollout also generated, are in no length the record holds.
        note += (
            f" (measured on the trained samples: the {w.generated_per_trained:g}x prompts"
            " generated per trained prompt include groups dynamic sampling dropped, whose"
            " lengths are not logged)"
        )
    return LengthOverrides(overrides=tuple(overrides), note=note)


def load_with_lengths(
    load: Callable[[Sequence[str]], Config],
    run: RecordedRun,
    user: Sequence[str] = (),
    steps: Sequence[int] | None = None,
) -> tuple[Config, tuple[str, ...], str | None]:
    """The config ``load(extra)`` gives with the lengths ``run`` measured (``extra``: the
    overrides to put before the user's ``user``), those overrides and the note
    (:func:`length_overrides`). A config that the measured lengths make invalid (a share cut
    at the maximum that no length distribution of that mean has) is read without them, and
    the note says why.
    """
    config = load(())
    found = length_overrides(run, config, user, steps)
    if not found.overrides:
        if found.note is None:
            # Nothing measured: say so where the config's mean is rlplex's guess.
            guess = next((w for w in config.warnings if w.startswith(ASSUMED_MEAN + ":")), None)
            if guess is not None:
                return config, (), f"the record gives no response length: {guess}"
        return config, (), found.note
    try:
        return load(found.overrides), found.overrides, found.note
    except ConfigError as exc:
        where = (found.note or "").partition(" are used")[0]
        return config, (), f"{where} are not used: {exc}"


def config_warnings(config: Config) -> tuple[str, ...]:
    """The warnings reading the config gave, as ``replay``, ``whatif`` and ``calibrate``
    show them: all but the guessed mean response, which the record's lengths replace (and
    which :func:`load_with_lengths`'s note repeats where the record has none).

    ``rlplex plan`` prints every one; a command on a record must too, or a config read with
    rlplex's 7B default stage times (no ``cluster.gpu``), a model replaced by a preset's
    architecture or an override the file's reader ignores would price the stages the
    record lacks and divide its joint timers with nothing said.
    """
    return tuple(w for w in config.warnings if not w.startswith(ASSUMED_MEAN + ":"))


__all__ = [
    "LengthOverrides",
    "RecordedLengths",
    "config_warnings",
    "length_overrides",
    "load_with_lengths",
]
