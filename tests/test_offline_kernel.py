"""The compiled offline kernel (``_offline_kernel``) against the numpy reference solver,
and the fallback to numpy when numba is missing or broken."""

import importlib.util
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_sim.errors import MarketSimError
from market_sim.mechanisms import offline
from market_sim.mechanisms.offline import solve

HAS_NUMBA = importlib.util.find_spec("numba") is not None
needs_numba = pytest.mark.skipif(not HAS_NUMBA, reason="numba is not installed")
REL = 1e-12


def markets(max_m=40):
    """(psi, mu, sigma, gamma, k): ties, +inf costs, m = 1, 2, hyperparameters 1e-6..1e6."""
    value = st.one_of(st.floats(0.01, 3.0), st.sampled_from([0.5, 1.0, 1.5, np.inf]))
    hyper = st.one_of(
        st.floats(0.05, 20.0),
        st.builds(lambda e, f: f * 10.0**e, st.integers(-6, 6), st.floats(1.0, 9.99)),
    )
    return st.tuples(
        st.lists(value, min_size=1, max_size=max_m).map(np.array),
        hyper,
        hyper,
        hyper,
        st.one_of(st.none(), st.floats(1.0, 4.0)),
    )


def both(psi, **kw):
    """(numpy result, kernel result), or the two error messages."""
    out = []
    for backend in ("numpy", "numba"):
        try:
            out.append(solve(psi, **kw, backend=backend))
        except MarketSimError as exc:
            out.append(str(exc))
    return out


def assert_same(ref, got):
    """Kernel result equals the reference to ~1e-12 relative (eps, a, eta, cut-off, loss)."""
    if isinstance(ref, str) or isinstance(got, str):
        assert ref == got
        return
    scale = ref.eps.max()
    np.testing.assert_allclose(got.eps, ref.eps, rtol=REL, atol=REL * scale)
    np.testing.assert_allclose(got.a, ref.a, rtol=REL, atol=REL * ref.a.max())
    assert got.eta == pytest.approx(ref.eta, rel=REL)
    assert got.proxy_loss == pytest.approx(ref.proxy_loss, rel=REL)
    assert got.lam == pytest.approx(ref.lam, rel=REL) or got.lam == ref.lam == np.inf
    assert got.n_bought == ref.n_bought


@needs_numba
@settings(max_examples=300)
@given(markets())
def test_kernel_equals_numpy_on_drawn_markets(case):
    psi, mu, sigma, gamma, k = case
    ref, got = both(psi, mu=mu, sigma=sigma, gamma=gamma, k=k)
    assert_same(ref, got)


@needs_numba
@settings(max_examples=60)
@given(
    st.integers(0, 2**32 - 1), st.sampled_from([None, 1.0, 1.7, 5.0]), st.sampled_from([0, 1, 2])
)
def test_kernel_equals_numpy_on_larger_markets(seed, k, ties):
    """Markets of 50..3000 sellers: continuous, rounded (many ties) or two clusters."""
    rng = np.random.default_rng(seed)
    m = int(rng.integers(50, 3000))
    psi = rng.uniform(0.01, 2.0, m)
    if ties == 1:
        psi = np.round(psi, 2)
    elif ties == 2:
        psi *= rng.choice([1.0, 30.0], m)
    mu, sigma, gamma = 10.0 ** rng.uniform(-2, 2, 3)
    ref, got = both(psi, mu=mu, sigma=sigma, gamma=gamma, k=k)
    assert_same(ref, got)


@needs_numba
@pytest.mark.parametrize(
    "psi, k",
    [
        ([0.5], None),
        ([0.5, 0.2], None),
        ([0.5, 0.2], 1.0),
        ([0.3] * 7, None),
        ([0.3] * 7, 2.0),
        ([0.2, np.inf, 0.4, np.inf], None),
        ([0.2, np.inf, 0.4, np.inf], 1.5),
        ([0.0, 1.0], None),
        ([0.0, 0.0, 0.5], None),
        ([-0.01, 1.0, 1.0, 2.0], None),
        ([0.5, np.inf, np.inf], 1.0),
        ([np.inf, np.inf], None),
    ],
)
def test_kernel_equals_numpy_at_the_edges(psi, k):
    """m = 1, 2, equal costs (the greedy allocation), +inf, zero and negative virtual costs,
    and the errors, which must be the same."""
    psi = np.array(psi)
    for sigma in (1e-6, 1.0, 1e6):
        ref, got = both(psi, mu=1.0, sigma=sigma, gamma=1.0, k=k)
        assert_same(ref, got)


