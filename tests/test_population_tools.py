"""Populations in the tools: per-seller laws in the mechanisms defined per seller,
``as_mechanism(population=)``, ``MarketModel(population=)`` and ``compare`` on a
population (docs/population.md)."""

import numpy as np
import pytest
from scipy import integrate

from market_sim.distributions import SellerLaws, parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms import as_mechanism
from market_sim.mechanisms.offline import solve
from market_sim.mechanisms.online import OnlineMechanism
from market_sim.mechanisms.payments import OfflineCurves, offline_payments
from market_sim.population import Population

TWO = Population([("uniform:0:1", 8), ("uniform:1:2", 4)])
PARAMS = dict(mu=1.0, sigma=1.0, gamma=0.3)


def _costs(pop=TWO, seed=1):
    return pop.sample(np.random.default_rng(seed)).costs


# ---- 1. per-seller laws in the offline and online mechanisms ----------------------------
@pytest.mark.parametrize("k", [None, 3])
def test_offline_payments_integrate_each_sellers_eps_to_its_own_top(k):
    """Eq. 8 (003) per seller, by brute force: t_i = c_i eps_i + int_{c_i}^{h_i} eps_i(z) dz
    with eps_i(z) from a full re-solve of the market where seller i alone reports z
    (psi_i of its own law), integrated by adaptive quadrature up to the top h_i of
    seller i's OWN support (1 for class 0, 2 for class 1).  Both classes have bought
    sellers in this market (checked), so a wrong top or a wrong psi_i in either class
    shows up."""
    laws, c = TWO.seller_laws, _costs()
    kw = dict(PARAMS, k=k)
    eps, pay = offline_payments(c, laws, **kw)
    assert np.array_equal(eps, solve(laws.virtual_cost(c), **kw).eps)
    assert (eps[TWO.group == 0] > 0).any() and (eps[TWO.group == 1] > 0).any()

    def eps_at(i, z):
        r = c.copy()
        r[i] = z
        return solve(laws.virtual_cost(r), **kw).eps[i]

    for i in np.flatnonzero(eps > 0):
        tail = integrate.quad(lambda z, i=i: eps_at(i, z), c[i], laws.high[i], limit=200)[0]
        assert pay[i] == pytest.approx(c[i] * eps[i] + tail, abs=1e-8)


@pytest.mark.parametrize("spec", ["offline", "online", "online:rule=alg3"])
def test_per_seller_mechanisms_are_ic_and_ir_on_a_grid_for_both_classes(spec):
    """Every seller of either class: utility >= 0 at the truth (IR), and no report on a
    grid over the hull [0, 2] of the supports beats the truth (IC); reports outside a
    seller's own support are read as its nearest end, so they are covered too."""
    mech = as_mechanism(spec, population=TWO, **dict(PARAMS, gamma=0.05))
    c = _costs(seed=2)
    n = c.size
    grid = np.column_stack([c, np.broadcast_to(np.linspace(0.0, 2.0, 41), (n, 41))])
    u = mech.deviation_utilities(np.arange(n), grid, c, c)
    assert np.all(u[:, 0] >= -1e-12)
    assert np.all(u[:, 1:].max(axis=1) <= u[:, 0] + 1e-9)
    assert (mech.run(c).eps[TWO.group == 1] > 0).any()  # class 1 is bought (a real test)


def test_pay_as_bid_per_seller_is_not_ic():
    """The control stays a control: with per-seller laws someone gains by shading up."""
    mech = as_mechanism("pay-as-bid", population=TWO, **dict(PARAMS, gamma=0.05))
    c = _costs(seed=2)
    grid = np.column_stack([c, np.clip(c * 1.1, TWO.seller_laws.low, TWO.seller_laws.high)])
    u = mech.deviation_utilities(np.arange(c.size), grid, c, c)
    assert np.max(u[:, 1] - u[:, 0]) > 1e-4


