"""The dynamics study: its rows on a tiny grid, its references, and findings computed
from the rows (the figure is checked with every study's in test_figures.py)."""

import numpy as np
import pandas as pd
import pytest

from market_sim.agents import MarketModel
from market_sim.analysis import dynamics as analysis
from market_sim.scenarios import dynamics as study


def tiny(**kw) -> dict:
    return {**study.grid(quick=True)[0], "m": 4, "rounds": 6, **kw}


def rows(seed: int = 0, **kw) -> pd.DataFrame:
    return pd.DataFrame(study.run(tiny(**kw), np.random.default_rng(seed)))


@pytest.mark.parametrize("mechanism", ["offline", "online"])
def test_rows_are_shares_ratios_and_rounds(mechanism):
    df = rows(mechanism=mechanism, learner="learning")
    assert df["round"].tolist() == list(range(1, 7))
    for col in ("share_misreporting", "share_bought_misreporting", "participation"):
        v = df[col].dropna()
        assert len(v) and v.between(0, 1).all(), col
    assert (df.n_bought <= 4).all() and (df.report_ratio > 0).all()
    # the learner tries the truthful arm first: round 1 is the truth
    assert df.report_ratio.iloc[0] == 1 and df.share_misreporting.iloc[0] == 0
    assert df.share_misreporting.iloc[1:].max() > 0  # then it explores


@pytest.mark.parametrize("mechanism", ["offline", "online"])
def test_truthful_sellers_get_exactly_the_truthful_reference(mechanism):
    df = rows(mechanism=mechanism, learner="truthful", rounds=4)
    np.testing.assert_array_equal(df.proxy_loss, df.truthful_proxy_loss)
    np.testing.assert_array_equal(df.total_payment, df.truthful_payment)
    assert (df.report_ratio == 1).all() and (df.share_bought_misreporting.fillna(0) == 0).all()


def test_the_truthful_reference_is_the_mechanism_on_the_costs_of_the_round():
    params = tiny(mechanism="offline", learner="learning", rounds=3)
    df = pd.DataFrame(study.run(params, np.random.default_rng(5)))
    # the same market again (the model's seed is the first draw of the task's stream),
    # its costs of each round put through the mechanism by hand
    seed = int(np.random.default_rng(5).integers(2**63))
    model = MarketModel(
        4,
        dist=params["dist"],
        mechanism="offline",
        strategy="learning",
        rounds=3,
        gamma=params["gamma"],
        new_costs_each_round=True,
        measure_regret=params["measure_regret"],
        seed=seed,
    )
    for k in range(3):
        model.step()
        out = model.mechanism.run(model.cost[model.participating])
        assert df.truthful_payment[k] == pytest.approx(out.payments.sum(), rel=1e-12)
        assert df.total_payment[k] == pytest.approx(model.platform.total_payment, rel=1e-12)


def test_truth_gain_is_zero_for_ic_mechanisms_and_positive_for_pay_as_bid():
    gains = {}
    for mech in ("offline", "online", "pay-as-bid"):
        model = MarketModel(6, dist="uniform:1:5", mechanism=mech, gamma=0.3, rounds=1)
        gains[mech] = study.truth_gain(model.mechanism, model.dist, 6, seed=0)
    assert gains["offline"] <= study.IC_TOL and gains["online"] <= study.IC_TOL
    assert gains["pay-as-bid"] > 1e-3  # shading up pays under pay-as-bid


def test_ic_mechanisms_have_no_bne_reference():
    df = rows(mechanism="online", learner="learning")
    assert (df.truth_gain <= study.IC_TOL).all()
    assert not any(c.startswith("bne_") for c in df.columns)


def test_same_seed_same_rows_other_seed_other_rows():
    a, b, c = (rows(seed, mechanism="online") for seed in (1, 1, 2))
    pd.testing.assert_frame_equal(a, b)
    assert not np.allclose(a.truthful_payment, c.truthful_payment)


# ---- analysis: every number and verdict from the rows -------------------------------


def synthetic(late_share: float, q_ratio: float, reps: int = 3) -> pd.DataFrame:
    """20 rounds; report/cost falls linearly to 1 + late_share / 10 under offline;
    pay-as-bid has a BNE at 1.2 and a q-learner ending at ``q_ratio``."""
    out = []
    for mech, learner in (
        ("offline", "hedge"),
        ("pay-as-bid", "hedge"),
        ("pay-as-bid", "q-learning"),
    ):
        for rep in range(reps):
            for k in range(1, 21):
                share = 1.0 - (1.0 - late_share) * k / 20
                ratio = q_ratio if learner == "q-learning" else 1 + share / 10
                row = dict(
                    mechanism=mech,
                    learner=learner,
                    m=5,
                    replication=rep,
                    round=k,
                    report_ratio=ratio + 0.001 * rep,
                    bought_report_ratio=ratio + 0.001 * rep,
                    share_bought_misreporting=share,
                    avg_external_regret=1.0 / k,
                    proxy_loss=2.0,
                    truthful_proxy_loss=1.0,
                    total_payment=3.0,
                    truthful_payment=2.0,
                    truth_gain=0.0 if mech == "offline" else 0.3,
                )
                if mech == "pay-as-bid":
                    row |= dict(
                        bne_report_ratio=1.1,
                        bne_bought_report_ratio=1.2,
                        bne_proxy_loss=1.5,
                        bne_payment=2.5,
                        bne_epsilon=0.001,
                    )
                out.append(row)
    return pd.DataFrame(out)


