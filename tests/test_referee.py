"""The referee's report (issue #52, item 3): the peers' regret protocols beside the
audit's on the same markets, on mechanisms whose regret is known in closed form."""

import numpy as np
import pytest

from market_sim.errors import MarketSimError
from market_sim.mechanisms.base import Mechanism, Outcome
from market_sim.referee import gradient_ascent_regret, grid_regret, referee

FAST = dict(n_grid=33, n_random=4, refine=False)
AUDIT = "audit (with opponent profiles)"


class Quadratic(Mechanism):
    """eps = 1 and t(r) = 2r - r^2 on [0, 1]: the utility 2r - r^2 - c rises to r = 1, so
    a seller of cost c gains exactly (1 - c)^2 by reporting 1.  Gradient ascent from c
    with step 0.1 moves 1 - r by a factor 0.8 a step (the central difference is exact on
    a quadratic), so after 100 steps it is at 1 to 0.8^100; the 25-point grid holds 1."""

    name = "quadratic"

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        return Outcome(np.ones(r.size), 2 * r - r * r)


class Window(Mechanism):
    """eps = 1 and t = 1 + 0.3 [0.40 <= r <= 0.41]: every seller whose cost is outside
    the window gains exactly 0.3 by reporting into it (IR: t >= 1 >= c).  No point of
    the 25-point grid of [0, 1] (k/24: 0.375, 0.4167) lies in the window, and away from
    its edges the utility is flat, so gradient ascent from the truth never moves; the
    audit's 33-point grid holds 13/32 = 0.40625."""

    name = "window"

    def outcome(self, reports, rng=None):
        r = np.asarray(reports, dtype=float)
        return Outcome(np.ones(r.size), 1.0 + 0.3 * ((r >= 0.40) & (r <= 0.41)))


def test_every_protocol_finds_a_smooth_gain_exactly():
    rng = np.random.default_rng(0)
    c = rng.random(6)
    want = (1 - c) ** 2
    np.testing.assert_allclose(gradient_ascent_regret(Quadratic(), c, (0, 1), rng), want,
                               atol=1e-9)  # fmt: skip
    np.testing.assert_allclose(grid_regret(Quadratic(), c, (0, 1), rng), want, atol=1e-12)
    rep = referee(Quadratic(), "uniform:0:1", 6, 2, np.random.default_rng(3), **FAST)
    t = rep.table.set_index("protocol")
    assert t.loc[AUDIT, "max_regret"] == pytest.approx(t.loc["25-point grid", "max_regret"])
    assert t.loc["gradient ascent", "ratio"] == pytest.approx(1.0, abs=1e-6)
    assert (t["ir_violations"] == 0).all() and (t["share_above_tol"] == 1).all()
    w = rep.witness
    assert w["report"] == pytest.approx(1.0) and w["gain"] == pytest.approx((1 - w["cost"]) ** 2)


def test_a_window_the_peers_protocols_cannot_see():
    rep = referee(Window(), "uniform:0:1", 8, 2, np.random.default_rng(1), **FAST)
    t = rep.table.set_index("protocol")
    assert t.loc["25-point grid", "max_regret"] == 0.0
    assert t.loc["gradient ascent", "max_regret"] == 0.0
    assert t.loc[AUDIT, "max_regret"] == pytest.approx(0.3)
    assert np.isinf(t.loc["25-point grid", "ratio"]) and np.isinf(t.loc["gradient ascent", "ratio"])
    assert "gains 0.3" in rep.format()
    assert rep.format().count("\n") >= 4


def test_the_claimed_regret_is_printed_and_bad_input_is_one_error():
    rep = referee(Quadratic(), "uniform:0:1", 3, 1, np.random.default_rng(0), claimed=1e-3,
                  **FAST)  # fmt: skip
    assert "claimed): 0.001" in rep.format()
    with pytest.raises(MarketSimError, match="Generator"):
        referee(Quadratic(), "uniform:0:1", 3, 1, 0)


def test_the_cli_prints_the_report_and_refuses_bad_input_in_one_line():
    import subprocess
    import sys
    from pathlib import Path

    exe = str(Path(sys.executable).with_name("market-sim"))
    cmd = [exe, "referee", "--mechanism", "pay-as-bid", "--dist", "uniform:1:5",
           "--sellers", "4", "--markets", "1", "--steps", "5", "--claimed", "0.01"]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "gradient ascent" in done.stdout and "25-point grid" in done.stdout
    assert "claimed): 0.01" in done.stdout
    bad = subprocess.run([*cmd[:-2], "--claimed", "-1"], capture_output=True, text=True)
    assert bad.returncode == 2 and "claimed" in bad.stderr and "Traceback" not in bad.stderr