@needs_numba
@pytest.mark.parametrize("which", ["mu", "sigma", "gamma"])
@pytest.mark.parametrize("scale", [1e-6, 1e-3, 1e3, 1e6])
@pytest.mark.parametrize("k", [None, 3.0])
def test_kernel_equals_numpy_at_extreme_hyperparameters(which, scale, k):
    psi = np.random.default_rng(2).uniform(0.01, 1, 1000)
    kw = dict(mu=1.0, sigma=1.0, gamma=1.0, k=k)
    kw[which] = scale
    ref, got = both(psi, **kw)
    assert not isinstance(ref, str)
    assert_same(ref, got)


@needs_numba
def test_auto_uses_the_kernel_from_the_threshold_on():
    rng = np.random.default_rng(11)
    psi = np.round(rng.uniform(0.01, 1, offline.KERNEL_MIN_M), 3)
    for k in (None, 4.0):
        auto = solve(psi, mu=1, sigma=1, gamma=1, k=k)
        kern = solve(psi, mu=1, sigma=1, gamma=1, k=k, backend="numba")
        np.testing.assert_array_equal(auto.eps, kern.eps)
        assert_same(solve(psi, mu=1, sigma=1, gamma=1, k=k, backend="numpy"), auto)
    small = psi[:100]
    np.testing.assert_array_equal(
        solve(small, mu=1, sigma=1, gamma=1).eps,
        solve(small, mu=1, sigma=1, gamma=1, backend="numpy").eps,
    )


@needs_numba
def test_strided_read_only_and_integer_input():
    rng = np.random.default_rng(4)
    psi = rng.uniform(0.1, 2, 600)
    assert_same(
        solve(psi[::3], mu=1, sigma=1, gamma=2, backend="numpy"),
        solve(psi[::3], mu=1, sigma=1, gamma=2, backend="numba"),
    )
    frozen = psi.copy()
    frozen.flags.writeable = False
    assert_same(
        solve(psi, mu=1, sigma=1, gamma=2, k=3, backend="numpy"),
        solve(frozen, mu=1, sigma=1, gamma=2, k=3, backend="numba"),
    )
    ints = [3, 1, 4, 1, 5, 9, 2, 6]
    assert_same(
        solve(ints, mu=2, sigma=3, gamma=1, k=2, backend="numpy"),
        solve(ints, mu=2, sigma=3, gamma=1, k=2, backend="numba"),
    )


@needs_numba
@pytest.mark.parametrize("ties", [False, True])
def test_galloping_staircase_equals_the_bisection(ties):
    """c*(j) of the kernel's galloping search equals offline._staircase for every j,
    from the previous answer and from arbitrary starting guesses."""
    from market_sim.mechanisms import _offline_kernel as K

    rng = np.random.default_rng(7)
    xs = np.sort(rng.uniform(0, 1, 2000) * rng.choice([1.0, 10.0], 2000))
    if ties:
        xs = np.round(xs, 2)
    G = offline._Groups.of(xs)
    U = len(G.v)
    for k in (1.0, 3.0, 40.0):
        Q = xs.size / k
        ref = offline._staircase(G, Q)
        prev = 0
        got = []
        for j in range(1, U + 2):
            prev = K.cstar(j, prev, G.v, G.Nw, G.S1, U, Q, G.ref)
            got.append(prev)
        np.testing.assert_array_equal(got, ref)
        for j in rng.integers(1, U + 2, 50):
            guess = int(rng.integers(0, U + 1))
            assert K.cstar(int(j), guess, G.v, G.Nw, G.S1, U, Q, G.ref) == ref[j - 1]


