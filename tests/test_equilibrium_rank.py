"""A black box's rank interim (market_sim.games.equilibrium_rank; docs/equilibrium.md,
"A black box's rank interim"): (R1) agrees with the exact interims it stands for, the
probe refuses boxes that are no rank mechanism (each proved so below), a box built to
pass the probe is caught by the verification, and the all-pay contest written as a black
box (issue #48: neither method solved it) is solved by the default ``auto``."""

from __future__ import annotations

import numpy as np
import pytest
from bne_reference import AllPayContest, FirstPriceReserve, all_pay_profile, table_relative_epsilon
from test_equilibrium import FIRST_PRICE  # the examples' first price: its own deviations
from test_equilibrium_distributional import _conformance

from market_sim.errors import MarketSimError
from market_sim.games.equilibrium import bne
from market_sim.games.equilibrium_game import as_classes
from market_sim.games.equilibrium_rank import RankInterim, rank_interim, ranked_markets
from market_sim.mechanisms.base import as_mechanism
from market_sim.mechanisms.first_price import FirstPrice

#: a mechanism's ``outcome`` as a black box that takes a (B, n) batch
Batched = _conformance().OutcomeOnly


class OneVector:
    """The same box, one report vector per call (rejects a batch, as a user's might)."""

    def __init__(self, mech):
        self.mech = mech

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        if r.ndim != 1:
            raise ValueError("one report vector per call")
        return self.mech.outcome(r, rng)


def _classes(spec):
    return as_classes(spec)[0]


def _interim_of_box(box, spec, z_range=(0.0, 1.0)):
    classes = _classes(spec)
    return rank_interim(as_mechanism(box, n_sellers=classes.n, dist=classes.laws[0]), classes,
                        z_range)  # fmt: skip


CASES = [
    (FirstPrice(1), [("uniform:0:1", 4)]),
    (FirstPriceReserve(k=2, reserve=0.6), [("beta:2:2:0:1", 5)]),
    (AllPayContest(), [("uniform:0:1", 2), ("beta:2:3:0:1", 2)]),
]


@pytest.mark.parametrize("wrap", [Batched, OneVector])
@pytest.mark.parametrize("mech, spec", CASES, ids=["first-price", "2-unit-reserve", "all-pay"])
def test_the_rank_interim_is_the_exact_interim(mech, spec, wrap):
    """(R1) is the Poisson-binomial mixture of the box's outcomes with exactly k
    opponents below, and these mechanisms' own ``interim`` is the same mixture written by
    hand (tests/bne_reference.py, FirstPrice): they agree at random reports and random
    per-class probabilities below, to rounding.  The one-vector box is read linearly
    between 4097 reports, exact here (eps constant and payments linear in the report
    between them) except within one cell of the reserve's jump, which is left out."""
    interim = _interim_of_box(wrap(mech), spec)
    assert isinstance(interim, RankInterim) and interim.batched == (wrap is Batched)
    rng = np.random.default_rng(7)
    z = rng.uniform(0, 1, 400)
    z = z[np.abs(z - getattr(mech, "reserve", 9.0)) > 1e-3]
    counts = np.array([c for _, c in spec])
    for g in range(len(spec)):
        below = rng.uniform(0, 1, (len(spec), z.size))
        opponents = counts - (np.arange(counts.size) == g)
        E, T = interim(z, below, opponents)
        E0, T0 = mech.interim(z, below, opponents)
        assert np.allclose(E, E0, rtol=0, atol=1e-12) and np.allclose(T, T0, rtol=0, atol=1e-12)


class CountingBatched(Batched):
    """A batched box that counts the report vectors it is asked."""

    rows = 0

    def outcome(self, reports, rng=None):
        self.rows += np.atleast_2d(reports).shape[0]
        return super().outcome(reports, rng)


