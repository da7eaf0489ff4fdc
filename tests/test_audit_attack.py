"""The audit under attack: mechanisms built to fool it, each with its truth proved.

Costs U[1, 5] (w = 4).  Notation: eps(r) = (5 - r) / 4 (non-increasing),
rent(r) = int_r^5 eps = (5 - r)^2 / 8, T(r) = r eps(r) + rent(r) (Myerson's payment,
Eq. 8 of 003).  A seller of cost c reporting r gets u_c(r) = T(r) - c eps(r) +
(whatever the mechanism adds); with T alone u_c(c) - u_c(r) = (r - c)^2 / 8 >= 0 (IC)
and u_c(c) = rent(c) >= 0 (IR, 0 at the top).  Each mechanism is audited on two
seeds (small markets); every verdict is checked against the numbers of the same
summary (``_consistent``)."""

import numpy as np
import pytest

from market_sim.auditing import audit
from market_sim.coalitions import opponent_profiles
from market_sim.mechanisms.base import Mechanism
from market_sim.mechanisms.myerson import myerson_mechanism

DIST = "uniform:1:5"
LO, HI, W = 1.0, 5.0, 4.0
SEEDS = (0, 1)


def eps(r):
    return (HI - np.asarray(r, dtype=float)) / W


def rent(r):
    return (HI - np.asarray(r, dtype=float)) ** 2 / (2 * W)


def T(r):
    r = np.asarray(r, dtype=float)
    return r * eps(r) + rent(r)


def _audit(mech, seed, n=5, k=3, **kw):
    kw.setdefault("n_grid", 17)
    return audit(mech, DIST, n, k, np.random.default_rng(seed), **kw)


def _consistent(res):
    """No verdict contradicts a number printed in the same summary."""
    s = res.summary
    assert s["verdict"] in ("ic", "not_ic", "inconclusive")
    assert s["ir_verdict"] in ("ir", "not_ir", "inconclusive")
    exact = not s["monte_carlo"]
    if s["verdict"] == "ic":
        assert s["n_profitable"] == 0
        if exact:
            assert s["max_gain"] <= s["tol"] and s["type_gain_max"] <= s["type_gain_tol"]
            if s["identity_residual_tol"] is not None and not s["randomized"]:
                assert s["identity_residual_max"] <= s["identity_residual_tol"]
            if not s["randomized"]:
                assert s["monotonicity_violations"] == 0
    if s["verdict"] == "not_ic":
        w = s["witness"]
        assert w["gain"] > 0
        if w["kind"] == "seller":
            assert w["gain"] - s["margin_z"] * w["se"] > s["tol"] and s["n_profitable"] > 0
        if w["kind"] == "type":
            assert "type gain" in s["verdict_reason"] or "identity" in s["verdict_reason"]
    if s["ir_verdict"] == "ir":
        assert s["ir_violations"] == 0
        if exact:
            assert s["min_ir_utility"] >= -s["tol"]
    if s["ir_verdict"] == "not_ir":
        assert s["ir_violations"] > 0
        if exact:
            assert s["min_ir_utility"] < -s["tol"]
    if s["verdict"] == "inconclusive" or s["ir_verdict"] == "inconclusive":
        assert res.exit_status == 4 or "not_" in s["verdict"] + s["ir_verdict"]
        assert "INCONCLUSIVE" in s["statement"]
    if s["randomized"]:
        assert s["detectable_gain"] >= s["tol"]
    failed = "not_ic" in (s["verdict"], s.get("group_verdict")) or s["ir_verdict"] == "not_ir"
    assert (res.exit_status == 0) == res.passed and (res.exit_status == 3) == failed
    return s


# ---- truly IC and IR -----------------------------------------------------------------
class LumpSum(Mechanism):
    """T(r) + 100 to every seller: the lump sum does not depend on any report, so every
    utility difference is T's (IC) and u_c(c) = rent(c) + 100 > 0 (IR)."""

    def __init__(self, lump=100.0):
        self.lump = lump

    def outcome(self, reports, rng=None):
        return eps(reports), T(reports) + self.lump


