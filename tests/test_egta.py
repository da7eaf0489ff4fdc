"""Empirical games: the meta-game solver on games with known
equilibria, the deviation-preserving reduction, the market, and `market-sim egta`."""

import itertools
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from market_sim.cli import main
from market_sim.errors import MarketSimError
from market_sim.games.egta import (
    SymmetricGame,
    _compositions,
    _seeds,
    _table_regrets,
    dpr_exact,
    dpr_game,
    dpr_support,
    egta,
    equilibrium_regret_bounds,
    find_equilibria,
    gain_noise,
    gains,
    linear_game,
    regret_test,
    regret_upper_bounds,
)

DIST = "uniform:1:5"
TS = ["truthful", "shade:factor=1.3"]
# one-shot games, many cost draws per seed: new costs every round, static strategies
FAST = {"rounds": 30, "new_costs_each_round": True, "n_boot": 200}


def two_player(table) -> SymmetricGame:
    """A 2-player symmetric game from its row player's matrix A[s, t]."""
    A = np.asarray(table, dtype=float)

    def payoff(p):  # p: counts; a player of s meets the other player's strategy
        out = np.full(len(p), np.nan)
        for s in np.flatnonzero(p):
            other = p.copy()
            other[s] -= 1
            out[s] = A[s, int(np.flatnonzero(other)[0])]
        return out

    return SymmetricGame.from_function([f"s{i}" for i in range(len(A))], 2, payoff)


# ---- the equilibrium finder on known games --------------------------------------------
def test_hawk_dove_mixed_equilibrium():
    V, C = 2.0, 3.0  # ESS: hawk with probability V / C
    g = two_player([[(V - C) / 2, V], [0.0, V / 2]])
    eqs = find_equilibria(g)
    assert len(eqs) == 1
    x, r = eqs[0]
    np.testing.assert_allclose(x, [V / C, 1 - V / C], atol=1e-6)
    assert r < 1e-9
    # at the mixture both strategies earn the same; at the pure profiles a deviation pays
    u = g.deviation_payoffs(x)
    assert u[0] == pytest.approx(u[1], abs=1e-8)
    assert g.regret([1, 0]) == pytest.approx(0 - (V - C) / 2)  # dove against hawks
    assert g.regret([0, 1]) == pytest.approx(V - V / 2)  # hawk against doves


def test_dominant_strategy_is_the_only_equilibrium():
    g = two_player([[3, 0], [5, 1]])  # prisoner's dilemma: s1 (defect) dominates
    eqs = find_equilibria(g)
    assert len(eqs) == 1
    np.testing.assert_allclose(eqs[0][0], [0, 1])
    assert eqs[0][1] == 0
    assert g.regret([1, 0]) == pytest.approx(5 - 3)


def test_coordination_game_has_both_pure_equilibria():
    g = two_player([[2, 0], [0, 1]])  # mixed equilibrium at x0 = 1/3 is unstable
    eqs = sorted(find_equilibria(g), key=lambda e: -e[0][0])
    assert len(eqs) == 2
    np.testing.assert_allclose(eqs[0][0], [1, 0])
    np.testing.assert_allclose(eqs[1][0], [0, 1])
    assert g.regret([1 / 3, 2 / 3]) == pytest.approx(0, abs=1e-12)
    assert g.regret([0.5, 0.5]) > 0.1


def test_rock_paper_scissors_centre():
    g = two_player([[0, -1, 1], [1, 0, -1], [-1, 1, 0]])
    eqs = find_equilibria(g)
    assert len(eqs) == 1
    np.testing.assert_allclose(eqs[0][0], [1 / 3] * 3, atol=1e-9)
    assert all(g.regret(v) == pytest.approx(1) for v in np.eye(3))


def test_deviation_payoffs_match_enumeration():
    """u_s(x) of a 4-player game with nonlinear payoffs, against the sum over every
    pure choice of the 3 others."""
    rng = np.random.default_rng(3)
    table = {}

    def payoff(p):
        table.setdefault(tuple(p), rng.normal(size=3))
        return table[tuple(p)]

    g = SymmetricGame.from_function(["a", "b", "c"], 4, payoff)
    x = np.array([0.2, 0.5, 0.3])
    want = np.zeros(3)
    for s in range(3):
        for others in itertools.product(range(3), repeat=3):
            counts = np.bincount(others, minlength=3)
            prob = np.prod(x[list(others)])
            counts[s] += 1
            want[s] += prob * table[tuple(counts)][s]
    np.testing.assert_allclose(g.deviation_payoffs(x), want, rtol=1e-12)
    assert g.regret(x) == pytest.approx(want.max() - x @ want)


