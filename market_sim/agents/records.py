"""What a MarketModel keeps of its rounds: the DataCollector's reporters, the per-seller
columns (in memory, or streamed to Parquet with ``agent_out``) and the frames built from
them (``agent_frame``, ``ledger_frame``).  Each function takes the model."""

from __future__ import annotations

import mesa
import numpy as np

from ..errors import MarketSimError
from .market_agents import SellerAgent


def collector(model, eager: bool) -> mesa.DataCollector:
    """The DataCollector: one row per round, and per seller when views are eager."""
    seller_reporters = {
        k: k
        for k in ("seller_id",)
        + (("group",) if model._population_given else ())
        + ("strategy_name", "cost", "report", "eps", "payment", "utility", "regret")
        + (("external_regret",) if model._learners else ())
        + (("eps_spent", "budget_left") if model.ledger is not None else ())
    }
    ledger_reporters = (
        {
            "sellers_in_market": lambda m: int(m.n_sellers - m._exhausted.sum()),
            "mean_eps_spent": lambda m: float(m.ledger.spent.mean()),
        }
        if model.ledger is not None
        else {}
    )
    return mesa.DataCollector(
        model_reporters={
            "buyer_loss": lambda m: m.platform.buyer_loss,
            "proxy_loss": lambda m: m.platform.proxy_loss,
            "total_payment": lambda m: m.platform.total_payment,
            "released_payment": lambda m: m.platform.released_payment,
            "released_n_bought": lambda m: m.platform.released_n_bought,
            "test_error": lambda m: m.platform.test_error,
            "mean_regret": lambda m: m._regret_stat(np.mean),
            "max_regret": lambda m: m._regret_stat(np.max),
            "participation": lambda m: float(np.mean(m.participating)),
            "share_misreporting": lambda m: m._share_misreporting(),
            "avg_external_regret": lambda m: m._avg_external_regret(),
            **ledger_reporters,
        },
        agenttype_reporters={SellerAgent: seller_reporters} if eager else None,
    )


def record(model, active) -> None:
    """Keep this round's per-seller columns (ids, round and strategy are added when
    the frame is built; costs only when they change)."""
    cols = {
        "report": model.report.copy(),
        "eps": model.eps.copy(),
        "payment": model.payment.copy(),
        "utility": model.utility.copy(),
        # not measured: all NaN every round, so every round shares one read-only column
        "regret": model.regret.copy() if model._regret_written else model._nan_column(),
    }
    if model.ledger is not None:
        cols["eps_spent"] = model.ledger.spent.copy()
        cols["budget_left"] = model.ledger.left.copy()
    if model._learners:
        cols["external_regret"] = (
            model.external_regret.copy() if model._scored else model._nan_column()
        )
    cols["cost"] = (
        model.cost.copy()
        if model.new_costs or not model._agent_rows
        else model._agent_rows[0]["cost"]
    )
    if model.agent_out is None:
        model._agent_rows.append(cols)
        return
    import pyarrow.parquet as pq

    table = model._table([cols], model.round)
    if model._agent_writer is None:
        model._agent_writer = pq.ParquetWriter(str(model.agent_out), table.schema)
    model._agent_writer.write_table(table)
    if model._agent_rows == []:
        model._agent_rows.append({"cost": cols["cost"]})
    if model.round >= model.rounds:
        model.close()


def nan_column(model) -> np.ndarray:
    col = getattr(model, "_nans", None)
    if col is None:
        col = model._nans = np.full(model.n_sellers, np.nan)
        col.flags.writeable = False
    return col


def arrow_table(model, rows, first_round: int):
    import pyarrow as pa

    n = model.n_sellers
    names = pa.DictionaryArray.from_arrays(
        pa.array(np.tile(model.strategy_id.astype(np.int32), len(rows))),
        pa.array(model.strategy_names, type=pa.string()),
    )
    cols = {
        "round": np.repeat(np.arange(first_round, first_round + len(rows)), n),
        "seller_id": np.tile(np.arange(n), len(rows)),
    }
    if model._population_given:
        cols["group"] = np.tile(model.group, len(rows))
    for k in model.agent_columns[2:-1]:
        if k != "group":
            cols[k] = np.concatenate([r[k] for r in rows])
    return pa.table({**cols, "strategy": names.cast(pa.string())})


def ledger_frame(model, accountants=("basic", "rdp", "pld")):
    """One row per seller: its sales, the eps it sold (sum), its composed loss under
    the model's accountant (``eps_spent``), ``budget_left``, and the loss of the same
    history under each of ``accountants`` at the budget's delta (``spent_<name>``;
    pld is left out when dp-accounting is not installed)."""
    import pandas as pd

    from ..privacy.ledger import spent_under

    if model.ledger is None:
        raise MarketSimError("ledger_frame: the model has no budget (pass budget=)")
    led = model.ledger
    agents = model.agent_frame()
    hist = agents.pivot(index="round", columns="seller_id", values="eps")
    hist = hist.reindex(columns=range(model.n_sellers), fill_value=0.0).to_numpy()
    names = list(accountants)
    if "pld" in names:
        try:
            import dp_accounting  # noqa: F401
        except ImportError:
            names.remove("pld")
    spent = spent_under(hist, led.budget.delta, names) if len(hist) else {}
    return pd.DataFrame(
        {
            "seller_id": np.arange(model.n_sellers),
            "sales": led.rounds.copy(),
            "eps_sold": led.basic.spent.copy(),
            "eps_spent": led.spent.copy(),
            "budget_left": led.left.copy(),
            **{f"spent_{k}": v for k, v in spent.items()},
        }
    )


def agent_frame(model):
    """One row per seller and round (``AGENT_COLUMNS``)."""
    import pandas as pd

    if model.agent_out is not None:
        model.close()
        df = pd.read_parquet(model.agent_out)
    elif not model._agent_rows:
        return pd.DataFrame(columns=list(model.agent_columns))
    else:
        df = model._table(model._agent_rows, 1).to_pandas()
    df["strategy"] = df["strategy"].astype(str)
    return df
