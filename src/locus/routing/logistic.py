"""The one logistic fit of the routing layer: weights by L-BFGS on the log-loss of scores in
[0, 1] (a graded score s counts as s successes and 1 - s failures), pulled towards a prior.

The stack's weights (`locus.routing.stack.fit_stack`), a newcomer's thin reading
(`locus.routing.thin`) and an LLM onboarded into MF or IRT (`locus.routing.learned`) are each
this fit with their own features, prior and bounds.

    >>> import numpy as np
    >>> x = np.array([[1.0], [2.0], [-1.0], [-2.0]])
    >>> w = fit_logistic(x, np.array([1.0, 1.0, 0.0, 0.0]), strength=1.0)
    >>> bool(w[0] > 0)
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from numpy.typing import NDArray

from locus.calibration import sigmoid

__all__ = ["fit_logistic"]


def fit_logistic(
    features: NDArray[np.floating[Any]],
    scores: NDArray[np.floating[Any]],
    *,
    offset: NDArray[np.floating[Any]] | None = None,
    prior: NDArray[np.floating[Any]] | None = None,
    strength: float | NDArray[np.floating[Any]] = 0.0,
    start: NDArray[np.floating[Any]] | None = None,
    bounds: Sequence[tuple[float | None, float | None]] | None = None,
    average: bool = False,
    max_iterations: int | None = None,
) -> NDArray[np.float64]:
    """argmin over w of the log-loss of sigmoid(`features` w + `offset`) against `scores`,
    summed over the rows (their mean with `average`), plus strength / 2 x |w - prior|^2.

    Args:
        features: (n, p) one row per scored cell.
        scores: (n,) in [0, 1].
        offset: (n,) added to every logit (default 0).
        prior: (p,) what the penalty pulls towards (default 0).
        strength: the penalty's strength, one for all weights or (p,) one each (0: an
            unpenalised weight, such as an intercept's column of ones).
        start: (p,) where L-BFGS starts (default the prior).
        bounds: (low, high) per weight, None for no bound (default none).
        average: the mean of the rows' log-loss instead of its sum.
        max_iterations: L-BFGS's bound on iterations (default scipy's).

    Returns:
        (p,) the weights.
    """
    from scipy.optimize import minimize

    x = np.asarray(features, np.float64)
    y = np.asarray(scores, np.float64)
    base = np.zeros(len(y)) if offset is None else np.asarray(offset, np.float64)
    centre = np.zeros(x.shape[1]) if prior is None else np.asarray(prior, np.float64)
    pull = np.asarray(strength, np.float64)
    rows = len(y) if average else 1

    def loss(weights: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        z = base + x @ weights
        gap = weights - centre
        value = np.sum(np.logaddexp(0.0, z) - y * z) / rows + 0.5 * np.sum(pull * gap**2)
        gradient = x.T @ (sigmoid(z) - y) / rows + pull * gap
        return float(value), gradient

    options = {} if max_iterations is None else {"maxiter": max_iterations}
    found = minimize(
        loss,
        centre.copy() if start is None else np.asarray(start, np.float64),
        jac=True,
        method="L-BFGS-B",
        bounds=None if bounds is None else list(bounds),
        options=options,
    )
    return np.asarray(found.x, np.float64)
