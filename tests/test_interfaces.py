"""The public Mechanism and Strategy interfaces, registries, and Mesa conventions."""

import mesa
import numpy as np
import pandas as pd
import pytest

from market_sim.agents import MarketModel, Strategy
from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms.base import Mechanism, Outcome, as_mechanism
from market_sim.registry import MECHANISMS, STRATEGIES, parse_spec

UNIFORM = parse_distribution("uniform:0:1")


class UniformPrice(Mechanism):
    """Buy the n_buy cheapest at the (n_buy+1)-th report per unit of eps."""

    def __init__(self, n_buy=3, eps_level=1.0):
        self.n_buy, self.eps_level = n_buy, eps_level

    def outcome(self, reports, rng=None):
        order = np.argsort(reports, kind="stable")
        eps = np.zeros(len(reports))
        eps[order[: self.n_buy]] = self.eps_level
        price = reports[order[self.n_buy]] if len(reports) > self.n_buy else 1.0
        return eps, price * eps


class Lottery(Mechanism):
    """Randomized: a seller reporting r is bought with probability 1 - r at price 1."""

    randomized = True
    n_draws = 4000

    def outcome(self, reports, rng=None):
        eps = (rng.random(len(reports)) < 1 - reports).astype(float)
        return Outcome(eps, 1.0 * eps)


class Shader(Strategy):
    """Per-agent strategy with per-seller state on self (one copy per seller)."""

    def __init__(self, factor=1.5):
        self.factor, self.calls = factor, 0

    def report(self, agent, model):
        self.calls += 1
        return min(agent.cost * self.factor, 1.0)


def test_parse_spec_reads_names_files_and_typed_parameters():
    assert parse_spec("shade:factor=1.3") == ("shade", {"factor": 1.3})
    assert parse_spec("pkg.mod:Cls:k=5:flag=true") == ("pkg.mod:Cls", {"k": 5, "flag": True})
    assert parse_spec("dir/f.py:Cls:m=0.5,0.7") == ("dir/f.py:Cls", {"m": (0.5, 0.7)})
    with pytest.raises(MarketSimError, match="not a parameter name"):
        parse_spec("shade:1x=2")


def test_registries_list_the_built_ins_and_resolve_references(tmp_path):
    assert {
        "offline",
        "online",
        "data-dependent",
        "pay-as-bid",
        "posted-price",
        "private-posted-price",
        "private-cutoff",
    } <= set(MECHANISMS.names())
    assert {"truthful", "shade", "random", "best-response", "learning", "collusion"} <= set(
        STRATEGIES.names()
    )
    f = tmp_path / "mymech.py"
    f.write_text(
        "from market_sim.mechanisms import base\n"
        "class Flat(base.Mechanism):\n"
        "    def outcome(self, reports, rng=None):\n"
        "        return reports * 0 + 1.0, reports * 0 + 2.0\n"
    )
    mech = as_mechanism(f"{f}:Flat", dist=UNIFORM)
    out = mech.run(np.array([0.1, 0.2]))
    assert np.all(out.eps == 1.0) and np.all(out.payments == 2.0)
    with pytest.raises(MarketSimError, match="has no attribute 'Nope'"):
        as_mechanism(f"{f}:Nope")
    with pytest.raises(MarketSimError, match="no module named 'no_such_pkg_xyz'"):
        as_mechanism("no_such_pkg_xyz:Thing")
    bad = tmp_path / "broken.py"
    bad.write_text("raise RuntimeError('boom')\n")
    with pytest.raises(MarketSimError, match="failed to import: RuntimeError: boom"):
        as_mechanism(f"{bad}:X")
    with pytest.raises(MarketSimError, match="did you mean 'offline'"):
        as_mechanism("ofline", dist=UNIFORM)


def test_run_time_registration_is_used_by_name():
    MECHANISMS.register("test-uniform-price", UniformPrice)
    STRATEGIES.register("test-shader", Shader)
    try:
        m = MarketModel(
            8,
            mechanism="test-uniform-price:n_buy=2",
            strategy="test-shader",
            rounds=1,
            seed=0,
            measure_regret=False,
        )
        assert m.mechanism.n_buy == 2
        _, agents = m.run()
        assert (agents.strategy == "test-shader").all()
    finally:
        MECHANISMS._registered.pop("test-uniform-price")
        STRATEGIES._registered.pop("test-shader")