@pytest.mark.parametrize("wrap", [CountingBatched, OneVector])
def test_the_surrogates_outcome_is_the_boxs(wrap):
    """``RankSurrogate.outcome`` is the box's outcome on any markets, ties included: a
    batched box asked itself, once per report vector (before, through its table, n vectors
    per report: 15 s of a 16-seller posted price's check), a one-vector box read off its
    table (exact for first price away from ties: eps is constant and the payment linear
    between the table's reports)."""
    from market_sim.games.equilibrium_rank import RankSurrogate

    mech = FirstPrice(1)
    box = wrap(mech)
    interim = _interim_of_box(box, [("uniform:0:1", 4)])
    surrogate = RankSurrogate(box, interim)
    rng = np.random.default_rng(3)
    R = rng.uniform(0, 1, (64, 4))
    if wrap is CountingBatched:
        R[:8, 1] = R[:8, 0]  # ties: the box's own rule, which a table of ranks cannot hold
        before = box.rows
    eps, pay = surrogate.outcome(R)
    e0, p0 = mech.outcome(R)
    assert np.array_equal(eps, e0) and np.allclose(pay, p0, rtol=0, atol=1e-12)
    if wrap is CountingBatched:
        assert box.rows - before == R.shape[0]


def test_ranked_markets_put_exactly_k_others_below():
    """k of the others strictly below the deviator, the rest strictly above, every report
    inside the range (a mechanism may refuse one outside: ``online`` raised at a report
    of 1 + 2.5e-10); at an end the deviator is a hair (1e-9 of the range) inside it."""
    z = np.array([0.0, 0.3, 1.0])
    X = ranked_markets(z, 5, (0.0, 1.0))
    assert np.all((X >= 0.0) & (X <= 1.0))
    for i, zi in enumerate(z):
        for k in range(5):
            dev, others = X[i, k, 0], X[i, k, 1:]
            assert dev == pytest.approx(zi, abs=1e-9)
            assert (others < dev).sum() == k and (others > dev).sum() == 4 - k


class SecondPrice:
    """The lowest report sells and is paid the second-lowest report."""

    batched = True

    def outcome(self, reports, rng=None):
        R = np.atleast_2d(np.asarray(reports, dtype=float))
        order = np.sort(R, axis=1)
        eps = (R == order[:, :1]).astype(float)
        pay = eps * order[:, 1:2]
        return (eps[0], pay[0]) if np.ndim(reports) == 1 else (eps, pay)


class Lottery:
    """A seller drawn at random by the generator sells at its report."""

    batched = True

    def outcome(self, reports, rng=None):
        R = np.atleast_2d(np.asarray(reports, dtype=float))
        rng = np.random.default_rng() if rng is None else rng
        eps = np.zeros_like(R)
        eps[np.arange(R.shape[0]), rng.integers(0, R.shape[1], R.shape[0])] = 1.0
        return (eps[0], (R * eps)[0]) if np.ndim(reports) == 1 else (eps, R * eps)


class Handicapped:
    """First price where seller 0's report counts at 0.9 of its value (not anonymous)."""

    batched = True

    def outcome(self, reports, rng=None):
        R = np.atleast_2d(np.asarray(reports, dtype=float))
        score = R.copy()
        score[:, 0] *= 0.9
        eps = (np.argsort(np.argsort(score, axis=1), axis=1) == 0).astype(float)
        return (eps[0], (R * eps)[0]) if np.ndim(reports) == 1 else (eps, R * eps)


@pytest.mark.parametrize(
    "box",
    ["uniform-price", SecondPrice(), Lottery(), Handicapped()],
    ids=["uniform-price", "second-price", "lottery", "handicapped"],
)
def test_the_probe_refuses_what_is_no_rank_mechanism(box):
    """Each box's deviator outcome depends on more than its report and its rank, so (R1)
    would be wrong: uniform price and second price pay the (k+1)-th / second-lowest
    *value* (a winner's payment moves with an opponent's report that stays above it); the
    lottery's allocation is the generator's draw (two generators, two outcomes); the
    handicapped box sells to seller 0 against a lower opponent report when 0.9 z0 is the
    lowest score (the deviator's position matters).  The probe says None for each."""
    assert _interim_of_box(box, [("uniform:0:1", 4)]) is None