def test_game_input_checks():
    prof = np.array([[2, 0], [1, 1], [0, 2]])
    with pytest.raises(MarketSimError, match="every profile"):
        SymmetricGame(("a", "b"), 2, prof[:2], np.zeros((2, 2)))
    with pytest.raises(MarketSimError, match="finite payoff"):
        SymmetricGame(("a", "b"), 2, prof, np.full((3, 2), np.nan))
    g = two_player([[1, 0], [0, 1]])
    with pytest.raises(MarketSimError, match="sum to 1"):
        g.regret([0.5, 0.2])


# ---- the deviation-preserving reduction ----------------------------------------------------
def test_dpr_support_counts():
    # N - 1 = 12 = 4 (n - 1): exact; one seller plays s, the others scale by 4
    for reduced, s, full in (([2, 2], 0, [5, 8]), ([2, 2], 1, [8, 5]), ([4, 0], 0, [13, 0])):
        w, rows = dpr_support(reduced, s, 13, 4)
        np.testing.assert_array_equal(w, [1.0])
        np.testing.assert_array_equal(rows, [full])
    assert dpr_exact(13, 4) and not dpr_exact(20, 4) and not dpr_exact(12, 4)
    # N - 1 = 19 over 3: the others (1, 2) x 19/3 = (6.33, 12.67) = 2/3 (6, 13) + 1/3 (7, 12)
    w, rows = dpr_support([2, 2], 0, 20, 4)
    order = np.argsort(rows[:, 0])
    np.testing.assert_allclose(w[order], [2 / 3, 1 / 3])
    np.testing.assert_array_equal(rows[order], [[7, 13], [8, 12]])
    # in general: integer splits of N, s played, weights summing to 1, mean = the DPR target
    for N, n in ((20, 4), (50, 5), (7, 3), (12, 4), (12, 5)):
        for p in _compositions(n, 3):
            for s in np.flatnonzero(p):
                w, rows = dpr_support(p, s, N, n)
                assert np.all(rows.sum(axis=1) == N) and np.all(rows[:, s] >= 1)
                assert rows.min() >= 0 and w.min() > 0 and w.sum() == pytest.approx(1)
                target = (p - np.eye(3)[s]) * (N - 1) / (n - 1) + np.eye(3)[s]
                np.testing.assert_allclose(w @ rows, target, atol=1e-12)
                assert len(w) == 1 or not dpr_exact(N, n)
    # players = N: the full game itself
    np.testing.assert_array_equal(dpr_support([3, 2, 1], 2, 6, 6)[1], [[3, 2, 1]])
    with pytest.raises(MarketSimError, match="not played"):
        dpr_support([2, 0], 1, 13, 4)


@pytest.mark.parametrize("N, n", [(20, 4), (12, 4), (12, 3), (13, 4)])
def test_dpr_payoffs_equal_the_full_games_on_a_game_linear_in_counts(N, n):
    """u_s(full counts c) = a_s + b_s . (c - e_s), the others' counts, three strategies: the
    DPR's expected payoffs u_s(x) equal the full N-player game's at every mixture x (both
    are a_s + (N - 1) b_s . x), also when (N - 1)/(n - 1) is not an integer (N = 20 and 12
    with n = 4: rounding the scaled counts was off by up to 0.014 there)."""
    a = np.array([1.0, 1.2, 0.9])
    b = np.array([[-0.05, 0.02, 0.01], [0.03, -0.06, 0.0], [0.01, 0.04, -0.02]])

    def payoff(c):
        c = np.asarray(c, dtype=float)
        return a + (b @ c) - np.diag(b)  # the others: c - e_s

    full = SymmetricGame.from_function(list("abc"), N, payoff)
    reduced = dpr_game(list("abc"), N, n, payoff)
    x = np.random.default_rng(0).dirichlet(np.ones(3), 25)
    np.testing.assert_allclose(reduced.deviation_payoffs(x), full.deviation_payoffs(x), atol=1e-12)
    np.testing.assert_allclose(full.deviation_payoffs(x), a + (N - 1) * x @ b.T, atol=1e-12)


def test_dpr_keeps_the_equilibrium_of_a_linear_game():
    """Full game of N = 13: u_A = 1 - (share of the others playing A), u_B = 0.3.
    Symmetric equilibrium: E[share] = x_A = 0.7; DPR to 4 players is exact here."""
    N = 13

    def full(p):
        return [1 - (p[0] - 1) / (N - 1), 0.3]

    g = dpr_game(["A", "B"], N, 4, full)
    eqs = find_equilibria(g)
    assert len(eqs) == 1
    np.testing.assert_allclose(eqs[0][0], [0.7, 0.3], atol=1e-6)
    # reduced payoffs: u_A(p) = 1 - (p_A - 1)/3 exactly
    for p, u in zip(g.profiles, g.payoffs, strict=True):
        if p[0]:
            assert u[0] == pytest.approx(1 - (p[0] - 1) / 3)
    # the full game (players = N) agrees with the function itself
    whole = dpr_game(["A", "B"], N, N, full)
    ref = SymmetricGame.from_function(["A", "B"], N, full)
    np.testing.assert_array_equal(whole.payoffs, ref.payoffs)


