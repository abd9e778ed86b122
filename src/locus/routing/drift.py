"""An alarm for an endpoint that changed behind its name: each LLM's outcomes tested, one by
one, against the P(correct) the router predicted for them.

`DriftMonitor` keeps, per LLM, a Bernoulli CUSUM (Page's cumulative sum) of the log-likelihood
ratio of each outcome y in [0, 1] under two hypotheses: the LLM is as predicted (P(correct) =
p, the router's prediction when it answered), or it has become worse (its odds of a right
answer divided by `ODDS_RATIO`, on every query: p1 = sigmoid(logit(p) - log ODDS_RATIO)):

    S_t = max(0, S_(t-1) + y log(p1 / p) + (1 - y) log((1 - p1) / (1 - p)))

and raises its alarm when S_t crosses `threshold`. Under "as predicted" the statistic drifts
down and is reset at 0; the mean number of outcomes before a false alarm is at least
exp(threshold) (Wald's bound for a CUSUM of likelihood ratios): the default, log 20,000, keeps
false alarms under one per 10,000 outcomes per LLM where the predictions are calibrated. After a
swap from an LLM right 9 times in 10 to one right once in 10, each wrong answer adds about 1.1,
so the alarm comes after about 9 of its outcomes. The test reads each outcome against its own
query's P(correct), which the change detectors of the stream libraries (river's ADWIN and
Page-Hinkley: a stream's mean moving) do not: a hard week of queries is not a worse LLM.

    >>> monitor = DriftMonitor()
    >>> for _ in range(30):
    ...     _ = monitor.update("a", 0.9, 0.0)    # a 0.9 LLM now always wrong
    >>> monitor.state("a").alarm, monitor.state("a").alarm_at
    (True, 9)
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from locus.errors import LocusInputError

__all__ = ["ODDS_RATIO", "RECENT", "THRESHOLD", "DriftMonitor", "DriftState"]

ODDS_RATIO = 4.0  # the worsening the test is tuned to: the odds of a right answer / 4
THRESHOLD = math.log(20_000)  # the alarm: a mean of 20,000 outcomes at least between false ones
RECENT = 50  # outcomes the recent rate is read over
_EDGE = 1e-4  # P(correct) kept inside (0, 1)


@dataclass
class DriftState:
    """One LLM's outcomes and its test.

    Attributes:
        outcomes: outcomes read.
        correct: their sum (a right answer 1, a wrong one 0, a grade in between).
        predicted: the sum of their predicted P(correct).
        statistic: the CUSUM now.
        alarm: whether it crossed the threshold (it stays raised until `reset`).
        alarm_at: the outcome (1-based) it crossed at; None before.
        since: the outcome after which the statistic last left 0: where the change most
            likely began.
        recent: the last `RECENT` (outcome, predicted) pairs.
    """

    outcomes: int = 0
    correct: float = 0.0
    predicted: float = 0.0
    statistic: float = 0.0
    alarm: bool = False
    alarm_at: int | None = None
    since: int = 0
    recent: deque[tuple[float, float]] = field(default_factory=lambda: deque(maxlen=RECENT))

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: counts, the rate beside the predicted one, overall and recent."""
        n = len(self.recent)
        return {
            "outcomes": self.outcomes,
            "rate": self.correct / self.outcomes if self.outcomes else None,
            "predicted": self.predicted / self.outcomes if self.outcomes else None,
            "recent_rate": sum(y for y, _ in self.recent) / n if n else None,
            "recent_predicted": sum(p for _, p in self.recent) / n if n else None,
            "statistic": self.statistic,
            "alarm": self.alarm,
            "alarm_at": self.alarm_at,
            "since": self.since,
        }


class DriftMonitor:
    """Per LLM, its outcomes against its predicted P(correct): a CUSUM and its alarm.

    Args:
        odds_ratio: the worsening the test is tuned to (> 1).
        threshold: the statistic's alarm level (> 0).
    """

    def __init__(self, odds_ratio: float = ODDS_RATIO, threshold: float = THRESHOLD) -> None:
        if not odds_ratio > 1 or not threshold > 0:
            raise LocusInputError(
                f"drift test: odds_ratio must be > 1 and threshold > 0, found {odds_ratio} "
                f"and {threshold}"
            )
        self.shift = math.log(odds_ratio)
        self.threshold = float(threshold)
        self._states: dict[str, DriftState] = {}

    def update(self, llm_id: str, predicted: float, outcome: float) -> bool:
        """Read one outcome (in [0, 1]) of `llm_id` against its `predicted` P(correct);
        True where this outcome raised the alarm.

        Raises:
            LocusInputError: an outcome or prediction outside [0, 1].
        """
        if not (0 <= outcome <= 1 and 0 <= predicted <= 1):
            raise LocusInputError(
                f"drift test of {llm_id!r}: outcome {outcome!r} and predicted P(correct) "
                f"{predicted!r} must be in [0, 1]"
            )
        state = self._states.setdefault(llm_id, DriftState())
        p = min(max(float(predicted), _EDGE), 1 - _EDGE)
        worse = 1.0 / (1.0 + math.exp(-(math.log(p / (1 - p)) - self.shift)))
        ratio = outcome * math.log(worse / p) + (1 - outcome) * math.log((1 - worse) / (1 - p))
        state.outcomes += 1
        state.correct += float(outcome)
        state.predicted += p
        state.recent.append((float(outcome), p))
        if state.statistic == 0.0:
            state.since = state.outcomes - 1
        state.statistic = max(0.0, state.statistic + ratio)
        if state.statistic > self.threshold and not state.alarm:
            state.alarm, state.alarm_at = True, state.outcomes
            return True
        return False

    def state(self, llm_id: str) -> DriftState:
        """`llm_id`'s state (an empty one where it has no outcome)."""
        return self._states.get(llm_id, DriftState())

    def alarms(self) -> list[str]:
        """The LLMs whose alarm is raised."""
        return sorted(llm for llm, state in self._states.items() if state.alarm)

    def reset(self, llm_id: str) -> None:
        """Forget `llm_id`'s outcomes and alarm (after it was re-probed or re-fitted)."""
        self._states.pop(llm_id, None)

    def as_dict(self) -> dict[str, dict[str, Any]]:
        return {llm: state.as_dict() for llm, state in sorted(self._states.items())}