def test_fallback_to_numpy_warns_once(monkeypatch):
    """If numba cannot be imported or compiled, auto falls back to numpy with one warning,
    and backend='numba' is an error."""

    def broken():
        raise ImportError("no module named numba (simulated)")

    monkeypatch.setattr(offline, "_import_kernel", broken)
    monkeypatch.setattr(offline, "_kernel_state", None)
    monkeypatch.setattr(offline, "KERNEL_MIN_M", 1)
    psi = np.random.default_rng(9).uniform(0.05, 2, 300)
    with pytest.warns(RuntimeWarning, match="numpy solver"):
        first = solve(psi, mu=1, sigma=1, gamma=1, k=2.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        second = solve(psi, mu=1, sigma=1, gamma=1)
    np.testing.assert_array_equal(
        first.eps, solve(psi, mu=1, sigma=1, gamma=1, k=2.0, backend="numpy").eps
    )
    np.testing.assert_array_equal(
        second.eps, solve(psi, mu=1, sigma=1, gamma=1, backend="numpy").eps
    )
    with pytest.raises(MarketSimError, match="numba.*unavailable.*simulated"):
        solve(psi, mu=1, sigma=1, gamma=1, backend="numba")
    with pytest.raises(MarketSimError, match="unknown backend"):
        solve(psi, mu=1, sigma=1, gamma=1, backend="cuda")


def test_fallback_without_numba_in_a_fresh_process():
    """A real ImportError: numba blocked in sys.modules; auto still solves, warns once."""
    code = (
        "import sys, warnings; sys.modules['numba'] = None\n"
        "import numpy as np\n"
        "from market_sim.mechanisms import offline\n"
        "psi = np.random.default_rng(1).uniform(0.05, 2, offline.KERNEL_MIN_M)\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    r = [offline.solve(psi, mu=1, sigma=1, gamma=1, k=k) for k in (None, 3.0, None)]\n"
        "ref = offline.solve(psi, mu=1, sigma=1, gamma=1, backend='numpy')\n"
        "assert np.array_equal(r[0].eps, ref.eps) and np.array_equal(r[2].eps, ref.eps)\n"
        "print(len([x for x in w if 'numpy solver' in str(x.message)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "1"


def _uncapped_cells(xs, s):
    """Per cell n of sorted xs (c = 0): (pre-screen drops it, cell_loss's loss)."""
    from market_sim.mechanisms import _offline_kernel as K

    G = offline._Groups.of(xs)
    ref, U = G.ref, len(G.v)
    scale = 1e-9 * (abs(ref) + abs(G.v[-1]) + 1e-300)
    out = []
    for n in range(1, U + 1):
        v, v_next = G.v[n - 1], (G.v[n] if n < U else np.inf)
        N, S1, S2 = G.Nw[n], G.S1[n], G.S2[n]
        drop = K._uncapped_keeps_sign(N, S1, S2, v - ref, v_next - ref, ref, s, scale)
        loss = K.cell_loss(
            0.0, N, 0.0, 0.0, S1, S2, ref, 1.0, s, v, v_next, -np.inf, -np.inf, scale, 0.0, False
        )[0]
        out.append((drop, loss))
    return out


def _drawn_market(rng, trial, m):
    """(sorted values, s): U[0, 1] values, rounded to 0.1 (ties) every third trial,
    shifted by 0, -0.3 (negative values) or 5 and scaled by 1e-6..1e6; s = sigma / mu^2
    over 1e-4..1e4 relative to the scale."""
    base = rng.uniform(0, 1, m)
    if trial % 3 == 1:
        base = np.round(base, 1)
    scale_x = 10.0 ** rng.uniform(-6, 6)
    xs = np.sort((base + rng.choice([0.0, -0.3, 5.0])) * scale_x)
    return xs, 10.0 ** rng.uniform(-4, 4) / scale_x


def _drops(cells):
    """(cells with a root, cells dropped) of (dropped, loss) pairs; a dropped cell with a
    root (a finite loss) fails the test."""
    roots = dropped = 0
    for drop, loss in cells:
        dropped += drop
        if np.isfinite(loss):
            roots += 1
            assert not drop
    return roots, dropped


@needs_numba
def test_uncapped_pre_screen_never_drops_a_cell_with_a_root():
    """The division-free pre-screen of ``uncapped_best`` drops only cells whose screen and
    roots find nothing (so the kernel's choice is the reference's), on cells built to
    sit on the edge: the next value placed at the cell's own root lam (1 + delta),
    |delta| down to 1e-13, so that the root is at the end of its interval; scales 1e-6 to
    1e6, negative values, ties.  It must also drop almost every other cell (else the
    kernel is no faster)."""
    from market_sim.mechanisms import _offline_kernel as K

    rng = np.random.default_rng(47)
    roots = 0
    for trial in range(40):
        xs, s = _drawn_market(rng, trial, int(rng.integers(2, 30)))
        G = offline._Groups.of(xs)
        N, d1 = G.Nw[-1], G.S1[-1] / G.Nw[-1]
        V = max(G.S2[-1] / N - d1 * d1, 0.0)
        m1 = d1 + G.ref
        for u in K.positive_roots(s * N, s * N * V - m1, V):
            if not u > 0:
                continue
            for delta in (-1e-9, -1e-13, 0.0, 1e-13, 1e-9, 1e-3):
                nxt = (m1 + u) * (1 + delta) if m1 + u != 0 else delta
                if nxt > xs[-1]:
                    extended = np.append(xs, [nxt, nxt + abs(nxt) + 1.0])
                    roots += _drops(_uncapped_cells(extended, s))[0]
    assert roots >= 100
    cells = _uncapped_cells(np.sort(rng.uniform(0, 2, 3000)), 1.0)
    assert _drops(cells)[1] >= 0.99 * len(cells)


def _capped_cells(rng):
    """Every cell (c < n) of 120 small drawn markets (``_drawn_market``; caps from 1.05
    to 10 sellers' share): per cell (G, kappa, s, scale, the arguments ``cell_loss`` and
    ``_capped_keeps_sign`` share, (v_n, v_next, v_c, v_c1))."""
    for trial in range(120):
        m = int(rng.integers(4, 40))
        xs, s = _drawn_market(rng, trial, m)
        kappa = rng.uniform(1.05, 10.0) / m
        G = offline._Groups.of(xs)
        ref, v, U = G.ref, G.v, len(G.v)
        scale = 1e-9 * (abs(ref) + abs(v[-1]) + 1e-300)
        for n in range(1, U + 1):
            v_n, v_next = v[n - 1], (v[n] if n < U else np.inf)
            for c in range(n):
                Nc = G.Nw[c]
                v_c = v[c - 1] if c > 0 else -np.inf
                args = (Nc, G.Nw[n] - Nc, G.S1[c], G.S2[c], G.S1[n], G.S2[n], ref, kappa, s)
                yield G, kappa, s, scale, args, (v_n, v_next, v_c, v[c])


@needs_numba
def test_capped_pre_screen_never_drops_a_cell_with_a_root():
    """The same for ``capped_best``'s pre-screen over every cell (c < n) of small markets
    (ties, scales 1e-6 to 1e6, negative values, caps from 1.05 to 10 sellers' share)."""
    from market_sim.mechanisms import _offline_kernel as K

    cells = []
    for G, _, _, scale, args, ends in _capped_cells(np.random.default_rng(48)):
        drop = K._capped_keeps_sign(*args, *(e - G.ref for e in ends), scale)
        loss = K.cell_loss(*args, *ends, scale, 0.0, True)[0]
        cells.append((drop, loss))
    roots, dropped = _drops(cells)
    assert roots >= 100
    assert dropped >= 0.8 * len(cells)


@needs_numba
def test_capped_lam_end_bounds_every_cell_with_a_root():
    """``capped_best`` stops at cut-offs above ``capped_lam_end`` (its docstring proves no
    KKT point lies there): on the pre-screen test's markets (ties, scales 1e-6 to 1e6,
    negative values, caps from 1.05 to 10 sellers' share) the root of every cell (c, n),
    c < n, in which ``cell_loss`` finds one (the reference's candidates) lies below it;
    on U[0, 1] with k = 5 it leaves out most groups (the speed)."""
    from market_sim.mechanisms import _offline_kernel as K

    roots = 0
    for G, kappa, s, scale, args, ends in _capped_cells(np.random.default_rng(49)):
        loss, u = K.cell_loss(*args, *ends, scale, 0.0, True)
        if np.isfinite(loss):
            roots += 1
            end = K.capped_lam_end(G.v, G.Nw, len(G.v), 1.0 / kappa, s)
            Nc, N, S1c, _, S1n = args[:5]
            assert (S1n - S1c) / N + G.ref + u < end + scale  # lam = mean of the band + u
    assert roots >= 100
    v = np.sort(np.random.default_rng(0).uniform(0, 2, 3000))
    end = K.capped_lam_end(v, np.arange(3001.0), 3000, 3000 / 5, 1.0)
    assert np.mean(v <= end) < 0.3


@needs_numba
def test_fused_first_pass_checks_and_filters_like_numpy():
    """The kernel's one pass over psi (``scaled_finite``) refuses NaN and -inf with the
    numpy path's message and drops what gamma psi sends to +inf (psi = inf, or 1e308
    times gamma = 10) as the numpy path's filter does."""
    psi = np.random.default_rng(5).uniform(0, 1, 600)
    for bad in (np.nan, -np.inf):
        wrong = psi.copy()
        wrong[7] = bad
        ref, got = both(wrong, mu=1.0, sigma=1.0, gamma=1.0)
        assert ref == got == "virtual costs must not be NaN or -inf"
    huge = psi.copy()
    huge[[3, 9]] = np.inf, 1e308
    with np.errstate(over="ignore"):
        ref, got = both(huge, mu=1.0, sigma=1.0, gamma=10.0, k=2.0)
    assert_same(ref, got)
    assert got.eps[3] == got.eps[9] == 0.0
