"""Private selection: the exponential mechanism (McSherry and Talwar, 001) and
permute-and-flip.

Both pick an index r of ``scores`` (higher is better) whose score changes by at
most ``sensitivity`` when one person's data changes; both are epsilon-DP.
The exponential mechanism picks r with probability proportional to
exp(epsilon s_r / (2 sensitivity)); it is sampled exactly by the Gumbel-max
trick, argmax_r (epsilon s_r / (2 sensitivity) + G_r) with G_r i.i.d. Gumbel,
which never exponentiates a score and so cannot overflow.  Utility (001): the
chosen score is below the best by more than 2 sensitivity (ln |R| + t)/epsilon
with probability at most e^-t.
"""

from __future__ import annotations

import numpy as np
from scipy.special import softmax

from ..errors import MarketSimError


def _scores(scores, epsilon, sensitivity) -> np.ndarray:
    s = np.asarray(scores, dtype=float).ravel()
    if s.size == 0:
        raise MarketSimError("scores: the set of outcomes is empty")
    if not np.all(np.isfinite(s)):
        raise MarketSimError("scores must be finite")
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise MarketSimError(f"epsilon must be a finite number > 0 (got {epsilon!r})")
    if not (np.isfinite(sensitivity) and sensitivity > 0):
        raise MarketSimError(f"sensitivity must be a finite number > 0 (got {sensitivity!r})")
    return s


def exponential_probabilities(scores, epsilon: float, sensitivity: float) -> np.ndarray:
    """P(r) proportional to exp(epsilon s_r / (2 sensitivity)), computed stably."""
    s = _scores(scores, epsilon, sensitivity)
    return softmax(epsilon * s / (2 * sensitivity))


def exponential_mechanism(
    scores, epsilon: float, sensitivity: float, rng: np.random.Generator
) -> int:
    """Index drawn by the exponential mechanism (Gumbel-max sampler)."""
    s = _scores(scores, epsilon, sensitivity)
    return int(np.argmax(epsilon * s / (2 * sensitivity) + rng.gumbel(size=s.size)))


def permute_and_flip(scores, epsilon: float, sensitivity: float, rng: np.random.Generator) -> int:
    """Permute-and-flip (McKenna and Sheldon, 2020): visit outcomes in random order,
    accept r with probability exp(epsilon (s_r - max s) / (2 sensitivity)).  epsilon-DP,
    and never worse than the exponential mechanism in expected score."""
    s = _scores(scores, epsilon, sensitivity)
    accept = np.exp(epsilon * (s - s.max()) / (2 * sensitivity))
    while True:  # terminates: the best outcome is accepted with probability 1
        for r in rng.permutation(s.size):
            if rng.random() <= accept[r]:
                return int(r)
