"""The IC / IR / monotonicity audit and `market-sim audit`.

Every mechanism below is written for the tests, with a known answer: IC, not IC
through a narrow window or a tiny deviation, IC but not IR, randomized IC in
expectation only, randomized with a real gain, and group-manipulable."""

import json
import math

import numpy as np
import pandas as pd
import pytest

from market_sim.auditing import COLUMNS, audit, clopper_pearson_upper
from market_sim.cli import main
from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms.base import Mechanism
from market_sim.mechanisms.myerson import myerson_mechanism

DIST = "uniform:1:5"
LO, HI = 1.0, 5.0
W = HI - LO


def _audit(mech, seed=0, n=6, k=4, **kw):
    return audit(mech, DIST, n, k, np.random.default_rng(seed), n_grid=kw.pop("n_grid", 13), **kw)


# ---- mechanisms written for the tests ------------------------------------------------
def _linear_eps(r):
    """eps(r) = (HI - r) / W: non-increasing, one seller at a time."""
    return (HI - np.asarray(r, dtype=float)) / W


def _myerson_pay(r):
    """Eq. 8 (003) for _linear_eps: t(r) = r eps(r) + int_r^HI eps = r eps + (HI - r)^2 / (2W)."""
    r = np.asarray(r, dtype=float)
    return r * _linear_eps(r) + (HI - r) ** 2 / (2 * W)


class LinearMyerson(Mechanism):
    """IC and IR: each seller alone, eps linear in its report, Myerson payments; ``fee``
    is charged to everybody (IC still, IR not), ``kick`` adds kick x r x eps(r) (a
    tiny profitable over-report: the best report is c + kick (HI - 2c) / (1 + 2 kick))."""

    def __init__(self, fee=0.0, kick=0.0):
        self.fee, self.kick = fee, kick

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        eps = _linear_eps(r)
        return eps, _myerson_pay(r) + self.kick * r * eps - self.fee


class NarrowWindow(Mechanism):
    """Buys nothing; pays a bonus of 1 for a report in [3.1, 3.1 + 0.002 W): 0.2% of the
    support, well inside one cell of the 33-point grid."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        inside = (r >= 3.1) & (r < 3.1 + 0.002 * W)
        return np.zeros(r.size), inside.astype(float)


class Lottery(Mechanism):
    """IC in expectation, not ex post: the Myerson mechanism plus a bonus
    b (r - 3) xi, xi ~ N(0, 1) drawn per round (mean zero, its size depends on the
    report).  ``shade`` pays shade x r x eps on top: a real gain from over-reporting."""

    randomized = True
    n_draws = 16

    def __init__(self, b=0.5, shade=0.0):
        self.b, self.shade = b, shade

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        eps = _linear_eps(r)
        xi = rng.standard_normal()
        return eps, _myerson_pay(r) + self.b * (r - 3.0) * xi + self.shade * r * eps


class Vickrey(Mechanism):
    """Procurement Vickrey auction: buy the cheapest report (eps 1), pay the second
    lowest report.  Truthful alone; the runner-up raises the winner's price for free."""

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        order = np.argsort(r, kind="stable")
        eps = np.zeros(r.size)
        eps[order[0]] = 1.0
        return eps, eps * r[order[1]]


# ---- the built-ins ---------------------------------------------------------------------
def test_pay_as_bid_is_caught():
    res = _audit("pay-as-bid", k=5)
    s = res.summary
    assert s["verdict"] == "not_ic" and s["ir_verdict"] == "ir"
    assert s["max_gain"] > 1e3 * s["tol"]
    assert s["max_gain_ci_low"] > 0  # the bootstrap interval excludes 0
    assert 0 < s["share_profitable"] <= 1
    assert s["ir_violations"] == 0 and s["monotonicity_violations"] == 0
    assert s["certified"] is None
    # a profitable deviation is an over-report (shading up), by the gain found
    gainers = res.table[res.table.profitable]
    assert (gainers.best_report > gainers.cost).all()
    assert s["witness"]["gain"] == pytest.approx(s["max_gain"])


