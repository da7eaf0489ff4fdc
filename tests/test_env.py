"""market_sim.games.env: MarketEnv (PettingZoo) and SellerEnv (Gymnasium), issue 41 items 1-2."""

import importlib.util
import warnings
from pathlib import Path

import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from pettingzoo.test import parallel_api_test, parallel_seed_test

from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.games.env import OBSERVATION, MarketEnv, SellerEnv
from market_sim.mechanisms.payments import offline_payments
from market_sim.population import Population

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def _truthful(env, obs):
    return {a: np.array([o[0]], dtype=np.float32) for a, o in obs.items() if a in env.agents}


# ---- the ecosystems' own checks ---------------------------------------------------------
@pytest.mark.parametrize(
    "options",
    [
        {"mechanism": "offline", "rounds": 4},
        {"mechanism": "pay-as-bid", "rounds": 4, "new_costs_each_round": True, "public": True},
        {"mechanism": "offline", "rounds": 30, "budget": 1.0},  # sellers leave mid-episode
        {"mechanism": "posted-price", "rounds": 5, "budget": (1.0, 1e-5), "accountant": "rdp"},
    ],
)
def test_market_env_passes_pettingzoo_checks(options):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # PettingZoo's advice on unbounded Box entries
        parallel_api_test(MarketEnv(5, **options), num_cycles=40)
        parallel_seed_test(lambda: MarketEnv(5, **options), num_cycles=10)


@pytest.mark.parametrize("opponents", ["truthful", "shade:factor=1.2", "random:spread=0.3"])
def test_seller_env_passes_gymnasium_check(opponents):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(SellerEnv(4, opponents=opponents, rounds=3, mechanism="pay-as-bid"))


@pytest.mark.parametrize(
    "options",
    [
        {"mechanism": "pay-as-bid"},  # the case, at the default rounds=1
        {"mechanism": "offline", "public": True},
        {"mechanism": "pay-as-bid", "new_costs_each_round": True, "rounds": 2},
        {"mechanism": "offline", "budget": 1.0},
    ],
)
def test_seller_env_passes_gymnasium_check_at_every_documented_setting(options):
    """Issue #49: at the default ``rounds=1`` check_env failed ("truncates after 1
    step"): a one-round episode is a one-shot game, now *terminated* (env.py's doc)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check_env(SellerEnv(5, dist="uniform:0:1", **options))
    env = SellerEnv(5, dist="uniform:0:1", mechanism="pay-as-bid")
    obs, _ = env.reset(seed=0)
    _, _, terminated, truncated, _ = env.step(np.array([obs[0]], np.float32))
    assert terminated and not truncated


def test_a_one_round_market_env_terminates_its_sellers():
    env = MarketEnv(3, rounds=1, mechanism="pay-as-bid")
    obs, _ = env.reset(seed=0)
    _, _, terminations, truncations, _ = env.step(_truthful(env, obs))
    assert all(terminations.values()) and not any(truncations.values()) and not env.agents
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        parallel_api_test(MarketEnv(3, rounds=1, mechanism="pay-as-bid"), num_cycles=5)


# ---- the market is MarketModel's ---------------------------------------------------------
def test_truthful_round_pays_the_offline_mechanism():
    """Truthful reports: each reward is the offline mechanism's t_i - c_i eps_i on the
    observed costs, computed here directly from the payment rule."""
    env = MarketEnv(8, dist="uniform:1:5", mechanism="offline", gamma=0.3, rounds=2)
    obs, _ = env.reset(seed=3)
    costs = np.array([obs[a][0] for a in env.possible_agents], dtype=float)
    env.core.cost[:] = costs  # the float32 observation is the cost the mechanism sees
    _, rewards, term, trunc, _ = env.step(_truthful(env, obs))
    eps, pay = offline_payments(costs, parse_distribution("uniform:1:5"), mu=1, sigma=1, gamma=0.3)
    want = pay - costs * eps
    got = np.array([rewards[a] for a in env.possible_agents])
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
    assert np.any(eps > 0) and np.all(got >= -1e-9)  # someone sells; IR
    assert not any(term.values()) and not any(trunc.values())


def test_observation_layout_and_truncation():
    env = MarketEnv(6, rounds=2, mechanism="pay-as-bid")
    obs, _ = env.reset(seed=0)
    first = np.array([obs[a] for a in env.agents])
    assert first.shape == (6, len(OBSERVATION))
    np.testing.assert_array_equal(first[:, 1:3], 0.0)  # no round yet: eps, payment 0
    np.testing.assert_array_equal(first[:, 3], first[:, 0])  # last report: the cost
    acts = {a: np.array([min(1.0, float(o[0]) * 1.5)], np.float32) for a, o in obs.items()}
    obs2, rewards, _, trunc, _ = env.step(acts)
    c = env.core
    for i, a in enumerate(env.possible_agents):
        assert obs2[a][0] == np.float32(c.cost[i])  # costs kept: the same cost
        assert obs2[a][0] == first[i, 0]
        np.testing.assert_allclose(obs2[a][1:4], [c.eps[i], c.payment[i], acts[a][0]], rtol=1e-6)
        # pay-as-bid pays report x eps; the reward is t - c eps
        assert rewards[a] == pytest.approx(c.payment[i] - c.cost[i] * c.eps[i])
        assert c.payment[i] == pytest.approx(float(acts[a][0]) * c.eps[i])
    assert not any(trunc.values()) and env.agents
    _, _, _, trunc, _ = env.step(_truthful(env, obs2))
    assert all(trunc.values()) and env.agents == []
    with pytest.raises(MarketSimError, match="reset"):
        env.step({})


def test_costs_redrawn_each_round_or_kept():
    kept, fresh = MarketEnv(5, rounds=3), MarketEnv(5, rounds=3, new_costs_each_round=True)
    for env, same in ((kept, True), (fresh, False)):
        obs, _ = env.reset(seed=1)
        before = np.array([o[0] for o in obs.values()])
        obs, *_ = env.step(_truthful(env, obs))
        after = np.array([o[0] for o in obs.values()])
        assert np.array_equal(before, after) == same


def test_out_of_range_actions_are_clipped():
    """Reports above (below) the support are the support's top (bottom): same rewards."""
    rewards = []
    for high in (1.0, 7.5):
        env = MarketEnv(5, dist="uniform:0:1", mechanism="pay-as-bid", rounds=1)
        obs, _ = env.reset(seed=2)
        acts = _truthful(env, obs)
        acts["seller_0"] = np.array([high], np.float32)
        acts["seller_1"] = np.array([-3.0], np.float32)
        _, r, *_ = env.step(acts)
        rewards.append(r)
        assert env.core.report[0] == 1.0 and env.core.report[1] == pytest.approx(1e-6)
    assert rewards[0] == rewards[1]


