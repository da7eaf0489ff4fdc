"""Myerson's characterization checked on candidate reports, and what gets certified."""

import numpy as np
import pytest

from market_sim.certification import CERTIFIED, certificate_note, certification, myerson_check
from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms.base import Mechanism, as_mechanism
from market_sim.mechanisms.builtin import OfflineMechanism
from market_sim.mechanisms.myerson import myerson_mechanism


def _candidates(dist, costs, rng, n_grid=33, n_random=32):
    lo, hi = dist.support
    grid = np.linspace(lo, hi, n_grid)
    grid[0] += 1e-3 * (grid[1] - grid[0])
    n = costs.size
    return np.column_stack([costs, np.tile(grid, (n, 1)), rng.uniform(lo, hi, (n, n_random))])


def _check(mech, dist, n=8, seed=0, **kw):
    rng = np.random.default_rng(seed)
    costs = dist.sample(n, rng)
    cand = _candidates(dist, costs, rng)
    dev = mech.deviations(np.arange(n), cand, costs)
    return myerson_check(cand, dev.eps, dev.payments, dist.support, **kw), dev, cand


# ---- the residual in closed form --------------------------------------------------------
def _rows(z, e, u):
    z, e, u = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (z, e, u))
    return z, e, u + z * e  # payments t = u + z eps


def test_two_points_residual_is_half_the_distance_to_the_bracket():
    # int_{0.2}^{0.6} eps lies in [0.5 x 0.4, 1 x 0.4] = [0.2, 0.4] for any monotone eps
    for du, want in ((0.5, 0.05), (0.1, 0.05), (0.3, 0.0), (0.4, 0.0), (0.2, 0.0)):
        z, e, t = _rows([0.2, 0.6], [1.0, 0.5], [1.0 + du, 1.0])
        res = myerson_check(z, e, t, (0.0, 1.0))
        assert res.monotone
        assert res.identity_residual_max == pytest.approx(want, abs=1e-15)


def test_residual_uses_the_whole_chain_not_neighbours_only():
    # eps flat at 1: each bracket is exactly 0.1; each step of u is 0.15 (0.025 off
    # alone), but u_1 - u_3 = 0.3 against exactly 0.2: the least violation is 0.05
    z, e, t = _rows([0.1, 0.2, 0.3], [1, 1, 1], [0.35, 0.2, 0.05])
    res = myerson_check(z, e, t, (0.0, 0.5))
    assert res.identity_residual_max == pytest.approx(0.05, abs=1e-15)
    # h free absorbs a shift; h = 0 does not: v_1 <= 0.1 + 0.1 + tail <= 0.4 -> 1.35 - 0.4
    z, e, t = _rows([0.1, 0.2, 0.3], [1, 1, 1], [1.35, 1.2, 1.05])
    res = myerson_check(z, e, t, (0.0, 0.5))
    assert res.identity_residual_max == pytest.approx(0.05, abs=1e-14)
    assert res.identity_residual_h0_max == pytest.approx(0.95, abs=1e-14)
    assert res.identity_residual_h0_rel == pytest.approx(0.95 / (1.35 + 0.1), abs=1e-14)


def test_exact_myerson_payments_have_zero_residual_for_any_h_and_order(rng):
    # eps(z) = 1 - z on [0, 1]: int_z^1 eps = (1 - z)^2 / 2
    z = rng.uniform(0, 1, (50, 40))
    e = 1 - z
    for h in (0.0, 0.7):
        t = z * e + (1 - z) ** 2 / 2 + h
        res = myerson_check(z, e, t, (0, 1))
        assert res.passed and res.identity_residual_max <= 1e-15
        if h == 0:
            assert res.identity_residual_h0_max <= 1e-15
        else:  # h = 0.7 breaks the normalisation by almost 0.7 (the brackets' slack aside)
            assert 0.6 < res.identity_residual_h0_max <= 0.7 + 1e-12
    perm = rng.permutation(40)
    t = z * e + (1 - z) ** 2 / 2 + 0.01 * z  # a payment that departs from the identity
    a = myerson_check(z, e, t, (0, 1))
    b = myerson_check(z[:, perm], e[:, perm], t[:, perm], (0, 1))
    assert a.identity_residual_max > 0
    np.testing.assert_array_equal(a.residuals, b.residuals)


def test_repeated_reports_must_agree():
    # the same report twice: eps must be equal (else a violation), and so must u
    z, e, t = _rows([0.3, 0.3, 0.6], [1.0, 1.0, 0.5], [0.5, 0.46, 0.3])
    res = myerson_check(z, e, t, (0, 1))
    assert res.monotone and res.identity_residual_max == pytest.approx(0.02, abs=1e-15)
    z, e, t = _rows([0.3, 0.6, 0.3], [1.0, 0.5, 0.9], [0.5, 0.3, 0.5])
    res = myerson_check(z, e, t, (0, 1))
    assert not res.monotone and res.n_violations == 1
    v = res.violations[0]
    assert (v.low, v.high, v.eps_low, v.eps_high) == (0.3, 0.3, 0.9, 1.0)


