"""The Mesa market with sellers of several fields (market_sim.agents.fields)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from market_sim.agents.fields import FieldMarketModel, FieldStrategy
from market_sim.cli import main
from market_sim.errors import MarketSimError
from market_sim.mechanisms.multifield import as_multifield_mechanism
from market_sim.multifield import records

POP = "6*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500"
PAC = "fair-query-caps:scale=1:respect_caps=False"


def _run(mechanism, population=POP, **kw) -> FieldMarketModel:
    model = FieldMarketModel(mechanism, population, seed=kw.pop("seed", 4), **kw)
    model.run_model()
    return model


def test_shade_cap_sells_half_the_cap_at_the_posted_price():
    """posted-price-caps (price p = 0.5, e_max = 10): a seller of cost c <= p reporting
    cap k/2 sells eps = min(k/2, 10) = k/2 and gets (p - c) k/2; a seller above p sells
    nothing (closed form, docstring of PostedPricePerUnit)."""
    model = _run("posted-price-caps:e_max=10", strategy="shade-cap:factor=0.5", rounds=2)
    a = model.agent_frame()
    c, k = a.cost.to_numpy(), a.cap.to_numpy()
    sells = c <= 0.5
    assert a.report_cap.to_numpy() == pytest.approx(k / 2)
    assert (a.report_cost == a.cost).all() and (a["report_size"] == a["size"]).all()
    assert a.eps.to_numpy() == pytest.approx(np.where(sells, k / 2, 0.0))
    assert a.utility.to_numpy() == pytest.approx(np.where(sells, (0.5 - c) * k / 2, 0.0))
    assert (model.model_frame().share_misreporting == 1.0).all()


def test_truthful_sellers_get_the_mechanisms_outcome_every_round():
    model = _run("cap-threshold:k=3", rounds=3)
    out = as_multifield_mechanism("cap-threshold:k=3").run(model.types)
    a = model.agent_frame()
    for r in (1, 2, 3):
        rows = a[a["round"] == r]
        assert rows.eps.to_numpy() == pytest.approx(out.eps)
        assert rows.payment.to_numpy() == pytest.approx(out.payments)
    assert (a.utility >= -1e-12).all()
    frame = model.model_frame()
    assert list(frame["round"]) == [1, 2, 3] and (frame.cap_exceeded == 0).all()


def test_eps_above_the_true_cap_is_minus_infinity_and_counted():
    """PAC sells eps = 1/(n - k) >= 1/5 whatever the caps: with caps in [0.1, 0.19]
    every winner's cap is exceeded (eps >= 0.2 > 0.19)."""
    model = _run(PAC, population="6*uniform:0:1;cap=uniform:0.1:0.19", rounds=2, xi=0.8)
    a = model.agent_frame()
    won = a.eps > 0
    assert won.any() and (a.eps[won] >= 0.2 - 1e-12).all()
    assert (a.utility[won] == -np.inf).all() and (a.cap_exceeded == won).all()
    assert (a.eps[~a.arrived] == 0).all() and not a.arrived.all()
    per_round = a.groupby("round").cap_exceeded.sum().to_numpy()
    frame = model.model_frame()
    assert list(frame.cap_exceeded) == list(per_round)
    assert (frame.ir_violations >= frame.cap_exceeded).all()


def test_best_response_misreports_only_when_it_pays():
    """Round 1: every seller best-responds to the others' truth.  Under cap-threshold truth
    is dominant (proved), so nobody moves; under CSRA a mover's report, alone against
    the truthful others, beats its truth (re-run here on the profile)."""
    calm = _run("cap-threshold:k=3", strategy="best-response:local_steps=1", rounds=1)
    assert calm.model_frame().share_misreporting.iloc[0] == 0
    model = _run("csra:budget=5", strategy="best-response:local_steps=1", rounds=1)
    a = model.agent_frame()
    moved = (a.report_cost != a.cost) | (a.report_cap != a.cap)
    assert moved.any()
    mech = as_multifield_mechanism("csra:budget=5")
    truth = records(cost=a.cost, cap=a.cap, size=a["size"])
    u_truth = mech.run(truth).payments - a.cost.to_numpy() * mech.run(truth).eps
    for i in np.flatnonzero(moved):
        lie = truth.copy()
        lie[i]["cost"], lie[i]["cap"] = a.report_cost[i], a.report_cap[i]
        out = mech.run(lie)
        assert out.eps[i] <= a.cap[i] * (1 + 1e-9)
        assert out.payments[i] - a.cost[i] * out.eps[i] > u_truth[i] + 1e-9