def test_one_class_is_the_one_law_path_bit_for_bit():
    """A one-class population's seller laws take the very same calls as the law itself."""
    pop = Population([("uniform:0:1", 12)])
    law, c = pop.laws[0], _costs(pop, seed=4)
    Z = np.column_stack([c, np.clip(1.3 * c, 0, 1), np.full(c.size, 0.05)])
    for k in (None, 3):
        kw = dict(PARAMS, k=k)
        for a, b in zip(
            offline_payments(c, law, **kw), offline_payments(c, pop.seller_laws, **kw), strict=True
        ):
            assert np.array_equal(a, b)
        ca = OfflineCurves(c, law, **kw).outcome_at(Z)
        cb = OfflineCurves(c, pop.seller_laws, **kw).outcome_at(Z)
        assert all(np.array_equal(a, b) for a, b in zip(ca, cb, strict=True))
    for rule in ("fluid", "alg3"):
        a = OnlineMechanism(law, 12, **PARAMS, rule=rule).run(c)
        b = OnlineMechanism(pop.seller_laws, 12, **PARAMS, rule=rule).run(c)
        assert np.array_equal(a.eps, b.eps) and np.array_equal(a.payments, b.payments)


def test_two_classes_of_one_law_pay_as_that_law():
    """Splitting sellers into two classes with the same law changes nothing (to rounding:
    the integrals are batched by class); curves for candidates agree too."""
    d = parse_distribution("uniform:0:1")
    c = d.sample(15, np.random.default_rng(3))
    laws = SellerLaws((d, d), np.arange(15) % 2)
    for k in (None, 4):
        a = offline_payments(c, d, **PARAMS, k=k)
        b = offline_payments(c, laws, **PARAMS, k=k)
        assert np.array_equal(a[0], b[0])
        np.testing.assert_allclose(a[1], b[1], rtol=1e-14, atol=1e-16)
    # online: the class-weighted fluid rule (another code path) finds the law's cut-off
    for gamma in (1.0, 0.05):
        one = OnlineMechanism(d, 15, mu=1.0, sigma=1.0, gamma=gamma)
        two = OnlineMechanism(laws, 15, mu=1.0, sigma=1.0, gamma=gamma)
        assert two.cutoff == pytest.approx(one.cutoff, rel=1e-10)
        assert two.scale == pytest.approx(one.scale, rel=1e-9)
        np.testing.assert_allclose(two.run(c).payments, one.run(c).payments, rtol=1e-9)


def test_online_per_seller_payments_integrate_to_each_own_top():
    """Online: t_i = c_i eps_i + int_{c_i}^{h_i} eps_i, the integral by quad of the
    mechanism's own eps_i(z) up to seller i's own top; the cut-off is a root of the
    class-weighted Eq. 14 in expectation (phi(lam) = 0, 003)."""
    laws, c = TWO.seller_laws, _costs(seed=0)
    mech = OnlineMechanism(laws, 12, **PARAMS)
    assert (mech.run(c).eps[TWO.group == 1] > 0).sum() == 0  # at gamma 0.3; now 0.05:
    mech = OnlineMechanism(laws, 12, **dict(PARAMS, gamma=0.05))
    assert (mech.run(c).eps[TWO.group == 1] > 0).any()
    out = mech.run(c)
    for i in range(c.size):
        kink = [t for t in [mech.threshold_cost[i]] if c[i] < t < laws.high[i]]  # eps hits 0
        tail = integrate.quad(
            lambda z, i=i: mech.eps(np.array([z]), sellers=[i])[0],
            c[i],
            laws.high[i],
            points=kink or None,
        )[0]
        assert out.payments[i] == pytest.approx(c[i] * out.eps[i] + tail, abs=1e-10)
    g, w = mech.moments(mech.cutoff)
    assert mech.cutoff - mech.sigma * mech.m * g / mech.mu**2 - g / w == pytest.approx(0, abs=1e-10)
    # class 1's eps uses psi_1(c) = 2c - 1, class 0's psi_0(c) = 2c
    i0, i1 = 0, 8
    z = np.array([0.1])
    assert mech.eps(z, sellers=[i0])[0] == pytest.approx(
        mech.scale * max(mech.cutoff - 0.05 * 0.2, 0)
    )
    assert mech.eps(np.array([1.01]), sellers=[i1])[0] == pytest.approx(
        mech.scale * max(mech.cutoff - 0.05 * 1.02, 0)
    )
    assert mech.eps(np.array([1.01]), sellers=[i1])[0] > 0


