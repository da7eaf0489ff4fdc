"""bne's opt-in last stage, fictitious play in beliefs (market_sim.games.equilibrium_beliefs;
issue #48).  Each truth is proved where it is stated."""

from __future__ import annotations

import numpy as np
import pytest

from market_sim.errors import MarketSimError
from market_sim.games import equilibrium_beliefs as eb
from market_sim.games.equilibrium import bne
from market_sim.mechanisms.first_price import FirstPrice


class TwoTierMenu:
    """A posted menu paid as bid: a seller reporting z gets eps E(z), a smooth function
    of its own report only, and is paid z E(z).  Two tiers: a large eps below about 0.1
    and a small one below about 0.5."""

    batched = True

    def outcome(self, reports, rng=None):
        z = np.asarray(reports, dtype=float)
        E = menu_eps(z)
        return E, z * E


def menu_eps(z):
    return 10.0 / (1 + (z / 0.1) ** 8) + 1.0 / (1 + (z / 0.5) ** 8)


def menu_truth(c: np.ndarray) -> np.ndarray:
    """The menu's equilibrium: no seller's outcome depends on the others' reports, so the
    profile where every cost reports argmax_z (z - c) E(z) is a Bayes-Nash equilibrium
    (each report is a best response whatever the others do); the argmax on a grid of
    10^-5 over [0, 1] (E is smooth: the grid's loss is below 10^-8)."""
    z = np.linspace(0.0, 1.0, 100001)
    E = menu_eps(z)
    U = (z[None, :] - np.asarray(c)[:, None]) * E[None, :]
    return z[np.argmax(U, axis=1)]


def test_steps_sit_where_both_reports_pay_the_same():
    """Three reports with E = 10, 3, 1 at z = 0.1, 0.3, 0.5, paid zE.  Truth: cost c
    prefers report a to b iff (z_a - c) E_a > (z_b - c) E_b, so the steps are at
    c = (T_b - T_a) / (E_b - E_a): 1/70 (0.1 -> 0.3) and 0.2 (0.3 -> 0.5); every cost
    away from them bids its argmax, checked directly."""
    z, E = np.array([0.1, 0.3, 0.5]), np.array([10.0, 3.0, 1.0])
    T = z * E
    costs = np.linspace(0, 0.3, 31)
    best = np.argmax(T[None, :] - costs[:, None] * E[None, :], axis=1)
    xs, ys = eb.steps_table(costs, best, z, E, T)
    rises = xs[1:][np.diff(ys) > 0]
    assert np.allclose(rises, [1 / 70, 0.2], atol=1e-8)
    c = np.linspace(0, 0.3, 3001)
    c = c[(np.abs(c - 1 / 70) > 1e-6) & (np.abs(c - 0.2) > 1e-6)]
    direct = z[np.argmax(T[None, :] - c[:, None] * E[None, :], axis=1)]
    assert np.array_equal(np.interp(c, xs, ys), direct)


def test_ramps_hold_each_run_of_responses_at_its_middle():
    """Responses 0.1 on costs 0-0.2, 0.2 on 0.3-0.4, 0.3 on 0.5-0.8, 0.4 on 0.9-1: the
    ramps are 0.1, 0.2, 0.3, 0.4 at the runs' middles 0.1, 0.35, 0.65, 0.95, linear in
    between, flat outside them; no cost between two middles shares a bid with another."""
    c = np.linspace(0, 1, 11)
    best = np.array([0, 0, 0, 1, 1, 2, 2, 2, 2, 3, 3])
    z = np.array([0.1, 0.2, 0.3, 0.4])
    got = eb.ramps(c, best, z)
    want = np.interp(c, [0.1, 0.35, 0.65, 0.95], z)
    assert np.allclose(got, want, atol=1e-12)
    assert got[1] == 0.1 and got[-1] == 0.4 and np.all(np.diff(got[1:-1]) > 0)
    assert eb.ramps(c[:0], best[:0], z).size == 0


