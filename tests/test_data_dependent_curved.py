"""Myerson payments of the data-dependent mechanism where psi is curved (a Beta, a
truncated normal; issue 47): the adaptive rule of ``mechanisms.dd_curved`` against
independent integrals, and brute force IC/IR."""

import numpy as np
import pytest
from scipy import integrate
from test_data_dependent import CONVEX_DD, _cheapest_myerson_payment, _quad_integral

from market_sim.distributions import truncnorm
from market_sim.mechanisms import dd_curved

CURVED = {
    # one curved piece; psi(0) = 0 and psi -> infinity at the top, where the density is 0
    "beta": ("8*beta:2:5:0:2", "pooled"),
    # one curved piece, psi finite at both ends
    "truncnorm": ("8*truncnorm:0.5:0.3:0:1", "pooled"),
    # each seller's own psi_i: a uniform class (affine) and a Beta class (curved)
    "per-seller": ("5*uniform:0:1+3*beta:2:5:0:2", "per-seller"),
    # the same classes pooled: two curved pieces, psi jumps at 1 where the uniform ends
    "pooled-mixture": ("5*uniform:0:1+3*beta:2:5:0:2", "pooled"),
}


def _curved_mechanism(case, **kw):
    """8 sellers with synthetic data (seed 0), jointly convex (2 Lambda mu = 200 > 8: one
    optimum, Thm VIII.1): (mechanism, costs, law of each seller)."""
    from market_sim.mechanisms.builtin import DataDependentMechanism
    from market_sim.population import Population

    spec, laws = CURVED[case]
    pop = Population.parse(f"{spec};data=synthetic")
    mk = pop.sample(np.random.default_rng(0))
    dist = pop.pooled if laws == "pooled" else pop.seller_laws
    mech = DataDependentMechanism(dist, **{**CONVEX_DD, **kw}).with_data(*mk.data)
    law_of = [dist if laws == "pooled" else dist.law(i) for i in range(mk.costs.size)]
    return mech, mk.costs, law_of