@pytest.mark.parametrize("name", ["offline", "online"])
def test_truthful_mechanisms_pass_and_are_certified(name):
    res = _audit(name, k=3)
    s = res.summary
    assert s["verdict"] == "ic" and s["ir_verdict"] == "ir", s
    # each seller's tol on its own scale: 1e-6 x width x its largest eps among its own
    # reports (at least its truthful eps; + 1e-12 x its largest payment)
    from market_sim.mechanisms.base import as_mechanism

    mech = as_mechanism(name, dist=parse_distribution(DIST), n_sellers=6)
    own = np.concatenate([mech.run(g.cost.to_numpy(), np.random.default_rng(0)).eps
                          for _, g in res.table.groupby("market")])  # fmt: skip
    t = res.table
    assert (t.max_gain <= t.tol).all() and (t.tol >= 1e-6 * W * own).all()
    assert s["tol"] == t.tol.max() or s["tol"] >= t.tol.max()
    assert s["mean_payment"] > 0 and s["ir_violations"] == 0
    assert s["min_truthful_utility"] >= -1e-12
    assert list(res.table.columns) == COLUMNS and len(res.table) == 3 * 6
    assert s["certified"] == "monotone allocation + Myerson payments"
    assert "IR at the top of the support is IR for every cost" in s["statement"]
    assert (res.table.utility_at_top >= -res.table.tol).all()
    assert s["identity_residual_max"] <= 1e-9 * s["mean_payment"] * 6
    assert (res.table.gain_se == 0).all()  # exact: no Monte Carlo


def test_posted_price_is_truthful():
    """A fixed posted price is dominant-strategy truthful: the audit finds no gain at all."""
    res = _audit("posted-price")
    assert res.summary["max_gain"] == 0 and res.verdict == "ic"
    assert res.summary["certified"] is None  # its payments are not computed by Eq. 8


def test_private_posted_price_gain_within_its_bound():
    from market_sim.mechanisms.base import as_mechanism

    dist = parse_distribution(DIST)
    mech = as_mechanism("private-posted-price", dist=dist, privacy=1.0)
    res = audit(mech, dist, 6, 3, np.random.default_rng(1), n_grid=13)
    bound = np.array([mech.pricing.ic_bound(c) for c in res.table.cost])
    assert np.all(res.table.max_gain <= bound + 1e-12)
    assert res.summary["max_gain"] > 0  # only approximately truthful
    assert not res.summary["monte_carlo"] and (res.table.gain_se == 0).all()  # exact expectations


def test_monotone_myerson_rule_is_checked_not_certified():
    """myerson_mechanism pays by Eq. 8 itself, but over a user's allocation whose
    monotonicity is only checked where it is evaluated: not certified, the note says how
    many reports were checked; its gains are only the quadrature's, below tol."""

    def smooth(r):  # eps_i = 1 / (1 + r_i + mean of the others): non-increasing in r_i
        R = np.asarray(r, dtype=float)
        others = (R.sum(axis=-1, keepdims=True) - R) / max(R.shape[-1] - 1, 1)
        return 1.0 / (1.0 + R + others)

    mech = myerson_mechanism(smooth, DIST, vectorized=True, name="smooth")
    s = _audit(mech, n=5, k=1).summary
    assert s["verdict"] == "ic" and s["certified"] is None
    note = f"Myerson payments; monotonicity checked at {s['n_candidates']} reports"
    assert s["certificate_note"] == note and note in s["statement"]
    assert s["monotonicity_violations"] == 0 and s["identity_residual_max"] <= 1e-9


def test_non_monotone_myerson_rule_is_flagged():
    def bad(r):  # increasing in the own report above 3
        return np.where(r < 3, 1.0, r - 2.5)

    res = _audit(myerson_mechanism(bad, DIST, name="bad"), k=2)
    s = res.summary
    assert s["myerson_monotonicity_violations"] > 0 and s["monotonicity_violations"] > 0
    assert not res.table.monotone.all()
    assert s["certified"] is None and s["verdict"] == "not_ic"


# ---- the search --------------------------------------------------------------------------
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_narrow_window_is_found_with_the_defaults(seed):
    """A bonus window of 0.2% of the support, narrower than the grid's step (3%): found by
    the random reports on 20 markets x 10 sellers, the best reports inside it."""
    res = audit(NarrowWindow(), DIST, 10, 20, np.random.default_rng(seed))  # the defaults
    s = res.summary
    assert s["verdict"] == "not_ic"
    assert s["max_gain"] == 1.0 and s["n_candidates"] >= 32 + 33
    w = s["witness"]
    assert 3.1 <= w["report"] < 3.1 + 0.002 * W
    # each random report lands in the window with probability 0.002 (0.2% of the support)
    assert 0 < s["n_profitable_random"] / s["n_random_reports"] < s["profitable_share_upper"]
    assert s["profitable_share_upper"] == pytest.approx(
        clopper_pearson_upper(s["n_profitable_random"], s["n_random_reports"])
    )
    assert s["n_random_reports"] == 20 * 10 * 32