class InfiniteWinner:
    """First price whose winner, when it reports below 0.05, sells eps = +inf (a
    zero-cost limit): a rank mechanism in every finite respect, but its rank interim
    would mix +inf with probabilities of 0 (NaN)."""

    def __init__(self, batch: bool):
        self.batch = batch

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        if r.ndim != 1 and not self.batch:
            raise ValueError("one report vector per call")
        eps, pay = FirstPrice(1).outcome(r, rng)
        eps = np.where((eps > 0) & (r < 0.05), np.inf, eps)
        return eps, pay


@pytest.mark.parametrize("batch", [True, False], ids=["batched", "one-vector"])
def test_infinite_eps_gets_no_rank_interim_whether_batched_or_not(batch):
    """Both ways of asking the box check its outcomes alike (``checked_outcome_arrays``
    with no +inf eps) and name the first bad entry's market and seller.  Before, the
    one-vector rows were checked as ``as_outcome`` checks one (+inf allowed) and only
    the probe's comparison, NaN against the box, refused the box."""
    from market_sim.games.equilibrium_rank import outcomes

    box = InfiniteWinner(batch)
    assert _interim_of_box(box, [("uniform:0:1", 3)]) is None
    finite = _interim_of_box(OneVector(FirstPrice(1)), [("uniform:0:1", 3)])
    assert isinstance(finite, RankInterim)  # the same box without the +inf passes
    X = np.array([[0.5, 0.6, 0.7], [0.3, 0.01, 0.9]])  # market 1: seller 1 wins at 0.01
    with pytest.raises(
        MarketSimError, match=r"eps contains NaN or inf \(first at market 1, seller 1\)"
    ):
        outcomes(box, X, np.random.default_rng(0), batch)


class LazyBonus:
    """All-pay (tests/bne_reference.py) with a bonus: a seller who reports below 0.9
    while at least two others report above 0.995 gets 1 more.  No rank mechanism (the
    bonus moves with the others' *values* above the deviator), built to pass the probe:
    on its random markets (reports even on [0, 1], or U[0, 1] costs) two of three others
    above 0.995 has probability 3 (0.005)^2 (0.995) + (0.005)^3 = 7.5e-5 a market."""

    batched = True

    def outcome(self, reports, rng=None):
        return _all_pay_with_bonus(reports, 1.0, lambda R: R > 0.995)


def _all_pay_with_bonus(reports, bonus: float, counted):
    """The all-pay contest's outcome (one vector or a (B, n) batch), each seller reporting
    below 0.9 paid ``bonus`` more while at least two others are ``counted`` (a boolean
    function of the (B, n) reports)."""
    R = np.atleast_2d(np.asarray(reports, dtype=float))
    eps, pay = AllPayContest().outcome(R)
    inside = counted(R)
    others = inside.sum(axis=1, keepdims=True) - inside
    pay = pay + bonus * ((R < 0.9) & (others >= 2))
    return (eps[0], pay[0]) if np.ndim(reports) == 1 else (eps, pay)


def test_a_box_that_passes_the_probe_is_caught_by_the_verification():
    """LazyBonus passes the probe (asserted: the test is of the safety net), so the
    distributional method solves the plain all-pay contest on its rank interim; the
    verification asks the box itself.  The truth, for the returned bids (the all-pay
    equilibrium, z(c) = 1 - 3/4 (1 - c)^4): an opponent reports above 0.995 when
    (1 - c)^4 < 0.02/3, c > 0.714, probability p = 0.286, so two of three do with
    3 p^2 (1 - p) + p^3 = 0.198; a seller of cost near 1 (utility near 0: it almost never
    wins and bids near 1) who reports 0.89 instead pays 0.11 more effort and gets the
    bonus with probability 0.198: a gain of at least 0.088, more than 100% of the
    ex-ante utility (u = 0.05 in this game; tests/bne_reference.py).  The verification
    must not certify, and its epsilon / u must be above 1."""
    p = all_pay_profile(4)
    r = bne(LazyBonus(), p.population, np.random.default_rng(0), method="distributional",
            samples=256)  # fmt: skip
    assert r.options["rank_interim"] is True
    assert not r.converged and r.epsilon_relative > 1.0


