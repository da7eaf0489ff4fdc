"""The ``bne`` strategy: sellers play a given bid function (issue #43, item 4)."""

from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from market_sim.agents import MarketModel, SellerGroup, as_strategy
from market_sim.cli import main
from market_sim.errors import MarketSimError
from market_sim.games.egta import egta
from market_sim.games.equilibrium import symmetric_bne
from market_sim.mechanisms.first_price import (
    FirstPrice,
    asymmetric_first_price_bid,
    first_price_bid,
)

FIRST_PRICE = "market_sim.mechanisms.first_price:FirstPrice"
GRID = np.linspace(0.0, 1.0, 9)


def write_table(path, columns):
    """bid.csv as `market-sim bne` writes it: group,cost,bid, one row per grid cost."""
    rows = [
        f"{g},{c!r},{b!r}"
        for g, (cs, bs) in enumerate(columns)
        for c, b in zip(np.asarray(cs).tolist(), np.asarray(bs).tolist(), strict=True)
    ]
    path.write_text("group,cost,bid\n" + "\n".join(rows) + "\n")
    return path


def reports(strategy, costs, group=None, support=(0.0, 1.0)):
    """The strategy's reports for sellers of these costs (and classes)."""
    n = len(costs)
    model = SimpleNamespace(
        dist=SimpleNamespace(support=support),
        group=np.zeros(n, dtype=int) if group is None else np.asarray(group),
    )
    ids = np.arange(n)
    sellers = SellerGroup(ids, ids, ids, np.asarray(costs, float), np.zeros(n), np.zeros(n))
    return strategy.report_all(sellers, model)


def test_the_closed_form_bne_is_played_at_the_grid_and_linearly_between(tmp_path):
    # 2-unit first price, 4 sellers, U[0, 1]: b(c) = E[Y | Y > c] is not linear, so the
    # linear interpolation between grid costs differs from it between them
    bids = first_price_bid(GRID, 4, 2)
    s = as_strategy(f"bne:{write_table(tmp_path / 'bid.csv', [(GRID, bids)])}")
    assert s.name == "bne"
    np.testing.assert_array_equal(reports(s, GRID), bids)  # exactly, through the CSV
    mid = (GRID[:-1] + GRID[1:]) / 2
    got = reports(s, mid)
    np.testing.assert_allclose(got, (bids[:-1] + bids[1:]) / 2, rtol=0, atol=1e-15)
    exact = first_price_bid(mid, 4, 2)
    assert np.max(np.abs(got - exact)) > 1e-4  # interpolated, not the closed form
    assert np.max(np.abs(got - exact)) < 0.01  # and close to it on this grid
    # the folder that market-sim bne --out wrote works too, and so does path=
    for spec in (f"bne:{tmp_path}", f"bne:path={tmp_path / 'bid.csv'}"):
        np.testing.assert_array_equal(reports(as_strategy(spec), GRID), bids)


def test_each_seller_plays_its_class_column(tmp_path):
    grids = [np.linspace(1.0, 2.0, 9), np.linspace(0.0, 2.0, 9)]
    table = [(c, asymmetric_first_price_bid(c, g)) for g, c in enumerate(grids)]
    path = write_table(tmp_path / "bid.csv", table)
    s = as_strategy(f"bne:{path}")
    got = reports(s, [1.5, 1.5, 0.25, 2.0], group=[0, 1, 1, 0], support=(0.0, 2.0))
    want = [np.interp(1.5, *table[0]), np.interp(1.5, *table[1])]
    want += [np.interp(0.25, *table[1]), asymmetric_first_price_bid(2.0, 0)]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-15)
    assert got[0] != got[1]  # unlike sellers of equal cost
    # in a market of two classes (agents.csv's group column says whose is whose)
    m = MarketModel(
        population="2*uniform:1:2+3*uniform:0:2", mechanism=FIRST_PRICE, strategy=f"bne:{path}",
        rounds=1, seed=0, measure_regret=False,
    )  # fmt: skip
    _, agents = m.run()
    for g in (0, 1):
        a = agents[agents.group == g]
        np.testing.assert_allclose(a.report, np.interp(a.cost, *table[g]), rtol=0, atol=1e-15)