@pytest.mark.parametrize("case", sorted(CURVED))
def test_curved_payments_equal_an_independent_quadrature(case):
    """t_i(c) = c eps_i(c) + int_c^top eps_i (Lemma III.2, 003) for the cheapest seller
    and one other (of the curved class): the payment equals ``scipy.integrate.quad`` of
    eps_i itself (a re-solve of Eq. 17 per evaluation, no use of its value V) to 1e-9 of
    the payment.  The old Stieltjes sum on 9 nodes was off by ~1e-3 here (O(h^2))."""
    mech, costs, law_of = _curved_mechanism(case)
    out = mech.outcome(costs)
    curved = [i for i in range(costs.size) if "beta" in law_of[i].spec or "trunc" in law_of[i].spec]
    for i in {int(np.argmin(costs)), curved[len(curved) // 2]}:
        ref = costs[i] * out.eps[i] + _quad_integral(mech, law_of[i], i, costs, costs[i])
        assert abs(out.payments[i] - ref) <= 1e-9 * ref, (case, i, out.payments[i], ref)


@pytest.mark.parametrize("case", sorted(CURVED))
def test_brute_force_finds_no_gain_and_no_loss_on_curved_laws(case):
    """Every seller against 40 misreports over its own support (equally spaced, and
    geometric towards the bottom where eps_i jumps most): one optimum (jointly convex)
    and exact Myerson payments, so no misreport gains more than the audit's tolerance
    (1e-6 w max eps + 1e-9) and every truthful utility is >= -1e-9."""
    mech, costs, law_of = _curved_mechanism(case)
    rows = []
    for i, d in enumerate(law_of):
        lo, hi = d.support
        grid = np.r_[np.linspace(lo, hi, 25), lo + (hi - lo) * np.geomspace(1e-6, 0.3, 14)]
        rows.append(np.r_[costs[i], grid])
    dev = mech.deviations(np.arange(costs.size), np.array(rows), costs)
    util = dev.payments - costs[:, None] * dev.eps
    width = max(d.support[1] for d in law_of) - min(d.support[0] for d in law_of)
    assert np.max(util[:, 1:] - util[:, :1]) <= 1e-6 * width * dev.eps.max() + 1e-9
    assert util[:, 0].min() >= -1e-9


def test_myerson_payment_and_the_scipy_path_on_a_curved_law():
    """``myerson_payment`` and the mechanism's scipy path (``solver="lbfgs"``) use the same
    rule on the truncated normal: both equal the quadrature of eps_i to 1e-7 of the
    payment (the scipy solve's tolerance), and the payment covers the cost (IR)."""
    mech, costs, law_of = _curved_mechanism("truncnorm", solver="lbfgs")
    i, t = _cheapest_myerson_payment(mech, costs, law_of)
    dev = mech.deviations([i], costs[None, i : i + 1], costs)
    eps, pay = dev.eps[0, 0], dev.payments[0, 0]
    ref = costs[i] * eps + _quad_integral(mech, law_of[i], i, costs, costs[i])
    assert abs(t - ref) <= 1e-7 * ref and abs(pay - ref) <= 1e-7 * ref
    assert t >= costs[i] * eps


@pytest.mark.parametrize("params", [CONVEX_DD, dict(mu=1.0, reg_lambda=1e-2)])
def test_the_psi_ceiling_gives_no_weight_and_the_top_of_a_beta_has_an_outcome(params):
    """psi_ceiling's claim, at its worst case (every other seller at T, the laws' largest
    psi at the 1 - 1e-6 quantile): the seller at the ceiling gets eps_i = 0, and Eq. 17's
    value there equals the value with that seller at 1e3 x the ceiling (nothing changed).
    And every legal report has an outcome: a seller at the top of the Beta (psi = inf) is
    paid 0 for eps 0, and when every seller reports the top (an audit's opponent profile,
    the ceiling's one exception: all equally dear, the weight is shared) each is paid
    its cost (IR); before, both raised "psi_rows must be ... finite"."""
    from market_sim.mechanisms import data_dependent as dd

    mech, costs, law_of = _curved_mechanism("beta", **params)
    X, y = mech.data
    T = float(law_of[0].virtual_cost(law_of[0].ppf(1 - 1e-6)))
    P = np.full((2, costs.size), T)
    P[:, 0] = [mech._ceiling, 1e3 * mech._ceiling]
    res = dd.solve_many(X, y, P, **mech._kw())
    assert np.all(res.eps[:, 0] == 0.0) and abs(res.objective[0] - res.objective[1]) <= 1e-12
    top = law_of[0].support[1]
    out = mech.deviations([0], [[top]], np.r_[top, costs[1:]])
    assert out.eps[0, 0] == 0.0 and out.payments[0, 0] == 0.0
    everyone = np.full(costs.size, top)  # all at the ceiling: the weight is shared, at cost
    out = mech.deviations([0], [[top]], everyone)
    assert np.isfinite(out.payments[0, 0]) and out.payments[0, 0] >= top * out.eps[0, 0]


# ---- the adaptive rule alone, on an allocation built to fool it ---------------------
LAW = truncnorm(0.5, 0.3, 0.0, 1.0)
GAMMA = 0.7
# V(x) = min_j (c_j + s_j x) + B(x), B(x) = -q min(x, x0)^2 - 2 q x0 (x - x0)^+ (concave,
# C^1): eps = V'(x) = s_j - 2 q min(x, x0) jumps where the minimising j changes and has a
# kink at x0.  Two jumps 1e-4 apart in z (closer than the Chebyshev points), one near
# each end of the support, the kink at z = 0.7.
_Z_JUMPS = np.array([0.003, 0.41, 0.4101, 0.996])
_Z_KINK = 0.7


def _fooling_allocation():
    """(slopes s_j, intercepts c_j, q, x0): the lines cross at x_k = GAMMA psi(z_k) for the
    jumps above (c_{j+1} = c_j + (s_j - s_{j+1}) x_k keeps V continuous)."""
    x = GAMMA * LAW.virtual_cost(_Z_JUMPS)
    s = np.array([9.0, 6.0, 4.0, 3.5, 3.0])
    c = np.r_[0.0, np.cumsum((s[:-1] - s[1:]) * x)]
    return s, c, 0.5, GAMMA * float(LAW.virtual_cost(_Z_KINK))


def _fooling_solve(xs):
    """eps_i, V and no certificate gap at seller i's virtual costs xs."""
    s, c, q, x0 = _fooling_allocation()
    x = GAMMA * np.asarray(xs, dtype=float)
    j = np.argmin(c[:, None] + s[:, None] * x, axis=0)
    low = np.minimum(x, x0)
    value = c[j] + s[j] * x - q * low**2 - 2 * q * x0 * np.maximum(x - x0, 0.0)
    return s[j] - 2 * q * low, value, np.full(x.size, np.nan)


def test_the_adaptive_rule_meets_its_tolerance_on_an_allocation_built_to_fool_it():
    """Close jumps, jumps near both ends and a kink: the rule's integral from each of 30
    reports equals a closed-form reference (eps_i(z) = s_j - 2 q GAMMA min(psi(z),
    psi(0.7)) between the known jumps, ``quad`` of psi on each piece) to 1e-10 of the
    whole integral, and its own error estimate is no smaller than the error it makes."""
    s, _, q, x0 = _fooling_allocation()
    top = LAW.support[1]
    assert s.min() - 2 * q * x0 > 0.5  # eps_i stays positive: every jump is seen

    def exact(r):  # int_r^top of eps_i, piece by piece between the jumps and the kink
        edges = np.r_[0.0, _Z_JUMPS, top]
        total = 0.0
        for j, (u, v) in enumerate(zip(edges[:-1], edges[1:], strict=True)):
            for p, w in ((u, min(v, _Z_KINK)), (max(u, _Z_KINK), v)):
                p = max(p, r)
                if w > p:
                    low = integrate.quad(lambda z: np.minimum(GAMMA * LAW.virtual_cost(z), x0),
                                         p, w, epsabs=1e-14, epsrel=1e-13)[0]  # fmt: skip
                    total += s[j] * (w - p) - 2 * q * low
        return total

    tail = dd_curved.curved_tail(LAW, 0.0, top, GAMMA, _fooling_solve, np.inf, rtol=1e-10)
    reports = np.r_[np.linspace(0.0, top, 24), _Z_JUMPS, 0.41005, _Z_KINK]
    _, value_r, _ = _fooling_solve(LAW.virtual_cost(reports))
    got = tail.tail(reports, value_r)
    want = np.array([exact(r) for r in reports])
    assert np.max(np.abs(got - want)) <= 1e-10 * want[0]
    assert abs(tail.total - want[0]) <= tail.error <= 1e-10 * want[0]