def test_tiny_deviation_is_found_and_measured():
    """kick = 1e-2: the best report is c + kick (HI - 2c) / (1 + 2 kick), about 1% of the
    support from the truth, and gains kick^2 (HI - 2c)^2 / (2 (1 + 2 kick) W) (up to about
    30 x tol = 4e-6): no grid point gets there, the probes and the local search do.  The
    local search runs for sellers whose best candidate gains more than tol / 10, which a
    gain above tol guarantees (module doc): the gains above tol are measured exactly."""
    kick = 1e-2
    res = _audit(LinearMyerson(kick=kick), n=6, k=2, n_grid=33)
    s, t = res.summary, res.table
    assert s["verdict"] == "not_ic" and s["ir_verdict"] == "ir"
    c = t.cost.to_numpy()
    best = c + kick * (HI - 2 * c) / (1 + 2 * kick)
    gain = kick**2 * (HI - 2 * c) ** 2 / (2 * (1 + 2 * kick) * W)
    big = gain > s["tol"]
    assert big.any()
    np.testing.assert_allclose(t.max_gain[big], gain[big], rtol=1e-3, atol=1e-12)
    assert np.all(t.max_gain <= gain + 1e-12)  # never more than the true gain
    far = gain > 10 * s["tol"]
    np.testing.assert_allclose(t.best_report[far], best[far], atol=1e-4)
    assert np.all(np.abs(best - c) < 0.02 * W)


def test_ic_mechanism_statement_and_bound():
    """No gain anywhere: the Clopper-Pearson bound from 0 of N is 1 - 0.05^(1/N)."""
    res = _audit(LinearMyerson(), n=5, k=3)
    s = res.summary
    assert s["verdict"] == "ic" and s["ir_verdict"] == "ir"
    assert s["max_gain"] <= s["tol"]
    N = s["n_random_reports"]
    assert N == 5 * 3 * 32 and s["n_profitable_random"] == 0
    assert s["profitable_share_upper"] == pytest.approx(1 - 0.05 ** (1 / N), rel=1e-9)
    assert s["ir_share_upper"] == pytest.approx(1 - 0.05 ** (1 / 15), rel=1e-9)
    assert f"any of the {s['n_candidates']} reports tried per seller" in s["statement"]
    pct = f"{100 * s['profitable_share_upper']:.2g}%"
    assert f"at 95% confidence fewer than {pct} of uniformly random reports" in s["statement"]
    assert "Not excluded: a gain inside a window narrower than" in s["statement"]
    assert s["certified"] is None  # a user's class: judged by the search alone


def test_ic_but_not_ir():
    """A fee of 0.3 on top of Myerson payments: truthful, but the truthful utility
    (HI - c)^2 / (2W) - 0.3 is negative for c > HI - sqrt(0.6 W), and -0.3 for every seller
    at the top of the support: every seller fails IR there."""
    res = _audit(LinearMyerson(fee=0.3), n=8, k=3)
    s, t = res.summary, res.table
    assert s["verdict"] == "ic" and s["ir_verdict"] == "not_ir"
    expect = (HI - t.cost) ** 2 / (2 * W) - 0.3
    np.testing.assert_allclose(t.truthful_utility, expect, atol=1e-12)
    assert 0 < int((expect < -s["tol"]).sum()) < len(t)
    np.testing.assert_allclose(t.utility_at_top, -0.3, atol=1e-12)
    np.testing.assert_allclose(t.utility_at_bottom, (HI - LO) ** 2 / (2 * W) - 0.3, atol=1e-12)
    assert s["ir_violations"] == len(t) and s["min_utility_top"] == pytest.approx(-0.3)
    assert not res.passed


def test_clopper_pearson_closed_forms():
    assert clopper_pearson_upper(0, 100) == pytest.approx(1 - 0.05 ** (1 / 100))
    assert clopper_pearson_upper(10, 10) == 1.0
    # k = n - 1: the bound solves 1 - p^n = 0.05... i.e. P(X >= n-1... ) by the beta quantile
    from scipy import stats

    assert clopper_pearson_upper(3, 50) == pytest.approx(stats.beta.ppf(0.95, 4, 47))