def test_bad_input_is_one_line():
    z = np.array([[0.2, 0.5]])
    with pytest.raises(MarketSimError, match="outside the support"):
        myerson_check(z + 1, z, z, (0, 1))
    with pytest.raises(MarketSimError, match="shape"):
        myerson_check(z, z[:, :1], z, (0, 1))
    with pytest.raises(MarketSimError, match="c_min < c_max"):
        myerson_check(z, z, z, (1, 0))


# ---- the library's mechanisms ---------------------------------------------------------
@pytest.mark.parametrize(
    "name,spec,kw",
    [
        ("offline", "uniform:1:5", {}),
        ("offline", "uniform:0:1", {}),
        ("offline", "uniform:1:5", {"k": 2.0}),
        ("online", "uniform:1:5", {}),
        ("online", "uniform:0:1", {"rule": "alg3"}),
        ("online", "truncnorm:2:1:1:5", {}),  # psi not linear: the payment by quadrature
        ("offline", "truncexpon:1:1:5", {}),
    ],
)
def test_builtin_myerson_mechanisms_are_certified(name, spec, kw):
    dist = parse_distribution(spec)
    mech = as_mechanism(name, dist=dist, n_sellers=8, **kw)
    res, dev, cand = _check(mech, dist)
    assert res.monotone and res.n_violations == 0
    assert res.identity_residual_rel <= 1e-9 and res.identity_residual_h0_rel <= 1e-9
    assert dev.payments.max() > 0  # somebody is bought: the identity is not vacuous
    assert certification(mech, res) == CERTIFIED


def test_myerson_mechanism_passes_the_check_but_is_not_certified():
    """myerson_mechanism computes (P), but over a user's allocation checked only where it
    is evaluated: a passing check earns the note, not the certificate."""
    dist = parse_distribution("uniform:1:5")

    def threshold(r):  # monotone with jumps: 1 below the 3rd lowest other report
        out = np.zeros(r.size)
        for i in range(r.size):
            out[i] = 1.0 if r[i] < np.sort(np.delete(r, i))[2] else 0.2 * (r[i] < 4)
        return out

    mech = myerson_mechanism(threshold, dist)
    res, _, _ = _check(mech, dist, n=6)
    assert res.passed and certification(mech, res) is None
    assert certificate_note(mech, 66) == "Myerson payments; monotonicity checked at 66 reports"

    rising = myerson_mechanism(lambda r: r / 5.0, dist, check_monotone=False)
    res, dev, cand = _check(rising, dist, n=4)
    assert not res.monotone and certification(rising, res) is None
    v = res.violations[0]
    assert v.low < v.high and v.eps_high > v.eps_low
    assert v.eps_low == pytest.approx(v.low / 5) and v.eps_high == pytest.approx(v.high / 5)
    # every neighbouring pair of the 4 x 66 candidates rises, except repeated reports
    assert res.n_violations >= 4 * 60 and len(res.violations) == 100


def test_pay_as_bid_fails_the_identity_in_closed_form():
    dist = parse_distribution("uniform:1:5")
    mech = as_mechanism("pay-as-bid", dist=dist)
    res, dev, cand = _check(mech, dist)
    assert res.monotone  # the offline allocation
    assert not res.identity_holds and certification(mech, res) is None
    # pay-as-bid leaves u = t - r eps = 0 at every report, and every bracket is >= 0,
    # so the least violation is half the lower bracket summed over all candidates
    order = np.argsort(cand, axis=1)
    z, e = np.take_along_axis(cand, order, 1), np.take_along_axis(dev.eps, order, 1)
    want = 0.5 * np.sum(e[:, 1:] * np.diff(z, axis=1), axis=1)
    np.testing.assert_allclose(res.residuals, want, rtol=1e-12, atol=1e-15)
    assert res.identity_residual_rel > 1e-3


def test_user_classes_claiming_myerson_are_not_certified():
    dist = parse_distribution("uniform:0:1")

    class Linear(Mechanism):  # truly Myerson: eps = 1 - r, t = r eps + (1 - r)^2 / 2
        myerson_payments = True

        def outcome(self, reports, rng=None):
            return 1 - reports, reports * (1 - reports) + (1 - reports) ** 2 / 2

    class MyOffline(OfflineMechanism):
        pass

    class Duck:
        myerson_payments = True

        def outcome(self, reports):
            return 1 - reports, reports * (1 - reports) + (1 - reports) ** 2 / 2

    class Faked(Mechanism):  # claims a library module: the name is not the class
        myerson_payments = True

        def outcome(self, reports, rng=None):
            return 1 - reports, reports * (1 - reports) + (1 - reports) ** 2 / 2

    Faked.__module__ = "market_sim.mechanisms.builtin"
    Faked.__qualname__ = Faked.__name__ = "OfflineMechanism"
    for mech in (Linear(), MyOffline(dist), as_mechanism(Duck()), Faked()):
        res, _, _ = _check(mech, dist, n=5)
        assert res.passed  # the check alone cannot tell them apart ...
        assert certification(mech, res) is None  # ... the library vouches for its own code only


