"""No-regret learners (hedge, exp3, q-learning) and the model's external regret."""

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from market_sim.agents import MarketModel, SellerGroup, Strategy, as_strategy
from market_sim.agents.learners import DEFAULT_ABOVE, DEFAULT_MULTIPLIERS, Exp3, Hedge, QLearning
from market_sim.cli import main
from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError

U15 = parse_distribution("uniform:1:5")


def _stub(seed=0, rounds=10):
    return SimpleNamespace(rng=np.random.default_rng(seed), dist=U15, rounds=rounds)


def _group(cost):
    cost = np.asarray(cost, dtype=float)
    n = cost.size
    return SellerGroup(np.arange(n), np.arange(n), np.arange(n), cost, cost, np.zeros(n))


# ---- the update rules on hand-computed cases ------------------------------------------
def test_hedge_weights_are_exponentiated_cumulative_utilities():
    h = Hedge(multipliers=(1.0, 1.1, 1.2), eta=math.log(2), scale=1.0)
    model = _stub()
    h.start(2, model)
    sel = _group([2.0, 3.0])
    np.testing.assert_allclose(h.probabilities(), np.full((2, 3), 1 / 3))
    h.observe_arms(sel, np.array([[1.0, 0.0, 2.0], [0.0, 0.0, 0.0]]), model)
    # weights 2^G: (2, 1, 4) / 7 and uniform
    np.testing.assert_allclose(h.probabilities(), [[2 / 7, 1 / 7, 4 / 7], [1 / 3] * 3])
    h.observe_arms(sel, np.array([[0.0, 1.0, 0.0], [3.0, 0.0, 0.0]]), model)
    np.testing.assert_allclose(h.probabilities(), [[2 / 8, 2 / 8, 4 / 8], [8 / 10, 1 / 10, 1 / 10]])


def test_hedge_default_rate_and_adaptive_scale():
    h = Hedge(multipliers=(1.0, 1.5, 2.0))
    model = _stub(rounds=50)
    h.start(1, model)
    sel = _group([2.0])
    h.observe_arms(sel, np.array([[0.5, 0.0, 2.5]]), model)  # spread 2.5
    h.observe_arms(sel, np.array([[1.0, 0.0, 0.0]]), model)  # spread 1: S stays 2.5
    eta = math.sqrt(8 * math.log(3) / 50)  # Cesa-Bianchi & Lugosi Thm 2.2, T = rounds
    np.testing.assert_allclose(h.rates(), [eta / 2.5])
    w = np.exp(eta / 2.5 * np.array([1.5, 0.0, 2.5]))
    np.testing.assert_allclose(h.probabilities()[0], w / w.sum())
    anytime = Hedge(multipliers=(1.0, 1.5, 2.0), anytime=True, scale=1.0)
    anytime.start(1, model)
    anytime.observe_arms(sel, np.array([[0.0, 0.0, 0.0]]), model)
    np.testing.assert_allclose(anytime.rates(), [math.sqrt(8 * math.log(3) / 2)])


def test_hedge_draws_by_inverse_cdf_from_the_model_generator():
    h = Hedge(multipliers=(1.0, 1.1, 1.2), eta=math.log(2), scale=1.0)
    model = _stub(seed=5)
    n = 4000
    h.start(n, model)
    sel = _group(np.full(n, 2.0))
    h.observe_arms(sel, np.tile([1.0, 0.0, 2.0], (n, 1)), model)
    reports = h.report_all(sel, model)
    u = np.random.default_rng(5).random(n)  # the same stream
    expected = np.searchsorted(np.cumsum([2 / 7, 1 / 7, 4 / 7]), u, side="right")
    np.testing.assert_array_equal(h.last, expected)
    np.testing.assert_allclose(reports, 2.0 * np.array([1.0, 1.1, 1.2])[expected])
    assert abs(np.mean(expected == 2) - 4 / 7) < 0.03