class RareBonus:
    """All-pay with a bonus of 50 to a seller who reports below 0.9 while at least two
    others report in [0.953, 0.971]: no rank mechanism, departing from its rank
    interim in about 1% of the verification's markets (below), rarely enough to pass
    the probe (its markets are even on [0, 1]: two of three others in a band of 0.018,
    about 1e-3 a market)."""

    batched = True

    def outcome(self, reports, rng=None):
        return _all_pay_with_bonus(reports, 50.0, lambda R: (R >= 0.953) & (R <= 0.971))


def test_a_box_that_departs_from_rank_in_one_market_in_a_hundred_is_caught():
    """The controlled verification draws 2 x ``samples`` markets (``CONTROLLED_MARKETS``):
    RareBonus, whose departure a market has probability about 1%, is still caught at
    ``samples=256`` (512 markets: about 5 expected, none with probability e^-4.8 = 0.8%).
    The truth, for the returned bids (the all-pay equilibrium z(c) = 1 - 3/4 (1 - c)^4):
    an opponent reports in [0.953, 0.971] when 1 - c is in [(0.029/0.75)^(1/4),
    (0.047/0.75)^(1/4)] = [0.4435, 0.5003], probability p = 0.0568, so two of three do
    with 3 p^2 (1 - p) + p^3 = 0.0093 and the bonus is worth 0.47 in expectation; a seller
    of cost near 1 (bidding near 1, utility near 0) who reports 0.89 pays 0.11 more
    effort: a gain of about 0.35, 7 times the ex-ante utility (0.05).  The verification
    must not certify, and its epsilon / u must be above 1 (seed 0: 2.0, at the costs it
    evaluates)."""
    p = all_pay_profile(4)
    r = bne(RareBonus(), p.population, np.random.default_rng(0), method="distributional",
            samples=256)  # fmt: skip
    assert r.options["rank_interim"] is True  # it passed the probe: the net is tested
    assert r.check.eval_markets >= 512
    assert not r.converged and r.epsilon_relative > 1.0


@pytest.mark.parametrize(
    "box, deviators, path",
    [(OneVector(FirstPrice(1)), 1, "outcome"), (FIRST_PRICE, 2, "deviations")],
    ids=["one-vector", "deviations"],
)
def test_the_control_variate_leaves_a_rank_box_no_noise(box, deviators, path):
    """``ControlledOracle``: per market E_box - E_rank + E_exact.  On a rank box (first
    price, 4 x U[0, 1], every seller bidding the equilibrium c + (1 - c)/4; one deviator
    a market on the ``outcome`` path, two on the ``deviations`` path) the first two terms
    cancel market by market: every market's row is the exact interim
    (``FirstPrice.interim`` against the bids' report laws) to rounding, where the plain
    oracle's rows scatter."""
    from market_sim.games.equilibrium_game import Oracle, Sample, reports_of
    from market_sim.games.equilibrium_rank import ControlledOracle

    classes, laws, bid, Z = _equilibrium_laws()
    mech = as_mechanism(box, n_sellers=4, dist=classes.laws[0])
    interim = rank_interim(mech, classes, (0.0, 1.0))
    assert isinstance(interim, RankInterim)
    sample = Sample(classes, 64, deviators, np.random.default_rng(1))
    R = reports_of(sample, classes, bid)
    plain = Oracle(mech)
    assert plain.path == path and sample.deviators[0].shape[1] == deviators
    E, T = ControlledOracle(plain, interim, laws).eps_pay(sample, R, 0, Z)
    E0, T0 = FirstPrice(1).interim(Z, laws.below(Z), np.array([3]))
    assert np.allclose(E, E0[None, :], atol=1e-12) and np.allclose(T, T0[None, :], atol=1e-12)
    Ep, _ = Oracle(mech).eps_pay(sample, R, 0, Z)
    assert Ep.std(axis=0).max() > 0.1  # the plain rows scatter