# ---- randomized mechanisms -----------------------------------------------------------
def test_lottery_ic_in_expectation_is_ic():
    """The old audit called this not_ic with nearly every seller profitable (the best of
    many noisy averages).  Now: screened on common draws, confirmed on fresh ones with a
    Bonferroni margin.  b = 0.1: the bonus's SE at the top of the support, 0.1 x 2 / 64
    on 4096 draws, lets the confirmation decide IR within 1% of the incentive scale."""
    from scipy import stats

    res = audit(Lottery(b=0.1), DIST, 8, 2, np.random.default_rng(0))
    s, t = res.summary, res.table
    assert s["monte_carlo"] and s["verdict"] == "ic" and s["ir_verdict"] == "ir", s["witness"]
    assert (t.gain_se > 0).any()  # the noise is measured, not hidden
    # one-sided 5% over 2 reports (the best, a fresh one) x 16 sellers x 4 stages
    assert s["margin_z"] == pytest.approx(stats.norm.isf(0.05 / (2 * 16 * 4)), rel=1e-12)
    assert s["detectable_gain"] <= 0.05 * s["incentive_scale"]  # a typical seller's
    assert f"{s['detectable_gain']:.3g}" in s["statement"]


def test_noisy_lottery_ir_is_inconclusive():
    """b = 1: at the top (r - 3 = 2) the bonus has SD 2, SE 1/8 on 256 draws, and the
    truthful utility there is 0: its lower confidence bound (about -3 SE) lies below
    -(tol + 1% of the incentive scale w x eps_scale = 4) even after 4096 draws (SE 1/32):
    IR inconclusive, exit status 4."""
    res = audit(Lottery(b=1.0), DIST, 8, 2, np.random.default_rng(0))
    s = res.summary
    assert s["ir_verdict"] == "inconclusive" and res.exit_status == 4
    assert s["detectable_ir_violation"] > 0.01 * s["incentive_scale"]
    assert "IR INCONCLUSIVE" in s["statement"] and "more draws" in s["ir_reason"]


def test_randomized_with_a_real_gain_is_not_ic():
    """shade = 0.2: 0.2 r eps(r) on top, an expected gain of
    g(z) = -(z - c)^2 / (2W) + 0.2 (z eps(z) - c eps(c)) at report z."""
    res = audit(Lottery(b=0.1, shade=0.2), DIST, 8, 2, np.random.default_rng(0))
    s = res.summary
    assert s["verdict"] == "not_ic"
    w = s["witness"]
    assert w["gain"] - s["margin_z"] * w["se"] > s["tol"] and w["se"] > 0
    z, c = w["report"], w["cost"]
    expect = -((z - c) ** 2) / (2 * W) + 0.2 * (z * _linear_eps(z) - c * _linear_eps(c))
    assert abs(w["gain"] - expect) < 4 * w["se"]


def test_random_price_truthful_draw_by_draw():
    """A price drawn independently of the reports is truthful draw by draw: with common
    random numbers no gain appears at all."""

    class RandomPrice(Mechanism):
        randomized = True
        n_draws = 16

        def outcome(self, reports, rng=None):
            p = rng.uniform(1, 5)
            eps = (np.asarray(reports) <= p).astype(float)
            return eps, p * eps

    res = audit(RandomPrice(), DIST, 4, 2, np.random.default_rng(0), n_grid=9)
    assert res.summary["randomized"] and res.summary["mean_payment"] > 0
    assert res.verdict == "ic"