# ---- the market ---------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "mechanism, samples, kw",
    [("posted-price", 4, FAST), ("offline", 10, {"n_boot": 200})],  # offline: one round
)
def test_ic_mechanism_truth_is_the_equilibrium(mechanism, samples, kw):
    """Under a posted price and the offline mechanism truth is dominant: all-truthful has
    regret 0, its interval [0, q] narrower than the gain of truth against shading, and
    shading everybody is not an equilibrium (a truthful seller gains; with 10 seeds the
    test rejects it at 2.5%; 4 seeds, a t with 3 degrees of freedom, are too few)."""
    r = egta(mechanism, DIST, 8, TS, samples, seed=0, **kw)
    assert [e.mixture for e in r.equilibria] == [{"truthful": 1.0, "shade:factor=1.3": 0.0}]
    e = r.equilibria[0]
    shade = {"shade:factor=1.3": 1}
    assert e.regret == 0 and e.regret_ci[0] == 0 and e.regret_ci[1] < r.regret(shade)
    assert r.regret(shade) > 0.005
    assert samples < 10 or r.regret_ci(shade)[0] > 0
    # payoffs: mean utilities, >= 0 under an IR mechanism; truthful payoff in the
    # all-truthful profile averages all 8 sellers
    t = r.table()
    assert (t.payoff >= 0).all() and len(t) == 8
    row = t[(t["players[truthful]"] == 4) & (t.strategy == "truthful")].iloc[0]
    assert row.sellers == 8 and row.share == 1 and row.samples == samples


def test_pay_as_bid_truth_is_not_an_equilibrium():
    r = egta("pay-as-bid", DIST, 8, TS, 4, seed=0, **FAST)
    # a truthful seller is paid its cost: utility exactly 0 in every profile
    t = r.table()
    assert (t[t.strategy == "truthful"].payoff == 0).all()
    lo, hi = r.regret_ci({"truthful": 1})
    assert r.regret({"truthful": 1}) > 0 and 0 < lo <= hi
    assert all(e.mixture["truthful"] < 1 for e in r.equilibria)
    assert r.equilibria[0].mixture == {"truthful": 0.0, "shade:factor=1.3": 1.0}


def test_seeded_reproducibility():
    # 4 samples: with 3, both seeds can leave every shading deviator unbought (all 0)
    a = egta("pay-as-bid", DIST, 6, TS, 4, seed=5, players=3, rounds=2, n_boot=50)
    b = egta("pay-as-bid", DIST, 6, TS, 4, seed=5, players=3, rounds=2, n_boot=50)
    c = egta("pay-as-bid", DIST, 6, TS, 4, seed=6, players=3, rounds=2, n_boot=50)
    np.testing.assert_array_equal(a.sample_payoffs, b.sample_payoffs)
    assert [e.as_dict() for e in a.equilibria] == [e.as_dict() for e in b.equilibria]
    assert not np.array_equal(np.nan_to_num(a.sample_payoffs), np.nan_to_num(c.sample_payoffs))
    # an rng gives the same numbers as the same rng again
    d = egta("pay-as-bid", DIST, 6, TS, 2, rng=np.random.default_rng(1), players=3, n_boot=20)
    e = egta("pay-as-bid", DIST, 6, TS, 2, rng=np.random.default_rng(1), players=3, n_boot=20)
    np.testing.assert_array_equal(d.sample_payoffs, e.sample_payoffs)