def test_the_control_variate_is_unbiased_on_a_box_that_fools_the_probe():
    """On LazyBonus (no rank mechanism; it passes the probe) the rank term's mean over
    4,096 markets is the exact term within 4 standard errors, E and T (so the controlled
    mean is unbiased for the box's), and the controlled rows keep the bonus: they
    differ from the exact interim by about 1 on the markets where it is paid."""
    from market_sim.games.equilibrium_game import Oracle, Sample, reports_of
    from market_sim.games.equilibrium_rank import ControlledOracle

    classes, laws, bid, Z = _equilibrium_laws()
    mech = as_mechanism(LazyBonus(), n_sellers=4, dist=classes.laws[0])
    interim = rank_interim(mech, classes, (0.0, 1.0))
    assert isinstance(interim, RankInterim)
    markets = 4096
    sample = Sample(classes, markets, 1, np.random.default_rng(1))
    R = reports_of(sample, classes, bid)
    controlled = ControlledOracle(Oracle(mech), interim, laws)
    E, T = controlled.eps_pay(sample, R, 0, Z)
    Ex, Tx = interim(Z, laws.below(Z), np.array([3]))
    Er, Tr = controlled._rank_means(R, controlled.raw.deviators(sample, 0), Z)
    # all-pay: E is the win indicator and T = E + z - 1, so both have E's binomial
    # standard error (not the sample's: 0 where none of the markets wins, at z = 0.95,
    # where the exact E is 3e-4)
    se = np.sqrt(Ex * (1 - Ex) / markets)
    for got, want in ((Er, Ex), (Tr, Tx)):
        assert np.all(np.abs(got.mean(axis=0) - want) <= 4 * se + 1e-12)
    assert np.any(np.abs(T - Tx[None, :]) > 0.5)  # the bonus, kept


class SplitTies:
    """First price, one unit: the lowest report sells eps 1 at its report, a tie among
    the lowest split evenly (eps and payment 1/t each).  A rank mechanism (the probe's
    random reports never tie); with two sellers its tie is exactly ``interim``'s
    convention (a tie counted half)."""

    batched = True

    def outcome(self, reports, rng=None):
        R = np.atleast_2d(np.asarray(reports, dtype=float))
        low = R == R.min(axis=1, keepdims=True)
        eps = low / low.sum(axis=1, keepdims=True)
        return (eps[0], (R * eps)[0]) if np.ndim(reports) == 1 else (eps, R * eps)


def _laws_with_an_atom(n: int):
    """n x U[0, 1] bidding first price's equilibrium b(c) = c + (1 - c)/n except a flat
    piece: every cost in [0.4, 0.6] bids b(0.6) = 0.6 + 0.4/n (an atom of mass 0.2 in
    each seller's reports; the bids stay non-decreasing), as a table and its
    interpolation (the markets' bids and ``laws`` agree on it), and the atom."""
    from market_sim.games.equilibrium_game import Interim

    classes = _classes([("uniform:0:1", n)])
    x = np.unique(np.concatenate((np.linspace(0.0, 1.0, 4097), [0.4, 0.6])))
    atom = 0.6 + 0.4 / n
    y = np.where((x >= 0.4) & (x <= 0.6), atom, x + (1 - x) / n)
    laws = Interim(classes, [x], [y], [law.cdf for law in classes.laws])
    return classes, laws, [lambda c: np.interp(c, x, y)], atom