def test_bad_extensions_get_one_line_errors():
    class NoOutcome:
        pass

    with pytest.raises(MarketSimError, match="has no outcome method"):
        MarketModel(5, mechanism=NoOutcome())
    with pytest.raises(MarketSimError, match="does not implement outcome"):
        MarketModel(5, mechanism=Mechanism())

    class WrongShape(Mechanism):
        def outcome(self, reports, rng=None):
            return np.zeros(len(reports) + 1), np.zeros(len(reports))

    with pytest.raises(MarketSimError, match="eps has 6 entries for 5 reports"):
        MarketModel(5, mechanism=WrongShape(), rounds=1).run()

    class NaNPay(Mechanism):
        def outcome(self, reports, rng=None):
            return np.zeros(len(reports)), np.full(len(reports), np.nan)

    with pytest.raises(MarketSimError, match="payments contains NaN"):
        MarketModel(5, mechanism=NaNPay(), rounds=1).run()

    class NaNStrategy(Strategy):
        def report(self, agent, model):
            return float("nan")

    with pytest.raises(MarketSimError, match="reports must be 5 finite numbers"):
        MarketModel(5, strategy=NaNStrategy(), rounds=1, measure_regret=False).run()
    with pytest.raises(MarketSimError, match="no parameter 'colour'"):
        MarketModel(5, strategy="shade:colour=1")
    with pytest.raises(MarketSimError, match="has no report method"):
        MarketModel(5, strategy=object())


def test_generic_utilities_re_run_the_outcome_for_deterministic_mechanisms():
    mech = UniformPrice(n_buy=2)
    reports = np.array([0.1, 0.3, 0.5, 0.7])
    # seller 0 (cost 0.1): bought at the 3rd report (0.5) while it stays among the 2 cheapest
    u = mech.utilities(0, [0.1, 0.4, 0.6], 0.1, reports)
    np.testing.assert_allclose(u, [0.5 - 0.1, 0.5 - 0.1, 0.0])
    dev = mech.deviations([0, 3], [[0.2, 0.9], [0.05, 0.9]], reports)
    np.testing.assert_allclose(dev.eps, [[1, 0], [1, 0]])
    np.testing.assert_allclose(dev.payments, [[0.5, 0], [0.3, 0]])


def test_randomized_default_is_a_common_random_numbers_expectation():
    mech = Lottery()
    reports = np.array([0.2, 0.5])
    with pytest.raises(MarketSimError, match="randomized"):
        mech.utilities(0, [0.2], 0.2, reports)
    u = mech.utilities(0, [0.2, 0.6], 0.2, reports, np.random.default_rng(0))
    exact = (1 - np.array([0.2, 0.6])) * (1.0 - 0.2)
    assert np.all(np.abs(u - exact) < 0.03)  # 4000 draws: sd ~ 0.005
    # common random numbers: the difference has far less noise than the levels
    assert abs((u[0] - u[1]) - (exact[0] - exact[1])) < 0.03


def test_strategy_instances_classes_specs_and_mixtures():
    m = MarketModel(10, strategy="shade:factor=1.3", rounds=1, seed=1, measure_regret=False)
    _, agents = m.run()
    np.testing.assert_allclose(agents.report, np.minimum(agents.cost * 1.3, 1.0))
    m = MarketModel(10, strategy=Shader, rounds=2, seed=1, measure_regret=False)
    _, agents = m.run()
    assert len({id(m.strategy_of(i)) for i in range(10)}) == 10  # one copy per seller
    assert all(m.strategy_of(i).calls == 2 for i in range(10))
    m = MarketModel(
        10,
        strategy={"shade:factor=2": 0.3, Shader(1.1): 0.2},
        rounds=1,
        seed=1,
        measure_regret=False,
    )
    _, agents = m.run()
    assert list(agents.strategy) == ["shade:factor=2"] * 3 + ["Shader"] * 2 + ["truthful"] * 5
    np.testing.assert_allclose(agents.report[5:], agents.cost[5:])
    with pytest.raises(MarketSimError, match="sum to at most 1"):
        MarketModel(10, strategy={"shade": 0.7, "random": 0.5})


@pytest.mark.parametrize("mechanism", ["offline", "online", "pay-as-bid", "private-cutoff"])
@pytest.mark.parametrize("strategy", ["shade", "random", "best-response", "learning:explore=0.3"])
def test_vectorised_and_per_agent_paths_agree_exactly(mechanism, strategy):
    rounds = 12 if strategy.startswith("learning") else 2
    kw = dict(
        mechanism=mechanism,
        strategy=strategy,
        strategic_fraction=0.75,
        rounds=rounds,
        gamma=0.3,
        n_grid=5,
        seed=7,
        measure_regret=rounds < 5,
    )
    fast = MarketModel(8, **kw)
    slow = MarketModel(8, vectorized=False, **kw)
    assert fast.groups[0].copies is None and slow.groups[0].copies is not None
    pd.testing.assert_frame_equal(fast.run()[1], slow.run()[1])
    pd.testing.assert_frame_equal(fast.model_frame(), slow.model_frame())


def test_mesa_conventions_running_rng_and_step_zero():
    m = MarketModel(6, rounds=2, rng=np.random.default_rng(3), measure_regret=False)
    n = MarketModel(6, rounds=2, seed=3, measure_regret=False)
    np.testing.assert_array_equal(m.cost, n.cost)
    with pytest.raises(MarketSimError, match="seed or rng"):
        MarketModel(6, seed=1, rng=1)
    assert m.running
    raw = m.datacollector.get_model_vars_dataframe()
    assert len(raw) == 1  # the initial state is step 0
    m.step()
    m.step()
    assert not m.running and m.steps == 2
    assert len(m.datacollector.get_model_vars_dataframe()) == 3
    sellers = m.datacollector.get_agenttype_vars_dataframe(type(m.seller(0)))
    assert set(sellers.index.get_level_values("Step")) == {0, 1, 2}
    assert len(sellers) == 3 * 6  # the platform is not a row