def test_posted_price_passes_the_check_but_is_not_declared():
    dist = parse_distribution("uniform:1:5")
    mech = as_mechanism("posted-price", dist=dist)
    res, _, _ = _check(mech, dist)
    assert res.passed and certification(mech, res) is None


def test_randomized_mechanisms_are_not_certified():
    dist = parse_distribution("uniform:1:5")
    mech = as_mechanism("private-posted-price", dist=dist)
    res, _, _ = _check(mech, dist, n=4)
    assert certification(mech, res) is None


# ---- the object certified, not its class (issue #54, item 1) --------------------------
def _spiked(spec: str, at: float, width: float, ratio: float):
    """The library's law for ``spec`` whose scipy distribution is swapped, after it was
    built, for a piecewise-uniform one (frozen, so nothing callable is set on the law)
    with density ``ratio`` x 1 on [at, at + width]: its psi = c + F/f drops there."""
    import scipy.stats as st

    law = parse_distribution(spec)
    edges = np.array([0.0, at, at + width, 1.0])
    mass = np.array([1.0, ratio, 1.0]) * np.diff(edges)
    object.__setattr__(law, "dist", st.rv_histogram((mass / mass.sum(), edges), density=False)())
    return law


def test_a_law_swapped_after_it_was_built_is_not_certified_and_its_allocation_is_not_monotone():
    """Truth: with the density 1.5 on a window 1e-6 wide at 0.6 and ~1 below it, psi is
    ~1.2 just below the window and ~1.0 inside (F/f shrinks by 1.5), so a lower virtual
    cost is reached by a HIGHER report: the offline allocation (decreasing in psi) rises
    with the report there, and by Myerson's lemma (monotonicity is necessary: for costs
    a < b with eps(a) < eps(b), the two IC inequalities sum to (b - a)(eps(b) - eps(a))
    <= 0) no payment makes it IC.  Checked below by the mechanism's own eps.  Before the
    fix the audit certified it: every check looked at callables only."""
    from market_sim import audit
    from market_sim.certification import unmodified

    law = _spiked("beta:2:2:0:1", 0.6, 1e-6, 1.5)
    below, inside = 0.6 - 5e-7, 0.6 + 5e-7
    assert law.virtual_cost(inside) < law.virtual_cost(below) - 0.1
    mech = OfflineMechanism(law)
    others = np.array([0.8, 0.85, 0.9, 0.95, 0.7])
    eps = [mech.outcome(np.r_[r, others]).eps[0] for r in (below, inside)]
    assert eps[1] > eps[0] > 0  # the allocation rises with the report: not IC
    assert "cost law differs from the law its spec" in unmodified(mech)
    res = audit(mech, "beta:2:2:0:1", 6, 3, np.random.default_rng(0))
    assert res.summary["certified"] is None
    assert "cost law differs" in res.summary["certificate_note"]


def test_state_set_on_the_object_after_it_was_built_loses_the_certificate():
    """Each change below leaves every callable alone and sets numbers or objects on the
    instance or inside its law (the red team's next step after item 1): each is found,
    and the unchanged twin of each stays certifiable."""
    import pickle

    from market_sim.certification import unmodified
    from market_sim.distributions import SellerLaws
    from market_sim.mechanisms.online import OnlineMechanism

    laws = SellerLaws(
        (parse_distribution("uniform:0:1"), parse_distribution("beta:2:2:0:1")),
        np.array([0, 0, 0, 1, 1]),
    )
    fresh = [
        lambda: OfflineMechanism(parse_distribution("beta:2:5:0:2")),
        lambda: OfflineMechanism(laws, gamma=0.5),
        lambda: OnlineMechanism(parse_distribution("uniform:0:1"), 5, mu=1, sigma=1, gamma=1),
        lambda: OnlineMechanism(laws, 5, mu=1, sigma=1, gamma=1),
    ]
    reports = np.array([0.1, 0.3, 0.5, 0.7, 0.9])
    for make in fresh:
        mech = make()
        mech.outcome(reports)  # caches are filled: still the library's object
        assert unmodified(mech) is None
        assert unmodified(pickle.loads(pickle.dumps(mech))) is None  # a worker's copy

    online = fresh[2]()
    online.cutoff *= 1.01  # the cut-off no longer the one its m, mu, sigma, gamma give
    assert "state differs" in unmodified(online)
    per_class = fresh[3]()
    per_class._classes[1][0].scale *= 2  # one class's schedule, deep inside
    assert "state differs" in unmodified(per_class)
    offline = fresh[0]()
    offline.dist.dist.kwds["loc"] = 0.01  # the law's scipy parameters, edited in place
    assert "cost law differs" in unmodified(offline)
    forged = OfflineMechanism(_spiked("uniform:0:1", 0.3, 1e-3, 2.0))
    # a uniform spec's psi is computed from the spec, but its sampling uses the swapped law
    assert "cost law differs" in unmodified(forged)
    from market_sim.distributions import empirical

    sampled = OfflineMechanism(empirical(np.linspace(0.0, 1.0, 50), iron=True))
    assert "cannot be rebuilt from its spec" in unmodified(sampled)