def test_verified_fields_are_reported_true():
    class InflateSize(FieldStrategy):
        name = "inflate-size"

        def report(self, round, rng):
            out = round.types[round.mine].copy()
            out["size"] *= 2
            return out

    a = _run("csra:budget=5", strategy=InflateSize(), rounds=1).agent_frame()
    assert (a["report_size"] == a["size"]).all()


def test_same_seed_same_numbers_and_a_mix_of_strategies():
    spec = {"shade-cost:factor=1.5": 0.5}
    one = _run("csra:budget=5", strategy=spec, rounds=2).agent_frame()
    two = _run("csra:budget=5", strategy=spec, rounds=2).agent_frame()
    pd.testing.assert_frame_equal(one, two)
    first = one[one["round"] == 1]
    assert sorted(first.strategy.value_counts().to_dict().items()) == [
        ("shade-cost", 3),
        ("truthful", 3),
    ]


@pytest.mark.parametrize(
    "kwargs, words",
    [
        ({"strategy": "shade-cap:factor=0"}, "factor must be a number > 0"),
        ({"strategy": {"shade-cap": 0.7, "shade-cost": 0.6}}, "sum to <= 1"),
        ({"strategy": "shade-cap", "population": "6*uniform:0:1"}, "no cap field"),
        ({"rounds": 0}, "rounds must be"),
        ({"strategy": "nosuch"}, "unknown 'nosuch'"),
        ({"strategy": "shade-cap:nope=1"}, "no parameter 'nope'"),
    ],
)
def test_bad_settings_are_one_line(kwargs, words):
    with pytest.raises(MarketSimError, match=words) as info:
        _run("csra:budget=5", **kwargs)
    assert "\n" not in str(info.value)


def test_cli_simulate_writes_the_rounds(tmp_path, capsys):
    out = tmp_path / "sim"
    argv = ["simulate", "--population", POP, "--mechanism", "csra:budget=5", "--rounds", "2"]
    argv += ["--strategy", "shade-cap:factor=0.5", "--out", str(out), "--quiet"]
    assert main(argv) == 0
    model = pd.read_csv(out / "model.csv")
    agents = pd.read_csv(out / "agents.csv")
    assert list(model["round"]) == [1, 2] and len(agents) == 12
    assert agents.report_cap.to_numpy() == pytest.approx(agents.cap.to_numpy() / 2)
    assert (out / "manifest.json").exists() and "share_misreporting" in capsys.readouterr().out


def test_cli_simulate_refuses_one_field_settings(tmp_path, capsys):
    out = tmp_path / "sim"
    argv = ["simulate", "--population", POP, "--mechanism", "csra", "--budget", "1"]
    assert main([*argv, "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert "--budget is not available" in err and "\n" not in err and not out.exists()


def test_a_one_field_mechanism_is_built_for_the_population_and_reads_the_costs():
    """``offline`` needs the cost law: the model builds it from the population's costs,
    and its eps are the one-field mechanism's on the true costs (caps ignored by it,
    exceeded ones counted)."""
    from market_sim.mechanisms.base import as_mechanism
    from market_sim.population import Population

    pop = "5*uniform:0.1:1;cap=uniform:0.1:5"
    model = _run("offline", population=pop, rounds=1, settings=dict(mu=1.0, sigma=2.0))
    one_field = as_mechanism("offline", population=Population.parse("5*uniform:0.1:1"), sigma=2.0)
    out = one_field.run(model.types["cost"])
    a = model.agent_frame()
    assert a.eps.to_numpy() == pytest.approx(out.eps)
    assert list(a.cap_exceeded) == list(out.eps > model.types["cap"] * (1 + 1e-9))
