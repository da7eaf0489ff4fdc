"""Piece ends by Illinois (vs the former bisection) and the reusable eps curves."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms.payments import OfflineCurves, offline_payments, seller_utility

UNIFORM = parse_distribution("uniform:0:1")
SHIFTED = parse_distribution("uniform:0.1:1")  # psi(low) > 0: the bottom is a valid report
BETA = parse_distribution("beta:2:3:0.5:2")  # psi = +inf at the top


def _market(seed, max_m, dist):
    rng = np.random.default_rng(seed)
    m = int(rng.integers(1, max_m + 1))
    mu, sigma, gamma = rng.uniform(0.2, 5.0, 3)
    return rng, dist.sample(m, rng), dict(mu=mu, sigma=sigma, gamma=gamma)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from([UNIFORM, BETA, SHIFTED]))
def test_illinois_piece_ends_give_the_former_payments(seed, dist):
    _, c, kw = _market(seed, 40, dist)
    e1, t1 = offline_payments(c, dist, **kw, method="bisect")
    e2, t2 = offline_payments(c, dist, **kw)
    np.testing.assert_array_equal(e1, e2)
    np.testing.assert_allclose(t2, t1, rtol=1e-12, atol=0)


@pytest.mark.parametrize("seed", [1, 3, 5])
def test_illinois_agrees_with_the_resolve_reference(seed):
    _, c, kw = _market(seed, 25, UNIFORM)
    _, t1 = offline_payments(c, UNIFORM, **kw, method="resolve")
    _, t2 = offline_payments(c, UNIFORM, **kw)
    np.testing.assert_allclose(t2, t1, rtol=1e-12, atol=0)


@pytest.mark.parametrize(
    "seed, dist, k",
    [
        (0, SHIFTED, None),
        (1, BETA, None),
        (2, SHIFTED, None),
        (3, UNIFORM, None),
        (4, SHIFTED, 1.5),
        (6, UNIFORM, 2.0),
    ],
)
def test_curves_match_payments_and_seller_utility(seed, dist, k):
    rng, c, kw = _market(seed, 9 if k is None else 5, dist)
    kw["k"] = k
    m = c.size
    curves = OfflineCurves(c, dist, **kw)
    eps, pay = offline_payments(c, dist, **kw)
    np.testing.assert_allclose(curves.payments_at(c[:, None])[:, 0], pay, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(curves.eps_at(c[:, None])[:, 0], eps, rtol=1e-12, atol=1e-300)
    lo, hi = dist.support
    Z = np.column_stack(
        [
            np.full(m, lo) if dist.virtual_cost(lo) > 0 else c,
            np.maximum(0.6 * c, lo + 1e-3),
            c,
            np.minimum(1.3 * c, hi),
            np.full(m, hi),
            rng.uniform(lo, hi, m),
        ]
    )
    Z[0, -1] = Z[0, 2]  # a tie with the report
    true = dist.sample(m, rng)
    U = curves.utilities(Z, true)
    assert U.shape == Z.shape
    for i in range(m):
        for j in range(Z.shape[1]):
            ref = seller_utility(i, Z[i, j], true[i], c, dist, **kw)
            assert U[i, j] == pytest.approx(ref, abs=1e-9), (i, j)
    # a subset of sellers, asked again in another order: the same numbers
    sub = np.arange(m)[::-1]
    np.testing.assert_allclose(
        curves.utilities(Z[sub], true[sub], sellers=sub), U[sub], rtol=1e-13, atol=1e-15
    )


def test_capped_beta_curves_match_seller_utility():
    """The capped beta market where OfflineCurves and seller_utility differed by 8.8e-3.
    Cause: with a cap both re-solved the market per point and labelled a piece by the
    numbers of bought and capped sellers; seller 1 leaves the cap as another seller
    reaches it, the numbers stay, so the piece search stepped over the change and the
    rule integrated across it -- over different ranges for the curve (from its lowest
    candidate) and for seller_utility (from the report).  Both now use the capped pruned
    oracle, whose label is the cell and seller 1's place in it."""
    rng, c, kw = _market(56, 5, BETA)
    kw["k"] = 1.5
    curves = OfflineCurves(c, BETA, **kw)
    lo, hi = BETA.support
    Z = np.column_stack(
        [c, np.maximum(0.6 * c, lo + 1e-3), np.minimum(1.3 * c, hi), np.full(c.size, hi - 1e-3)]
    )
    true = BETA.sample(c.size, rng)
    U = curves.utilities(Z, true)
    for j in range(Z.shape[1]):
        ref = seller_utility(1, Z[1, j], true[1], c, BETA, **kw)
        assert U[1, j] == pytest.approx(ref, abs=1e-11), j
    # and the curve's payment at the report is what offline_payments pays
    assert curves.payments_at(c[:, None])[1, 0] == pytest.approx(
        offline_payments(c, BETA, **kw)[1][1], rel=1e-12
    )


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**31 - 1))
def test_curve_is_monotone_and_truth_is_a_best_response(seed):
    """eps_i(z) non-increasing; IR (truthful utility >= 0) and IC on a grid."""
    _, c, kw = _market(seed, 12, SHIFTED)
    m = c.size
    curves = OfflineCurves(c, SHIFTED, **kw)
    grid = np.linspace(0.1, 1.0, 61)
    Z = np.tile(grid, (m, 1))
    E = curves.eps_at(Z)
    assert np.all(np.diff(E, axis=1) <= 1e-12 * max(1.0, E.max()))
    U = curves.utilities(Z, c)
    truth = curves.utilities(c[:, None], c)[:, 0]
    assert truth.min() >= -1e-12
    assert np.max(U - truth[:, None]) <= 1e-9


def test_truth_beats_shading_where_pay_as_bid_would_not():
    c = UNIFORM.sample(10, np.random.default_rng(4))
    kw = dict(mu=1.0, sigma=0.5, gamma=0.3)
    curves = OfflineCurves(c, UNIFORM, **kw)
    i = int(np.argmin(c))
    grid = np.linspace(c[i], 1.0, 50)[None, :]
    E = curves.eps_at(grid, sellers=[i])[0]
    assert np.max((grid[0] - c[i]) * E) > 1e-4  # pay-as-bid: shading up pays
    gain = (
        curves.utilities(grid, c[[i]], sellers=[i])[0]
        - curves.utilities(c[[i]][:, None], c[[i]], sellers=[i])[0, 0]
    )
    assert gain.max() <= 1e-9  # Myerson: it does not


def test_curves_single_seller_and_errors():
    curves = OfflineCurves([0.3], SHIFTED, mu=1.0, sigma=1.0, gamma=1.0)
    eps, pay = offline_payments([0.3], SHIFTED, mu=1.0, sigma=1.0, gamma=1.0)
    assert curves.payments_at([[0.3]])[0, 0] == pytest.approx(pay[0], rel=1e-12)
    with pytest.raises(MarketSimError, match="shape"):
        curves.eps_at(np.zeros((2, 3)) + 0.5)
    with pytest.raises(MarketSimError, match="outside the support"):
        curves.eps_at([[1.5]])