def test_common_random_numbers():
    """Seed k gives every market the same costs and the same seating.  Under a posted price
    a seller's utility depends on its own report and cost only: the truthful deviator's
    utility is the same in every market of a seed, and shading never beats it."""
    r = egta("posted-price", DIST, 8, TS, 12, seed=2, n_boot=10)
    Y, dev = r.sample_payoffs, r.deviator
    truthful, shade = Y[dev == 0], Y[dev == 1]
    # N - 1 = 7 over n - 1 = 3 is not an integer: the others (2, 1), (1, 2) x 7/3 need two
    # integer splits each, (3, 0) and (0, 3) one: 6 markets per deviating strategy
    assert truthful.shape == shade.shape == (6, 12)
    np.testing.assert_array_equal(truthful, np.broadcast_to(truthful[0], truthful.shape))
    assert np.all(shade <= truthful[0] + 1e-12)
    assert np.any(shade < truthful[0] - 1e-6) and np.any(truthful[0] > 0)
    # the reduced payoffs are the DPR's weighted means of the deviators' payoffs
    np.testing.assert_array_equal(r.full_profiles.sum(axis=1), 8)
    for i, p in enumerate(r.game.profiles):
        for s in range(2):
            w = r.weights[i, s]
            assert (w.sum() > 0) == (p[s] > 0)
            if p[s]:
                assert w.sum() == pytest.approx(1) and np.all(dev[w > 0] == s)
                target = (p - np.eye(2)[s]) * 7 / 3 + np.eye(2)[s]
                np.testing.assert_allclose(w @ r.full_profiles, target)
                assert r.game.payoffs[i, s] == pytest.approx(w @ Y.mean(axis=1))
    # the seatings: permutations, the deviator's seats spread evenly over every seat
    assert all(sorted(row) == list(range(8)) for row in r.seats)
    start = r.seats[0, 0]
    assert np.array_equal((r.seats[:, 0] - start) % 8, (np.arange(12) * 8) // 12)


def test_user_files_and_exact_pairing():
    """A user's mechanism file (uniform price: truthful in dominant strategies) and a user's
    strategy file.  With the same others and the same seed, the deviator earns at least as
    much truthfully as shading, in every sample: the pairing is exact."""
    root = Path(__file__).parent.parent / "examples"
    mech = f"{root}/uniform_price.py:UniformPrice:n_buy=3"
    shade = f"{root}/threshold_shading.py:ThresholdShading:quantile=0.5:factor=1.3"
    r = egta(mech, DIST, 7, ["truthful", shade], 10, seed=4, n_boot=100)  # 6/3: exact DPR
    assert r.mechanism == mech and r.reduction == "exact"
    others = {}
    for f, d in enumerate(r.deviator):
        key = tuple(r.full_profiles[f] - np.eye(2, dtype=int)[d])
        others.setdefault(key, {})[int(d)] = r.sample_payoffs[f]
    assert len(others) == 4 and all(len(v) == 2 for v in others.values())
    for pair in others.values():
        assert np.all(pair[0] >= pair[1] - 1e-12)
    assert any(np.any(p[0] > p[1] + 1e-9) for p in others.values())  # shading loses somewhere
    assert r.equilibria[0].mixture == {"truthful": 1.0, shade: 0.0}
    # truth beats shading or ties in every seed, yet its vertex's [0, q] is not [0, 0]: one
    # seed in ten losing a lot is a wide mean; a finite sample cannot prove a regret of 0
    assert r.regret({"truthful": 1}) == 0 and r.equilibria[0].regret_ci[1] > 0
    assert r.regret_test({"truthful": 1}).p_value == 1  # the test never rejects it


def test_no_seat_is_favoured(tmp_path):
    """Uniform price, k = 3, 8 sellers all reporting 2.25: the three lowest indices are
    bought (ties by index) at the 4th report, 2.25; seller 0 earns 2.25 - c every time,
    seats 3..7 nothing.  The strategy's payoff is the average over the seats (every seat
    deviates equally often: 16 samples = twice each), not seller 0's."""
    (tmp_path / "fixed.py").write_text(
        "import numpy as np\n"
        "from market_sim.agents.strategies import Strategy\n"
        "class Fixed(Strategy):\n"
        "    def report(self, agent, model):\n"
        "        return 2.25\n"
        "    def report_all(self, sellers, model):\n"
        "        return np.full(len(sellers.cost), 2.25)\n"
    )
    fixed = f"{tmp_path}/fixed.py:Fixed"
    mech, K = "uniform-price:n_buy=3:eps_level=1", 80
    r = egta(mech, "uniform:1:2.25", 8, [fixed, "truthful"], K, seed=0, n_boot=10)
    row = r.full_profiles[:, 0] == 8  # everybody fixed, the deviator too
    from market_sim.population import as_population

    pop = as_population("uniform:1:2.25", 8)
    costs = [pop.sample(np.random.default_rng(cs)).costs for cs in _seeds(0, None, K, 8)[3]]
    utilities = np.where(np.arange(8) < 3, 2.25 - np.array(costs), 0.0)  # (K, 8) by hand
    deviator = utilities[np.arange(K), r.seats[:, 0]]
    np.testing.assert_allclose(r.sample_payoffs[row][0], deviator, atol=1e-12)
    payoff = r.game.payoffs[0, 0]  # the reduced all-fixed profile
    se = deviator.std(ddof=1) / np.sqrt(K)
    seat_average, seller_0 = utilities.mean(), utilities[:, 0].mean()
    assert abs(payoff - seat_average) < 3 * se
    assert seller_0 - payoff > 10 * se  # seller 0 alone: 8/3 times as much


# d(x) = u_0(x) - u_1(x) = -0.1 + 0.19 x_1: the equilibrium x_1 = 10/19, regret 0.1 at all-s0
MIXED = linear_game([0.4, 0.5], [[0, 0.19 / 12], [0, 0]], 13)
X_MIXED = np.array([9 / 19, 10 / 19])


def noisy_seeds(true: SymmetricGame, rng, reps: int, K: int, sd: float) -> np.ndarray:
    """reps x K seed tables: the true table plus N(0, sd^2) per market (a reduced entry)."""
    noise = sd * rng.standard_normal((reps, K, *true.payoffs.shape))
    return np.where(true.profiles > 0, true.payoffs + noise, np.nan)


def test_the_closed_form_game():
    """The game the coverage tests use (13 sellers, 4 reduced players: DPR exact on a game
    linear in the counts, tested above): u_0(x) - u_1(x) = -0.1 + 12 (0.19/12) x_1, so the
    regret is 0.1 at all-s0, 0.09 at all-s1 and 0 at x_1 = 10/19 (and nowhere else)."""
    assert MIXED.regret([1, 0]) == pytest.approx(0.1, abs=1e-12)
    assert MIXED.regret([0, 1]) == pytest.approx(0.09, abs=1e-12)
    assert MIXED.regret(X_MIXED) == pytest.approx(0, abs=1e-12)
    (x, r), *rest = find_equilibria(MIXED)
    np.testing.assert_allclose(x, X_MIXED, atol=1e-6)
    assert not rest
    G = gains(MIXED, MIXED.payoffs, np.array([[1, 0], [0.3, 0.7]]))  # against u_s - x.u
    for g, x in zip(G, [[1, 0], [0.3, 0.7]], strict=True):
        u = MIXED.deviation_payoffs(x)
        np.testing.assert_allclose(g, u - np.dot(x, u), atol=1e-14)


def test_equilibrium_regret_interval_covers_at_its_level():
    """The issue's case: 13 sellers, 4 reduced players, noise sd 0.3 per market, K = 10
    seeds, the true equilibrium mixed (x_1 = 10/19).  The one-sided 95% interval [0, q]
    of the estimated equilibrium must cover its true regret (exact, from the true table)
    in >= 95% - 2.33 binomial sd of 200 runs (91.4%: a sound method fails this with
    probability < 1%).  The former bound (each replicate's own equilibrium) fails it: it
    misses whenever the estimate lands on the pure vertex of regret 0.1."""
    reps, K, level = 200, 10, 0.95
    floor = level - 2.33 * np.sqrt(level * (1 - level) / reps)
    rng = np.random.default_rng(11)
    Y = noisy_seeds(MIXED, rng, reps, K, 0.3)
    estimates = Y.mean(axis=1)
    xs = np.array([find_equilibria(replace_payoffs(MIXED, e))[0][0] for e in estimates])
    truth = np.array([MIXED.regret(x) for x in xs])
    new = np.array(
        [
            regret_upper_bounds(MIXED, y, x, seed=r)[0]
            for r, (y, x) in enumerate(zip(Y, xs, strict=True))
        ]
    )
    assert np.mean(truth <= new) >= floor, np.mean(truth <= new)
    # the former bound on the first 40 runs (it is slow: replicator dynamics per replicate)
    few, B = 40, 40
    w = rng.multinomial(K, np.full(K, 1 / K), size=(few, B)) / K
    tables = np.einsum("rbk,rkps->rbps", w, Y[:few])  # the seeds resampled
    old = equilibrium_regret_bounds(MIXED, estimates[:few], tables, xs[:few], level)
    few_floor = level - 2.33 * np.sqrt(level * (1 - level) / few)
    assert np.mean(truth[:few] <= old) < few_floor, np.mean(truth[:few] <= old)


def replace_payoffs(game: SymmetricGame, table) -> SymmetricGame:
    return SymmetricGame(game.strategies, game.players, game.profiles, table)


def test_a_true_mixed_equilibrium_passes_the_mixture_test():
    """At the true mixed equilibrium every gain G_s(x*) is 0: the test of "x* is an
    equilibrium" must reject at 5% in 5% of runs (within 2.33 binomial sd of 300), and
    regret_ci's lower end (a 2.5% test) be 0 in >= 97.5% - 2.33 sd.  The percentile
    interval of the regret under resampled seeds (the former regret_ci) has its lower end
    above 0 in every run: max_s of noisy gains is biased up."""
    reps, K = 300, 10
    rng = np.random.default_rng(5)
    Y = noisy_seeds(MIXED, rng, reps, K, 0.3)
    tests = [regret_test(MIXED, y, X_MIXED, seed=r) for r, y in enumerate(Y)]
    p = np.array([t.p_value for t in tests])
    sd = np.sqrt(0.05 * 0.95 / reps)
    assert 0.05 - 2.33 * sd <= np.mean(p < 0.05) <= 0.05 + 2.33 * sd, np.mean(p < 0.05)
    assert all((t.lower > 0) == (t.p_value < 0.05) for t in tests if abs(t.p_value - 0.05) > 0.01)
    two_sided = [regret_test(MIXED, y, X_MIXED, level=0.975, seed=r) for r, y in enumerate(Y)]
    assert np.mean([t.lower == 0 for t in two_sided]) >= 0.975 - 2.33 * np.sqrt(
        0.975 * 0.025 / reps
    )
    w = rng.multinomial(K, np.full(K, 1 / K), size=200) / K
    percentile_low = [
        np.quantile(
            _table_regrets(MIXED, np.einsum("bk,kps->bps", w, y), np.tile(X_MIXED, (200, 1))), 0.025
        )
        for y in Y[:50]
    ]
    assert all(lo > 0 for lo in percentile_low)


def test_the_max_t_p_value_of_two_strategies_is_a_t_test():
    """With two strategies and x interior, G_0 = x_1 d and G_1 = -x_0 d (d = u_0 - u_1),
    so max_s Ghat_s / se_s = |t|, t the one-sample t statistic of the seeds' d(x), and the
    p-value must be P(|t_{K-1}| >= |t|) (scipy), to Monte Carlo error of 20,000 draws."""
    from scipy import stats

    rng = np.random.default_rng(2)
    for K in (4, 10):
        y = noisy_seeds(MIXED, rng, 1, K, 0.3)[0]
        x = np.array([0.3, 0.7])
        d = np.array([np.diff(replace_payoffs(MIXED, t).deviation_payoffs(x))[0] for t in y])
        t_stat = abs(d.mean()) / (d.std(ddof=1) / np.sqrt(K))
        want = 2 * stats.t.sf(t_stat, K - 1)
        got = regret_test(MIXED, y, x, n_boot=20_000, seed=0).p_value
        assert got == pytest.approx(want, abs=4 * np.sqrt(want * (1 - want) / 20_000) + 1e-4)


def test_the_band_is_uniform_and_exact_where_the_seeds_agree():
    """The band over the simplex is at least the pointwise bound at every mixture (its
    critical value is a sup); a gain every seed agrees on has no noise (se 0), so a
    strategy better than the other by a constant in every seed keeps [0, 0] at its vertex
    and its exact regret elsewhere."""
    rng = np.random.default_rng(4)
    y = noisy_seeds(MIXED, rng, 1, 10, 0.3)[0]
    xs = np.array([[1, 0], [0.5, 0.5], [0.2, 0.8], [0, 1]])
    band = regret_upper_bounds(MIXED, y, xs, seed=1)
    pointwise = [regret_test(MIXED, y, x, seed=1).upper for x in xs]
    assert np.all(band >= np.array(pointwise) - 1e-12)
    for bad in (1.5, 0, "0.9"):
        with pytest.raises(MarketSimError, match="level must be a number in"):
            regret_test(MIXED, y, X_MIXED, level=bad)
    common = rng.normal(size=(10, 1, 1))  # a seed's shock shared by every entry
    prisoners = two_player([[3, 0], [5, 1]])  # s1 dominates by 1 or 2
    seeds = prisoners.payoffs + common
    np.testing.assert_allclose(gain_noise(prisoners, seeds, np.eye(2), 50, 0).se, 0, atol=1e-12)
    assert regret_upper_bounds(prisoners, seeds, [[0, 1], [1, 0]], seed=0) == pytest.approx([0, 2])
    t = regret_test(prisoners, seeds, [1, 0], seed=0)
    assert t.lower == t.upper == pytest.approx(2) and t.p_value == pytest.approx(1 / 1001)


def test_last_rounds_payoff_window():
    """Shade is static: its mean utility per round is the same whichever rounds are averaged
    when costs are fixed (new_costs_each_round False)."""
    a = egta("pay-as-bid", DIST, 5, TS, 2, seed=1, players=2, rounds=3, n_boot=10)
    b = egta("pay-as-bid", DIST, 5, TS, 2, seed=1, players=2, rounds=3, last_rounds=1, n_boot=10)
    np.testing.assert_allclose(a.sample_payoffs, b.sample_payoffs, equal_nan=True)
    assert a.last_rounds == 3 and b.last_rounds == 1


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"strategies": ["truthful"]}, "at least 2 strategies"),
        ({"strategies": ["truthful", "truthful"]}, "listed twice"),
        ({"strategies": ["truthful", "no-such-strategy"]}, "no-such-strategy"),
        ({"samples": 0}, "samples must be an integer >= 1"),
        ({"players": 1}, "players must be an integer >= 2"),
        ({"mechanism": "no-such-mechanism"}, "no-such-mechanism"),
        ({"mechanism": "data-dependent"}, "needs the sellers' data"),
        ({"rounds": 2, "last_rounds": 3}, "exceeds rounds"),
        ({"strategic_fraction": 0.5}, "sets strategic_fraction itself"),
    ],
)
def test_bad_input(kwargs, message):
    args = {"mechanism": "pay-as-bid", "strategies": TS, "samples": 1, **kwargs}
    with pytest.raises(MarketSimError, match=message):
        egta(args.pop("mechanism"), DIST, 4, args.pop("strategies"), args.pop("samples"), **args)