def test_exp3_importance_weighted_update():
    e = Exp3(multipliers=(1.0, 1.5), gamma=0.5)
    model = _stub(seed=1)
    e.start(1, model)
    sel = _group([2.0])
    np.testing.assert_allclose(e.probabilities(), [[0.5, 0.5]])
    e.report_all(sel, model)
    e.observe_all(sel, np.array([3.0]), model)  # one value seen: range [3, 3], reward 0
    np.testing.assert_allclose(e.probabilities(), [[0.5, 0.5]])
    e.report_all(sel, model)
    e.observe_all(sel, np.array([1.0]), model)  # range [1, 3]: reward (1 - 1)/2 = 0
    np.testing.assert_allclose(e.probabilities(), [[0.5, 0.5]])
    e.report_all(sel, model)
    arm = int(e.last[0])
    e.observe_all(sel, np.array([2.0]), model)  # range [1, 3]: reward 1/2, estimate 1/2 / 0.5
    g = np.zeros(2)
    g[arm] = 1.0
    w = np.exp(0.5 * g / 2)
    p = 0.5 * w / w.sum() + 0.25  # (1 - gamma) w / sum w + gamma / K
    np.testing.assert_allclose(e.probabilities()[0], p)
    e.report_all(sel, model)
    arm2, p2 = int(e.last[0]), p[int(e.last[0])]
    e.observe_all(sel, np.array([5.0]), model)  # range [1, 5]: reward 1
    g[arm2] += 1.0 / p2
    w = np.exp(0.5 * g / 2)
    np.testing.assert_allclose(e.probabilities()[0], 0.5 * w / w.sum() + 0.25)
    # Auer et al. (2002) Cor. 3.2: gamma = min(1, sqrt(K ln K / ((e - 1) T)))
    d = Exp3()  # default arms: above=16, K = 17
    d.start(1, _stub(rounds=1000))
    assert d.n_arms == DEFAULT_ABOVE + 1 == 17
    assert d.rate == pytest.approx(math.sqrt(17 * math.log(17) / ((math.e - 1) * 1000)))


def _play(learner, table: np.ndarray, seed: int = 3) -> np.ndarray:
    """Run ``learner`` (one seller) on a (T, K) table of arm utilities: each round it
    draws an arm and observes that arm's utility (Exp3) or every arm's (Hedge); the
    arms played."""
    T, K = table.shape
    model = _stub(seed=seed, rounds=T)
    learner.start(1, model)
    sel = _group([2.0])
    arms = np.empty(T, dtype=int)
    for t in range(T):
        learner.report_all(sel, model)
        arms[t] = int(learner.last[0])
        if learner.full_information:
            learner.observe_arms(sel, table[t][None, :], model)
        else:
            learner.observe_all(sel, table[t, arms[t]][None], model)
    return arms


@pytest.mark.parametrize(
    "make",
    [lambda: Exp3(multipliers=DEFAULT_MULTIPLIERS), lambda: Hedge(multipliers=DEFAULT_MULTIPLIERS)],
)
def test_a_shift_of_the_utilities_does_not_change_the_play(make):
    """Issue #49: Exp3's reward range always included 0, so utilities in [10, 11] were
    squeezed into [0.91, 1] and it played nearly uniformly (regret 474 at T = 10^4).
    Both learners now scale by the observed range (Hedge: the largest spread across
    arms), so utilities + 10 give the same play, arm for arm, with the same seed; and
    Exp3's regret there stays below Auer et al.'s bound 2.63 sqrt(T K ln K) (rewards
    of range 1) and well below uniform play's."""
    T, K = 3000, len(DEFAULT_MULTIPLIERS)
    rng = np.random.default_rng(0)
    means = np.linspace(0.2, 0.8, K)  # arm K - 1 is the best by 0.1 per round
    table = np.clip(means + 0.2 * rng.standard_normal((T, K)), 0.0, 1.0)
    arms = _play(make(), table)
    shifted = _play(make(), table + 10.0)
    np.testing.assert_array_equal(arms, shifted)
    regret = table[:, -1].sum() - table[np.arange(T), shifted].sum()
    uniform = table[:, -1].sum() - table.mean(axis=1).sum()  # 0.3 T
    assert regret < 2.63 * math.sqrt(T * K * math.log(K)) and regret < 0.5 * uniform


