"""market_sim.agents.batch_run: Mesa's signature and rows, with seller rows on every Mesa."""

import mesa
import numpy as np
import pandas as pd
import pytest

from market_sim.agents import MarketModel, batch_run
from market_sim.errors import MarketSimError

PARAMS = {"n_sellers": 5, "mechanism": "offline", "strategy": "shade", "rounds": 3}
MESA = tuple(int(p) for p in mesa.__version__.split(".")[:2])


def _sweep(**kw):
    kw.setdefault("display_progress", False)
    return pd.DataFrame(batch_run(MarketModel, PARAMS, **kw))


def test_one_row_per_seller_and_step_matching_the_models_own_frames():
    df = _sweep(rng=[0, 1], data_collection_period=1)
    assert len(df) == 2 * 5 * 4  # two runs, five sellers, steps 0..3
    for run, seed in enumerate((0, 1)):
        got = df[df.RunId == run]
        assert (got.seed == seed).all() and (got.iteration == run).all()
        assert sorted(got.Step.unique()) == [0, 1, 2, 3]
        assert got.groupby("Step").AgentID.nunique().tolist() == [5] * 4
        rounds, sellers = MarketModel(**PARAMS, seed=seed).run()
        for step in (1, 2, 3):
            at = got[got.Step == step].sort_values("seller_id")
            direct = sellers[sellers["round"] == step].sort_values("seller_id")
            np.testing.assert_array_equal(at.payment.to_numpy(), direct.payment.to_numpy())
            np.testing.assert_array_equal(at.report.to_numpy(), direct.report.to_numpy())
            # the model columns repeat this step's round row on every seller row
            total = rounds.loc[rounds["round"] == step, "total_payment"].item()
            assert np.allclose(at.total_payment, total)
            assert np.isclose(at.payment.sum(), total)
        assert (got[got.Step == 0].payment == 0).all()  # step 0: the initial state


def test_collection_period_and_seeds_in_the_parameters():
    last = _sweep(iterations=1, data_collection_period=-1)
    assert last.Step.unique().tolist() == [3] and len(last) == 5
    every_other = _sweep(rng=[4], data_collection_period=2)
    assert sorted(every_other.Step.unique()) == [0, 2]
    # a seed among the parameters is kept (no rng given): reproducible
    params = {**PARAMS, "seed": [7, 8]}
    a = pd.DataFrame(batch_run(MarketModel, params, display_progress=False))
    b = pd.DataFrame(batch_run(MarketModel, params, display_progress=False))
    pd.testing.assert_frame_equal(a, b)
    assert sorted(a.seed.unique()) == [7, 8]
    assert not np.allclose(a[a.seed == 7].cost, a[a.seed == 8].cost)


def test_processes_give_the_rows_of_one_process_in_run_order():
    one = _sweep(rng=[0, 1, 2], data_collection_period=1)
    two = _sweep(rng=[0, 1, 2], data_collection_period=1, number_processes=2)
    pd.testing.assert_frame_equal(one, two)


def test_agrees_with_mesa_batch_run():
    """Mesa >= 3.4 gives seller rows: ours must be identical.  Mesa 3.3 gives model rows
    for steps 0 .. steps - 1 only: ours must agree on those."""
    kw = dict(data_collection_period=1, max_steps=10, display_progress=False)
    if MESA >= (3, 4):  # seeds by rng= (Mesa 3.5 would pass seed=None over a seed parameter)
        ours = pd.DataFrame(batch_run(MarketModel, PARAMS, rng=[0, 1], **kw))
        theirs = pd.DataFrame(mesa.batch_run(MarketModel, PARAMS, rng=[0, 1], **kw))
        key = ["RunId", "Step", "AgentID"]
        pd.testing.assert_frame_equal(
            ours.sort_values(key).reset_index(drop=True),
            theirs.sort_values(key).reset_index(drop=True)[ours.columns],
        )
        return
    params = {**PARAMS, "rng": [0, 1]}  # Mesa 3.3 has no rng= argument
    ours = pd.DataFrame(batch_run(MarketModel, params, iterations=1, **kw))
    theirs = pd.DataFrame(mesa.batch_run(MarketModel, params, iterations=1, **kw))
    assert "AgentID" not in theirs  # what this function exists for
    assert sorted(theirs.Step.unique()) == [0, 1, 2]
    model_cols = list(theirs.columns)
    firsts = ours.drop_duplicates(["RunId", "Step"])[model_cols]
    firsts = firsts[firsts.Step < 3].reset_index(drop=True)
    pd.testing.assert_frame_equal(firsts, theirs[model_cols].reset_index(drop=True))


def test_errors():
    with pytest.raises(MarketSimError, match="iterations or rng"):
        batch_run(MarketModel, PARAMS, iterations=2, rng=[0], display_progress=False)
    with pytest.raises(MarketSimError, match="no values"):
        batch_run(MarketModel, {**PARAMS, "rounds": []}, display_progress=False)
    with pytest.raises(MarketSimError, match="data_collection_period"):
        batch_run(MarketModel, PARAMS, data_collection_period=0, display_progress=False)
