"""Payments with the cap a_i <= k/m: the pruned oracle (``_CappedOracle``), its screen,
the interpolated integrals of sellers deep at the cap, and the re-solving reference."""

import warnings

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy import integrate

from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms import offline, payment_oracles
from market_sim.mechanisms import payments as P
from market_sim.mechanisms.offline import _Groups, solve
from market_sim.mechanisms.payments import OfflineCurves, offline_payments, seller_utility

UNIFORM = parse_distribution("uniform:0:1")
SHIFTED = parse_distribution("uniform:0.1:1")
BETA = parse_distribution("beta:2:3:0.5:2")  # psi = +inf at the top
TRUNCNORM = parse_distribution("truncnorm:0.5:0.3:0:1")
DISTS = [UNIFORM, SHIFTED, BETA, TRUNCNORM]


def _draw(seed, dist, max_m=30):
    """A capped market: ties, all-equal costs or a seller at the top now and then; k from
    1 (every seller at the cap) to 6, hyperparameters 1e-2..1e2."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(2, max_m + 1))
    c = dist.sample(m, rng)
    r = rng.random()
    if r < 0.25:
        c = np.clip(np.round(c, 1), *dist.support)
    elif r < 0.35:
        c[:] = c[0]
    elif r < 0.45:
        c[rng.integers(m)] = dist.support[1]
    k = float(rng.uniform(1.0, min(m, 6)))
    if rng.random() < 0.2:
        k = float(rng.integers(1, min(m, 6)))
    mu, sigma, gamma = 10.0 ** rng.uniform(-2, 2, 3)
    return c, dict(mu=mu, sigma=sigma, gamma=gamma, k=k)


def _adaptive(c, dist, kw, i):
    """Seller i's payment by scipy's adaptive quadrature over full re-solves (Eq. 8, 003),
    split at the pruned oracle's piece ends."""
    psi = dist.virtual_cost(c)
    g = kw["gamma"]
    oracle, refine = P._oracle(psi, kw["mu"], kw["sigma"], g, kw["k"], "auto")
    _, (_, start, end, _, _) = P._integrate(
        oracle, refine, np.array([i]), g * psi[[i]], c[[i]], dist, g, 32, record=True
    )

    def eps_i(z):
        q = psi.copy()
        q[i] = dist.virtual_cost(z)
        return solve(q, **kw).eps[i]

    edges = np.unique(np.concatenate(([c[i]], start, end, [dist.support[1]])))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # quad's roundoff notes near a fold
        tail = sum(
            integrate.quad(eps_i, a, b, epsabs=1e-17, epsrel=1e-14, limit=200)[0]
            for a, b in zip(edges[:-1], edges[1:], strict=True)
        )
    return c[i] * eps_i(c[i]) + tail


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.sampled_from(DISTS))
def test_pruned_capped_payments_equal_the_resolve_reference(seed, dist):
    """The reference bisects its pieces and integrates each by 32-point Gauss-Legendre,
    halved where the rule has not resolved the piece (issue #47): a re-solve per point
    has rounding noise, so most pieces cost three rules, and 10 examples (20 before)
    keep the test near its former time.  At most 10 sellers: with k near 1 the
    reference takes up to a minute at 20."""
    c, kw = _draw(seed, dist, max_m=10)
    try:
        e1, t1 = offline_payments(c, dist, **kw, method="resolve")
    except MarketSimError as exc:
        with pytest.raises(MarketSimError, match=str(exc)[:30]):
            offline_payments(c, dist, **kw)
        return
    e2, t2 = offline_payments(c, dist, **kw)
    np.testing.assert_allclose(e2, e1, rtol=1e-12, atol=0)
    np.testing.assert_allclose(t2, t1, rtol=5e-11, atol=0)


def test_where_they_differ_the_pruned_oracle_is_the_accurate_one():
    """Here the reference was off by 2.1e-11 (one 32-point rule over a long piece); since
    #47 its pieces are halved where the rule has not resolved them, and both it and the
    pruned oracle agree with adaptive quadrature to 1e-12."""
    c = np.array([0.1, 0.8, 0.3, 0.2, 0.8, 0.7, 0.3])
    kw = dict(
        mu=1.4889822804428818, sigma=3.571548214610511, gamma=0.8218555838873143,
        k=4.756879325731829,
    )  # fmt: skip
    truth = _adaptive(c, SHIFTED, kw, 0)
    _, ref = offline_payments(c, SHIFTED, **kw, method="resolve")
    _, got = offline_payments(c, SHIFTED, **kw)
    assert abs(ref[0] / truth - 1) < 1e-12
    assert got[0] == pytest.approx(truth, rel=1e-13)