def test_q_learning_update_and_decaying_exploration():
    q = QLearning(multipliers=(1.0, 1.5), alpha=0.5, delta=0.5, beta=50.0)
    model = _stub(seed=2)
    q.start(1, model)
    sel = _group([2.0])
    r = q.report_all(sel, model)  # t = 0: eps_0 = 1, every seller explores
    a = int(q.last[0])
    assert r[0] == pytest.approx(2.0 * (1.0, 1.5)[a])
    model.eps = np.array([0.3])  # bought: next state 1
    q.observe_all(sel, np.array([2.0]), model)
    assert q.Q[0, 0, a] == pytest.approx(0.5 * (2.0 + 0.5 * 0.0))  # = 1
    assert q.s[0] == 1
    q.report_all(sel, model)  # eps_1 = exp(-50): greedy in state 1, a tie -> the truth
    assert q.last[0] == 0
    model.eps = np.array([0.0])
    q.observe_all(sel, np.array([-0.5]), model)
    # Q(1, 0) = 0.5 * 0 + 0.5 * (-0.5 + 0.5 * max Q(0, .))
    assert q.Q[0, 1, 0] == pytest.approx(0.5 * (-0.5 + 0.5 * max(q.Q[0, 0])))
    assert q.s[0] == 0
    d = QLearning()
    d.start(1, _stub(rounds=200))
    assert d.decay == pytest.approx(math.log(100) / 200)  # eps_T = 1%


def test_grid_arms_are_the_truth_and_the_cell_midpoints():
    h = Hedge(grid=4, eta=1.0)
    model = MarketModel(3, dist="uniform:1:5", strategy=h, rounds=1, seed=0)
    sel = model._group_view(model.groups[0])
    arms = h.arm_reports(sel, model)
    np.testing.assert_allclose(arms[:, 0], model.cost)
    np.testing.assert_allclose(arms[:, 1:], np.tile([1.5, 2.5, 3.5, 4.5], (3, 1)))
    for j in range(5):  # the chosen arm's report is the same number as in arm_reports
        got = h._reports_of(np.full(3, j), sel, model)
        np.testing.assert_array_equal(got, arms[:, j])


# ---- external regret in the model ------------------------------------------------------
def _brute_force_regret(model, agent_df):
    """Each seller's cumulative external regret / rounds, recomputed from the recorded
    reports round by round (participants: utility >= 0 in the round before)."""
    mech, n = model.mechanism, model.n_sellers
    strat = model.groups[0].strategy
    cum_arm, cum_real, played = None, np.zeros(n), np.zeros(n)
    prev_u = np.zeros(n)
    out = []
    for t in range(1, model.rounds + 1):
        rows = agent_df[agent_df["round"] == t].sort_values("seller_id")
        present = prev_u >= -1e-9
        idx = np.flatnonzero(present)
        reports = rows.report.to_numpy()[idx]
        cost = rows.cost.to_numpy()[idx]
        sel = _group(cost)
        arms = strat.arm_reports(sel, model)
        u = mech.deviation_utilities(np.arange(idx.size), arms, cost, reports, model.rng)
        if mech.randomized:
            real = mech.deviation_utilities(
                np.arange(idx.size), reports[:, None], cost, reports, model.rng
            )[:, 0]
        else:
            real = rows.utility.to_numpy()[idx]
        if cum_arm is None:
            cum_arm = np.zeros((n, arms.shape[1]))
        cum_arm[idx] += u
        cum_real[idx] += real
        played[idx] += 1
        with np.errstate(invalid="ignore", divide="ignore"):
            out.append(np.where(played > 0, (cum_arm.max(axis=1) - cum_real) / played, np.nan))
        prev_u = rows.utility.to_numpy()
    return np.array(out)