def test_summary_windows_and_ratios_are_computed_from_the_rows():
    df = synthetic(late_share=0.0, q_ratio=1.5)
    t = analysis.summarise(df).set_index(["mechanism", "learner"])
    off = t.loc[("offline", "hedge")]
    # the last 10% of 20 rounds are rounds 19 and 20: shares 0.05 and 0
    assert off.share_bought_misreporting_late == pytest.approx(0.025)
    assert off.share_bought_misreporting_early == pytest.approx((0.95 + 0.9) / 2)
    assert off.report_ratio_late == pytest.approx(1.0025 + 0.001)  # mean over reps 0, 1, 2
    assert off.report_ratio_ci_late == pytest.approx(1.96 * 0.001 / np.sqrt(3))
    assert off.loss_ratio_late == 2.0 and off.payment_ratio_late == 1.5
    assert off.avg_external_regret_late == pytest.approx((1 / 19 + 1 / 20) / 2)
    assert np.isnan(off.bne_report_ratio)  # IC: no BNE reference
    pab = t.loc[("pay-as-bid", "q-learning")]
    assert pab.bne_loss_ratio == 1.5 and pab.bne_payment_ratio == 1.25
    assert pab.bne_bought_report_ratio == 1.2
    assert pab.bought_report_ratio_late == pytest.approx(1.501)


def test_findings_state_what_the_numbers_say():
    yes = " ".join(analysis.findings(synthetic(late_share=0.0, q_ratio=1.5)))
    assert "hedge 0.925 -> 0.025 ± 0 (report/cost 1 ± 0.0011; reaches truth)" in yes
    assert "symmetric BNE gives 1.2 (all sellers: 1.1;" in yes
    assert "q-learning 1.5 ± 0.0011 (above the BNE" in yes
    assert "the buyer pays x1.5 of truthful against x1.25 at the BNE" in yes
    assert "they overbid together, more than every other learner" in yes
    assert "It falls for 3 of 3" in yes
    no = " ".join(analysis.findings(synthetic(late_share=0.5, q_ratio=1.19)))
    assert "does not reach truth" in no and "reaches truth)" not in no
    assert "q-learning 1.19 ± 0.0011 (at the BNE" in no
    assert "no joint overbidding beyond the BNE" in no


def test_pay_as_bid_rows_carry_the_bne_reference_computed_once():
    study._BNE.clear()
    kw = dict(mechanism="pay-as-bid", learner="learning", rounds=3, bne_samples=16, bne_max_iter=3)
    a, b = rows(1, **kw), rows(2, **kw)
    assert len(study._BNE) == 1  # one solve for both tasks (same market, same options)
    (bne,) = study._BNE.values()
    for df in (a, b):
        assert (df.truth_gain > study.IC_TOL).all()
        assert np.isfinite(df[["bne_report_ratio", "bne_proxy_loss", "bne_payment"]]).all().all()
        assert (df.bne_report_ratio >= 1).all()  # the solver never bids below cost
        assert (df.bne_epsilon == bne.epsilon).all()
    assert not np.allclose(a.bne_payment, b.bne_payment)  # on each task's own costs


def test_bne_distance_is_zero_at_the_bne_and_the_largest_gap_otherwise():
    from market_sim.games.equilibrium import symmetric_bne

    bne = symmetric_bne(
        "pay-as-bid", "uniform:1:5", 5, np.random.default_rng(0), samples=64, max_iter=4
    )
    cost = np.linspace(1.0, 5.0, 9)
    b = bne.bid(cost)
    u = np.arange(9.0)
    same = study.bne_distance(bne, cost, b, u, u, arms=np.column_stack([cost, b]))
    assert same == {"bne_linf": 0.0, "bne_action_gap": 0.0, "bne_utility_gap": 0.0}
    ch = bne.check
    top = ch.eval_costs[ch.win_rates >= 0.01].max()
    off = study.bne_distance(bne, cost, cost + 0.1, u + 1.0, u)
    assert off["bne_linf"] == pytest.approx(np.max(np.abs(cost + 0.1 - b)[cost <= top]))
    assert off["bne_utility_gap"] == 1.0
    assert np.isnan(off["bne_action_gap"])  # no arms given
    # the default arms of the learners (above=16): cost + (5 - cost) j / 16; the nearest
    # one to b(c) is |x - round(x)| (5 - c) / 16 away, x = 16 (b - c) / (5 - c)
    arms = cost[:, None] + (5.0 - cost)[:, None] * np.arange(17) / 16
    x = 16 * (b - cost) / np.where(cost < 5, 5.0 - cost, 1.0)
    want = (np.abs(x - np.round(x)) * (5.0 - cost) / 16)[cost <= top].max()
    got = study.bne_distance(bne, cost, b, u, u, arms=arms)["bne_action_gap"]
    assert got == pytest.approx(want, abs=1e-12) and got <= (5.0 - cost[0]) / 32 + 1e-12
    # NaN rows (sellers without arms) are left out
    arms[0] = np.nan
    nan_row = study.bne_distance(bne, cost, b, u, u, arms=arms)["bne_action_gap"]
    assert nan_row == pytest.approx(
        (np.abs(x - np.round(x)) * (5.0 - cost) / 16)[1:][(cost <= top)[1:]].max(), abs=1e-12
    )