def test_resolve_reference_sees_a_seller_leave_the_cap_as_another_reaches_it():
    """Seller 2 leaves the cap while another seller reaches it: the counts of bought and
    capped sellers stay the same but the piece changes (A, B, A).  Labelled by counts, the
    reference stepped over B and was off by 7.4e-5."""
    c = np.array(
        [0.10992254658696154, 0.5893479576464347, 0.18078791941369932, 0.20470231715096077,
         0.9291923274199537, 0.6627969020525974, 0.7584631954340747, 0.2821342391437741,
         0.7758136305865571, 0.6693594615505146, 0.3462669258021417, 0.496236462538865,
         0.2490785151352245, 0.594502057140895, 0.18694387586474648, 0.448665771747608,
         0.8553265882190104]
    )  # fmt: skip
    kw = dict(
        mu=0.7372073798673338, sigma=4.144067606725198, gamma=3.1737718894680618,
        k=3.408962334345652,
    )  # fmt: skip
    truth = _adaptive(c, UNIFORM, kw, 2)
    _, ref = offline_payments(c, UNIFORM, **kw, method="resolve")
    _, got = offline_payments(c, UNIFORM, **kw)
    assert ref[2] == pytest.approx(truth, rel=1e-10)
    assert got[2] == pytest.approx(truth, rel=1e-13)


def test_one_huge_virtual_cost_does_not_widen_the_cell_tolerance():
    """A cost near the top of a beta support has psi ~ 3e8.  The validity tolerance of a
    cell was 1e-11 (|lam| + largest value) ~ 0.01: a cell that breaks the cap passed, and
    solve bought 3 sellers at 8x the cap.  It is now relative to the cell's own values."""
    c = np.array(
        [1.99997, 1.3058512883749873, 1.2110995479921691, 1.6323200144367291,
         1.5288876157718851, 1.204467712180353, 1.3275686679511978, 1.5250232317027523,
         1.5597234763265124, 1.2570793267239804, 1.423432439850279, 1.551340467641157,
         1.1679920735189957, 1.5489214544412426, 0.5995731860506511, 0.7902816205101394,
         1.6360859047494745, 0.7734643593097159, 1.1821403181793082, 1.0585604728030942,
         1.0311332785567946, 1.1265633047130947, 0.7905942183730407, 1.4029004571242065,
         1.0851784078898303]
    )  # fmt: skip
    k = 1.019987467935974  # Q = m/k = 24.5: all 25 sellers are bought
    kw = dict(mu=3.6195910772690887, sigma=1.1076902601843657, gamma=4.118895608677413, k=k)
    psi = BETA.virtual_cost(c)
    assert psi[0] > 1e8
    results = [solve(psi, **kw, backend=b) for b in ("numpy", "numba")]
    for res in results:
        assert res.a.max() <= k / c.size * (1 + 1e-12)
        assert res.n_bought == c.size
    np.testing.assert_allclose(results[1].eps, results[0].eps, rtol=1e-12)


@pytest.mark.parametrize("seed", range(6))
def test_the_screen_keeps_the_cell_of_every_moved_market(seed):
    """The pruning itself: for random one-seller moves, the cell (c, n) that holds the
    moved market's optimum (from a full re-solve) is one the oracle kept."""
    rng = np.random.default_rng(seed)
    misses = 0
    for _ in range(25):
        m = int(rng.integers(3, 60))
        psi = rng.uniform(0.01, 2, m)
        if rng.random() < 0.3:
            psi = np.round(psi, 1)
        k = float(rng.uniform(1.0, min(m - 1, 6)))
        mu, sigma, gamma = 10 ** rng.uniform(-1, 1, 3)
        kw = dict(mu=mu, sigma=sigma, gamma=gamma, k=k)
        oracle, _ = P._oracle(psi, mu, sigma, gamma, k, "auto", floor=0.0)
        G = _Groups.of(np.sort(gamma * psi))
        U = len(G.v)
        kernels = payment_oracles._payment_kernels(offline._kernel())
        cells = payment_oracles._capped_cells(kernels, G, 1.0 / (k / m), sigma / mu**2, 0.0, False)
        kept = set(zip(*(x.tolist() for x in cells), strict=True))
        assert len(kept) == oracle.ncells
        for _ in range(8):
            i, p = int(rng.integers(m)), float(rng.uniform(0, 2.5))
            q = psi.copy()
            q[i] = p
            res = solve(q, **kw, backend="numpy")
            a, x = res.a, gamma * q
            band = np.flatnonzero((a > 0) & (a < k / m * (1 - 1e-9)))
            if band.size == 0:  # the greedy allocation: no band, computed apart
                continue
            # (lam, tau) of the moved market from its allocation: rho = ||a|| sqrt(s / x.a)
            rho = np.linalg.norm(a) * np.sqrt(sigma / mu**2 / np.dot(a[a > 0], x[a > 0]))
            lam = x[band[0]] + a[band[0]] / rho
            n = int(np.searchsorted(G.v, lam, "left"))
            c = int(np.searchsorted(G.v, lam - k / m / rho, "right"))
            assert 0 <= c <= n <= U
            misses += (c, n) not in kept
    assert misses == 0