# ---- the command line --------------------------------------------------------------------------
def test_cli_writes_the_files(tmp_path, capsys):
    out = tmp_path / "eg"
    argv = ["egta", "--mechanism", "pay-as-bid", "--dist", DIST, "--sellers", "6"]
    argv += ["--strategy", "truthful", "--strategy", "shade:factor=1.3", "--strategy", "random"]
    argv += ["--samples", "2", "--seed", "3", "--players", "3", "--boot", "50"]
    assert main([*argv, "--out", str(out), "--quiet"]) == 0
    printed = capsys.readouterr().out
    assert "equilibria" in printed and "pure profiles" in printed
    eqs = json.loads((out / "equilibria.json").read_text())
    assert eqs and all(set(e) == {"mixture", "regret", "regret_ci"} for e in eqs)
    for e in eqs:
        assert set(e["mixture"]) == {"truthful", "shade:factor=1.3", "random"}
        assert sum(e["mixture"].values()) == pytest.approx(1)
        assert e["regret_ci"][0] <= e["regret_ci"][1] and e["regret"] >= 0
    t = pd.read_csv(out / "payoffs.csv")
    # 3 strategies, 3 reduced players: 10 profiles, 3 + 6 x 2 + 1 x 3 = 18 (profile, strategy) rows
    assert len(t) == 18 and t.profile.nunique() == 10
    assert {"strategy", "share", "sellers", "payoff", "sd", "samples"} <= set(t.columns)
    assert (t.samples == 2).all()
    assert (out / "egta.png").stat().st_size > 10_000
    summary = json.loads((out / "summary.json").read_text())
    assert summary["simulations"] == summary["full_profiles"] * 2 and summary["seed"] == 3
    assert summary["context"] == {}