def test_a_bne_result_and_its_written_table_play_alike_in_simulate(tmp_path, capsys):
    r = symmetric_bne(
        FirstPrice(1), "uniform:0:1", 5, np.random.default_rng(0), samples=64, grid=9,
        eval_grid=5, max_iter=4,
    )  # fmt: skip
    r.write(tmp_path / "bne")
    kw = dict(dist="uniform:0:1", mechanism=FIRST_PRICE, rounds=1, seed=3, measure_regret=False)
    _, from_result = MarketModel(5, strategy=r, **kw).run()
    _, from_file = MarketModel(5, strategy=f"bne:{tmp_path / 'bne' / 'bid.csv'}", **kw).run()
    np.testing.assert_array_equal(from_result.report, from_file.report)
    np.testing.assert_allclose(from_result.report, r.bid(from_result.cost), rtol=0, atol=1e-15)
    # the command line
    out = tmp_path / "sim"
    argv = ["simulate", "--dist", "uniform:0:1", "--sellers", "5", "--rounds", "1", "--quiet"]
    argv += ["--mechanism", FIRST_PRICE, "--strategy", f"bne:{tmp_path / 'bne'}", "--out", str(out)]
    assert main(argv) == 0
    agents = pd.read_csv(out / "agents.csv")
    np.testing.assert_allclose(agents.report, r.bid(agents.cost), rtol=0, atol=1e-12)


def test_egta_with_the_closed_form_bne(tmp_path):
    # single-unit first price, 4 sellers, U[0, 1]: b(c) = c + (1 - c) / 4.  A truthful
    # seller is paid its cost (utility 0); a BNE seller wins at a markup (utility >= 0)
    path = write_table(tmp_path / "bid.csv", [(GRID, GRID + (1 - GRID) / 4)])
    spec = f"bne:{path}"
    r = egta(FIRST_PRICE, "uniform:0:1", 4, ["truthful", spec], 3, seed=0, rounds=10,
             new_costs_each_round=True, n_boot=50)  # fmt: skip
    t = r.table()
    assert (t[t.strategy == "truthful"].payoff == 0).all()
    assert (t[t.strategy == spec].payoff > 0).all()
    assert r.regret({spec: 1}) == 0 and r.regret({"truthful": 1}) > 0
    assert r.equilibria[0].mixture == {"truthful": 0.0, spec: 1.0}
    # in Python, a BNEResult (anything with bid_tables) in place of the spec: same game
    result = SimpleNamespace(bid_tables=lambda: ((GRID, GRID + (1 - GRID) / 4),))
    r1 = egta(FIRST_PRICE, "uniform:0:1", 4, ["truthful", result], 3, seed=0, rounds=10,
              new_costs_each_round=True, n_boot=50)  # fmt: skip
    assert r1.strategies == ("truthful", "bne")
    np.testing.assert_array_equal(r1.sample_payoffs, r.sample_payoffs)
    # a table of two classes in a population of two: each seat plays its class's column
    # (egta's markets keep the population's classes; else "the market 1" is refused)
    two = write_table(tmp_path / "two.csv", [(GRID, GRID + 0.1), (GRID, GRID + 0.2)])
    r2 = egta(FIRST_PRICE, "2*uniform:0:1+2*uniform:0:1", None, ["truthful", f"bne:{two}"], 2,
              seed=0, n_boot=20)  # fmt: skip
    assert (r2.table().query("strategy == 'truthful'").payoff == 0).all()


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "no such file"),
        (b"\x00\xff\xfe garbage\n\x00", "cannot be read|needs the columns"),
        (b"group,price\n0,1\n", "needs the columns cost and bid"),
        (b"", "needs the columns cost and bid"),
        (b"cost,bid\n0,0.5\n1,x\n", "line 3: 'x' is not a number"),
        (b"cost,bid\n0,0.5\n0,0.6\n", "a cost is listed twice"),
        (b"cost,bid\n0,0.5\n", "bids at 2 costs or more"),
        (b"group,cost,bid\n0,0,0.5\n0,1,1\n2,0,0.5\n2,1,1\n", "groups must be 0, 1"),
    ],
)
def test_a_bad_table_is_one_line(tmp_path, content, message):
    path = tmp_path / "bid.csv"
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(MarketSimError, match=message) as info:
        as_strategy(f"bne:{path}")
    assert "\n" not in str(info.value) and str(path) in str(info.value)