def test_a_report_outside_the_own_support_reads_as_its_nearest_end():
    mech = as_mechanism("offline", population=TWO, **PARAMS)
    c = _costs()
    high, low = c.copy(), c.copy()
    high[0], low[-1] = 1.7, 0.2  # class 0 above its top 1, class 1 below its bottom 1
    at_top, at_bottom = c.copy(), c.copy()
    at_top[0], at_bottom[-1] = 1.0, 1.0
    for r, ref in ((high, at_top), (low, at_bottom)):
        a, b = mech.run(r), mech.run(ref)
        assert np.array_equal(a.eps, b.eps) and np.array_equal(a.payments, b.payments)
    with pytest.raises(MarketSimError, match="outside every seller's support"):
        mech.run(np.r_[c[:-1], 2.5])


# ---- 2. as_mechanism(population=) -------------------------------------------------------
def test_as_mechanism_gives_per_seller_laws_or_the_pooled_law():
    for spec in ("offline", "pay-as-bid", "online"):
        assert isinstance(as_mechanism(spec, population=TWO).dist, SellerLaws)
    posted = as_mechanism("posted-price", population=TWO)
    assert posted.dist is TWO.pooled
    # the pooled law is the count-weighted mixture: F(1) = 8/12
    assert float(posted.dist.cdf(1.0)) == pytest.approx(8 / 12)
    assert as_mechanism("private-cutoff", population=TWO).n_sellers == 12
    assert as_mechanism("online", population=TWO).m == 12


def test_as_mechanism_bad_population_input_is_one_line():
    gap = Population([("uniform:0:1", 5), ("uniform:2:3", 5)])
    cases = [
        (dict(population=TWO, n_sellers=5), "offline", "conflicts"),
        (dict(population=TWO), "data-dependent", "needs the sellers' data"),
        (dict(population=gap), "posted-price", "takes one cost law"),
        (dict(population=TWO, dist="uniform:0:1"), "offline", "not both"),
    ]
    for kw, spec, msg in cases:
        with pytest.raises(MarketSimError, match=msg) as err:
            as_mechanism(spec, **kw)
        assert "\n" not in str(err.value)
    # a spec string is a population too; per-seller mechanisms serve gapped classes
    assert as_mechanism("offline", population="5*uniform:0:1+5*uniform:2:3").dist.n_sellers == 10


# ---- 3. MarketModel(population=) ---------------------------------------------------------
def _after_mesa(seed):
    """default_rng(seed) after mesa.Model's set-up has drawn from it (as the model's)."""
    import mesa

    rng = np.random.default_rng(seed)
    mesa.Model(rng=rng)
    return rng


def test_market_model_draws_its_market_from_the_population():
    """Round 1's costs are pop.sample(rng) exactly, rng in the state the model leaves it
    after mesa.Model's own set-up (its first draw);
    the frames carry each seller's class; the proxy loss is Eq. 11 (003) with each
    seller's own psi_i; the shorthand dist + n_sellers draws the same costs as a
    one-class population."""
    from market_sim.agents import MarketModel
    from market_sim.mechanisms.offline import proxy_loss_of_eps

    model = MarketModel(population=TWO, mechanism="offline", rounds=1, seed=5, **PARAMS)
    rounds, sellers = model.run()
    market = TWO.sample(_after_mesa(5))
    assert np.array_equal(sellers["cost"].to_numpy(), market.costs)
    assert np.array_equal(sellers["group"].to_numpy(), TWO.group)
    assert isinstance(model.mechanism.dist, SellerLaws)
    psi = TWO.seller_laws.virtual_cost(market.costs)
    eps = sellers["eps"].to_numpy()
    assert rounds["proxy_loss"].iloc[0] == pytest.approx(
        proxy_loss_of_eps(eps, psi, mu=1.0, sigma=1.0, gamma=0.3), rel=1e-12
    )
    short = MarketModel(12, dist="uniform:1:5", rounds=1, seed=2)
    one = MarketModel(population="12*uniform:1:5", rounds=1, seed=2)
    assert np.array_equal(short.cost, one.cost)
    assert "group" not in short.run()[1].columns  # the shorthand's frames are unchanged