def test_the_rank_term_counts_a_tie_half_as_the_exact_term_does():
    """At an atom of the others' reports the rank term's mean over markets is the exact
    term's (a tie counted half): first price, 4 sellers, every cost in [0.4, 0.6]
    bidding 0.7.  Proof of the truth at z = 0.7: each other is below w.p. 0.4 + 0.2/2,
    so E_exact = P(none below) = 0.5^3 = 0.125.  Read as "strictly below" (a tie the
    deviator's win, before the fix) the mean was P(none strictly below) = 0.6^3 =
    0.216, and the controlled E was off by the ties' share."""
    from market_sim.games.equilibrium_game import Oracle, Sample, reports_of
    from market_sim.games.equilibrium_rank import ControlledOracle

    classes, laws, bid, atom = _laws_with_an_atom(4)
    mech = as_mechanism(Batched(FirstPrice(1)), n_sellers=4, dist=classes.laws[0])
    interim = rank_interim(mech, classes, (0.0, 1.0))
    assert isinstance(interim, RankInterim)
    Z = np.array([atom - 0.05, atom, atom + 0.05])
    Ex, _ = interim(Z, laws.below(Z), np.array([3]))
    assert Ex[1] == pytest.approx(0.125, abs=1e-9)
    markets = 4096
    sample = Sample(classes, markets, 1, np.random.default_rng(3))
    R = reports_of(sample, classes, bid)
    controlled = ControlledOracle(Oracle(mech), interim, laws)
    Er, _ = controlled._rank_means(R, controlled.raw.deviators(sample, 0), Z)
    se = np.sqrt(Ex * (1 - Ex) / markets)
    assert np.all(np.abs(Er.mean(axis=0) - Ex) <= 4 * se)
    assert abs(0.216 - Ex[1]) > 15 * se[1]  # the strict reading is far outside


def test_the_control_variate_leaves_a_split_tie_box_no_noise_at_an_atom():
    """Two sellers, the split-tie box, bids with an atom at 0.8: every market's
    controlled row is the exact interim to rounding at the atom too (the box's tie, 1/2
    each, is the rank term's).  Before the fix the rows at the atom were 1/2 below on
    the markets where the other sat on it."""
    from market_sim.games.equilibrium_game import Oracle, Sample, reports_of
    from market_sim.games.equilibrium_rank import ControlledOracle

    classes, laws, bid, atom = _laws_with_an_atom(2)
    mech = as_mechanism(SplitTies(), n_sellers=2, dist=classes.laws[0])
    interim = rank_interim(mech, classes, (0.0, 1.0))
    assert isinstance(interim, RankInterim)
    Z = np.array([0.6, atom - 1e-4, atom, atom + 1e-4, 0.9])
    sample = Sample(classes, 256, 1, np.random.default_rng(4))
    R = reports_of(sample, classes, bid)
    assert np.mean(R == atom) > 0.1  # markets where a tie happens at the atom
    E, T = ControlledOracle(Oracle(mech), interim, laws).eps_pay(sample, R, 0, Z)
    E0, T0 = FirstPrice(1).interim(Z, laws.below(Z), np.array([1]))
    assert E0[2] == pytest.approx(0.4 + 0.1, abs=1e-9)  # above the atom, or half of it
    assert np.allclose(E, E0[None, :], atol=1e-12) and np.allclose(T, T0[None, :], atol=1e-12)


def _equilibrium_laws():
    """4 x U[0, 1] bidding first price's equilibrium c + (1 - c)/4: the classes, the
    bids' exact report laws (an ``Interim``), the bid function and 19 reports."""
    from market_sim.games.equilibrium_game import Interim

    classes = _classes([("uniform:0:1", 4)])
    bid = [lambda c: c + (1 - c) / 4]
    x = np.linspace(0.0, 1.0, 4097)
    laws = Interim(classes, [x], [bid[0](x)], [law.cdf for law in classes.laws])
    return classes, laws, bid, np.linspace(0.05, 0.95, 19)