def test_below_the_jump_the_bids_are_continuous_not_atoms():
    """The menu's exact belief (E and T = zE at the stage's reports: the menu's outcome
    is the own report's, so the belief is exact): below its jump the best report rises
    with the cost through nine reports.  The table there is continuous (strictly
    increasing inside the first and last runs' halves: a step table's flats are atoms
    of the class's bids, which make the others' eps jump), each bid within a report's
    spacing (2%) of the truth, and the jump at c* within the response grid's cell."""
    from market_sim.distributions import parse_distribution
    from market_sim.games.equilibrium_pure import _State

    law = parse_distribution("uniform:0:1")
    reports = eb.report_set((0.0, 1.0), 1.0, 0.06)
    E, T = menu_eps(reports), reports * menu_eps(reports)
    grid = eb.response_grid(law, 1.0)
    state = _State([grid], [grid.copy()], [1.0], 1.0)
    costs, bids, jumps = eb.table_from_belief(grid, reports, E, T, 6, law, state, 0, True)
    c_star = menu_jump()
    assert len(jumps) == 1 and abs(jumps[0] - c_star) <= grid[1] - grid[0]
    low = costs < jumps[0] - 1e-6
    x, y = costs[low], bids[low]
    inside = (x > 0.002) & (x < c_star - 0.002)  # past the first and last half-runs
    assert np.all(np.diff(y[inside]) > 0)  # steps: 9 bids for these 97 costs
    assert np.all(np.abs(y - menu_truth(x)) <= 0.02 * menu_truth(x) + 1e-9)


def menu_jump() -> float:
    """The cost c* where the menu's two branches pay the same: the best utility over
    reports below 0.2 (the large tier's peak) equals the best over reports above it
    (each a bounded scalar maximisation to 10^-12), solved by Brent's method: 0.0529302."""
    from scipy.optimize import brentq, minimize_scalar

    def best(c, lo, hi):
        def loss(z):
            return -(z - c) * menu_eps(z)

        r = minimize_scalar(loss, bounds=(lo, hi), method="bounded", options={"xatol": 1e-12})
        return -r.fun

    return brentq(lambda c: best(c, 0.0, 0.2) - best(c, 0.2, 1.0), 0.01, 0.2, xtol=1e-14)


def test_the_menu_is_solved_with_its_jump_a_step():
    """The two-tier menu (U[0, 1], 3 sellers): its equilibrium jumps from about 0.092
    to 0.40 at c* (``menu_jump``); after the stage the table is within 0.005 of it
    (``menu_truth``) at every cost below 0.45 not within 10^-3 of c*, the step is within
    10^-5 of c* (a step at its cell's middle would be 10^-4 off), and the verified
    epsilon / u is within 1%."""
    c = np.linspace(0, 0.45, 901)
    truth = menu_truth(c)
    star = menu_jump()
    assert abs(star - 0.0529302) < 1e-6
    r = bne(TwoTierMenu(), [("uniform:0:1", 3)], np.random.default_rng(0), method="pure",
            samples=256, max_iter=14, beliefs_rounds=1, beliefs_markets=1024)  # fmt: skip
    (jump,) = r.options["jumps"][0]
    assert abs(jump - star) <= 1e-5
    away = np.abs(c - star) > 1e-3
    assert np.max(np.abs(r.bid(c) - truth)[away]) <= 0.005
    assert r.epsilon_relative <= 0.01


def test_the_interim_path_keeps_an_exact_equilibrium():
    """First price, U[0, 1], 3 sellers: b(c) = c + (1 - c)/3 (the textbook symmetric
    equilibrium; tests/bne_reference.py).  On the interim path the belief is exact, and
    two rounds from the pure method's table stay within 0.01 of it on the costs that win
    at least 1% ((1 - c)^2 >= 0.01: c <= 0.9), at a verified epsilon / u within 1%."""
    r = bne(FirstPrice(1), [("uniform:0:1", 3)], np.random.default_rng(0), method="pure",
            beliefs_rounds=2)  # fmt: skip
    assert r.options["path"] == "interim"
    c = np.linspace(0, 0.9, 91)
    assert np.max(np.abs(r.bid(c) - (c + (1 - c) / 3))) <= 0.01
    assert r.epsilon_relative <= 0.01


class FirstPriceBox:
    """First price as a black box that takes batches (the ``batched`` path: sampled)."""

    batched = True

    def outcome(self, reports, rng=None):
        return FirstPrice(1).outcome(reports, rng)


def test_same_numbers_on_any_number_of_workers():
    """The observation's chunks are seeded in the parent: one or two processes give the
    same tables to the bit; another seed, other tables."""
    kw = dict(method="pure", max_iter=6, samples=256, eval_grid=6, check_grid=9,
              beliefs_rounds=2, beliefs_markets=2048)  # fmt: skip
    pop = [("uniform:0:1", 3)]
    one = bne(FirstPriceBox(), pop, np.random.default_rng(3), beliefs_workers=1, **kw)
    two = bne(FirstPriceBox(), pop, np.random.default_rng(3), beliefs_workers=2, **kw)
    other = bne(FirstPriceBox(), pop, np.random.default_rng(4), beliefs_workers=1, **kw)
    assert one.options["path"] == "batched"
    assert np.array_equal(one.costs, two.costs) and np.array_equal(one.bids, two.bids)
    assert not np.array_equal(one.bids, other.bids)