def test_market_model_runs_data_dependent_on_the_population_alone():
    """The data-dependent mechanism needs nothing but a population with data: the rows
    and the test rows are the population's market (its first draw)."""
    from market_sim.agents import MarketModel

    pop = Population([("uniform:0:1", 8)], data="synthetic", rho=-0.5, on="label_noise", n_test=50)
    model = MarketModel(
        population=pop,
        mechanism="data-dependent:n_nodes=3",
        rounds=1,
        measure_regret=False,
        gamma=0.05,
        seed=3,
    )
    market = pop.sample(_after_mesa(3))
    assert np.array_equal(model.X, market.data[0]) and np.array_equal(model.y, market.data[1])
    assert np.array_equal(model.platform.test_data[0], market.test[0])
    rounds, sellers = model.run()
    bought = sellers["eps"].to_numpy() > 0
    assert np.unique(market.data[1][bought]).size == 2  # so the private model is trained
    assert 0 <= rounds["test_error"].iloc[0] <= 1


def test_market_model_bad_population_input_is_one_line():
    from market_sim.agents import MarketModel

    cases = [
        (dict(n_sellers=5, population=TWO), "conflicts"),
        (dict(population=TWO, dist="uniform:0:1"), "not both"),
        (dict(population=TWO, data="synthetic"), "come from the population"),
        (dict(population=TWO, mechanism="data-dependent"), "needs the sellers' data"),
        (dict(population=TWO, market=TWO.sample(np.random.default_rng(0)).costs), "0 costs"),
        (dict(population="3*uniform:0:1;data=synthetic", market=Population(
            [("uniform:0:1", 3)]).sample(np.random.default_rng(0))), "has data and this"),
    ]  # fmt: skip
    for kw, msg in cases:
        with pytest.raises(MarketSimError, match=msg) as err:
            MarketModel(**kw)
        assert "\n" not in str(err.value)
    given = TWO.sample(np.random.default_rng(9))  # a market given: its costs, no draw
    model = MarketModel(population=TWO, market=given, rounds=1, seed=5, **PARAMS)
    assert np.array_equal(model.cost, given.costs)


# ---- 4. compare on a population -------------------------------------------------------
def test_compare_runs_every_mechanism_on_the_populations_markets():
    """The markets are pop.sample(rng) one after another (re-drawn here and re-run
    independently: the same objectives); each class's parts add up to the market's
    objective and payments; the per-class table is printed."""
    from market_sim.comparison import compare, objective

    res = compare(["offline", "online", "posted-price"], TWO, None, 3, 7, audit=False, **PARAMS)
    rng = np.random.default_rng(7)
    markets = [TWO.sample(rng) for _ in range(3)]
    rows = res.markets
    for spec in ("offline", "online"):
        mech = as_mechanism(spec, population=TWO, **PARAMS)
        mine = rows[rows["mechanism"] == spec].sort_values("market")
        for k, mk in enumerate(markets):
            out = mech.run(mk.costs)
            assert mine["objective"].iloc[k] == objective(out.eps, out.payments, **PARAMS)
            assert mine["class1_payment"].iloc[k] == pytest.approx(out.payments[8:].sum())
    finite = np.isfinite(rows["objective"])
    parts = rows["class0_objective"] + rows["class1_objective"]
    np.testing.assert_allclose(parts[finite], rows["objective"][finite], rtol=1e-12)
    np.testing.assert_allclose(
        rows["class0_payment"] + rows["class1_payment"], rows["payment"], rtol=1e-12, atol=1e-15
    )
    assert {"class0_objective_mean", "class1_payment_mean"} <= set(res.leaderboard.columns)
    assert "By class of 8*uniform:0:1+4*uniform:1:2" in res.format()