def test_a_table_for_another_market_is_refused(tmp_path, capsys):
    path = write_table(tmp_path / "bid.csv", [(GRID, GRID)])
    with pytest.raises(MarketSimError, match=r"covers costs \[0, 1\]; a seller's cost is"):
        MarketModel(4, dist="uniform:1:5", strategy=f"bne:{path}", rounds=1, seed=0).run()
    two = write_table(tmp_path / "two.csv", [(GRID, GRID), (GRID, GRID)])
    with pytest.raises(MarketSimError, match="the bid table has 2 classes, the market 1"):
        MarketModel(4, dist="uniform:0:1", strategy=f"bne:{two}", rounds=1, seed=0).run()
    with pytest.raises(MarketSimError, match="takes parameters as key=value"):
        as_strategy("shade:1.3")
    # a study's strategy parameter reads the spec the same way
    from market_sim.parameters import Registered

    Registered("strategy").check(f"bne:{path}")
    with pytest.raises(ValueError, match="takes parameters as key=value"):
        Registered("strategy").check("shade:1.3")
    argv = ["simulate", "--dist", "uniform:0:1", "--sellers", "4", "--quiet"]
    argv += ["--strategy", f"bne:{tmp_path / 'missing.csv'}", "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "no such file" in err and "\n" not in err


def test_compare_plays_given_bids(tmp_path, capsys):
    # single-unit first price: the lowest report wins and is paid its report.  At truth
    # a market pays its lowest cost c; playing b(c) = c + (1 - c) / 4 it pays b(c), so
    # market by market: payment with the bids = 0.75 x payment at truth + 0.25
    from market_sim.comparison import compare

    path = write_table(tmp_path / "bid.csv", [(GRID, GRID + (1 - GRID) / 4)])
    kw = dict(audit=False)
    truth = compare([FIRST_PRICE, "posted-price"], "uniform:0:1", 4, 5, 0, **kw)
    given = compare(
        [FIRST_PRICE, "posted-price"], "uniform:0:1", 4, 5, 0, bids={FIRST_PRICE: f"bne:{path}"},
        **kw,
    )  # fmt: skip
    pay = {
        name: r.markets[r.markets.mechanism == FIRST_PRICE].payment.to_numpy()
        for name, r in (("truth", truth), ("given", given))
    }
    np.testing.assert_allclose(pay["given"], 0.75 * pay["truth"] + 0.25, rtol=1e-12)
    lb = given.leaderboard.set_index("mechanism")
    assert (
        lb.loc[FIRST_PRICE, "played"] == "given bids"
        and lb.loc["posted-price", "played"] == "truth"
    )
    np.testing.assert_array_equal(  # the other mechanism's sellers are untouched
        given.markets[given.markets.mechanism == "posted-price"].objective,
        truth.markets[truth.markets.mechanism == "posted-price"].objective,
    )
    assert given.settings["bids"] == {FIRST_PRICE: f"bne:{path}"}
    # the command line: --bids LABEL=bne:DIR/bid.csv; an unknown label is one line, exit 2
    argv = ["compare", "--mechanism", FIRST_PRICE, "--mechanism", "posted-price", "--quiet"]
    argv += ["--dist", "uniform:0:1", "--sellers", "4", "--markets", "3", "--no-audit"]
    assert main([*argv, "--bids", f"{FIRST_PRICE}=bne:{path}", "--out", str(tmp_path / "c")]) == 0
    printed = capsys.readouterr().out
    assert "Given bids: the sellers of" in printed and "At truth" in printed
    assert main([*argv, "--bids", f"offline=bne:{path}", "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err.strip()
    assert "'offline' is not a mechanism here" in err and "\n" not in err
