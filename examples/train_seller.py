"""A seller learns to report, by policy gradient on numpy, in ``SellerEnv``.

The policy reports a markup on the cost: report = c + (high - c) sigmoid(a), with
a ~ N(theta, noise^2) (a Gaussian policy on the logit of the markup fraction).
REINFORCE on antithetic pairs: each market (one episode, one round, costs drawn at
reset) is played at a = theta +- noise xi, and theta += lr mean(d xi) / noise with d
the pair's reward difference over its root mean square (a normalised step).

* Offline mechanism (IC), the others truthful: the learner's markup falls towards 0:
  it learns to tell the truth.
* First-price procurement (pay-as-bid for a single unit, examples/first_price.py),
  the others playing its Bayes-Nash equilibrium b(c) = c + (1 - c)/m on U[0, 1]:
  the learner's markup fraction approaches 1/m, the BNE's own (a best response to
  the BNE is the BNE).

Run: ``python examples/train_seller.py`` (about 10 s); tests/test_env.py runs a
short version.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from market_sim.games.env import SellerEnv

FIRST_PRICE = f"{Path(__file__).resolve().parent / 'first_price.py'}:FirstPriceProcurement"


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def train(
    env: SellerEnv,
    *,
    iterations: int = 150,
    batch: int = 32,
    lr: float = 0.2,
    noise: float = 0.5,
    theta0: float = -1.0,
    seed: int = 0,
) -> np.ndarray:
    """Train the markup logit theta; returns the markup fraction sigmoid(theta) after
    each iteration.  Each of the ``batch`` markets is played twice, at theta + noise xi
    and theta - noise xi (antithetic pairs on common random numbers: the same costs,
    ``env.reset(seed=...)``), so the market's own noise cancels in the difference."""
    rng = np.random.default_rng(seed)
    theta, history = float(theta0), []
    high = float(env.action_space.high[0])

    def play(market_seed: int, logit: float) -> float:
        obs, _ = env.reset(seed=market_seed)
        c = float(obs[0])
        report = c + (high - c) * _sigmoid(logit)
        return float(env.step(np.array([report], dtype=np.float32))[1])

    for _ in range(iterations):
        xi = rng.standard_normal(batch)
        seeds = rng.integers(2**31, size=batch)
        diff = np.array(
            [
                play(int(s), theta + noise * x) - play(int(s), theta - noise * x)
                for s, x in zip(seeds, xi, strict=True)
            ]
        )
        sd = np.sqrt(np.mean(diff**2))
        if sd > 0:  # REINFORCE: grad log N(a; theta, s^2) = (a - theta) / s^2 = xi / s
            theta += lr * float(np.mean(diff / sd * xi)) / noise
        history.append(_sigmoid(theta))
    return np.array(history)


def first_price_bne(m: int):
    """The first-price BNE on U[0, 1] with m sellers: b(c) = c + (1 - c) / m."""
    return lambda c: c + (1.0 - c) / m


def main(iterations: int = 20, batch: int = 16) -> dict[str, float]:
    m = 3
    offline = SellerEnv(m, dist="uniform:0:1", mechanism="offline", gamma=0.5)
    truth = train(offline, iterations=iterations, batch=batch, lr=0.3)
    fp = SellerEnv(m, dist="uniform:0:1", mechanism=FIRST_PRICE, opponents=first_price_bne(m))
    bne = train(fp, iterations=10 * iterations, batch=2 * batch)
    tail = float(np.mean(bne[bne.size // 2 :]))  # Polyak: the mean over the second half
    out = {"offline_markup": float(truth[-1]), "first_price_markup": tail}
    print(f"offline, others truthful: markup fraction {truth[0]:.3f} -> {truth[-1]:.3f} (truth: 0)")
    print(
        f"first-price, others at the BNE: markup fraction {bne[0]:.3f} -> {tail:.3f} "
        f"(mean of the second half; BNE: 1/{m} = {1 / m:.3f})"
    )
    return out


if __name__ == "__main__":
    main()