def test_an_all_pay_black_box_is_solved_by_default():
    """Issue #48: the all-pay contest, 4 x U[0, 1], written as a black box (``outcome``
    only): the pure method fails it (not certified) and the sampled distributional path
    reached L-inf 0.017 and an exact relative epsilon of 17%.  ``auto`` (the default)
    runs the pure method, then, the box passing the probe, the distributional method on
    its rank interim, and returns that: L-inf <= 0.01 to z(c) = 1 - 3/4 (1 - c)^4 where
    the reference wins >= 1% (c <= 0.78), and by the independent measure (the exact
    best response against the returned bids) a relative epsilon <= 1%, not above what it
    printed."""
    p = all_pay_profile(4)
    r = bne(OneVector(AllPayContest()), p.population, np.random.default_rng(0), samples=256)
    assert r.options["method"] == "distributional" and r.options["rank_interim"] is True
    assert "rank probe" in r.options["method_reason"]
    c = np.linspace(0, 0.78, 157)
    assert np.max(np.abs(r.bid(c) - p.bids[0](c))) <= 0.01
    exact = _conformance().exact_relative_gain(p, r, 0)
    assert exact <= 0.01 and r.epsilon_relative >= exact
    # certified, and printed at the exact epsilon (the verification's control variate:
    # without it the noise of every report paying printed 0.8-3.7% for 0.03%, uncertified)
    assert r.converged and r.epsilon_relative <= 1.05 * exact + 1e-6


def test_rank_interim_false_keeps_the_sampled_path():
    p = all_pay_profile(3)
    kw = dict(method="distributional", grid=8, bid_grid=16, max_iter=8, markets=32,
              samples=16, eval_grid=4, check_grid=9, refine=1)  # fmt: skip
    off = bne(Batched(AllPayContest()), p.population, np.random.default_rng(0),
              rank_interim=False, **kw)  # fmt: skip
    on = bne(Batched(AllPayContest()), p.population, np.random.default_rng(0), **kw)
    assert off.options["rank_interim"] is False and off.options["path"] == "batched"
    assert on.options["rank_interim"] is True and on.options["path"] == "rank interim"


def test_a_rank_black_box_never_prints_less_than_the_exact_epsilon():
    """Issue #48: the sampled verification's maximum is conservative on average only; on
    a one-vector first-price box, 4 x U[0, 1], seed 15, it printed 0.93 of the exact
    relative epsilon of the returned bids.  A box that passes the rank probe is also
    verified exactly on its rank interim and each class keeps the larger number, so the
    printed epsilon / u is at least the independent measure's
    (``bne_reference.table_relative_epsilon``: every report searched against the
    returned table's exact report laws), and on this seed the rank interim's is the one
    printed (the sampled one was smaller)."""
    r = bne(OneVector(FirstPrice(1)), [("uniform:0:1", 4)], np.random.default_rng(15),
            method="pure")  # fmt: skip
    assert r.options["method"] == "pure" and r.options["verification"] == "rank interim"
    assert r.epsilon_relative >= table_relative_epsilon(r)


