"""The leaderboard (`market_sim.compare`, `market-sim compare`).

The theory check: among IC and IR mechanisms the offline mechanism minimises the
expected objective, because (1) it minimises Eq. 11 (the proxy loss) in every market,
and (2) for an IC mechanism paying nothing at the top cost, Myerson's identity makes
the objective (Eq. 11 with the payments) equal the proxy loss in expectation.  (1) is
checked market by market (exact), (2) by the mean gap's t statistic, with a non-IC
mechanism (pay-as-bid) as the control that (2) does detect; the paired differences
then order the mechanisms."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from market_sim.auditing import audit
from market_sim.comparison import TRUSTED, TRUSTED_IR, compare, objective, t_interval
from market_sim.errors import MarketSimError

IC_IR = ["offline", "online", "posted-price"]


# ---- the pieces ----------------------------------------------------------------------
def test_objective_closed_form():
    # eps = (1, 1): ||eps|| / eta = sqrt(2)/2, sigma / eta = 1/2, gamma sum t = 2 * 0.75
    got = objective([1.0, 1.0, 0.0], [0.5, 0.25, 0.0], mu=1.0, sigma=1.0, gamma=2.0)
    assert got == pytest.approx(math.sqrt(2) / 2 + 0.5 + 1.5)
    assert objective([0.0, 0.0], [0.0, 0.0], mu=1, sigma=1, gamma=1) == math.inf


def test_t_interval_matches_the_t_quantile():
    mean, lo, hi = t_interval([1.0, 2.0, 3.0])  # sd 1, n 3
    half = stats.t.ppf(0.975, 2) / math.sqrt(3)
    assert (mean, lo, hi) == pytest.approx((2.0, 2.0 - half, 2.0 + half))
    assert t_interval([1.0, math.inf]) == (math.inf, math.inf, math.inf)


def test_private_posted_price_expectations_are_the_price_laws():
    """The vectorised exact expectations (which make its audit fast) against the law of
    the price recomputed from scratch at every trial report."""
    from market_sim.mechanisms.base import as_mechanism

    mech = as_mechanism("private-posted-price", dist="uniform:0:1", privacy=0.5)
    rng = np.random.default_rng(1)
    r, cand = rng.random(30), rng.random((30, 7))
    cand[:, 0] = r  # the truth among the candidates
    dev = mech.deviations(np.arange(30), cand, r)
    u = mech.deviation_utilities(np.arange(30), cand, r, r)
    pricing = mech.pricing
    p = np.asarray(pricing.prices)
    for i in range(30):
        for j, z in enumerate(cand[i]):
            trial = r.copy()
            trial[i] = z
            prob = pricing.price_probabilities(trial)
            sold = pricing.eps_level * (z <= p)
            assert dev.eps[i, j] == pytest.approx(prob @ sold, abs=1e-14)
            assert dev.payments[i, j] == pytest.approx(prob @ (p * sold), abs=1e-14)
            assert u[i, j] == pytest.approx(prob @ ((p - r[i]) * sold), abs=1e-14)


def test_paired_differences_leave_out_markets_where_both_bought_nothing():
    from market_sim.comparison import _paired

    inf = math.inf
    base = {"objective": np.array([1.0, 2.0, inf, 4.0])}
    got = _paired({"objective": np.array([2.0, 3.1, inf, 5.05])}, base, "objective")
    mean, lo, hi = t_interval([1.0, 1.1, 1.05])
    assert (got["objective_diff_mean"], got["objective_diff_ci_low"]) == (mean, lo)
    assert got["n_pairs"] == 3 and got["n_both_empty"] == 1 and got["verdict"] == "higher"
    one = _paired({"objective": np.array([inf, 2.5, inf, 6.0])}, base, "objective")
    assert one["objective_diff_mean"] == inf and one["verdict"] == "higher"
    both = _paired({"objective": np.array([inf, 2.5, 1.0, 6.0])}, base, "objective")
    assert math.isnan(both["objective_diff_mean"]) and both["verdict"] == "undefined"


# ---- the theory check ----------------------------------------------------------------
@pytest.mark.parametrize("dist", ["uniform:0:1", "beta:2:5:0:1"])
def test_offline_minimises_the_expected_objective_among_ic_mechanisms(dist):
    K = 50
    res = compare([*IC_IR, "pay-as-bid"], dist, 80, K, 11, audit=False)
    mk = res.markets
    loss = mk.pivot(index="market", columns="mechanism", values="proxy_loss")
    obj = mk.pivot(index="market", columns="mechanism", values="objective")
    assert np.isfinite(obj.to_numpy()).all()  # nobody is left with an empty market here
    # (1) exact: the offline mechanism's Eq. 11 is the least in every market
    off = loss["offline"].to_numpy()
    for name in loss.columns:
        assert np.all(loss[name].to_numpy() >= off - 1e-9 * off), name
    # (2) E[sum t] = E[sum psi eps] for IC mechanisms (mean gap within 4 SE of 0);
    # pay-as-bid pays the costs, far below: the check has power
    gap = obj - loss
    tstat = gap.mean() / (gap.std(ddof=1) / math.sqrt(K))
    for name in IC_IR:
        assert abs(tstat[name]) < 4, (name, tstat[name])
    assert tstat["pay-as-bid"] < -10
    # so the paired differences against the offline baseline are positive on average,
    # with a CI above 0 where the gap is large (posted price), and pay-as-bid (not IC)
    # beats it: the objective is not the whole story
    p = res.paired.set_index("mechanism")
    assert (p.loc[["online", "posted-price"], "objective_diff_mean"] > 0).all()
    assert p.loc["posted-price", "objective_diff_ci_low"] > 0
    assert p.loc["pay-as-bid", "objective_diff_ci_high"] < 0
    lb = res.leaderboard.set_index("mechanism")
    assert lb.loc["offline", "objective_mean"] == pytest.approx(obj["offline"].mean())
    assert lb["objective_mean"].idxmin() == "pay-as-bid"


def test_audited_leaderboard_ranks_offline_first_among_ic(tmp_path):
    res = compare(
        ["pay-as-bid", "posted-price", "offline", "online"],
        "uniform:0:1",
        20,
        6,
        np.random.default_rng(5),
        n_grid=9,
        n_random=8,
        refine=False,
    )
    lb = res.leaderboard.set_index("mechanism")
    assert lb.loc["pay-as-bid", "ic"] == "not_ic" and lb.loc["pay-as-bid", "max_gain"] > 1e-4
    assert (lb.loc[IC_IR, "ic"] == "ic").all() and (lb.loc[IC_IR, "ir"] == "ir").all()
    assert lb.loc["offline", "rank_ic"] == 1
    assert math.isnan(lb.loc["pay-as-bid", "rank_ic"])
    assert res.settings["baseline"] == "pay-as-bid"  # the first by default
    assert set(res.paired["mechanism"]) == {"posted-price", "offline", "online"}
    out = res.write(tmp_path / "cmp")
    for f in ("leaderboard.csv", "paired.csv", "markets.csv", "leaderboard.md", "compare.png"):
        assert (out / f).stat().st_size > 0
    csv = pd.read_csv(out / "leaderboard.csv")
    need = {"mechanism", "objective_mean", "objective_ci_low", "objective_ci_high"}
    assert need | {"proxy_loss_mean", "payment_mean", "n_bought_mean", "max_gain"} <= set(csv)
    assert {"ir_violations", "ic", "seconds", "n_empty"} <= set(csv)
    md = (out / "leaderboard.md").read_text()
    assert "**NOT IC**" in md and md.index("| pay-as-bid") < md.index("| offline")
    assert "Theory check: offline ranks first of the 3 mechanisms audited IC and IR" in md
    assert csv.set_index("mechanism")["eq11_minimiser"].to_dict() == {
        "pay-as-bid": False,
        "posted-price": False,
        "offline": True,
        "online": False,
    }


# ---- common random numbers -----------------------------------------------------------
USER = '''
import numpy as np
from market_sim.mechanisms.builtin import PayAsBidMechanism, PrivateCutoffMechanism
from market_sim.mechanisms.base import Mechanism


class MyPayAsBid(PayAsBidMechanism):
    """The built-in pay-as-bid under another name."""


class MyCutoff(PrivateCutoffMechanism):
    """The built-in private cut-off (randomized) under another name."""


class Cheap(Mechanism):
    """Buys eps 1 from sellers reporting below 0.05 at 0.05: often nobody in 4 sellers."""

    def outcome(self, reports, rng=None):
        eps = (np.asarray(reports) < 0.05).astype(float)
        return eps, 0.05 * eps
'''


def test_every_mechanism_sees_the_same_markets_seeds_and_audit(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text(USER)
    mechs = ["pay-as-bid", f"{f}:MyPayAsBid", "private-cutoff", f"{f}:MyCutoff"]
    # two sizes, each small: the equalities below hold by construction at any size
    res = compare(mechs, "uniform:0:1", [4, 6], 4, 3, n_grid=5, n_random=4, refine=False)
    assert list(res.settings["mechanisms"]) == ["pay-as-bid", "MyPayAsBid", "private-cutoff",
                                                "MyCutoff"]  # fmt: skip
    mk = res.markets.set_index(["n_sellers", "market", "mechanism"])["objective"].unstack()
    # same cost draws, and the same seed per market for the randomized cut-off
    assert np.array_equal(mk["pay-as-bid"], mk["MyPayAsBid"])
    assert np.array_equal(mk["private-cutoff"], mk["MyCutoff"])
    assert not np.array_equal(mk["pay-as-bid"], mk["private-cutoff"])
    lb = res.leaderboard.set_index(["n_sellers", "mechanism"])
    for m in (4, 6):  # the same misreports tried on the same markets
        assert lb.loc[(m, "pay-as-bid"), "max_gain"] == lb.loc[(m, "MyPayAsBid"), "max_gain"]
        assert lb.loc[(m, "private-cutoff"), "max_gain"] == lb.loc[(m, "MyCutoff"), "max_gain"]
    p = res.paired.set_index(["n_sellers", "mechanism"])
    assert p.loc[(4, "MyPayAsBid"), "objective_diff_mean"] == 0.0
    assert sorted(res.leaderboard["n_sellers"].unique()) == [4, 6]


def test_empty_markets_are_counted_and_make_the_mean_infinite(tmp_path):
    f = tmp_path / "mine.py"
    f.write_text(USER)
    res = compare([f"{f}:Cheap", "pay-as-bid"], "uniform:0:1", 4, 40, 9, audit=False)
    mk = res.markets[res.markets["mechanism"] == "Cheap"]
    empty = int((mk["n_bought"] == 0).sum())
    assert 0 < empty < 40  # P(nobody < 0.05 of 4) = 0.95^4 = 0.81
    assert np.isinf(mk["objective"]).sum() == empty
    row = res.leaderboard.set_index("mechanism").loc["Cheap"]
    assert row["n_empty"] == empty and row["objective_mean"] == math.inf
    assert row["objective_mean_bought"] == pytest.approx(mk["objective"][mk["n_bought"] > 0].mean())
    assert res.leaderboard["mechanism"].iloc[0] == "pay-as-bid"
    p = res.paired.set_index("mechanism").loc["pay-as-bid"]  # baseline Cheap: -inf
    assert p["objective_diff_mean"] == -math.inf and p["verdict"] == "lower"


def test_audit_of_given_costs():
    costs = np.random.default_rng(0).random((3, 5))
    res = audit("pay-as-bid", "uniform:0:1", 5, 3, np.random.default_rng(1), costs=costs,
                n_grid=5, n_random=4, refine=False)  # fmt: skip
    assert np.array_equal(res.table["cost"].to_numpy(), costs.ravel())
    with pytest.raises(MarketSimError, match=r"shape \(n_markets, n_sellers\)"):
        audit("offline", "uniform:0:1", 5, 2, np.random.default_rng(1), costs=costs)
    with pytest.raises(MarketSimError, match="within the support"):
        audit("offline", "uniform:0:1", 5, 3, np.random.default_rng(1), costs=costs + 1)


# ---- bad input -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mechs", "kw", "msg"),
    [
        (["offline"], {}, "at least two mechanisms"),
        (["offline", "online"], {"baseline": "posted"}, "baseline 'posted' is not among"),
        (["offline", "data-dependent"], {}, "data-dependent needs the sellers' data"),
        (["offline", "offline"], {}, "'offline' is given twice"),
        (["offline", "nope"], {}, "nope"),
        (["offline", "online"], {"n_markets": 1}, "n_markets must be an integer >= 2"),
        (["offline", "online"], {"n_sellers": [5, 5]}, "given twice"),
        (["offline", "online"], {"mu": -1}, "mu must be"),
    ],
)
def test_bad_input_is_one_clear_error(mechs, kw, msg):
    args = {"n_sellers": 5, "n_markets": 3, **kw}
    with pytest.raises(MarketSimError, match=msg) as exc:
        compare(mechs, "uniform:0:1", args.pop("n_sellers"), args.pop("n_markets"), 0, **args)
    assert "\n" not in str(exc.value)


# ---- the command line ----------------------------------------------------------------
def _cli(argv, capsys):
    """(exit status, stdout, stderr); argparse's own errors exit through SystemExit."""
    from market_sim.cli import main

    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_compares_a_users_mechanism_file(tmp_path, capsys):
    f = tmp_path / "mine.py"
    f.write_text(USER)
    out = tmp_path / "cmp"
    argv = ["compare", "--mechanism", "offline", "--mechanism", f"{f}:MyPayAsBid"]
    argv += ["--dist", "uniform:0:1", "--sellers", "10", "--markets", "4", "--seed", "2"]
    argv += ["--grid", "5", "--random", "4", "--no-refine", "--quiet", "--out", str(out)]
    code, text, err = _cli(argv, capsys)
    assert code == 0, err
    assert "| MyPayAsBid |" in text and "**NOT IC**" in text
    lb = pd.read_csv(out / "leaderboard.csv").set_index("mechanism")
    assert lb.loc["offline", "ic"] == "ic" and lb.loc["MyPayAsBid", "ic"] == "not_ic"
    # the same markets as the library with the same seed
    lib = compare(["offline", f"{f}:MyPayAsBid"], "uniform:0:1", 10, 4, 2, audit=False)
    want = lib.leaderboard.set_index("mechanism")["objective_mean"]
    assert lb["objective_mean"].to_dict() == pytest.approx(want.to_dict(), rel=1e-12)
    assert (out / "compare.png").stat().st_size > 0


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--mechanism", "offline"], "at least two mechanisms"),
        (["--mechanism", "offline", "--mechanism", "online", "--baseline", "x"], "baseline 'x'"),
        (["--mechanism", "offline", "--mechanism", "data-dependent"], "needs the sellers' data"),
        (["--mechanism", "offline", "--mechanism", "online", "--markets", "1"], "markets must"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(tmp_path, capsys, extra, needle):
    argv = ["compare", *extra, "--dist", "uniform:0:1", "--out", str(tmp_path / "o")]
    code, _, err = _cli(argv, capsys)
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and needle in err, err
    assert not (tmp_path / "o").exists()


def test_cli_refuses_an_unwritable_out_before_any_work(tmp_path, capsys, monkeypatch):
    import market_sim.comparison

    def trap(*a, **k):
        raise AssertionError("work started before --out was checked")

    monkeypatch.setattr(market_sim.comparison, "compare", trap)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    argv = ["compare", "--mechanism", "offline", "--mechanism", "online"]
    argv += ["--dist", "uniform:0:1", "--out", str(blocker / "out")]
    code, _, err = _cli(argv, capsys)
    assert code == 2 and "cannot write to" in err and len(err.strip().splitlines()) == 1


def test_at_equilibrium_offline_ranks_first_and_the_truth_table_says_truth():
    """Revelation principle: offline minimises the expected objective among Bayes-IC,
    interim-IR mechanisms and pay-as-bid's BNE is one of those, so at equilibrium
    pay-as-bid cannot beat it (at truth it can: its sellers do not shade)."""
    mechs = ["pay-as-bid", "offline"]
    kw = dict(n_grid=9, n_random=4, refine=False)
    # the truth table's audit verdicts are not asserted (the audit at equilibrium is):
    # unaudited, it has the same markets (drawn before any audit)
    truth = compare(mechs, "uniform:0:1", 12, 8, 3, audit=False)
    # 64 opponent draws, not 256: pay-as-bid's objective 1.682 (1.677 with 256) against
    # offline's 1.568, its payment 0.364 (0.362) against 0.215 at truth, epsilon 0.007 (0.008)
    eq = compare(
        mechs, "uniform:0:1", 12, 8, 3, at="equilibrium", bne_options={"samples": 64}, **kw
    )
    lb = eq.leaderboard.set_index("mechanism")
    assert lb.loc["offline", "rank"] == 1 and lb.loc["offline", "played"] == "truth"
    assert lb.loc["pay-as-bid", "played"] == "equilibrium"
    assert lb.loc["pay-as-bid", "bne_epsilon"] >= 0 and math.isnan(lb.loc["offline", "bne_epsilon"])
    # the same markets: offline's numbers are those of the truth table
    t = truth.leaderboard.set_index("mechanism")
    assert lb.loc["offline", "objective_mean"] == t.loc["offline", "objective_mean"]
    # shading: pay-as-bid pays more at its equilibrium than at truth
    assert lb.loc["pay-as-bid", "payment_mean"] > t.loc["pay-as-bid", "payment_mean"]
    assert "At truth" in truth.format() and "At equilibrium" in eq.format()
    assert "as the revelation principle says" in eq.format()
    with pytest.raises(MarketSimError, match="at must be one of"):
        compare(mechs, "uniform:0:1", 12, 8, 3, at="nash")
    # audit=True at equilibrium skips offline: the library proves it IC and IR
    assert lb.loc["offline", "ic"] == TRUSTED and lb.loc["offline", "ir"] == TRUSTED_IR
    assert lb.loc["pay-as-bid", "ic"] == "not_ic"
    assert "IC (proof)" in eq.format()


def test_audit_only_some_mechanisms_and_trust_only_the_librarys_own():
    """--audit LABEL audits those only (offline, not audited, is proved IC by the library);
    at equilibrium without audits, online built from
    its name is trusted (played at truth), an offline instance the caller passes is not
    (it may be modified: it is played at its BNE, which the solver finds at truth)."""
    from market_sim.mechanisms.base import as_mechanism

    kw = dict(n_grid=9, n_random=4, refine=False)
    one = compare(["pay-as-bid", "offline"], "uniform:0:1", 6, 3, 3, audit=["pay-as-bid"], **kw)
    lb = one.leaderboard.set_index("mechanism")
    assert lb.loc["pay-as-bid", "ic"] == "not_ic" and lb.loc["offline", "ic"] == TRUSTED
    with pytest.raises(MarketSimError, match="'nonesuch' is not one of the mechanisms"):
        compare(["pay-as-bid", "offline"], "uniform:0:1", 6, 3, 3, audit=["nonesuch"])
    mine = as_mechanism("offline", dist="uniform:0:1", n_sellers=6)  # an instance
    # the labels asserted do not depend on how well the BNE is solved: the least solver
    bne = {"samples": 16, "max_iter": 1, "grid": 5, "bid_grid": 5, "eval_grid": 5, "check_grid": 9}
    eq = compare(["online", mine], "uniform:0:1", 6, 3, 3, at="equilibrium", audit=False,
                 bne_options=bne, **kw)  # fmt: skip
    rows = eq.leaderboard.set_index("mechanism")
    assert (rows.loc["online", "ic"], rows.loc["online", "played"]) == (TRUSTED, "truth")
    assert (rows.loc["offline", "ic"], rows.loc["offline", "played"]) == (
        "not_audited",
        "equilibrium",
    )


def test_an_uncertified_equilibrium_is_flagged_below_the_table():
    """The leaderboard at equilibrium prints each BNE's epsilon / utility and warns when
    the solver did not certify the equilibrium (its row is then an approximation); the
    warning follows the BNE's own ``converged``, so it is checked against it here."""
    from market_sim.comparison import _uncertified_equilibria

    lb = pd.DataFrame(
        [
            dict(rank=1, mechanism="offline", played="truth", bne_converged=None,
                 bne_epsilon_relative=math.nan),
            dict(rank=2, mechanism="pay-as-bid", played="equilibrium", bne_converged=False,
                 bne_epsilon_relative=5.11),
            dict(rank=3, mechanism="first-price", played="equilibrium", bne_converged=True,
                 bne_epsilon_relative=0.004),
        ]
    )  # fmt: skip
    lines = _uncertified_equilibria(lb)
    assert len(lines) == 1 and "pay-as-bid's BNE is not certified" in lines[0]
    assert "5.11" in lines[0]