def test_batch_run_gives_aligned_reproducible_rows():
    """With the initial state collected as step 0, batch_run's row at step s is round s.
    Mesa 3.3's batch_run reports steps 0 .. steps - 1, later versions 0 .. steps."""
    params = {
        "n_sellers": 6,
        "mechanism": "online",
        "rounds": 4,
        "measure_regret": False,
        "rng": [0, 1],
    }
    runs = [
        pd.DataFrame(
            mesa.batch_run(
                MarketModel,
                parameters=params,
                iterations=1,
                max_steps=10,
                number_processes=1,
                data_collection_period=1,
                display_progress=False,
            )
        )
        for _ in range(2)
    ]
    pd.testing.assert_frame_equal(runs[0], runs[1])
    df = runs[0].drop_duplicates(["rng", "Step"])  # one row a step (Mesa >= 3.4 adds seller rows)
    last = int(df.Step.max())
    assert last in (3, 4)  # rounds is enforced: 4 steps, not 11
    assert sorted(df.Step.unique()) == list(range(last + 1))
    assert df.groupby("rng").size().tolist() == [last + 1] * 2
    assert (df[df.Step == 0].total_payment == 0).all()  # step 0: nothing bought yet
    for r in (0, 1):
        direct = MarketModel(6, mechanism="online", rounds=4, measure_regret=False, rng=r).run()[0]
        got = df[(df.rng == r) & (df.Step > 0)].sort_values("Step")
        np.testing.assert_allclose(
            got.total_payment.to_numpy(), direct.total_payment.to_numpy()[:last]
        )
        np.testing.assert_allclose(got.proxy_loss.to_numpy(), direct.proxy_loss.to_numpy()[:last])


def test_agent_rows_stream_to_parquet_round_by_round(tmp_path):
    path = tmp_path / "agents.parquet"
    m = MarketModel(
        50,
        mechanism="online",
        strategy="shade",
        rounds=3,
        seed=2,
        agent_out=path,
        measure_regret=False,
    )
    _, agents = m.run()
    assert path.exists()
    back = pd.read_parquet(path)
    assert len(back) == 150 and list(back["round"].unique()) == [1, 2, 3]
    mem = MarketModel(
        50, mechanism="online", strategy="shade", rounds=3, seed=2, measure_regret=False
    ).run()[1]
    pd.testing.assert_frame_equal(back, mem)


def test_large_markets_do_not_build_an_agent_per_seller():
    m = MarketModel(20_000, mechanism="online", rounds=1, seed=0, measure_regret=False)
    assert len(m.agents) == 1  # only the platform; sellers are array rows
    view = m.seller(123)
    view.report = 0.5
    assert m.report[123] == 0.5 and view.cost == m.cost[123]
    m.run()
    assert m.model_frame().total_payment.iloc[0] > 0


def test_a_builtin_name_loads_without_scanning_entry_points(monkeypatch):
    """Built-in and run-time names are found directly; the entry points (slow to scan)
    are read only for other names, with the precedence of ``entries()``."""
    from market_sim import registry

    def no_scan(group):
        raise AssertionError(f"entry points of {group} scanned")

    monkeypatch.setattr(registry, "entry_points", no_scan)
    assert registry.MECHANISMS.load("offline").__name__ == "OfflineMechanism"
    assert registry.STRATEGIES.load("hedge").__name__ == "Hedge"
    with pytest.raises(AssertionError, match="scanned"):
        registry.MECHANISMS.load("no-such-mechanism")


def test_builtin_mechanisms_take_the_cost_law_as_a_spec():
    for name in ("offline", "pay-as-bid", "posted-price", "private-posted-price"):
        mech = as_mechanism(name, dist="uniform:1:5", n_sellers=10)
        assert mech.dist.spec == "uniform:1:5"
    with pytest.raises(MarketSimError, match="dist must be a CostDistribution or a spec"):
        as_mechanism("offline", dist=3.0)


@pytest.mark.parametrize("spec", ["shade:factor=-1.3", "shade:factor=0", "random:spread=-1"])
def test_strategy_parameters_out_of_range_are_refused(spec):
    from market_sim.agents.strategies import as_strategy

    with pytest.raises(MarketSimError, match="must be a finite number"):
        as_strategy(spec)


def test_listings_cite_the_papers_by_their_bibliography_keys():
    from market_sim.registry import summary_line

    line = summary_line("Offline mechanism (Alg. 2 / Eq. 11, 003) and ``k``.\n\nMore.")
    assert line == "Offline mechanism (Alg. 2 / Eq. 11, [AES]) and `k`."
    assert summary_line("Price by the exponential mechanism (001); 1003 stays.") == (
        "Price by the exponential mechanism ([MT]); 1003 stays."
    )
