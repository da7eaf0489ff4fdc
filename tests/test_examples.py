"""The examples of docs/extending.md (issue 17 item 7)."""

from pathlib import Path
from types import SimpleNamespace

import numpy as np

from market_sim.auditing import audit
from market_sim.distributions import parse_distribution
from market_sim.mechanisms.base import Mechanism, as_mechanism
from market_sim.mechanisms.myerson import myerson_mechanism
from market_sim.registry import load_object

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
DIST = parse_distribution("uniform:1:5")


def _uniform_price():
    return load_object(f"{EXAMPLES / 'uniform_price.py'}:UniformPrice")


def test_uniform_price_outcome():
    mech = as_mechanism(f"{EXAMPLES / 'uniform_price.py'}:UniformPrice:n_buy=2", dist=DIST)
    assert isinstance(mech, Mechanism)
    out = mech.run(np.array([3.0, 1.5, 4.0, 2.2, 4.5]))
    np.testing.assert_array_equal(out.eps, [0, 1, 0, 1, 0])
    np.testing.assert_array_equal(out.payments, [0, 3.0, 0, 3.0, 0])  # the 3rd lowest report
    everybody = mech.run(np.array([2.0, 3.0]))  # nobody left out: the top of the support
    np.testing.assert_array_equal(everybody.payments, [5.0, 5.0])


def test_uniform_price_audits_as_ic():
    mech = _uniform_price()(n_buy=3, dist=DIST)
    res = audit(mech, DIST, 8, 4, np.random.default_rng(0), n_grid=17)
    s = res.summary
    assert s["verdict"] == "ic" and s["max_gain"] <= s["tol"]
    assert s["mean_payment"] > 0 and s["ir_violations"] == 0

    # the control: pay the own report instead (pay-as-bid), the audit must object
    class PayOwnReport(type(mech)):
        def outcome(self, reports, rng=None):
            out = super().outcome(reports, rng)
            return out.eps, np.asarray(reports) * out.eps

    bad = audit(PayOwnReport(n_buy=3, dist=DIST), DIST, 8, 4, np.random.default_rng(0), n_grid=17)
    assert bad.summary["verdict"] == "not_ic" and bad.summary["max_gain_ci_low"] > 0


def test_myerson_step_allocation_reproduces_uniform_price():
    """The K-cheapest step rule with generic Myerson payments pays what UniformPrice pays."""
    K = 3

    def k_cheapest(R):
        rank = np.argsort(np.argsort(R, axis=-1, kind="stable"), axis=-1, kind="stable")
        return np.where(rank < K, 1.0, 0.0)

    generic = myerson_mechanism(k_cheapest, DIST, vectorized=True, name="k-cheapest")
    costs = DIST.sample(9, np.random.default_rng(4))
    a, b = generic.run(costs), _uniform_price()(n_buy=K, dist=DIST).run(costs)
    np.testing.assert_array_equal(a.eps, b.eps)
    np.testing.assert_allclose(a.payments, b.payments, rtol=1e-11)


def test_myerson_example_from_extending_guide():
    """The guide's smooth example: eps_i = (4 - r_i)^+ / (1 + mean of the others)."""

    def alloc(r):
        m = r.size
        others = (r.sum() - r) / (m - 1)
        return np.maximum(4.0 - r, 0.0) / (1.0 + others)

    mech = myerson_mechanism(alloc, "uniform:1:5", name="linear", tol=1e-10)
    r = np.array([1.5, 2.0, 3.0, 4.5])
    out = mech.run(r)
    # closed form: int_r^4 (4 - z) dz / (1 + o) = (4 - r)^2 / 2 / (1 + o)
    others = (r.sum() - r) / 3
    want = r * np.maximum(4 - r, 0) / (1 + others) + np.maximum(4 - r, 0) ** 2 / 2 / (1 + others)
    np.testing.assert_allclose(out.payments, want, rtol=1e-9)
    assert np.all(np.abs(out.payments - want) <= out.info["payment_bound"])


def test_two_arm_study_common_markets():
    study = load_object(str(EXAMPLES / "two_arm_study.py"))
    points = study.grid(True)
    assert {p["arm"] for p in points} == {"uniform-price", "offline"}
    rows = []
    for p in points:  # one replication: every grid point gets the same crn seed
        rows += study.run(
            p, np.random.default_rng(99), replication=0, crn=np.random.default_rng(12345)
        )
    assert len({r["mean_cost"] for r in rows}) == 1  # both arms saw the same market
    by_arm = {r["arm"]: r for r in rows}
    # the offline mechanism minimises the proxy loss (Eq. 11) over all allocations
    assert by_arm["offline"]["proxy_loss"] <= by_arm["uniform-price"]["proxy_loss"]
    assert min(r["min_utility"] for r in rows) >= -1e-12  # both are IR
    import pandas as pd

    text = study.section(pd.DataFrame(rows), None)
    assert "proxy_loss" in text and "offline" in text


def test_threshold_shading_reports():
    mod = load_object(str(EXAMPLES / "threshold_shading.py"))
    strat = mod.ThresholdShading(quantile=0.5, factor=1.5)
    model = SimpleNamespace(dist=DIST)
    costs = (1.2, 2.9, 3.1, 4.5)  # threshold: the median 3.0; the top of the support 5
    expected = [1.2 * 1.5, 2.9 * 1.5, 3.1, 4.5]
    np.testing.assert_allclose(
        [strat.report(SimpleNamespace(cost=c), model) for c in costs], expected, rtol=1e-15
    )
    np.testing.assert_allclose(
        strat.report_all(SimpleNamespace(cost=np.array(costs)), model), expected, rtol=1e-15
    )


def test_threshold_shading_in_the_market_model():
    from market_sim.agents import MarketModel

    mod = load_object(str(EXAMPLES / "threshold_shading.py"))
    model = MarketModel(
        12,
        dist="uniform:1:5",
        mechanism=_uniform_price()(n_buy=4, dist=DIST),
        strategy=mod.ThresholdShading(quantile=0.5, factor=1.2),
        rounds=2,
        seed=0,
    )
    model_df, agent_df = model.run()
    cheap = agent_df[agent_df.cost < DIST.ppf(0.5)]
    assert (cheap.report > cheap.cost).all()
