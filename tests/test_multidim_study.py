"""The multidim study at a tiny size: its rows show the peers' cost-only measure missing what
the joint audit finds, and its report section draws its figure."""

from __future__ import annotations

import numpy as np
import pandas as pd

from market_sim.analysis.multidim import section, summarise
from market_sim.scenarios import multidim

TINY = dict(sellers=6, profiles=6, cost_grid=25, field_grid=7, joint_grid=4, local_steps=3)


def test_tiny_table_and_figure(tmp_path):
    rows = []
    for mech in ("pac", "csra", "cap-threshold"):
        for rep in range(2):
            params = dict(TINY, mechanism=mech, budget=10.0)
            for row in multidim.run(params, np.random.default_rng(rep)):
                rows.append({**params, **row, "replication": rep})
    df = pd.DataFrame(rows)
    s = summarise(df).set_index("mechanism")
    # cap-threshold: truthful in cost and cap (proved), never above a cap
    assert s.loc["cap-threshold", "joint_share_gaining"] == 0
    assert s.loc["cap-threshold", "cap_exceeded"] == 0
    # PAC is a threshold rule in cost (no gain under either measure), but eps = 1/(n - k)
    # ignores caps: the peers see no IR violation, the joint audit sees caps exceeded
    assert s.loc["pac", "peer_share_gaining"] == 0 and s.loc["pac", "joint_share_gaining"] == 0
    assert s.loc["pac", "peer_share_ir"] == 0 and s.loc["pac", "cap_exceeded"] > 0
    # ... and those sellers escape by reporting a high cost: not IC once caps count
    assert s.loc["pac", "joint_share_escaping"] == s.loc["pac", "cap_exceeded"]
    assert s.loc["cap-threshold", "joint_share_escaping"] == 0
    # CSRA pays in proportion to the reported cap: the joint audit finds more gainers
    assert s.loc["csra", "joint_share_gaining"] > s.loc["csra", "peer_share_gaining"]
    assert (df.max_spend_over_budget <= 1 + 1e-9).all()  # every mechanism within budget
    sec = section(df, tmp_path)
    assert (tmp_path / "multidim.png").stat().st_size > 10_000
    assert len(sec.tables[0][1]) == 3


def test_grid_and_mechanisms():
    assert {p["mechanism"] for p in multidim.grid()} == set(multidim.MECHANISMS)
    assert {p["budget"] for p in multidim.grid()} == {10.0, 50.0, 100.0, 200.0}
    for name in multidim.MECHANISMS:
        mech = multidim.build(name, 50.0, 10)
        assert mech.report_fields[0] == "cost"