def test_collusion_index_is_zero_at_truth_and_one_at_the_joint_profit_reference():
    """Under offline (IC) the equilibrium is truth: truthful sellers' utility on the
    scale's own markets is u_N (Delta 0), the cartel's joint-profit reference u_M (Delta
    1; the markup index is 1 at the best common markup, which u_M is at least);
    the index of a round of truthful sellers is close to 0 on average over rounds."""
    from market_sim.games.psro import _mean_utility, _Sample

    p = tiny(mechanism="offline")
    model = MarketModel(p["m"], dist=p["dist"], mechanism="offline", strategy="truthful",
                        rounds=6, gamma=p["gamma"], new_costs_each_round=True, seed=1)  # fmt: skip
    scale = study.collusion_reference(model, p, None)
    assert scale.u_collusive >= scale.u_markup > scale.u_nash >= 0 and scale.multiplier > 1
    assert study.collusion_index(scale, scale.u_nash) == 0
    assert study.collusion_index(scale, scale.u_collusive) == pytest.approx(1)
    assert study.collusion_index(scale, scale.u_markup, "u_markup") == pytest.approx(1)
    # u_N is the truthful utility on the sampled markets, recomputed here
    sample = _Sample(model.dist, p["m"], study.COLLUSION_MARKETS,
                     np.random.default_rng(p["reference_seed"]))  # fmt: skip
    u = _mean_utility(model.mechanism, sample, sample.costs)
    assert u == pytest.approx(scale.u_nash)
    flat = type(scale)("x", "x", 2, 1.0, 1.0, 1.0, np.ones(1), np.ones(1))
    assert np.isnan(study.collusion_index(flat, 1.0))  # no collusive gain: undefined


def test_the_report_splits_the_summary_into_narrow_tables_with_every_number():
    """Issue #43: one 35-column table was unreadable.  Each table now has at most 12
    columns, and every quantity of ``summarise`` appears with its own mean and CI."""
    df = synthetic(late_share=0.0, q_ratio=1.5)
    t = analysis.summarise(df)
    tables = analysis.report_tables(df)
    assert all(len(tab.columns) <= 12 for _, tab in tables)
    cells = {}
    for _, tab in tables:
        for col in tab.columns[len(analysis.KEYS) :]:
            cells[col] = list(tab[col])
    for q in [c[: -len("_early")] for c in t.columns if c.endswith("_early") and "_ci" not in c]:
        first = cells[f"{analysis.SHORT[q]}, first"]
        pairs = zip(t[f"{q}_early"], t[f"{q}_ci_early"], strict=True)
        assert first == [f"{v:.3g} ± {ci:.2g}" for v, ci in pairs]
    assert cells["BNE payment ratio"] == ["n/a", "1.25", "1.25"]  # offline: IC, no BNE
    assert cells["rounds"] == [20, 20, 20]


def test_the_study_runs_on_a_beta_law(monkeypatch):
    """Issue #47: ``dist=beta:2:5:0:2`` crashed every task ("only 0 sellers have a finite
    virtual cost"): the collusion reference's largest markup put every report at 2,
    where Beta(2, 5)'s density is 0.  Small references here (the offline mechanism on
    a Beta law evaluates its virtual cost through scipy, slowly)."""
    monkeypatch.setattr(study, "COLLUSION_MARKETS", 4)
    monkeypatch.setattr(study, "COLLUSION_MULTIPLIERS", 5)  # 1 ... 1000: the top
    monkeypatch.setattr(study, "COLLUSION_LEVELS", 3)
    monkeypatch.setattr(study, "IC_PROFILES", 1)
    monkeypatch.setattr(study, "_SCALE", {})
    df = rows(dist="beta:2:5:0:2", m=3, rounds=2, mechanism="offline")
    assert len(df) == 2 and np.isfinite(df["collusion_index"]).all()
    assert np.isfinite(df["collusion_index_markup"]).all()