class PostedPriceBox:
    """A posted price of 0.1 a unit of eps, one report vector per call: every report at
    most 0.1 sells eps 1 at 0.1."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        if r.ndim != 1:
            raise ValueError("one report vector per call")
        eps = (r <= 0.1).astype(float)
        return eps, 0.1 * eps


class CountingBox:
    """A box that counts the report vectors it evaluates (a (k, n) batch counts k)."""

    def __init__(self, box):
        self.box, self.vectors = box, 0

    def outcome(self, reports, rng=None):
        out = self.box.outcome(reports, rng)
        r = np.asarray(reports)
        self.vectors += r.shape[0] if r.ndim == 2 else 1
        return out


def test_an_ic_black_box_is_certified_at_the_truth_at_once():
    """The truth, proved: a seller's utility is (0.1 - c) 1[z <= 0.1] whatever the others
    report, so reporting its cost (selling exactly when c <= 0.1) is a dominant strategy
    and no deviation gains.  ``auto`` finds the box truthful on its rank interim and runs
    the pure method, which starts at the truth and is certified at its first iteration
    with epsilon 0.  Before issue #48's fix the outcome path's first iteration did not
    try the current bids, so the utility's step at 0.1 was interpolated, the responses
    moved off the truth (a residual of 0.062) and the result was verified at epsilon / u
    0.943 after 21 iterations, not certified."""
    for method in ("auto", "pure"):
        box = CountingBox(PostedPriceBox())
        r = bne(box, [("uniform:0:1", 4)], np.random.default_rng(0), method=method)
        # every report vector the box evaluated is counted, auto's rank probe too
        assert r.options["calls"] == box.vectors > 0
        assert r.options["method"] == "pure" and r.options["path"] == "outcome"
        assert (r.iterations, r.converged, r.epsilon) == (1, True, 0.0)
        c = np.linspace(0, 1, 101)
        np.testing.assert_allclose(r.bid(c), c, atol=1e-6)
        if method == "auto":
            assert "truthful on its rank interim" in r.options["method_reason"]


def test_a_controlled_verification_draws_half_the_markets_and_prints_the_same(monkeypatch):
    """``CONTROLLED_MARKETS``: with a control variate (a black box that passes the rank
    probe) the verification draws 2 x ``samples`` markets, not 4 x: on a rank box its
    terms cancel market by market, so the epsilon is the same to rounding with half the
    box's calls (a one-vector first-price box, 3 x U[0, 1]); a given ``eval_samples`` is
    kept, and a box without a control variate keeps 4 x."""
    from market_sim.games.equilibrium_setup import CONTROLLED_MARKETS, _Options

    assert CONTROLLED_MARKETS == 2
    opt = _Options(samples=100).checked()
    assert opt.for_path("outcome", controlled=True).eval_samples == 200
    assert opt.for_path("outcome").eval_samples == 400
    assert (
        _Options(samples=100, eval_samples=64).for_path("outcome", controlled=True).eval_samples
        == 64
    )
    from market_sim.games import equilibrium
    from market_sim.games.equilibrium import bne_epsilon_by_group

    # the sampled verification's own numbers: the exact rank check (which keeps the
    # larger) patched out; the bids shade too little for 3 sellers ((1 - c)/4, not /3)
    monkeypatch.setattr(equilibrium, "_rank_checked", lambda setup, opt, checks, *a: checks)
    box, bid = OneVector(FirstPrice(1)), (lambda c: c + (1 - c) / 4)
    kw = dict(samples=128, eval_grid=6, check_grid=9, refine=1)
    runs = {
        ev: bne_epsilon_by_group(
            box, "uniform:0:1", 3, bid, np.random.default_rng(0), eval_samples=ev, **kw
        )[0]  # fmt: skip
        for ev in (None, 512)
    }
    half, full = runs[None], runs[512]
    assert (half.eval_markets, full.eval_markets) == (256, 512)
    assert half.verification == full.verification == "sampled"
    assert half.epsilon_relative > 0.01  # a gain to measure
    assert abs(half.epsilon - full.epsilon) <= 1e-12


@pytest.mark.parametrize(
    "box, flag, solved_on_rank",
    [(Handicapped(), True, False), (Batched(FirstPrice(1)), False, False),
     (Batched(FirstPrice(1)), True, True)],
    ids=["fails-the-probe", "rank_interim-False", "rank-box"],
)  # fmt: skip
def test_the_distributional_method_probes_a_box_once(monkeypatch, box, flag, solved_on_rank):
    """One rank probe per ``method="distributional"`` call, whatever it says: its interim
    serves the solve (unless ``rank_interim=False``) and the verification's control
    variate and exact check (before, a box that failed the probe was probed twice: for
    the solve, then for the verification)."""
    from market_sim.games import equilibrium

    probes: list[int] = []
    original = equilibrium.rank_interim

    def counted(*args, **kwargs):
        probes.append(1)
        return original(*args, **kwargs)

    monkeypatch.setattr(equilibrium, "rank_interim", counted)
    r = bne(box, [("uniform:0:1", 3)], np.random.default_rng(0), method="distributional",
            rank_interim=flag, grid=8, bid_grid=16, max_iter=8, markets=32, samples=16,
            eval_grid=4, check_grid=9, refine=1)  # fmt: skip
    assert len(probes) == 1
    assert r.options["rank_interim"] is solved_on_rank
    assert (r.options["path"] == "rank interim") is solved_on_rank