@pytest.mark.parametrize("k", [2, 4])
def test_figure_and_files_for_two_and_four_strategies(tmp_path, k):
    specs = ["truthful", "shade:factor=1.1", "shade:factor=1.3", "shade:factor=1.6"][:k]
    r = egta("posted-price", DIST, 4, specs, 2, seed=0, players=2, n_boot=20)
    r.write(tmp_path)
    assert (tmp_path / "egta.png").stat().st_size > 10_000
    eqs = json.loads((tmp_path / "equilibria.json").read_text())
    assert [e["mixture"] for e in eqs] == [e.mixture for e in r.equilibria]
    assert len(pd.read_csv(tmp_path / "payoffs.csv")) == k + k * (k - 1)  # 2 players


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--strategy", "truthful"], "at least 2 strategies"),
        (["--strategy", "truthful", "--strategy", "nope", "--samples", "1"], "nope"),
        (["--strategy", "truthful", "--strategy", "shade", "--samples", "0"], "samples"),
        (
            ["--strategy", "truthful", "--strategy", "shade", "--mechanism", "no-such-mech"],
            "no-such-mech",
        ),
        (
            ["--strategy", "truthful", "--strategy", "shade", "--mechanism", "data-dependent"],
            "needs the sellers' data",
        ),
    ],
)
def test_cli_bad_input(tmp_path, capsys, extra, message):
    argv = ["egta", "--dist", DIST, "--sellers", "4", "--out", str(tmp_path / "x"), "--quiet"]
    if "--mechanism" not in extra:
        argv += ["--mechanism", "pay-as-bid"]
    try:
        code = main(argv + extra)
    except SystemExit as exc:  # argparse's own checks exit directly
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "x" / "equilibria.json").exists()