# ---- coalitions ----------------------------------------------------------------------
def test_vickrey_is_ic_but_group_manipulable():
    """Second price: no seller gains alone, but the runner-up and the winner gain together
    by raising the price (the winner is paid the runner-up's report)."""
    res = audit(Vickrey(), DIST, 6, 3, np.random.default_rng(0), coalition_size=2)
    s = res.summary
    assert s["verdict"] == "ic" and s["ir_verdict"] == "ir" and s["group_verdict"] == "not_ic"
    assert s["coalition_size"] == 2 and s["coalition_max_gain"] > s["tol"]
    # every coalition also tried with the others in the 5 targeted opponent profiles and
    # the 15 interior ones (k = 1..3 at either end: 6; k = 1..3 near 2 points: 6; one tied
    # pair; 2 bands)
    assert s["coalition_profiles_tried"] == (5 + 15) * s["coalitions_tried"]
    w = s["coalition_witness"]
    assert len(w["members"]) == 2 and w["gain"] > s["tol"]
    # the witness: the two cheapest of its market, the runner-up raising its report, and
    # the gain is exactly the rise of the price the winner gets
    # the others' reports: the truth, or the opponent profile the witness names
    from market_sim.coalitions import opponent_profiles

    costs = res.table[res.table.market == w["market"]].cost.to_numpy()
    others = costs.copy()
    if "(others: " in w["move"]:
        kind = w["move"].split("(others: ")[1].rstrip(")")
        others = opponent_profiles(costs, (LO, HI), w["members"])[kind]
    others = np.delete(others, w["members"])

    def members_utility(reports):  # the lowest report wins, paid the second lowest
        r = np.r_[reports, others]
        win = int(np.argmin(r))
        price = np.sort(r)[1]
        return price - w["costs"][win] if win < 2 else 0.0

    gain = members_utility(np.array(w["reports"])) - members_utility(np.array(w["costs"]))
    assert w["gain"] == pytest.approx(gain, rel=1e-9) and gain > 0
    assert not res.passed and "NOT GROUP-IC" in s["statement"]


def test_report_independent_price_is_group_ic():
    res = _audit("posted-price", k=2, coalition_size=3)
    s = res.summary
    assert s["group_verdict"] == "ic" and s["coalition_max_gain"] <= s["tol"]
    assert res.passed


@pytest.mark.parametrize("k", [1, 7])
def test_bad_coalition_size(k):
    from market_sim.errors import MarketSimError

    with pytest.raises(MarketSimError, match="coalition size"):
        _audit("posted-price", n=6, k=1, coalition_size=k)


def test_zero_random_budget_is_refused():
    from market_sim.errors import MarketSimError

    with pytest.raises(MarketSimError, match="n_random"):
        _audit("posted-price", n_random=0)


def test_profiles_are_searched_unless_the_market_certifies_the_mechanism():
    """The certificate is a proof for every profile of the others: a market whose own
    check certifies the library's unmodified mechanism searches no opponent profile (and
    the statement says so).  The same object with a method bound on the instance is not
    the library's object: no certificate, and every market searches its profiles."""
    from market_sim.mechanisms.base import as_mechanism

    law = parse_distribution(DIST)
    s = _audit(as_mechanism("online", dist=law, n_sellers=4), n=4, k=2).summary
    assert s["certified"] == "monotone allocation + Myerson payments"
    assert s["profiles_certified"] == 2 and s["n_profiles"] == 0
    assert "none in the 2 of 2 markets whose own check certified" in s["statement"]
    twin = as_mechanism("online", dist=law, n_sellers=4)
    object.__setattr__(twin, "outcome", twin.outcome)  # the same numbers, bound
    t = _audit(twin, n=4, k=2).summary
    assert t["certified"] is None and t["profiles_certified"] == 0
    assert t["verdict"] == "ic" and t["ir_verdict"] == "ir"
    assert all(t["profiles_by_kind"][kd] == 8 for kd in ("floor", "top", "tied"))
    assert "none in the" not in t["statement"]


# ---- the shared offline curves ----------------------------------------------------------
def test_shared_offline_curves_match_own_curves(monkeypatch):
    """Sellers far above the cut-off share one curve; their utilities are those of their
    own curves, bit for bit."""
    from market_sim.mechanisms import payments

    dist = parse_distribution("uniform:0:1")
    c = dist.sample(150, np.random.default_rng(3))
    kw = dict(mu=1.0, sigma=1.0, gamma=1.0)
    Z = np.column_stack(
        [np.full(c.size, 1e-4), np.full(c.size, 2e-3), c, np.linspace(0.001, 1, c.size)]
    )
    shared = payments.OfflineCurves(c, dist, **kw)
    u = shared.utilities(Z, c)
    assert len({id(v) for v in shared._curve.values()}) < len(shared._curve)  # shared
    monkeypatch.setattr(payments._UncappedOracle, "independent_above", np.inf, raising=False)
    own = payments.OfflineCurves(c, dist, **kw)
    own._oracle.independent_above = np.inf
    np.testing.assert_allclose(own.utilities(Z, c), u, rtol=1e-13, atol=1e-15)
    assert len({id(v) for v in own._curve.values()}) == len(own._curve)