def test_population_sets_the_sellers_and_their_costs():
    env = MarketEnv(dist="3*uniform:0:1+2*uniform:1:5", rounds=1)
    assert env.possible_agents == [f"seller_{i}" for i in range(5)]
    obs, _ = env.reset(seed=0)
    costs = np.array([obs[a][0] for a in env.possible_agents])
    assert np.all(costs[:3] <= 1) and np.all(costs[3:] >= 1)
    assert env.action_space("seller_0").high[0] == 5.0  # the pooled law's support
    same = MarketEnv(population=Population([("uniform:0:1", 3), ("uniform:1:5", 2)]), rounds=1)
    same.reset(seed=0)
    np.testing.assert_array_equal(same.core.cost, env.core.cost)
    assert len(MarketEnv(dist=parse_distribution("uniform:0:1")).possible_agents) == 20
    with pytest.raises(MarketSimError, match="conflicts"):
        MarketEnv(4, dist="3*uniform:0:1+2*uniform:1:5")


def test_budget_terminates_sellers_and_charges_the_composed_loss():
    """With a budget, utility = t - c x (increase of the composed loss); a seller whose
    budget is spent is terminated and leaves; the composed loss never passes the budget."""
    env = MarketEnv(6, rounds=40, budget=0.5, gamma=0.05, dist="uniform:0:1")
    obs, _ = env.reset(seed=4)
    left = []
    while env.agents:
        spent_before = env.core.ledger.spent.copy()
        acting = list(env.agents)
        obs, rewards, term, trunc, _ = env.step(_truthful(env, obs))
        c = env.core
        for a in acting:
            i = int(a.split("_")[1])
            inc = c.ledger.spent[i] - spent_before[i]
            assert rewards[a] == pytest.approx(c.payment[i] - c.cost[i] * inc, abs=1e-12)
            if term[a]:
                left.append(a)
                assert a not in env.agents and obs[a][-1] == pytest.approx(
                    max(0.0, 0.5 - c.ledger.spent[i]), abs=1e-6
                )
        assert np.all(c.ledger.spent <= 0.5 + 1e-9)
    assert left, "someone should spend the budget in 40 rounds"