@pytest.mark.parametrize(
    "mechanism, strategy",
    [
        ("pay-as-bid", "hedge:multipliers=0.8,0.9,1,1.1,1.25,1.5,2"),
        ("pay-as-bid", "exp3:multipliers=0.8,0.9,1,1.1,1.25,1.5,2"),
        ("pay-as-bid", "hedge"),
        ("online", "q-learning:grid=5"),
        ("private-posted-price", "hedge"),
    ],
)
def test_external_regret_is_best_fixed_arm_minus_realised(mechanism, strategy):
    model = MarketModel(
        8, dist="uniform:1:5", mechanism=mechanism, strategy=strategy, rounds=6, seed=3
    )
    model_df, agent_df = model.run()
    want = _brute_force_regret(model, agent_df)
    got = agent_df.pivot(index="round", columns="seller_id", values="external_regret").to_numpy()
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(model_df.avg_external_regret, np.nanmean(want, axis=1), rtol=1e-9)
    if "multipliers" in strategy:  # sellers who undercut lose and sit the next round out
        assert (agent_df.utility < 0).any()
    elif mechanism == "pay-as-bid":  # the default arms (above=16) never report below cost
        assert (agent_df.utility >= 0).all() and (agent_df.report >= agent_df.cost).all()


def test_hedge_regret_falls_toward_zero_under_the_online_mechanism():
    kw = dict(dist="uniform:1:5", mechanism="online", measure_regret=False)
    model = MarketModel(60, strategy="hedge", rounds=400, seed=1, **kw)
    df = model.run()[0]
    r = df.avg_external_regret.to_numpy()
    assert r[9] > 0 and r[-1] < 0.25 * r[9]
    # Thm 2.2 with the largest spread B of any seller: R_T / T <= B sqrt(ln K / (2T))
    B = model.groups[0].strategy.S.max()
    assert r[-1] <= B * math.sqrt(math.log(7) / (2 * 400))
    # existing strategies: no learner, no regret column, NaN average
    truthful = MarketModel(10, strategy="truthful", rounds=2, seed=1, **kw)
    tdf, tag = truthful.run()
    assert tdf.avg_external_regret.isna().all() and "external_regret" not in tag.columns


def test_exp3_regret_falls_with_the_counterfactuals_measured():
    m = MarketModel(
        40,
        dist="uniform:1:5",
        mechanism="online",
        strategy="exp3:multipliers=0.8,0.9,1,1.1,1.25,1.5,2",  # 7 arms (17 learn slower)
        rounds=400,
        seed=1,
        n_grid=3,
    )
    r = m.run()[0].avg_external_regret.to_numpy()
    assert r[-1] < 0.5 * r[9] and r[-1] < r[199] < r[99]  # bandit: slower than hedge


def test_hedge_regret_falls_under_pay_as_bid():
    m = MarketModel(
        8,
        dist="uniform:1:5",
        mechanism="pay-as-bid",
        strategy="hedge",
        rounds=40,
        seed=2,
        measure_regret=False,
    )
    r = m.run()[0].avg_external_regret.to_numpy()
    assert r[-1] < 0.5 * r[:10].max()


def test_default_arms_reach_every_bid_between_cost_and_top():
    """Issue #51: the default action set (above=16) holds the truth and the top, and
    every bid b in [c, top] lies within (top - c) / 32 of an arm (so it contains the
    BNE bids of first-price-like mechanisms, which lie there); the old multipliers
    (x0.8 .. x2) reach no bid above 2c, which on Beta(2, 5) costs on [0, 2] excludes
    the BNE bids of the cheapest sellers."""
    h = Hedge()
    model = _stub(rounds=10)
    model.dist = SimpleNamespace(support=(0.0, 2.0))
    cost = np.array([0.0, 0.05, 0.4, 1.3, 2.0])
    arms = h.arm_reports(SimpleNamespace(cost=cost), model)
    assert arms.shape == (5, DEFAULT_ABOVE + 1)
    np.testing.assert_array_equal(arms[:, 0], cost)  # arm 0: the truth
    np.testing.assert_allclose(arms[:, -1], 2.0)  # the last arm: the top
    bids = cost[:, None] + (2.0 - cost)[:, None] * np.linspace(
        0, 1, 3201
    )  # holds the cell midpoints
    nearest = np.abs(bids[:, :, None] - arms[:, None, :]).min(axis=2).max(axis=1)
    np.testing.assert_allclose(nearest, (2.0 - cost) / 32, atol=1e-12)
    # the reports of chosen arms are the same numbers as arm_reports
    arm = np.array([0, 3, 16, 7, 5])
    np.testing.assert_array_equal(
        h._reports_of(arm, SimpleNamespace(cost=cost), model), arms[np.arange(5), arm]
    )
    assert max(DEFAULT_MULTIPLIERS) * 0.05 <= 0.1 < arms[1, 1]  # old reach vs the first markup