class FakedLibraryClass(Mechanism):
    """Pays T exactly (IC and IR as above) but names itself the library's offline
    mechanism: IC, and not certified (the certificate trusts class identity only)."""

    myerson_payments = True

    def outcome(self, reports, rng=None):
        return eps(reports), T(reports)


FakedLibraryClass.__module__ = "market_sim.mechanisms.builtin"
FakedLibraryClass.__name__ = FakedLibraryClass.__qualname__ = "OfflineMechanism"


class UniformPrice(Mechanism):
    """The 2 lowest reports win (eps 1, ties to the lower index) and are paid the 3rd
    lowest report: a threshold price, so winning at any report below it pays the same
    and losing pays 0 (IC); a winner's cost is below its price (IR).  Reports tied with
    another's are tried exactly: no false gain at ties."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        order = np.argsort(r, kind="stable")
        win = np.zeros(r.size)
        win[order[:2]] = 1.0
        return win, win * r[order[2]]


class ParetoNoise(Mechanism):
    """Pays r eps(r) + rent(r) X, X Pareto (shape 2.5) scaled to mean 1, drawn per seller:
    E[pay] = T(r), so IC and IR in expectation; ex post u_c(c) = rent(c) X >= 0.  The
    heavy right tail of X makes a sample mean of differences skewed."""

    randomized = True
    n_draws = 16

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        x = (rng.pareto(2.5, r.size) + 1.0) * 0.6  # mean 2.5 / 1.5 x 0.6 = 1
        return eps(r), r * eps(r) + rent(r) * x


class Jackpot(Mechanism):
    """Pays r eps(r) for sure and rent(r) / p with probability p = 0.1 (per seller):
    E[pay] = T(r) (IC and IR in expectation); a misreport's gain over the truth is a
    sure small amount minus a rare large one (left-skewed)."""

    randomized = True
    n_draws = 16
    p = 0.1

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        hit = rng.random(r.size) < self.p
        return eps(r), r * eps(r) + hit * rent(r) / self.p


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mech", [LumpSum(), FakedLibraryClass(), UniformPrice()],
                         ids=["lump-sum", "faked-module", "uniform-price"])  # fmt: skip
def test_truthful_deterministic_mechanisms_pass(mech, seed):
    res = _audit(mech, seed)
    s = _consistent(res)
    assert s["verdict"] == "ic" and s["ir_verdict"] == "ir" and res.exit_status == 0
    assert s["certified"] is None  # none of these is the library's own class


@pytest.mark.parametrize("seed", SEEDS)
def test_lump_sum_does_not_move_the_tolerance(seed):
    """tol = 1e-6 w eps_scale + 1e-9 whatever the transfer: the same with 0 and 100."""
    a, b = _audit(LumpSum(0.0), seed), _audit(LumpSum(100.0), seed)
    eps_scale = float(eps(a.table.cost).max())  # each seller's eps is its own report's
    assert a.summary["tol"] == b.summary["tol"] == pytest.approx(1e-6 * W * eps_scale + 1e-9)
    assert b.summary["mean_payment"] > 100


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mech", [ParetoNoise(), Jackpot()], ids=["pareto", "jackpot"])
def test_truthful_lotteries_are_not_flagged(mech, seed):
    """resolution 5%: the audit must decide whether a gain above 5% of the incentive
    scale exists (at the default 1% the jackpot's variance can leave it inconclusive on
    4096 draws, never not_ic)."""
    res = _audit(mech, seed, n=4, k=2, n_random=16, resolution=0.05)
    s = _consistent(res)
    assert s["monte_carlo"]
    assert s["verdict"] == "ic" and s["ir_verdict"] == "ir", s["statement"]
    assert "would have confirmed a gain of" in s["statement"]


# ---- not IC or not IR ----------------------------------------------------------------
class PayAsBidLump(Mechanism):
    """Pay-as-bid (eps(r), r eps(r)) plus 2 to everyone: u_c(r) = (r - c) eps(r) + 2,
    maximised at r = (5 + c) / 2 with gain (5 - c)^2 / 16 > 0 for c < 5: not IC."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        return eps(r), r * eps(r) + 2.0