@pytest.mark.parametrize(
    "dist, m, sigma", [(UNIFORM, 4000, 1.0), (BETA, 3000, 1.0), (TRUNCNORM, 3000, 0.01)]
)
def test_interpolated_integrals_equal_the_integrated_ones(dist, m, sigma, monkeypatch):
    """Sellers deep at the cap: interpolated in the cost, as integrated one by one."""
    c = dist.sample(m, np.random.default_rng(m))
    kw = dict(mu=1.0, sigma=sigma, gamma=1.0, k=5.0)
    oracle, _ = P._oracle(dist.virtual_cost(c), 1.0, sigma, 1.0, 5.0, "auto")
    e1, t1 = offline_payments(c, dist, **kw)
    deep = (e1 > 0) & (dist.virtual_cost(c) < oracle.smooth_below)
    assert deep.sum() > 2 * P._SMOOTH_MIN  # the interpolation was used
    monkeypatch.setattr(P, "_SMOOTH_MIN", 10**9)
    e2, t2 = offline_payments(c, dist, **kw)
    np.testing.assert_array_equal(e1, e2)
    np.testing.assert_allclose(t1, t2, rtol=1e-13, atol=0)


def test_a_kink_in_the_interpolated_integral_is_split_not_smoothed():
    """An integral that is not one polynomial: the interval is halved until each piece
    passes its held-out sellers, and an interval too small is integrated seller by seller."""
    c = np.sort(np.random.default_rng(0).uniform(0, 1, 400))
    calls = []

    def exact(pos):
        calls.append(pos.size)
        return np.abs(c[pos] - 0.5) ** 1.5  # a kink of the second derivative at 0.5

    got = P._smooth_integrals(exact, c, np.ones(c.size))
    np.testing.assert_allclose(got, np.abs(c - 0.5) ** 1.5, rtol=0, atol=1e-13)
    assert sum(calls) < c.size  # still fewer exact integrals than sellers
    assert len(calls) > 2  # but more than one level of intervals


def test_capped_curves_match_payments_and_seller_utility():
    """OfflineCurves with a cap (seller i's whole curve, candidates below its report too)
    gives the payments and seller_utility's numbers."""
    c, kw = _draw(7, UNIFORM, max_m=8)
    curves = OfflineCurves(c, UNIFORM, **kw)
    eps, pay = offline_payments(c, UNIFORM, **kw)
    np.testing.assert_allclose(curves.payments_at(c[:, None])[:, 0], pay, rtol=1e-12, atol=0)
    Z = np.column_stack([np.full(c.size, 1e-3), 0.5 * c, c, np.minimum(1.3 * c, 1.0)])
    U = curves.utilities(Z, c)
    for i in range(c.size):
        for j in range(Z.shape[1]):
            assert U[i, j] == pytest.approx(
                seller_utility(i, Z[i, j], c[i], c, UNIFORM, **kw), abs=1e-12
            )


def test_without_numba_capped_payments_fall_back_to_resolving(monkeypatch):
    c, kw = _draw(3, UNIFORM, max_m=10)
    ref = offline_payments(c, UNIFORM, **kw, method="resolve")[1]
    monkeypatch.setattr(offline, "_kernel", lambda: None)
    monkeypatch.setattr(offline, "_kernel_error", "ImportError: numba (simulated)")
    np.testing.assert_array_equal(offline_payments(c, UNIFORM, **kw)[1], ref)
    with pytest.raises(MarketSimError, match="needs numba.*simulated"):
        offline_payments(c, UNIFORM, **kw, method="pruned")


def test_capped_kernel_that_fails_to_compile_falls_back_with_one_warning(monkeypatch):
    c, kw = _draw(3, UNIFORM, max_m=10)
    ref = offline_payments(c, UNIFORM, **kw, method="resolve")[1]

    def broken(*args, **kwargs):
        raise TypeError("a numba typing error (simulated)")

    monkeypatch.setattr(P, "_CappedOracle", broken)
    monkeypatch.setattr(P, "_capped_kernel_warned", False)
    with pytest.warns(RuntimeWarning, match="capped payment oracle failed.*simulated"):
        np.testing.assert_array_equal(offline_payments(c, UNIFORM, **kw)[1], ref)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # said once
        offline_payments(c, UNIFORM, **kw)
    with pytest.raises(TypeError, match="simulated"):
        offline_payments(c, UNIFORM, **kw, method="pruned")