# ---- populations --------------------------------------------------------------------------------
TWO_CLASSES = "3*uniform:1:3+3*uniform:2.5:4"


def test_a_population_of_two_classes_and_its_payoffs_per_class():
    """Posted price 2.5: the class on [2.5, 4] never sells (a cost of exactly 2.5 has
    probability 0), so its sellers' payoffs are exactly 0 in every profile, and the class
    on [1, 3] earns
    something truthfully.  The deviator sits in each class's seats half of the time (3 of
    6 seats each, the seats run through in turn), and the meta-game's payoff is the mean
    of the two classes'."""
    from market_sim.population import Population

    pop = Population.parse(TWO_CLASSES)
    mech = "posted-price:price=2.5"
    r = egta(mech, pop, strategies=TS, samples=12, seed=0, players=3, n_boot=20)
    assert r.n_sellers == 6 and r.population == TWO_CLASSES
    assert r.class_laws == ("uniform:1:3", "uniform:2.5:4")
    np.testing.assert_array_equal(np.bincount(r.deviator_class), [6, 6])
    np.testing.assert_array_equal(r.deviator_class, pop.group[r.seats[:, 0]])
    by_class = r.class_payoffs()
    played = r.game.profiles > 0
    assert np.all(by_class[1][played] == 0)
    assert by_class[0][played].max() > 0
    np.testing.assert_allclose(by_class.mean(axis=0)[played], r.game.payoffs[played])
    t = r.table()
    assert {"payoff[class 0: uniform:1:3]", "payoff[class 1: uniform:2.5:4]"} <= set(t.columns)
    # the same population as a spec; a conflicting n_sellers is an error
    s = egta(mech, TWO_CLASSES, strategies=TS, samples=12, seed=0, players=3, n_boot=20)
    np.testing.assert_array_equal(s.sample_payoffs, r.sample_payoffs)
    with pytest.raises(MarketSimError, match="conflicts with the population's 6 sellers"):
        egta("posted-price", pop, 8, TS, 2)
    with pytest.raises(MarketSimError, match="new_costs_each_round redraws"):
        egta("posted-price", pop, None, TS, 2, rounds=2, new_costs_each_round=True)