class HiddenEntryFee(Mechanism):
    """T(r) - 0.5, and 1000 more to seller 0: transfers independent of the own report
    (IC), but u_c(c) = rent(c) - 0.5 < 0 for c > 5 - 2 = 3 (and -0.5 at the top) for
    every seller but 0: not IR."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        pay = T(r) - 0.5
        pay[0] += 1000.0
        return eps(r), pay


class TopFee(Mechanism):
    """T(r) - 0.01: IC; u_c(c) = rent(c) - 0.01 < 0 iff c > 5 - sqrt(0.08) = 4.72, a cost
    that 15 draws miss a third of the time; at the top it is -0.01 for everyone: not IR."""

    def outcome(self, reports, rng=None):
        return eps(reports), T(reports) - 0.01


class FloorBonus(Mechanism):
    """T(r) + 1 for a report of exactly 1 (the floor, legal): u_c(1) - u_c(c) =
    1 - (1 - c)^2 / 8 > 0 for c < 1 + sqrt(8): not IC, only at the floor."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        return eps(r), T(r) + (r == LO)


class JustUnder(UniformPrice):
    """The uniform price plus 0.5 to a seller reporting within w 1e-8 below another
    seller's report: a loser keeps losing by moving up to just under a higher report
    (utility 0 before and after) and collects 0.5: not IC; no draw lands there."""

    def outcome(self, reports, rng=None):
        win, pay = super().outcome(reports, rng)
        r = np.asarray(reports, dtype=float)
        d = r[None, :] - r[:, None]  # d[i, j] = r_j - r_i
        under = ((d > 0) & (d < 1e-8 * W)).any(axis=1)
        return win, pay + 0.5 * under


