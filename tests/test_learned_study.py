"""The `learned` study (scenarios/learned.py): a network against offline at truth and at
its equilibrium, on networks whose truth is proved (tests/onnx_networks.py)."""

import numpy as np
import pytest
from onnx_networks import posted_price, smooth_myerson

from market_sim.errors import MarketSimError
from market_sim.mechanisms.offline import buyer_loss
from market_sim.scenarios import learned

TINY = dict(
    dist="uniform:0:1",
    sellers=4,
    markets=30,
    audit_markets=2,
    reference_seed=0,
    bne_samples=64,
    bne_max_iter=4,
)


def _run(path, at, seed=0):
    return learned.run(dict(TINY, network=str(path), at=at), np.random.default_rng(seed))[0]


def test_an_ic_network_has_no_regret_is_beaten_by_offline_and_its_equilibrium_is_truth(tmp_path):
    """smooth_myerson is IC and IR (Myerson's lemma, its docstring): every protocol finds
    no regret beyond float32 rounding; offline minimises the expected objective among IC
    and IR mechanisms, so the network's is larger; and its BNE is truth (the solver
    stops at its first verification), so at equilibrium the network plays the same
    reports, hence the same objective, as at truth on the same markets (same seed)."""
    net = smooth_myerson(tmp_path / "myerson.onnx")
    truth, eq = _run(net, "truth"), _run(net, "equilibrium")
    for k in ("regret_ascent", "regret_grid", "regret_audit"):
        assert 0.0 <= truth[k] < 1e-5, (k, truth[k])
    assert truth["objective_difference"] > 0
    assert truth["objective_difference"] == pytest.approx(
        truth["objective_learned"] - truth["objective_offline"], rel=1e-12
    )
    assert truth["negative_utility_share"] == 0.0
    assert eq["bne_epsilon_relative"] < 1e-6
    assert eq["objective_learned"] == pytest.approx(truth["objective_learned"], rel=1e-6)
    assert eq["objective_offline"] == truth["objective_offline"]  # offline at truth in both


def test_a_pay_the_report_network_regret_is_the_price_minus_the_cost(tmp_path):
    """posted_price with pay_the_report (its docstring): a seller of cost c < P gains
    P - c by reporting P, the largest report that sells, so the largest regret over the
    audited markets is P minus their lowest cost; no protocol can find more, and the
    audit reaches it.  P = 0.9 so that every market of 4 sellers buys someone."""
    price = 0.9
    net = posted_price(tmp_path / "pp.onnx", price=price, pay_the_report=True)
    row = _run(net, "truth", seed=3)
    rng = np.random.default_rng(3)
    costs = np.vstack([rng.uniform(0, 1, TINY["sellers"]) for _ in range(TINY["markets"])])
    low = costs[: TINY["audit_markets"]].min()
    assert low < price
    truth_gain = price - low
    assert row["regret_audit"] == pytest.approx(truth_gain, abs=1e-5)
    for k in ("regret_ascent", "regret_grid"):
        assert row[k] <= truth_gain + 1e-6
    # its objective on the same markets, by hand: eps = [c <= P], payments c eps
    by_hand = []
    for c in costs:
        eps = (c.astype(np.float32) <= np.float32(price)).astype(float)
        by_hand.append(buyer_loss(eps, c * eps, mu=1.0, sigma=1.0, gamma=1.0))
    assert np.isfinite(by_hand).all()  # every market buys someone (this seed)
    assert row["objective_learned"] == pytest.approx(np.mean(by_hand), rel=1e-6)


def test_the_study_refuses_a_network_that_is_not_there():
    from market_sim.parameters import check_value

    with pytest.raises(MarketSimError, match=r"network.*nope\.onnx"):
        check_value("network", "nope.onnx", learned.PARAMS["network"])
    check_value("network", "regretnet-u01-m10", learned.PARAMS["network"])
    assert learned.network_path("regretnet-u01-m10").is_file()


def test_the_pooled_interval_equals_the_one_over_all_markets():
    """Each task stores its markets' count, mean and sd of the paired difference; the
    report's interval pooled from them is the normal interval over the markets together
    (the sum of squares about the grand mean splits into within and between parts)."""
    import pandas as pd

    from market_sim.analysis.learned import _pooled_half_width

    rng = np.random.default_rng(5)
    tasks = [rng.normal(0.1 * k, 1.0 + k, size=n) for k, n in enumerate((40, 7, 123))]
    part = pd.DataFrame(
        dict(
            markets=[t.size for t in tasks],
            objective_difference=[t.mean() for t in tasks],
            objective_difference_sd=[t.std(ddof=1) for t in tasks],
        )
    )
    every = np.concatenate(tasks)
    direct = 1.959963984540054 * every.std(ddof=1) / np.sqrt(every.size)
    assert _pooled_half_width(part) == pytest.approx(direct, rel=1e-12)
