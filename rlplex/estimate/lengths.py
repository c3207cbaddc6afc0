"""Response lengths as a distribution: mean, cap, and the share truncated at the cap.

RL runs cap responses at ``max_response_length`` and a share of them hit the
cap (verl logs it as ``response_length/clip_ratio``). A generation stage does
not end when the *mean* response is done but when the slowest replica's
longest response is, so the estimator needs the whole distribution, not one
number. This module gives it a documented default shape:

- the body is a gamma distribution of shape 2 (density ``x/θ² e^(-x/θ)``):
  zero at length 0, one mode at ``θ``, an exponential right tail, the shape of
  published RL response-length histograms (most responses near the mode, a
  long tail of rambling ones);
- responses longer than the cap are cut at the cap (they are the truncated
  share);
- with ``clip_ratio`` given, the body is the gamma conditioned below the cap and
  exactly that share sits at the cap; otherwise the share is what the gamma puts
  beyond the cap.

``θ`` is solved so that the mean of the capped distribution is the given mean.
Everything is closed form for shape 2, so no SciPy is needed.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass
from functools import lru_cache

from rlplex.errors import ConfigError

SHAPE = 2
"""Gamma shape of the body (documented default; see the module docstring)."""
GOLDEN = (math.sqrt(5.0) - 1.0) / 2.0
"""Step of the low-discrepancy sequence that orders sequences as they arrive."""


def _cdf(x: float, theta: float) -> float:
    u = x / theta
    return 1.0 - math.exp(-u) * (1.0 + u)


def _partial_mean(x: float, theta: float) -> float:
    """``∫₀ˣ t f(t) dt`` for the shape-2 gamma of scale ``theta``."""
    u = x / theta
    return theta * (2.0 - math.exp(-u) * (u * u + 2.0 * u + 2.0))


def _partial_square(x: float, theta: float) -> float:
    """``∫₀ˣ t² f(t) dt`` for the shape-2 gamma of scale ``theta``."""
    u = x / theta
    return theta * theta * (6.0 - math.exp(-u) * (u**3 + 3.0 * u * u + 6.0 * u + 6.0))


TABLE_POINTS = 1024
"""Grid points of the tabulated CDF that quantiles are read from (linear in between)."""


@dataclass(frozen=True)
class LengthDistribution:
    """Response lengths in tokens: a shape-2 gamma body capped at ``cap``.

    Build it with :func:`response_lengths`; ``clip_ratio`` is the share of
    responses at the cap, ``theta`` the body's scale.
    """

    mean: float
    """Mean response length, in tokens, the share at the cap included."""
    cap: float
    """Longest response allowed (the framework's max response length), in tokens."""
    clip_ratio: float
    """Share of responses cut at ``cap``, 0 to 1: the workload's, or what the gamma body puts
    beyond the cap (1 when the mean is the cap)."""
    theta: float
    """Scale of the gamma body, in tokens (its mode): solved so that the capped mean is
    ``mean``; ``cap`` when every response is at the cap."""
    given_clip: bool
    """Whether ``clip_ratio`` came from the workload (the body is then the gamma conditioned
    below the cap) rather than from the default shape; printed with the assumptions."""

    def body_quantile(self, p: float) -> float:
        """Length at share ``p`` of the responses below the cap (``0 <= p < 1``)."""
        return _body_quantile(self.cap, self.theta, p)

    def lengths(self, n: int) -> list[float]:
        """``n`` representative response lengths in arrival order.

        Evenly spaced quantiles (the ones at or past the truncated share sit at
        the cap), visited in a low-discrepancy order so that long and short
        responses arrive mixed, as they do when a batch is submitted at once.
        """
        return list(_lengths(self.cap, self.theta, self.clip_ratio, n))

    def longest_of(self, n: int) -> float:
        """Expected longest of ``n`` responses (the cap once ``n`` hold a truncated one)."""
        if n * self.clip_ratio >= 0.5:
            return float(self.cap)
        body_share = 1.0 - self.clip_ratio
        p = 1.0 - 0.5 / max(n, 1)
        if p >= body_share:
            return float(self.cap)
        return self.body_quantile(p / body_share)

    def scaled(self, factor: float) -> LengthDistribution:
        """The same shape stretched by ``factor`` (a gamma's scale family): a share of each
        length, such as the tokens a multi-turn trajectory decodes of all it holds."""
        if factor == 1.0:
            return self
        return LengthDistribution(
            self.mean * factor, self.cap * factor, self.clip_ratio, self.theta * factor,
            self.given_clip,
        )  # fmt: skip

    def mean_square(self) -> float:
        """``E[L²]`` of the capped distribution (closed form)."""
        below = _cdf(self.cap, self.theta)
        body = _partial_square(self.cap, self.theta) / below if below > 0 else 0.0
        return (1.0 - self.clip_ratio) * body + self.clip_ratio * self.cap**2


@lru_cache(maxsize=256)
def _cdf_table(cap: float, theta: float) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """(lengths, CDF at them) on a grid up to the cap, for fast quantiles."""
    # A placement search prices the same distribution thousands of times.
    xs = tuple(cap * i / TABLE_POINTS for i in range(TABLE_POINTS + 1))
    return xs, tuple(_cdf(x, theta) for x in xs)


def _body_quantile(cap: float, theta: float, p: float) -> float:
    xs, cs = _cdf_table(cap, theta)
    target = p * cs[-1]
    i = min(max(bisect.bisect_left(cs, target), 1), len(cs) - 1)
    lo, hi = cs[i - 1], cs[i]
    w = (target - lo) / (hi - lo) if hi > lo else 0.0
    return xs[i - 1] + w * (xs[i] - xs[i - 1])


@lru_cache(maxsize=1024)
def _lengths(cap: float, theta: float, clip_ratio: float, n: int) -> tuple[float, ...]:
    out = []
    body_share = 1.0 - clip_ratio
    for i in range(n):
        p = ((i * GOLDEN) % 1.0 + 0.5 / n) % 1.0
        if p >= body_share:
            out.append(float(cap))
        else:
            out.append(_body_quantile(cap, theta, p / body_share) if body_share > 0 else cap)
    return tuple(out)


def mean_windowed_square(dist: LengthDistribution, prompt: float, window: int) -> float:
    """``E[g(prompt + R)]`` with ``g`` :func:`rlplex.estimate.formulas.windowed_square`: the
    squared length a windowed attention layer costs, averaged over the responses ``R``.

    ``g(L) = L² - max(0, L - window)²``, so this is ``E[(p + R)²]`` less the mean squared
    excess over the window, in closed form from the shape-2 gamma's partial moments (the
    truncated share at the cap counted at the cap).
    """
    full = prompt * prompt + 2.0 * prompt * dist.mean + dist.mean_square()
    if window <= 0:
        return full
    t = window - prompt  # responses longer than t pass the window

    def excess(r: float) -> float:
        return max(0.0, r - t) ** 2

    below = _cdf(dist.cap, dist.theta)
    start = max(0.0, t)
    body = 0.0
    if below > 0 and start < dist.cap:
        # ∫ (r - t)² f(r) dr from max(0, t) to the cap, over the body's mass below the cap.
        square = _partial_square(dist.cap, dist.theta) - _partial_square(start, dist.theta)
        mean = _partial_mean(dist.cap, dist.theta) - _partial_mean(start, dist.theta)
        mass = below - _cdf(start, dist.theta)
        body = (square - 2.0 * t * mean + t * t * mass) / below
    over = (1.0 - dist.clip_ratio) * body + dist.clip_ratio * excess(dist.cap)
    return full - over


def response_lengths(
    mean: float,
    cap: int,
    clip_ratio: float | None = None,
    *,
    field: str = "",
    file: str | None = None,
) -> LengthDistribution:
    """The default-shape distribution with this mean and cap (and truncated share, if given).

    Raises:
        ConfigError: the mean is not below the cap while some responses are
            shorter than it, or the truncated share does not fit the mean
            (``clip_ratio * cap`` alone exceeds it).
    """
    if mean > cap:
        raise ConfigError(
            f"mean {mean:g} exceeds the maximum {cap}", field=f"{field}.mean", value=mean, file=file
        )
    if clip_ratio is not None:
        if clip_ratio >= 1.0 or mean >= cap:
            return LengthDistribution(float(cap), cap, 1.0, float(cap), True)
        body_mean = (mean - clip_ratio * cap) / (1.0 - clip_ratio)
        if body_mean <= 0:
            raise ConfigError(
                f"{clip_ratio:g} of responses at the maximum {cap} already make a mean above"
                f" {mean:g}",
                field=f"{field}.clip_ratio",
                value=clip_ratio,
                file=file,
            )

        def conditional_mean(theta: float) -> float:
            return _partial_mean(cap, theta) / _cdf(cap, theta)

        theta = _solve(conditional_mean, body_mean, cap)
        return LengthDistribution(mean, cap, clip_ratio, theta, True)
    if mean >= cap:
        return LengthDistribution(float(cap), cap, 1.0, float(cap), False)

    def capped_mean(theta: float) -> float:
        return _partial_mean(cap, theta) + cap * (1.0 - _cdf(cap, theta))

    theta = _solve(capped_mean, mean, cap)
    return LengthDistribution(mean, cap, 1.0 - _cdf(cap, theta), theta, False)


def _solve(fn, target: float, cap: int) -> float:  # type: ignore[no-untyped-def]
    """The scale whose mean (increasing in scale) is ``target``, by bisection on a log scale."""
    lo, hi = 1e-6 * cap, 1e6 * cap
    for _ in range(200):
        mid = math.sqrt(lo * hi)
        if fn(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi / lo < 1 + 1e-12:
            break
    return math.sqrt(lo * hi)