def test_hedge_under_the_offline_mechanism_ends_on_the_truth():
    m = MarketModel(
        10,
        dist="uniform:1:5",
        mechanism="offline",
        strategy="hedge:multipliers=0.8,0.9,1,1.1,1.25,1.5,2",
        rounds=60,
        seed=4,
        measure_regret=False,
    )
    r = m.run()[0].avg_external_regret.to_numpy()
    assert r[-1] < 0.1 * r[0] and r[-1] < r[29] < r[9]  # 0.036 -> 0.0055 -> 0.0037 -> 0.0025
    h = m.groups[0].strategy
    learned = h.S > 1e-9  # sellers whose arms ever differed (the others are indifferent)
    assert learned.sum() >= 3
    p = h.probabilities()[learned]
    truth = 2  # multipliers (0.8, 0.9, 1.0, ...)
    # no arm beats the truth (IC): it has the largest probability (ties: arms that never sell)
    assert (p[:, truth] >= p.max(axis=1) - 1e-12).all()
    # sellers the truth sold for: the truth is strictly the most likely arm, and clearly so
    sold = h.G[learned][:, truth] > 0
    assert sold.sum() >= 2
    assert (p[sold].argmax(axis=1) == truth).all()
    assert (p[sold][:, truth] > 1 / 7).all() and p[sold][:, truth].mean() > 0.35


def test_bandit_regret_needs_measure_regret_but_hedge_always_has_it():
    kw = dict(dist="uniform:1:5", mechanism="online", rounds=3, seed=0, measure_regret=False)
    assert MarketModel(6, strategy="exp3", **kw).run()[0].avg_external_regret.isna().all()
    assert MarketModel(6, strategy="hedge", **kw).run()[0].avg_external_regret.notna().all()
    on = dict(kw, measure_regret=True)
    assert MarketModel(6, strategy="exp3", **on).run()[0].avg_external_regret.notna().all()


@pytest.mark.parametrize("strategy", ["hedge", "exp3", "q-learning:state=arm", "hedge:grid=6"])
def test_same_seed_same_numbers(strategy):
    kw = dict(dist="uniform:1:5", mechanism="online", strategy=strategy, rounds=5)
    a = MarketModel(9, seed=8, **kw).run()
    b = MarketModel(9, seed=8, **kw).run()
    c = MarketModel(9, seed=9, **kw).run()
    pd.testing.assert_frame_equal(a[0], b[0])
    pd.testing.assert_frame_equal(a[1], b[1])
    assert not np.array_equal(a[1].report, c[1].report)


def test_learners_mix_with_other_strategies_and_sellers_who_sit_out():
    m = MarketModel(
        20,
        dist="uniform:1:5",
        mechanism="online",
        strategy={"hedge": 0.4, "q-learning": 0.3},
        rounds=4,
        xi=0.6,
        seed=5,
    )
    df, ag = m.run()
    learners = ag[ag.strategy.isin(["hedge", "q-learning"])]
    others = ag[~ag.strategy.isin(["hedge", "q-learning"])]
    assert others.external_regret.isna().all() and len(learners) == 4 * 14
    played = []
    for gi, book in m._learners.items():  # NaN exactly for sellers never scored
        ids = m.groups[gi].ids
        np.testing.assert_array_equal(np.isnan(m.external_regret[ids]), book.played == 0)
        played.append(book.played)
    played = np.concatenate(played)
    assert played.min() < 4 and played.max() == 4  # some sat rounds out
    last = learners[learners["round"] == 4].external_regret
    assert df.avg_external_regret.iloc[-1] == pytest.approx(last.mean())  # NaN skipped