def test_compare_ranks_data_dependent_beside_offline_on_the_same_data():
    """With data in the population, data-dependent is run with each market's own rows
    (re-run here with with_data on the re-drawn markets: the same objective)."""
    from market_sim.comparison import compare, objective

    pop = Population([("uniform:0:1", 5)], data="synthetic", rho=-0.8, on="label_noise", n_test=20)
    spec = "data-dependent:n_nodes=3"  # a coarse payment rule: fast, the same on both sides
    res = compare(["offline", spec], pop, 5, 2, 3, audit=False, **PARAMS)
    rng = np.random.default_rng(3)
    markets = [pop.sample(rng) for _ in range(2)]
    dd = as_mechanism(spec, population=pop, **PARAMS)
    rows = res.markets[res.markets["mechanism"] == spec].sort_values("market")
    for k, mk in enumerate(markets):
        out = dd.with_data(*mk.data).run(mk.costs)
        assert rows["objective"].iloc[k] == objective(out.eps, out.payments, **PARAMS)
    assert set(res.leaderboard["mechanism"]) == {"offline", spec}
    assert "By class" not in res.format() and spec in res.format()  # one class: no class table


def test_compare_audits_data_dependent_on_the_same_markets_and_data():
    """With audits on, the data-dependent mechanism is audited on the compared markets
    with their rows: its verdicts and max gain are those of ``audit(..., costs=,
    data=)`` on the markets re-drawn from the same seed (the audit seed drawn after
    them); data without costs, or not one row per seller, is refused in one line."""
    from market_sim.auditing import audit
    from market_sim.comparison import compare

    pop = Population([("uniform:0:1", 5)], data="synthetic", n_test=20)
    spec = "data-dependent:n_nodes=3"
    search = dict(n_grid=5, n_random=2, refine=False)
    res = compare(["offline", spec], pop, 5, 2, 3, **search, **PARAMS)
    row = res.leaderboard.set_index("mechanism").loc[spec]
    assert row["ic"] in ("ic", "not_ic") and row["ir"] in ("ir", "not_ir")
    assert "not audited" not in res.format()
    rng = np.random.default_rng(3)
    markets = [pop.sample(rng) for _ in range(2)]
    rng.integers(2**63, size=2)  # the outcome seeds
    seed = int(rng.integers(2**63))
    costs = np.array([mk.costs for mk in markets])
    data = [mk.data for mk in markets]
    mech = as_mechanism(spec, population=pop, **PARAMS)
    direct = audit(mech, pop.laws[0], 5, 2, np.random.default_rng(seed), costs=costs,
                   data=data, **search)  # fmt: skip
    assert (direct.verdict, direct.ir_verdict) == (row["ic"], row["ir"])
    assert direct.summary["max_gain"] == row["max_gain"]
    for kw, msg in (
        (dict(data=data), "needs costs="),
        (dict(costs=costs, data=data[:1]), "1 m"),
        (dict(costs=costs, data=[(d[0][:4], d[1][:4]) for d in data]), "one row"),
    ):
        with pytest.raises(MarketSimError, match=msg):
            audit(mech, pop.laws[0], 5, 2, np.random.default_rng(0), **kw)


def test_compare_bad_population_input_is_one_line():
    from market_sim.comparison import compare

    cases = [
        ((["offline", "online"], TWO, 5, 2, 0), "conflicts"),
        ((["offline", "data-dependent"], TWO, None, 2, 0), "needs the sellers' data"),
        ((["offline", "online"], "uniform:0:1", None, 2, 0), "needs n_sellers"),
    ]
    for args, msg in cases:
        with pytest.raises(MarketSimError, match=msg) as err:
            compare(*args, audit=False)
        assert "\n" not in str(err.value)