# ---- the command line --------------------------------------------------------------------
def test_cli_writes_outputs_and_exits_3_when_not_ic(tmp_path, capsys):
    out = tmp_path / "a"
    args = ["audit", "--mechanism", "pay-as-bid", "--dist", DIST, "--sellers", "5"]
    args += ["--markets", "3", "--seed", "3", "--grid", "9", "--random", "8", "--quiet"]
    args += ["--out", str(out)]
    assert main(args) == 3
    s = json.loads((out / "summary.json").read_text())
    for key in (
        "max_gain",
        "max_gain_ci_high",
        "share_profitable",
        "ir_violations",
        "monotonicity_violations",
        "verdict",
        "ir_verdict",
        "tol",
        "mechanism",
        "dist",
        "seed",
        "n_candidates",
        "profitable_share_upper",
        "ir_share_upper",
        "identity_residual_max",
        "certified",
        "coalition_size",
        "coalition_max_gain",
        "group_verdict",
    ):
        assert key in s
    assert s["verdict"] == "not_ic" and s["seed"] == 3 and s["mechanism"] == "pay-as-bid"
    df = pd.read_csv(out / "audit.csv")
    assert list(df.columns) == COLUMNS and len(df) == 15
    assert df.max_gain.max() == pytest.approx(s["max_gain"])
    assert (out / "audit.png").stat().st_size > 1000
    printed = capsys.readouterr().out
    assert "verdict" in printed and "NOT IC" in printed


def test_cli_exit_0_when_ic_and_ir(tmp_path, capsys):
    args = ["audit", "--mechanism", "online", "--dist", DIST, "--sellers", "4"]
    args += ["--markets", "2", "--grid", "5", "--random", "4", "--out", str(tmp_path / "o")]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "the first of 2 markets took" in err  # timed on the mechanism (issue #43)
    one = ["audit", "--mechanism", "online", "--dist", DIST, "--sellers", "4", "--markets", "1"]
    assert main(one + ["--grid", "5", "--random", "4"]) == 0
    assert "estimated to take" in capsys.readouterr().err  # one market: the cost model


def test_cli_same_seed_same_numbers(tmp_path):
    args = ["audit", "--mechanism", "pay-as-bid", "--dist", DIST, "--sellers", "3"]
    args += ["--markets", "2", "--grid", "5", "--random", "4", "--no-refine", "--seed", "7"]
    args += ["--quiet", "--out"]
    assert main(args + [str(tmp_path / "x")]) == 3 and main(args + [str(tmp_path / "y")]) == 3
    assert (tmp_path / "x" / "audit.csv").read_text() == (tmp_path / "y" / "audit.csv").read_text()


@pytest.mark.parametrize(
    "extra,words",
    [
        (["--mechanism", "nonesuch"], "unknown 'nonesuch'"),
        (["--mechanism", "offline", "--dist", "weird:1"], "weird"),
        (["--mechanism", "offline", "--sellers", "0"], "sellers must be >= 1"),
        (["--mechanism", "math:pi"], "not a Mechanism"),
        (["--mechanism", "offline", "--coalition", "1"], "--coalition must be between 2"),
        (["--mechanism", "offline", "--coalition", "4"], "--coalition must be between 2"),
        (["--mechanism", "offline", "--random", "0"], "random must be >= 1"),
    ],
)
def test_cli_bad_input_one_line_exit_2(tmp_path, capsys, extra, words):
    base = {"--dist": DIST, "--sellers": "3"}
    args = ["audit", "--markets", "1", "--out", str(tmp_path / "o")] + extra
    for k, v in base.items():
        if k not in extra:
            args += [k, v]
    try:
        code = main(args)
    except SystemExit as exc:  # argparse's own check (--sellers 0)
        code = exc.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert words in err and "\n" not in err
    assert not (tmp_path / "o").exists()


def test_bootstrap_ci_is_seeded_and_brackets_the_mean():
    a = _audit(LinearMyerson(kick=0.05), seed=5, k=6)
    b = _audit(LinearMyerson(kick=0.05), seed=5, k=6)
    s = a.summary
    assert s["max_gain_ci_low"] == b.summary["max_gain_ci_low"]
    assert s["max_gain_ci_low"] <= s["mean_max_gain"] <= s["max_gain_ci_high"]
    assert s["max_gain_ci_low"] < s["max_gain_ci_high"]  # the markets differ
    assert math.isnan(_audit(LinearMyerson(kick=0.05), k=1).summary["max_gain_ci_low"])