def test_the_belief_is_the_running_mean_restarted_each_epoch(monkeypatch):
    """Rounds observe curves 1, 2, 3, 4, 5 (constants); with an epoch of 3 the beliefs
    the responses read are 1, 1.5, 2 (the running mean), then 4, 4.5 (restarted)."""
    seen, read = iter(range(1, 6)), []

    def observe(setup, opt, oracle, state, reports, rng):
        k = float(next(seen))
        return [(np.full(reports[0].size, k), np.full(reports[0].size, k))]

    def table(grid, reports, E, T, knots, law, state, g, cut):
        read.append(float(E[0]))
        return state.costs[g], state.bids[g], []

    monkeypatch.setattr(eb, "observe", observe)
    monkeypatch.setattr(eb, "table_from_belief", table)
    r = bne(FirstPrice(1), [("uniform:0:1", 2)], np.random.default_rng(0), method="pure",
            max_iter=5, beliefs_rounds=5, beliefs_epoch=3)  # fmt: skip
    assert read == [1.0, 1.5, 2.0, 4.0, 4.5]
    assert r.options["beliefs_rounds"] == 5


@pytest.mark.parametrize(
    "option, value",
    [("beliefs_rounds", -1), ("beliefs_markets", 0), ("beliefs_epoch", 0),
     ("beliefs_workers", 0), ("beliefs_rounds", 1.5)],
)  # fmt: skip
def test_bad_options_are_one_line_errors(option, value):
    with pytest.raises(MarketSimError, match=option):
        bne(FirstPrice(1), [("uniform:0:1", 2)], np.random.default_rng(0), method="pure",
            **{option: value})  # fmt: skip


def test_auto_runs_the_stage_only_for_a_jump_not_certified():
    """``method="auto"`` (the default) continues the pure method with the stage when its
    tables jump on a sampled path and the verified epsilon / u is above verify_tol:
    on the menu (a jump, batched path) solved coarsely (256 samples, 14 iterations:
    epsilon / u about 1.07%) it does, and returns the better verified of the two, saying
    so with both numbers; with verify_tol 5% it does not; a first-price box (no jump)
    never does."""
    pop = [("uniform:0:1", 3)]
    kw = dict(samples=256, max_iter=14, beliefs_markets=1024, beliefs_epoch=2)
    both = bne(TwoTierMenu(), pop, np.random.default_rng(0), **kw)
    reason = both.options["beliefs_reason"]
    assert "6 rounds" in reason and both.options["method"] == "pure"  # three epochs
    pure = bne(TwoTierMenu(), pop, np.random.default_rng(0), method="pure", **kw)
    assert pure.epsilon_relative > 0.01 and f"{pure.epsilon_relative:.3g}" in reason
    staged = float(reason.split("with 6 rounds ")[1].split(";")[0])  # the stage's, printed
    if "stage result returned" in reason:  # the better verified one, and it is the stage's
        assert both.options["beliefs_rounds"] == 6 and staged < pure.epsilon_relative
        assert f"{both.epsilon_relative:.3g}" == f"{staged:.3g}"
    else:
        assert both.epsilon_relative == pure.epsilon_relative <= staged
    assert "beliefs stage" in both.format() and both.seconds > pure.seconds  # both stages
    lax = bne(TwoTierMenu(), pop, np.random.default_rng(0), verify_tol=0.05, **kw)
    assert "beliefs_reason" not in lax.options
    assert lax.epsilon_relative == pure.epsilon_relative
    box = bne(FirstPriceBox(), pop, np.random.default_rng(0), max_iter=6, samples=256,
              verify_tol=1e-6, beliefs_markets=1024)  # fmt: skip
    assert not any(box.options["jumps"]) and "beliefs_reason" not in box.options


def test_no_pool_inside_a_runner_worker(monkeypatch):
    """``beliefs_workers``' default is every core, but one inside a runner's pool worker
    (``bne_sweep``'s tasks already use every core)."""
    import market_sim.execution as execution

    assert eb.available_cores() >= 1
    monkeypatch.setattr(execution, "_worker_ready", True)
    assert execution.in_worker() and eb.available_cores() == 1