@pytest.mark.parametrize("spec", ["offline", "online"])
def test_market_model_with_absent_sellers_keeps_each_sellers_own_law(spec):
    """With xi < 1 only some sellers take part; the mechanism then serves those sellers
    with their own laws (not the first ones' laws): every participant is paid what the
    per-seller mechanism on the participants alone pays (the online schedule is the
    one planned for the whole population)."""
    from market_sim.agents import MarketModel

    model = MarketModel(
        population=TWO, mechanism=spec, rounds=2, xi=0.6, seed=4, measure_regret=False, **PARAMS
    )
    full = as_mechanism(spec, population=TWO, **PARAMS)
    seen_partial = False
    while model.running:
        model.step()
        ids = np.flatnonzero(model.participating)
        seen_partial |= ids.size < TWO.n_sellers and (TWO.group[ids] == 1).any()
        alone = full.for_sellers(ids).run(model.report[ids])
        assert np.array_equal(model.payment[ids], alone.payments)
        laws = SellerLaws(TWO.laws, TWO.group[ids])
        if spec == "offline":
            assert np.array_equal(
                alone.payments, offline_payments(model.report[ids], laws, **PARAMS)[1]
            )
        else:
            assert np.array_equal(alone.eps, full.eps(model.report[ids], sellers=ids))
    assert seen_partial