def test_cli_population(tmp_path, capsys):
    argv = ["egta", "--mechanism", "posted-price", "--population", TWO_CLASSES]
    argv += ["--strategy", "truthful", "--strategy", "shade:factor=1.3", "--samples", "4"]
    argv += ["--players", "2", "--boot", "20", "--quiet", "--out"]
    assert main([*argv, str(tmp_path / "p")]) == 0
    assert TWO_CLASSES in capsys.readouterr().out
    summary = json.loads((tmp_path / "p" / "summary.json").read_text())
    assert summary["population"] == TWO_CLASSES and summary["n_sellers"] == 6
    assert "payoff[class 1: uniform:2.5:4]" in pd.read_csv(tmp_path / "p" / "payoffs.csv")
    code = main([*argv, str(tmp_path / "q"), "--sellers", "5"])
    assert code == 2 and "conflicts" in capsys.readouterr().err


def test_a_population_with_data_gives_each_market_its_rows():
    """Each sample's rows come from one pop.sample draw, shared by its markets, and reach
    the market (the platform trains on them); a mechanism that needs data is refused
    without them."""
    from market_sim.games.egta import _sample_markets
    from market_sim.population import Population

    pop = Population.parse("6*uniform:1:5;data=synthetic")
    r = egta("posted-price", pop, strategies=TS, samples=2, seed=0, players=2, n_boot=5)
    assert r.population == pop.spec and np.all(np.isfinite(r.sample_payoffs))
    _, _, seats, cost_seeds = _seeds(0, None, 2, 6)
    markets = _sample_markets(pop, seats, cost_seeds)
    again = pop.sample(np.random.default_rng(cost_seeds[1]))
    np.testing.assert_array_equal(markets[1].costs, again.costs)
    for have, want in zip(markets[1].data, (*again.data, *again.test), strict=True):
        np.testing.assert_array_equal(have, want)
    with pytest.raises(MarketSimError, match="needs the sellers' data: give a population"):
        egta("data-dependent", "6*uniform:1:5", strategies=TS, samples=1)


@pytest.mark.parametrize(
    "mechanism, population",
    [
        ("offline", TWO_CLASSES),  # per-seller laws: pooled, the allocation would differ
        ("data-dependent:n_nodes=3", "5*uniform:0:1;data=synthetic"),
    ],
)
def test_profiles_run_on_the_population_through_market_model(mechanism, population):
    """Every market is MarketModel(population=...) started from the sample's draw: in the
    all-truthful profile the deviator earns, in each sample, what the mechanism built from
    the population (each seller's own law; with data, that market's rows) pays its seat
    at those costs, minus its cost times eps.  With the pooled law in place of the
    per-seller laws (TWO_CLASSES' supports differ) the offline payments would differ."""
    from market_sim.games.egta import _sample_markets
    from market_sim.mechanisms.base import as_mechanism
    from market_sim.population import as_population

    pop = as_population(population)
    r = egta(mechanism, pop, strategies=TS, samples=3, seed=1, players=2, n_boot=5)
    _, _, seats, cost_seeds = _seeds(1, None, 3, pop.n_sellers)
    mech = as_mechanism(mechanism, population=pop)
    row = np.flatnonzero((r.full_profiles[:, 0] == pop.n_sellers) & (r.deviator == 0))[0]
    for k, mk in enumerate(_sample_markets(pop, seats, cost_seeds)):
        run = mech if mk.drawn.data is None else mech.with_data(*mk.drawn.data)
        out = run.run(mk.costs)
        seat = int(seats[k, 0])
        want = out.payments[seat] - mk.costs[seat] * out.eps[seat]
        assert r.sample_payoffs[row, k] == pytest.approx(want, rel=1e-9, abs=1e-12)
        if mechanism == "offline":  # the pooled law's mechanism pays otherwise
            pooled = as_mechanism("offline", dist=pop.pooled, n_sellers=pop.n_sellers)
            assert not np.allclose(pooled.run(mk.costs).payments, out.payments)


def test_deviator_seats_spread_over_a_populations_classes():
    """With fewer samples than seats the deviator's seats are spread evenly, so each class
    of a population (a stretch of seats) gets its share: 70/30 over 20 samples is 14/6,
    not a block of 20 consecutive seats that can fall half in the 30% class."""
    r = egta(
        "posted-price:price=0.5",
        "70*uniform:0:1+30*uniform:0.5:2",
        strategies=TS,
        samples=20,
        seed=0,
        n_boot=20,
    )
    assert np.bincount(r.deviator_class, minlength=2).tolist() == [14, 6]
