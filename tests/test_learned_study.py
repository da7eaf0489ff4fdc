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
    mu=1.0,
    sigma=1.0,
    gamma=1.0,
)


def _record_objective(path, text):
    """``path`` with the metadata objective_weights = ``text`` (the graph unchanged)."""
    import onnx
    from onnx import helper

    model = onnx.load(str(path))
    helper.set_model_props(model, {"objective_weights": text})
    onnx.save(model, str(path))
    return path


def _run(path, at, seed=0, **weights):
    params = dict(TINY, network=str(path), at=at, **weights)
    return learned.run(params, np.random.default_rng(seed))[0]


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


def test_both_mechanisms_are_scored_on_the_weights_the_network_was_trained_on(tmp_path):
    """mu, sigma, gamma = network: the weights recorded in the file (here 2, 3, 0.5, not
    the defaults 1, 1, 1), for both mechanisms.  By hand on the same markets: the
    posted price's Eq. 11 with those weights, and offline *built* with them (its
    allocation depends on them, Eq. 11's minimiser) scored with them.  Given weights
    win over the file's; a file without them and a weight left to ``network`` is one
    line naming the metadata key."""
    from market_sim.mechanisms.base import as_mechanism

    price, w = 0.9, dict(mu=2.0, sigma=3.0, gamma=0.5)
    net = _record_objective(
        posted_price(tmp_path / "pp.onnx", price=price), "mu=2,sigma=3,gamma=0.5"
    )
    row = _run(net, "truth", seed=4, mu="network", sigma="network", gamma="network")
    assert (row["objective_mu"], row["objective_sigma"], row["objective_gamma"]) == (2.0, 3.0, 0.5)
    rng = np.random.default_rng(4)
    costs = np.vstack([rng.uniform(0, 1, TINY["sellers"]) for _ in range(TINY["markets"])])
    offline = as_mechanism("offline", dist="uniform:0:1", n_sellers=TINY["sellers"], **w)
    posted, best = [], []
    for c in costs:
        eps = (c.astype(np.float32) <= np.float32(price)).astype(float)
        posted.append(buyer_loss(eps, price * eps, **w))
        o = offline.run(c)
        best.append(buyer_loss(o.eps, o.payments, **w))
    assert row["objective_learned"] == pytest.approx(np.mean(posted), rel=1e-6)
    assert row["objective_offline"] == pytest.approx(np.mean(best), rel=1e-9)
    default_offline = as_mechanism("offline", dist="uniform:0:1", n_sellers=TINY["sellers"])
    unit_runs = [default_offline.run(c) for c in costs]
    unit = np.mean([buyer_loss(o.eps, o.payments, **w) for o in unit_runs])
    assert abs(unit - np.mean(best)) > 1e-6  # the weights did change offline's allocation
    given = _run(net, "truth", seed=4, mu=1.0, sigma=1.0, gamma=1.0)
    assert given["objective_mu"] == 1.0
    assert given["objective_learned"] != pytest.approx(row["objective_learned"], rel=1e-3)
    bare = posted_price(tmp_path / "bare.onnx", price=price)
    with pytest.raises(MarketSimError, match="objective_weights.*--set mu="):
        _run(bare, "truth", mu="network", sigma=1.0, gamma=1.0)
    bad = _record_objective(posted_price(tmp_path / "bad.onnx"), "mu=1,sigma=-2,gamma=1")
    with pytest.raises(MarketSimError, match="objective_weights is 'mu=1,sigma=-2,gamma=1'"):
        _run(bad, "truth")


def test_the_shipped_network_records_the_weights_it_was_trained_on():
    """Its README's command trains with the defaults mu = sigma = gamma = 1."""
    from market_sim.mechanisms.onnx_network import OnnxMechanism

    net = OnnxMechanism(learned.network_path("regretnet-u01-m10"))
    assert net.objective_weights == (1.0, 1.0, 1.0)
    assert learned.grid()[0]["mu"] == "network"


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