def test_audit_time_estimate_follows_the_cost_model():
    from market_sim import estimates as E
    from market_sim.mechanisms.base import as_mechanism

    online = as_mechanism("online", dist=parse_distribution(DIST))
    fast = E.audit_seconds(online, 1000, 2, n_candidates=141)
    assert fast == pytest.approx(2 * (1000 * 142 * E.AUDIT_FAST_PER_EVAL + E.AUDIT_FAST_PER_MARKET))
    call = E.AUDIT_CALL_FIXED + 20 * E.AUDIT_CALL_PER_SELLER
    generic = E.audit_seconds(LinearMyerson(), 20, 20, n_candidates=141)
    assert generic == pytest.approx(400 * 142 * call)
    mc = E.audit_seconds(Lottery(), 20, 20, n_candidates=141, n_draws=16, n_confirm=64)
    search = 400 * 142 * 16 * E.AUDIT_MC_SEARCH_SHARE
    assert mc == pytest.approx((search + 400 * 64 * E.AUDIT_MC_CONFIRM_ESCALATION) * call)
    assert generic < mc < 16 * generic + 400 * 64 * 17 * call  # screened: fewer than all draws


# ---- populations -----------------------------------------------------------------------
def test_population_classes_get_their_own_lines():
    """Two classes, U[1, 3] and U[3, 5], under LinearMyerson(fee=0.3): IC; the truthful
    utility (5 - c)^2 / 8 - 0.3 is below 0 exactly for c > 5 - sqrt(2.4) = 3.45, so only
    the second class has violations: at the drawn costs and at its own top 5 (-0.3);
    the first class's own top is 3, where u = 0.5 - 0.3 > 0 (the pooled top 5 is no
    cost of theirs: issue #54, item 6)."""
    from market_sim.population import Population

    pop = Population([("uniform:1:3", 3), ("uniform:3:5", 3)])
    res = audit(LinearMyerson(fee=0.3), pop, None, 3, np.random.default_rng(0), n_grid=9)
    s, t = res.summary, res.table
    assert s["n_sellers"] == 6 and s["dist"] == pop.spec and list(t.group[:6]) == [0] * 3 + [1] * 3
    assert s["verdict"] == "ic" and s["ir_verdict"] == "not_ir"
    low, high = s["by_class"]
    assert low["ir_violations_at_cost"] == 0
    expect = int(((HI - t.cost[t.group == 1]) ** 2 / (2 * W) - 0.3 < -t.tol[t.group == 1]).sum())
    assert high["ir_violations_at_cost"] == expect > 0
    assert low["ir_violations"] == 0 and high["ir_violations"] == 9  # its top: -0.3
    assert "By class: uniform:1:3" in s["statement"]
    with pytest.raises(MarketSimError, match="conflicts"):
        audit(LinearMyerson(), pop, 7, 1, np.random.default_rng(0))


def test_data_needing_mechanism_refused_without_data(tmp_path, capsys):
    out = str(tmp_path / "a")
    code = main(["audit", "--mechanism", "data-dependent", "--dist", "uniform:0:1",
                 "--sellers", "5", "--markets", "1", "--quiet", "--out", out])  # fmt: skip
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "needs the sellers' data" in err[0]


def test_cli_population_and_exit_4_when_inconclusive(tmp_path, capsys, monkeypatch):
    """The noisy lottery of test_noisy_lottery_ir_is_inconclusive through the CLI, on a
    population of two classes: exit status 4 and the reason on stderr."""
    import sys
    import types

    mod = types.ModuleType("noisy_lottery_mod")
    mod.Noisy = type("Noisy", (Lottery,), {"__init__": lambda self: Lottery.__init__(self, b=1.0)})
    monkeypatch.setitem(sys.modules, "noisy_lottery_mod", mod)
    code = main(["audit", "--mechanism", "noisy_lottery_mod:Noisy", "--population",
                 "3*uniform:1:3+3*uniform:3:5", "--markets", "1", "--grid", "5", "--random", "4",
                 "--no-refine", "--quiet", "--out", str(tmp_path / "a")])  # fmt: skip
    out, err = capsys.readouterr()
    assert code == 4 and "audit inconclusive (exit status 4)" in err
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert s["n_sellers"] == 6 and s["ir_verdict"] == "inconclusive" and len(s["by_class"]) == 2