def test_bad_actions_get_one_line_errors():
    env = MarketEnv(3, rounds=2)
    obs, _ = env.reset(seed=0)
    acts = _truthful(env, obs)
    for bad, match in (
        (np.array([0.5, 0.5]), "shape"),
        (np.array([[0.5]]), "shape"),
        (np.array([np.nan]), "finite"),
    ):
        with pytest.raises(MarketSimError, match=match):
            env.step({**acts, "seller_1": bad})
    with pytest.raises(MarketSimError, match="no action for seller_2"):
        env.step({k: v for k, v in acts.items() if k != "seller_2"})
    # issue #49: an action for an agent that doesn't exist was silently ignored
    for extra in (np.array([0.5], np.float32), np.array([np.nan], np.float32)):
        with pytest.raises(MarketSimError, match="'seller_9', which is not a live seller"):
            env.step({**acts, "seller_9": extra})
    with pytest.raises(MarketSimError, match="'nobody', which is not a live seller"):
        env.step({**{k: v for k, v in acts.items() if k != "seller_2"}, "nobody": acts["seller_2"]})
    with pytest.raises(MarketSimError, match="dict"):
        env.step([0.5, 0.5, 0.5])
    assert env.core.round == 0  # nothing was played
    with pytest.raises(MarketSimError, match="rounds"):
        MarketEnv(3, rounds=0)
    with pytest.raises(MarketSimError):
        MarketEnv(3, mechanism="no-such-mechanism")
    with pytest.raises(MarketSimError, match="needs the sellers' data"):
        MarketEnv(3, mechanism="data-dependent")


# ---- one learning seller ----------------------------------------------------------------------
def test_seller_env_truth_is_a_best_report_under_offline():
    """Offline is dominant-strategy IC: on the same market (same seed) no report of
    seller 0 beats its cost; under pay-as-bid some report above the cost does."""
    for mech, ic in (("offline", True), ("pay-as-bid", False)):
        env = SellerEnv(4, mechanism=mech, gamma=0.5)
        gains = []
        for seed in range(3):
            obs, _ = env.reset(seed=seed)
            c = float(obs[0])
            truth = env.step(np.array([c], np.float32))[1]
            other = []
            for z in np.linspace(0.0, 1.0, 9):
                env.reset(seed=seed)
                other.append(env.step(np.array([z], np.float32))[1])
            gains.append(max(other) - truth)
        if ic:
            assert max(gains) <= 1e-6
        else:
            assert max(gains) > 1e-3


def test_seller_env_opponents():
    """Opponents' reports: truthful, shade (factor x cost, clipped), a bid function."""
    cases = {
        "truthful": lambda c: c,
        "shade:factor=1.5": lambda c: np.minimum(1.5 * c, 1.0),
        (lambda c: 0.5 + 0.5 * c): lambda c: 0.5 + 0.5 * c,
    }
    for spec, want in cases.items():
        env = SellerEnv(5, opponents=spec, mechanism="pay-as-bid")
        env.reset(seed=0)
        env.step(np.array([0.5], np.float32))
        c = env.core
        np.testing.assert_allclose(c.report[1:], want(c.cost[1:]))
    with pytest.raises(MarketSimError, match="no-such"):
        SellerEnv(3, opponents="no-such")
    with pytest.raises(MarketSimError, match="needs a Mesa market"):
        SellerEnv(3, opponents="best-response")
    env = SellerEnv(3)
    env.reset(seed=0)
    with pytest.raises(MarketSimError, match="shape"):
        env.step(np.array([0.1, 0.2]))
    env.step(np.array([0.1], np.float32))
    with pytest.raises(MarketSimError, match="reset"):  # rounds=1: the episode is over
        env.step(np.array([0.1], np.float32))


def test_seller_env_against_a_bne_result():
    """A BNEResult from the solver is a bid function: the others report result.bid(c)."""
    from market_sim.games.equilibrium import symmetric_bne

    fp = f"{EXAMPLES / 'first_price.py'}:FirstPriceProcurement"
    bne = symmetric_bne(
        fp, "uniform:0:1", 3, np.random.default_rng(0), samples=128, grid=17, bid_grid=65,
        eval_samples=64, max_iter=20,
    )  # fmt: skip
    env = SellerEnv(3, mechanism=fp, opponents=bne)
    env.reset(seed=1)
    env.step(np.array([0.9], np.float32))
    c = env.core
    np.testing.assert_allclose(c.report[1:], bne.bid(c.cost[1:]))
    assert np.all(c.report[1:] > c.cost[1:])  # the equilibrium shades up


def _example():
    spec = importlib.util.spec_from_file_location("train_seller", EXAMPLES / "train_seller.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_example_learns_truth_under_offline():
    ex = _example()
    env = SellerEnv(3, dist="uniform:0:1", mechanism="offline", gamma=0.5)
    h = ex.train(env, iterations=8, batch=8, lr=0.3, seed=0)
    assert h[0] > 0.15 and h[-1] < 0.05  # from a 20% markup to nearly the truth


def test_example_approaches_the_first_price_bne():
    """Against the BNE b(c) = c + (1 - c)/m the learner's markup fraction goes to 1/m,
    for m = 3 and m = 5 (it tracks the equilibrium, not a fixed number)."""
    ex = _example()
    for m in (3, 5):
        env = SellerEnv(m, mechanism=ex.FIRST_PRICE, opponents=ex.first_price_bne(m))
        h = ex.train(env, iterations=120, batch=32, theta0=-1.0, seed=1)
        tail = float(np.mean(h[60:]))
        assert abs(tail - 1 / m) < 0.03, (m, tail)