class NeedsOneAtTop(Mechanism):
    """T(r) + 0.5 x 1{r >= 4.9} when another seller reports >= 5 - 1e-3 w: with that
    profile a seller of cost 4.5 reporting 4.9 gains 0.5 - 0.4^2 / 8 = 0.48 (not IC
    ex post); drawn markets almost never have such a seller."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        top = r >= HI - 1e-3 * W
        others_top = top.sum() - top > 0
        return eps(r), T(r) + 0.5 * ((r >= 4.9) & others_top)


def _window(r):
    """eps(r) + 0.5 on [3, 3.08) (2% of the support, narrower than the default grid's
    step): rising at 3, so no payment makes it truthful (Myerson's lemma)."""
    r = np.asarray(r, dtype=float)
    return eps(r) + 0.5 * ((r >= 3.0) & (r < 3.08))


class LotteryWithGain(Mechanism):
    """ParetoNoise plus 0.3 r eps(r): E[u_c(z)] - E[u_c(c)] = -(z - c)^2 / 8 + 0.3 (z eps(z)
    - c eps(c)), positive just above c for c < 2.5: not IC; the witness must gain."""

    randomized = True
    n_draws = 16

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        x = (rng.pareto(2.5, r.size) + 1.0) * 0.6
        return eps(r), r * eps(r) + rent(r) * x + 0.3 * r * eps(r)


def expected_gain_with_shade(c, z):
    return -((z - c) ** 2) / (2 * W) + 0.3 * (z * eps(z) - c * eps(c))


class SmallGainLoudNoise(Mechanism):
    """T(r) + 0.1 r eps(r) (a true gain of at most 0.02 = 0.5% of the support, for c = 1
    at z = 1.16) plus noise 0.8 (cos(50 r) X + sin(50 r) Y), X, Y ~ N(0, 1): 40x the
    gain, mean zero, and no common draw cancels it between reports 0.06 apart."""

    randomized = True
    n_draws = 16

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        x, y = rng.standard_normal(2)
        noise = 0.8 * (np.cos(50 * r) * x + np.sin(50 * r) * y)
        return eps(r), T(r) + 0.1 * r * eps(r) + noise


@pytest.mark.parametrize("seed", SEEDS)
def test_lump_sum_on_pay_as_bid_is_not_ic(seed):
    res = _audit(PayAsBidLump(), seed)
    s = _consistent(res)
    assert s["verdict"] == "not_ic" and res.exit_status == 3
    w = s["witness"]
    c = w["cost"]
    assert w["gain"] == pytest.approx((w["report"] - c) * eps(w["report"]), rel=1e-9)
    assert w["gain"] <= (HI - c) ** 2 / 16 + 1e-12


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mech", [HiddenEntryFee(), TopFee()], ids=["entry-fee", "top-fee"])
def test_fees_are_not_ir(mech, seed):
    res = _audit(mech, seed)
    s = _consistent(res)
    assert s["verdict"] == "ic" and s["ir_verdict"] == "not_ir" and res.exit_status == 3
    fee = 0.5 if isinstance(mech, HiddenEntryFee) else 0.01
    assert s["min_utility_top"] == pytest.approx(-fee, abs=1e-12)
    assert s["ir_violations"] >= s["n_markets"] * (s["n_sellers"] - 1)


@pytest.mark.parametrize("seed", SEEDS)
def test_gain_only_at_the_floor(seed):
    res = _audit(FloorBonus(), seed)
    s = _consistent(res)
    assert s["verdict"] == "not_ic" and s["witness"]["report"] == LO
    c = s["witness"]["cost"]
    assert s["witness"]["gain"] == pytest.approx(1 - (LO - c) ** 2 / 8, rel=1e-9)
    assert s["candidates_by_kind"]["endpoints"] == 2 and s["floor_report"] == LO


@pytest.mark.parametrize("seed", SEEDS)
def test_gain_just_under_another_report(seed):
    res = _audit(JustUnder(), seed)
    s = _consistent(res)
    assert s["verdict"] == "not_ic"
    w = s["witness"]
    costs = res.table[res.table.market == w["market"]].cost.to_numpy()
    others = costs  # the drawn market, or the opponent profile the witness names
    if w["profile"] != "market":
        others = opponent_profiles(costs, (LO, HI), [w["seller"]])[w["profile"]]
    gap = np.delete(others, w["seller"]) - w["report"]
    assert ((gap > 0) & (gap < 1e-8 * W)).any()  # just under another seller's report
    assert w["gain"] == pytest.approx(0.5, abs=1e-9)
    assert s["candidates_by_kind"]["others"] == 5 * (s["n_sellers"] - 1)


@pytest.mark.parametrize("seed", SEEDS)
def test_gain_needing_another_seller_at_the_top(seed):
    res = _audit(NeedsOneAtTop(), seed)
    s = _consistent(res)
    assert s["verdict"] == "not_ic" and s["witness"]["profile"] in ("one_at_top", "top")
    c, z = s["witness"]["cost"], s["witness"]["report"]
    assert z >= 4.9 and s["witness"]["gain"] == pytest.approx(0.5 - (z - c) ** 2 / 8, rel=1e-9)
    assert s["n_profiles"] == 5 * s["n_sellers"] * s["n_markets"]
    assert set(s["profiles_by_kind"]) == {"floor", "top", "tied", "one_at_floor", "one_at_top"}


@pytest.mark.parametrize("seed", SEEDS)
def test_myerson_over_a_rising_window_is_caught_and_not_certified(seed):
    mech = myerson_mechanism(_window, DIST, vectorized=True, name="window")
    res = _audit(mech, seed, n_grid=33)
    s = _consistent(res)
    assert s["certified"] is None and s["verdict"] == "not_ic"
    assert s["monotonicity_violations"] > 0
    assert "monotonicity checked at" in s["statement"] or "rises" in s["statement"]


@pytest.mark.parametrize("seed", SEEDS)
def test_non_ic_lottery_witness_gains(seed):
    res = _audit(LotteryWithGain(), seed, n=4, k=3, n_random=16)  # 3 markets: power ~7/8
    s = _consistent(res)
    assert s["verdict"] == "not_ic"
    w = s["witness"]
    assert expected_gain_with_shade(w["cost"], w["report"]) > 0  # the true gain, not luck


@pytest.mark.parametrize("seed", SEEDS)
def test_small_gain_under_loud_noise_is_not_called_ic(seed):
    res = _audit(SmallGainLoudNoise(), seed, n=4, k=2, n_random=16)
    s = _consistent(res)
    assert s["verdict"] in ("inconclusive", "not_ic")
    assert s["detectable_gain"] > 0 and "would have confirmed a gain of" in s["statement"]
    if s["verdict"] == "inconclusive":
        assert res.exit_status == 4 and "more draws" in s["verdict_reason"]