# ---- the command line ---------------------------------------------------------------------
def _status(argv):
    from market_sim.cli import main

    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def test_simulate_and_compare_take_a_population(tmp_path, capsys):
    import pandas as pd

    spec = "6*uniform:0:1+4*uniform:1:2"
    argv = ["simulate", "--population", spec, "--rounds", "1", "--gamma", "0.05", "--quiet"]
    assert _status(argv + ["--out", str(tmp_path / "sim")]) == 0
    agents = pd.read_csv(tmp_path / "sim" / "agents.csv")
    assert list(agents["group"]) == [0] * 6 + [1] * 4
    assert agents["cost"][agents["group"] == 1].min() >= 1.0
    argv = ["compare", "--population", spec, "--mechanism", "offline", "--mechanism", "online"]
    argv += ["--markets", "2", "--no-audit", "--quiet", "--out", str(tmp_path / "cmp")]
    assert _status(argv) == 0
    lb = pd.read_csv(tmp_path / "cmp" / "leaderboard.csv")
    assert {"class0_objective_mean", "class1_payment_mean"} <= set(lb.columns)
    capsys.readouterr()
    bad = [
        (["simulate", "--population", spec, "--sellers", "5"], "conflicts"),
        (["simulate", "--population", spec, "--dist", "uniform:0:1"], "exactly one"),
        (["simulate", "--population", spec, "--data"], "--data with --population"),
        (["simulate", "--population", spec, "--mechanism", "data-dependent"], "needs the"),
        (["compare", "--population", "5*uniform:0:1+5*uniform:2:3", "--mechanism", "offline",
          "--mechanism", "posted-price"], "takes one cost law"),
    ]  # fmt: skip
    for argv, needle in bad:
        out = tmp_path / "bad"
        assert _status(argv + ["--out", str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and needle in err, err
        assert not out.exists()


def test_a_users_per_seller_mechanism_gets_seller_laws_and_is_audited_ic():
    """docs/extending.md's OwnPsiPrice: per_seller_laws gives it SellerLaws; with
    in_own_support it takes reports anywhere in the hull, and the audit (a grid over the
    hull, random reports, a local search) finds it IC and IR on both classes.  Without
    in_own_support the audit's reports past a seller's own support would be refused."""
    from market_sim.auditing import audit
    from market_sim.mechanisms.base import Mechanism, in_own_support

    class OwnPsiPrice(Mechanism):
        per_seller_laws = True

        def __init__(self, dist, threshold=1.0, eps_level=1.0):
            self.dist, self.threshold, self.eps_level = dist, threshold, eps_level
            # the truthful price: the largest report still bought, psi_i^-1(threshold)
            laws = [dist.law(i) for i in range(dist.n_sellers)]
            self.price = np.array([law.inverse_virtual_cost(threshold) for law in laws], float)

        def outcome(self, reports, rng=None):
            r = in_own_support(self.dist, reports)
            eps = np.where(self.dist.virtual_cost(r) < self.threshold, self.eps_level, 0.0)
            return eps, eps * self.price

    mech = as_mechanism(OwnPsiPrice, population=TWO, threshold=1.5)
    assert isinstance(mech.dist, SellerLaws)
    costs = np.array([TWO.sample(np.random.default_rng(s)).costs for s in range(2)])
    assert (mech.run(costs[0]).eps[TWO.group == 1] > 0).any() or (
        mech.run(costs[1]).eps[TWO.group == 1] > 0
    ).any()
    res = audit(
        mech, TWO.pooled, 12, 2, np.random.default_rng(0), costs=costs, n_grid=9, n_random=4
    )
    assert (res.summary["verdict"], res.summary["ir_verdict"]) == ("ic", "ir")


def test_market_model_new_markets_each_round_keep_the_copula():
    """new_costs_each_round draws the whole market again from the population: round 2
    has new costs and new rows from one new pop.sample draw (so costs stay tied to their
    data), not fresh costs beside the first rows."""
    from market_sim.agents import MarketModel

    pop = Population([("uniform:0:1", 6)], data="synthetic", rho=-0.9, on="label_noise", n_test=9)
    model = MarketModel(
        population=pop, rounds=2, new_costs_each_round=True, measure_regret=False, seed=1
    )
    rng = _after_mesa(1)
    first = pop.sample(rng)
    _, sellers = model.run()
    assert np.array_equal(sellers[sellers["round"] == 1]["cost"].to_numpy(), first.costs)
    cost2 = sellers[sellers["round"] == 2]["cost"].to_numpy()
    assert not np.array_equal(cost2, first.costs)
    assert np.array_equal(model.cost, cost2)
    assert not np.array_equal(model.X, first.data[0])  # the rows were drawn again too
    assert model.platform.test_data[0].shape == (9, 5)


def test_payments_on_a_pooled_law_whose_virtual_cost_jumps_are_myersons():
    """The pooled law of 7 sellers on U[0, 1] and 3 on U[1, 2] has psi jumping from 2 to
    1 + 0.7/0.3 at c = 1, so eps_i(z) jumps there inside one of the oracle's cells.  The
    payment must still be Eq. 8 (003): r eps(r) + int_r^2 eps, here by scipy's quad with
    the jump given as a break point; and truth must beat the report just below it (a
    Gauss-Legendre rule straddling the jump once paid 1.8e-3 too much there)."""
    pop = Population([("uniform:0:1", 7), ("uniform:1:2", 3)])
    assert pop.pooled.breaks == (1.0,)
    mech = as_mechanism("offline", dist=pop.pooled, n_sellers=10)
    reports = np.full(10, 2.0)
    cost = 0.497165

    def at(z):
        r = reports.copy()
        r[6] = z
        out = mech.run(r)
        return out.eps[6], out.payments[6]

    def eps_at(z):  # the allocation alone (Eq. 11): no payments computed
        r = reports.copy()
        r[6] = z
        return solve(pop.pooled.virtual_cost(r), mu=1.0, sigma=1.0, gamma=1.0).eps[6]

    for z in (cost, cost - 0.02, 0.9):
        e, pay = at(z)
        tail = integrate.quad(eps_at, z, 2.0, points=[1.0], limit=200)[0]
        assert pay == pytest.approx(z * e + tail, abs=2e-6)
    e0, p0 = at(cost)
    e1, p1 = at(cost - 0.02)
    assert p0 - cost * e0 >= p1 - cost * e1


def test_the_audit_runs_per_seller_mechanisms_on_each_sellers_own_law():
    """On two classes the audit builds offline with every seller's own psi_i (it was once
    built with the pooled law) and finds no gain, in every opponent profile it tries."""
    from market_sim.auditing import audit

    pop = Population([("uniform:0:1", 7), ("uniform:1:2", 3)])
    res = audit("offline", pop, None, 2, np.random.default_rng(0))
    assert res.verdict == "ic" and res.ir_verdict == "ir"
    assert res.summary["max_gain"] < 1e-9
    assert sorted(set(res.table["group"])) == [0, 1]