# ---- bad input -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "spec, msg",
    [
        ("hedge:eta=-1", "eta must be a number > 0"),
        ("hedge:eta=0", "eta must be a number > 0"),
        ("hedge:foo=1", "no parameter 'foo'"),
        ("hedge:scale=0", "scale must be"),
        ("exp3:gamma=1.5", r"gamma must be in \(0, 1\]"),
        ("q-learning:alpha=0", "alpha must be"),
        ("q-learning:delta=1", r"delta must be in \[0, 1\)"),
        ("q-learning:state=price", "state must be one of"),
        ("hedge:multipliers=0", "multipliers must be"),
        ("hedge:grid=0", "grid must be an integer"),
        ("hedge:grid=3:multipliers=1,2", "give one of multipliers, grid or above"),
        ("hedge:above=0", "above must be an integer >= 1"),
        ("exp3:above=4:grid=2", "give one of multipliers, grid or above"),
        ("exp3:horizon=0", "horizon must be"),
    ],
)
def test_bad_parameters_are_one_clear_error(spec, msg):
    with pytest.raises(MarketSimError, match=msg):
        as_strategy(spec)


def test_empty_arms_are_refused():
    with pytest.raises(MarketSimError, match="non-empty"):
        Hedge(multipliers=())


def test_cli_bad_learning_rate_exits_2_with_one_line(tmp_path, capsys):
    args = ["simulate", "--dist", "uniform:1:5", "--sellers", "5", "--rounds", "2"]
    code = main([*args, "--strategy", "hedge:eta=-1", "--out", str(tmp_path), "--quiet"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err.count("\n") == 0 and "eta must be a number > 0" in err


class _FixedArm(Strategy):
    """A user's learner that always plays one arm of (truth, 1.5 x cost): the protocol only."""

    def __init__(self, arm=0):
        self.arm = arm

    def arm_reports(self, sellers, model):
        lo, hi = model.dist.support
        return np.column_stack([sellers.cost, np.clip(1.5 * sellers.cost, lo, hi)])

    def report_all(self, sellers, model):
        return self.arm_reports(sellers, model)[:, self.arm]


def test_a_users_learner_gets_external_regret_through_the_protocol():
    kw = dict(dist="uniform:1:5", mechanism="online", rounds=3, seed=1)
    truthful = MarketModel(12, strategy=_FixedArm(0), **kw)
    df, ag = truthful.run()
    # online is IC: the truth is the best fixed arm, so playing it has no regret
    assert np.abs(ag.external_regret).max() <= 1e-12
    shading = MarketModel(12, strategy=_FixedArm(1), **kw)
    df, ag = shading.run()
    # the regret of always shading is the mean gain of the truth over it, > 0 for the bought
    arms = _FixedArm().arm_reports(_group(shading.cost), shading)
    u = shading.mechanism.deviation_utilities(np.arange(12), arms, shading.cost, arms[:, 1])
    gain = np.maximum(u[:, 0] - u[:, 1], 0.0)
    last = ag[ag["round"] == 3].sort_values("seller_id")
    np.testing.assert_allclose(last.external_regret, gain, rtol=1e-9, atol=1e-15)
    assert gain.max() > 0
    off = MarketModel(12, strategy=_FixedArm(1), measure_regret=False, **kw).run()[0]
    assert off.avg_external_regret.isna().all()  # a bandit learner: measured only on request


def test_mesa_batch_run_with_a_learner():
    import mesa

    rows = mesa.batch_run(
        MarketModel,
        parameters={"n_sellers": 6, "rounds": 3, "strategy": "hedge", "mechanism": "online",
                    "dist": "uniform:1:5", "rng": [0, 1]},
        iterations=1,
        data_collection_period=1,
        display_progress=False,
        number_processes=1,
    )  # fmt: skip
    df = pd.DataFrame(rows)
    assert df[df.Step == 0].avg_external_regret.isna().all()  # step 0: nothing played yet
    for r in (0, 1):
        got = df[(df.rng == r) & (df.Step > 0)].sort_values("Step").avg_external_regret
        direct = MarketModel(
            6, rounds=3, strategy="hedge", mechanism="online", dist="uniform:1:5", rng=r
        ).run()[0]
        assert got.size >= 2 and got.notna().all()
        np.testing.assert_allclose(got, direct.avg_external_regret.to_numpy()[: got.size])
