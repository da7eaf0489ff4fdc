"""The privacy ledger: accountants against dp_accounting, budgets as an invariant,
Budgeted caps (IR, pro rata), costs on the composed loss, input checks."""

from __future__ import annotations

import math

import numpy as np
import pytest

from market_sim.agents.model import MarketModel
from market_sim.errors import MarketSimError
from market_sim.mechanisms.budgeted import Budgeted, Caps
from market_sim.privacy.ledger import (
    RDP_ORDERS,
    Budget,
    PrivacyLedger,
    pure_dp_rdp,
    rdp_to_eps,
    rr_rdp,
    spent_under,
)

dp_accounting = pytest.importorskip("dp_accounting")  # the `test` extra installs it


# ---- accountants against the library --------------------------------------------------
def _rr(e):
    """One sale at e as dp_accounting's event: binary RR, privacy loss exactly +-e."""
    from dp_accounting import dp_event

    return dp_event.RandomizedResponseDpEvent(noise_parameter=2 / (1 + math.exp(e)), num_buckets=2)


def _lib(accountant):
    from dp_accounting import pld, rdp
    from dp_accounting.privacy_accountant import NeighboringRelation as NeighborRel

    rel = NeighborRel.REPLACE_ONE  # RR's pair; the default ADD_OR_REMOVE refuses RR events
    if accountant == "rdp":
        return rdp.RdpAccountant(orders=list(RDP_ORDERS), neighboring_relation=rel)
    return pld.PLDAccountant(neighboring_relation=rel, value_discretization_interval=1e-3)


def test_rr_rdp_closed_form_matches_the_definition_and_the_library():
    eps = np.array([0.05, 0.3, 1.0, 2.5, 40.0])
    ours = rr_rdp(eps)
    assert np.all(np.isfinite(ours)) and pure_dp_rdp is rr_rdp
    # the definition: q^a (1-q)^(1-a) + (1-q)^a q^(1-a), q = e^e/(1+e^e), where it fits a float
    a = RDP_ORDERS[RDP_ORDERS < 60]
    e = eps[:4, None]
    q = np.exp(e) / (1 + np.exp(e))
    direct = np.log(q**a * (1 - q) ** (1 - a) + (1 - q) ** a * q ** (1 - a)) / (a - 1)
    np.testing.assert_allclose(ours[:4, : a.size], direct, rtol=1e-9)
    for k, x in enumerate(eps):
        acc = _lib("rdp")
        acc.compose(_rr(x))
        np.testing.assert_allclose(ours[k], acc._rdp, rtol=1e-9)
    assert np.all(ours <= eps[:, None] * (1 + 1e-12))  # the pure-DP limit bounds the curve
    # R_a -> e as a -> inf (the max-divergence of RR is e): e - R_a <= log(2)/(a - 1)
    gap = eps - ours[:, -1]
    assert np.all(gap >= 0) and np.all(gap <= math.log(2) / (RDP_ORDERS[-1] - 1))


def test_one_rr_event_of_dp_accounting_has_loss_exactly_eps():
    from dp_accounting.pld import privacy_loss_distribution as pld

    for e in (0.3, 1.0, 2.0):
        p = pld.from_randomized_response(
            2 / (1 + math.exp(e)), 2, value_discretization_interval=1e-3
        )
        assert p.get_epsilon_for_delta(1e-12) == pytest.approx(e, abs=1e-3)  # delta -> 0: e
        assert p.get_delta_for_epsilon(e - 2e-3) > 0  # and not less
        led = PrivacyLedger(1, (1e3, 1e-9), "pld")
        led.charge([0], [e])
        assert led.spent[0] == pytest.approx(e, abs=1e-3)


def _kov_eps(eps, rounds, delta):
    """The exact eps of T binary RR events at e (Kairouz, Oh, Viswanath 2015, Thm 3.3):
    delta(x) = sum_k C(T, k) q^(T-k) (1-q)^k [1 - e^(x - (T - 2k) e)]_+, bisection on x."""
    k = np.arange(rounds + 1)
    q = math.exp(eps) / (1 + math.exp(eps))
    w = np.array([math.comb(rounds, int(j)) * q ** (rounds - j) * (1 - q) ** j for j in k])
    loss = (rounds - 2 * k) * eps

    def hockey(x):
        return float(np.sum(w * np.maximum(0.0, -np.expm1(x - loss))))

    lo, hi = 0.0, rounds * eps
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if hockey(mid) > delta else (lo, mid)
    return hi


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
@pytest.mark.parametrize("eps,rounds", [(0.1, 40), (0.2, 50)])
def test_ledger_equals_dp_accounting_for_T_rounds_of_rr(accountant, eps, rounds):
    delta = 1e-6
    led = PrivacyLedger(2, (1e3, delta), accountant)
    for _ in range(rounds):
        led.charge([0, 1], [eps, 0.0])
    lib = _lib(accountant)
    for _ in range(rounds):  # dp_accounting 0.6's PLDAccountant ignores compose's count for RR
        lib.compose(_rr(eps))
    want = min(lib.get_epsilon(delta), eps * rounds)
    assert led.spent[0] == pytest.approx(want, rel=1e-6)
    assert led.spent[1] == 0.0
    assert want < eps * rounds  # the tight accountant beats the sum here
    exact = _kov_eps(eps, rounds, delta)  # the optimal composition: no valid bound is below it
    assert exact <= led.spent[0]
    if accountant == "pld":  # pessimistic rounding: at most one 1e-3 step per event
        assert led.spent[0] <= exact + rounds * 1e-3


@pytest.mark.parametrize("accountant", ["rdp", "pld"])
def test_mixed_history_equals_the_library_composition(accountant):
    seq = [0.2, 0.05, 0.2, 0.4, 0.05, 0.1] * 4
    led = PrivacyLedger(1, (1e3, 1e-5), accountant)
    for e in seq:
        led.charge([0], [e])
    lib = _lib(accountant)
    for e in seq:
        lib.compose(_rr(e))
    assert led.spent[0] == pytest.approx(min(lib.get_epsilon(1e-5), sum(seq)), rel=1e-6)


def test_pure_dp_composition_of_rr_is_the_sum_and_rr_dominates_laplace():
    from dp_accounting import dp_event, pld, rdp

    # delta = 0: T events compose to T e (all T losses at +e with probability q^T > 0)
    p = _lib("pld")
    for _ in range(10):
        p.compose(_rr(0.2))
    assert p.get_epsilon(0.0) == pytest.approx(2.0, abs=1e-2)
    assert spent_under(np.full((10, 1), 0.2), 0.0)["pld"][0] == pytest.approx(2.0, rel=1e-12)
    # delta > 0: the RR bound is >= the Laplace model's (which was unsound-optimistic)
    for eps, rounds in [(0.1, 40), (0.3, 10), (0.5, 12), (1.0, 3)]:
        for name in ("rdp", "pld"):
            got = spent_under(np.full((rounds, 1), eps), 1e-6, (name,))[name][0]
            if name == "rdp":
                lap = rdp.RdpAccountant(orders=list(RDP_ORDERS))
            else:
                lap = pld.PLDAccountant(value_discretization_interval=1e-3)
            lap.compose(dp_event.LaplaceDpEvent(noise_multiplier=1 / eps), rounds)
            assert got >= min(lap.get_epsilon(1e-6), eps * rounds) - 1e-9
    # strictly: 40 sales of 0.1 at 1e-6, Laplace's PLD gives 2.732, below the exact eps
    # of 40 RR events (2.775, KOV Thm 3.3): no valid bound for every 0.1-DP mechanism
    lap = pld.PLDAccountant(value_discretization_interval=1e-3)
    lap.compose(dp_event.LaplaceDpEvent(noise_multiplier=10.0), 40)
    assert lap.get_epsilon(1e-6) < _kov_eps(0.1, 40, 1e-6) - 0.04


def test_rdp_to_eps_is_the_librarys_conversion():
    from dp_accounting.rdp.rdp_privacy_accountant import compute_epsilon

    curve = 17 * rr_rdp([0.2])[0]
    for delta in (1e-3, 1e-6, 1e-9):
        assert rdp_to_eps(curve, delta)[0] == pytest.approx(
            compute_epsilon(RDP_ORDERS, curve, delta)[0], rel=1e-12
        )


def test_pure_dp_budget_every_accountant_is_the_sum():
    hist = np.array([[0.3, 0.1], [0.2, 0.0], [0.3, 0.7]])
    out = spent_under(hist, 0.0)
    for name in ("basic", "rdp", "pld"):
        np.testing.assert_allclose(out[name], hist.sum(axis=0), rtol=1e-12)


def test_sellers_with_equal_histories_share_one_pld():
    led = PrivacyLedger(50, (1e3, 1e-6), "pld")
    levels = np.where(np.arange(50) % 2 == 0, 0.2, 0.3)
    for _ in range(5):
        led.charge(np.arange(50), levels)
    assert np.unique(led.tight.hid).size == 2
    assert len(led.tight.plds) == 3  # the two live histories and the empty one


# ---- caps ---------------------------------------------------------------------------------
@pytest.mark.parametrize("accountant", ["basic", "rdp", "pld"])
def test_cap_is_the_largest_eps_within_budget(accountant):
    b = 6.0
    led = PrivacyLedger(3, (b, 1e-6), accountant)
    for _ in range(100):
        led.charge([0, 1, 2], [0.05, 0.02, 0.0])
    cap = led.cap([0, 1, 2])
    after = led.after([0, 1, 2], cap)
    assert np.all(after <= b + 1e-12)
    assert np.all(cap >= led.lower_cap([0, 1, 2]) - 1e-12)
    if accountant == "basic":
        np.testing.assert_allclose(cap, b - led.spent)
    else:  # one grid step more is over the budget
        assert np.all(led.after([0, 1, 2], cap + led.grid) > b)
        # 100 sales of 0.05 cost < 5: the tighter bound lets the seller sell more
        assert led.spent[0] < 3.5 and cap[0] > b - led.spent[0]


def test_budgeted_caps_and_pays_pro_rata_and_keeps_ir():
    reports = np.array([0.1, 0.2, 0.3, 0.9])
    inner = MarketModel(4, mechanism="offline", rounds=1, seed=0).mechanism
    base = inner.run(reports)
    cap = np.array([0.0, 0.5 * base.eps[1], 10.0, 0.0])
    out = Budgeted(inner, cap, payments="pro-rata").run(reports)
    np.testing.assert_allclose(out.eps, np.minimum(base.eps, cap))
    share = np.divide(out.eps, base.eps, out=np.ones(4), where=base.eps > 0)
    np.testing.assert_allclose(out.payments, base.payments * share)
    assert np.all(out.utilities(reports) >= -1e-12)  # IR: truthful utilities stay >= 0
    np.testing.assert_allclose(out.utilities(reports), share * base.utilities(reports), atol=1e-12)


def test_budgeted_deviations_are_the_capped_rule():
    reports = np.array([0.1, 0.2, 0.3, 0.9, 0.5])
    inner = MarketModel(5, mechanism="offline", rounds=1, seed=0).mechanism
    cap = np.full(5, 0.4)
    cand = np.array([[0.05, 0.1, 0.6]])
    for payments in ("pro-rata", "myerson"):
        mech = Budgeted(inner, cap, payments=payments)
        dev = mech.deviations([0], cand, reports)
        for j, z in enumerate(cand[0]):
            trial = reports.copy()
            trial[0] = z
            out = mech.run(trial)
            assert dev.eps[0, j] == pytest.approx(out.eps[0])
            assert dev.payments[0, j] == pytest.approx(out.payments[0], rel=1e-9)


def _capped_offline(payments):
    model = MarketModel(8, mechanism="offline", rounds=1, seed=5)
    base = model.mechanism.run(model.cost)
    cap = np.full(8, 0.5 * base.eps.max())  # binds for every bought seller
    return Budgeted(model.mechanism, cap, payments=payments), model.cost, base, cap


def test_myerson_payments_of_the_capped_offline_rule_are_ic_and_ir():
    mech, costs, base, cap = _capped_offline("myerson")
    assert mech.myerson_payments
    grid = np.linspace(0, 1, 201)
    u = mech.deviation_utilities(np.arange(8), np.tile(grid, (8, 1)), costs, costs)
    out = mech.run(costs)
    truth = out.utilities(costs)
    assert np.all(u.max(axis=1) <= truth + 1e-9)  # no report on the grid gains
    assert np.all(truth >= -1e-12)
    # Myerson's identity for the capped allocation x(z) = min(eps(z), cap): u(c) =
    # int_c^1 x(z) dz, by the trapezoid rule on a fine grid of own reports
    i = int(np.argmax(base.eps))
    z = np.linspace(costs[i], 1.0, 4001)
    x = mech.deviations([i], z[None, :], costs).eps[0]
    assert truth[i] == pytest.approx(np.trapezoid(x, z), rel=2e-3)


def test_pro_rata_is_ir_but_not_ic_under_myerson_payments():
    mech, costs, base, cap = _capped_offline("pro-rata")
    grid = np.linspace(0, 1, 201)
    u = mech.deviation_utilities(np.arange(8), np.tile(grid, (8, 1)), costs, costs)
    truth = mech.run(costs).utilities(costs)
    assert np.all(truth >= -1e-12)
    assert (u.max(axis=1) - truth).max() > 1e-3  # a capped seller gains by over-reporting
    assert not mech.myerson_payments
    assert Budgeted(mech.mechanism, cap).payments == "myerson"  # the default for offline
    pp = MarketModel(4, mechanism="posted-price", rounds=1, seed=0).mechanism
    assert Budgeted(pp, np.ones(4)).payments == "pro-rata"
    with pytest.raises(MarketSimError, match="Myerson payments for the capped rule"):
        Budgeted(pp, np.ones(4), payments="myerson")


def test_posted_price_under_caps_stays_truthful():
    """A uniform price per unit: the capped seller sells cap units at that price, so
    reporting anything but the truth cannot gain (grid of reports)."""
    model = MarketModel(6, mechanism="posted-price", rounds=1, seed=3)
    mech = Budgeted(model.mechanism, np.full(6, 0.4))
    costs = model.cost
    grid = np.linspace(0, 1, 41)
    u = mech.deviation_utilities(np.arange(6), np.tile(grid, (6, 1)), costs, costs)
    truth = mech.run(costs).utilities(costs)
    assert np.all(u.max(axis=1) <= truth + 1e-12)


def test_lazy_caps_compute_exact_values_only_above_the_lower_bound():
    asked = []

    def exact(pos):
        asked.append(np.asarray(pos).tolist())
        return np.full(len(pos), 0.7)

    caps = Caps(np.array([0.5, 0.5, 0.5]), exact)
    out = caps.apply(np.arange(3), np.array([0.2, 0.9, 0.5]))
    np.testing.assert_allclose(out, [0.2, 0.7, 0.5])
    assert asked == [[1]]


# ---- the market -------------------------------------------------------------------------------
MECHS = ["offline", "posted-price", "private-posted-price", "online"]


@pytest.mark.parametrize("mechanism", MECHS)
@pytest.mark.parametrize("accountant", ["basic", "rdp", "pld"])
def test_no_seller_ever_exceeds_its_budget(mechanism, accountant):
    budget = (1.5, 1e-5)
    model = MarketModel(
        12,
        mechanism=mechanism,
        rounds=15,
        seed=7,
        measure_regret=False,
        new_costs_each_round=True,
        budget=budget,
        accountant=accountant,
    )
    _, agents = model.run()
    assert agents.eps_spent.max() <= budget[0] + 1e-9
    assert (agents.budget_left >= -1e-9).all()
    # the ledger's spent is recomputable from the per-round eps (same composition)
    hist = agents.pivot(index="round", columns="seller_id", values="eps").to_numpy()
    again = spent_under(hist, budget[1], (accountant,))[accountant]
    np.testing.assert_allclose(model.ledger.spent, again, rtol=1e-9, atol=1e-12)
    # an exhausted seller reports in no later round
    gone = agents[agents.budget_left < model.ledger.min_eps]
    assert gone.seller_id.nunique() >= 1  # budgets did bind in this run
    for sid, first in gone.groupby("seller_id")["round"].min().items():
        later = agents[(agents.seller_id == sid) & (agents["round"] > first)]
        assert (later.eps == 0).all() and (later.payment == 0).all()


def test_truth_stays_a_best_response_in_a_budgeted_offline_market():
    model = MarketModel(
        8, mechanism="offline", rounds=6, seed=1, budget=(2.0, 1e-6), accountant="rdp"
    )
    frame, agents = model.run()
    assert frame.max_regret.max() <= 1e-7
    assert (agents.budget_left < model.ledger.min_eps).any()  # the caps did bind


def test_costs_follow_the_composed_loss():
    """utility = payment - c_i (increase of eps_spent), and under PLD later sales
    cost less than c_i eps_i."""
    model = MarketModel(
        8,
        mechanism="posted-price",
        rounds=12,
        seed=2,
        measure_regret=False,
        budget=(5.0, 1e-6),
        accountant="pld",
    )
    _, a = model.run()
    a = a.sort_values(["seller_id", "round"])
    inc = a.groupby("seller_id").eps_spent.diff().fillna(a.eps_spent)
    np.testing.assert_allclose(a.utility, a.payment - a.cost * inc, atol=1e-12)
    bought = a[a.eps > 0]
    assert (inc[bought.index] <= bought.eps + 1e-12).all()
    assert (inc[bought.index] < bought.eps - 1e-6).any()


def test_ledger_frame_shows_every_accountant_per_seller():
    model = MarketModel(
        10,
        mechanism="posted-price:price=0.9:eps_level=0.1",
        rounds=40,
        seed=0,
        measure_regret=False,
        new_costs_each_round=True,
        budget=(2.0, 1e-6),
        accountant="rdp",
    )
    model.run()
    t = model.ledger_frame()
    np.testing.assert_allclose(t.spent_rdp, t.eps_spent, rtol=1e-9)
    np.testing.assert_allclose(t.spent_basic, t.eps_sold, rtol=1e-12)
    sold = t[t.sales > 20]  # more than the sum allows (2 / 0.1)
    assert len(sold) and (sold.spent_pld < sold.spent_rdp).all()
    assert (sold.spent_rdp < sold.spent_basic).all()


def test_basic_ledger_with_a_large_budget_changes_nothing():
    kw = dict(mechanism="offline", rounds=3, seed=4, measure_regret=False)
    _, plain = MarketModel(10, **kw).run()
    _, led = MarketModel(10, budget=1e6, **kw).run()
    for col in ("eps", "payment", "utility"):
        np.testing.assert_allclose(plain[col], led[col], atol=1e-12)
    spent = led.groupby("seller_id").eps.sum().to_numpy()
    np.testing.assert_allclose(led[led["round"] == 3].eps_spent, spent, atol=1e-12)


def test_market_closes_when_every_budget_is_spent():
    model = MarketModel(
        5,
        mechanism="posted-price:price=1.0",
        rounds=50,
        seed=0,
        budget=2.0,
        measure_regret=False,
    )
    frame, _ = model.run()
    assert len(frame) < 50 and frame.sellers_in_market.iloc[-1] == 0


# ---- input checks ---------------------------------------------------------------------------
@pytest.mark.parametrize(
    "budget,accountant,msg",
    [
        (-1.0, "basic", "eps must be a finite number > 0"),
        (math.inf, "basic", "eps must be a finite number > 0"),
        ((1.0, 1.5), "rdp", "delta must be in (0, 1)"),
        ((1.0, -1e-6), "rdp", "delta must be in (0, 1)"),
        ((1.0, 0.0), "rdp", "for pure DP give eps alone"),
        ("2:0", "basic", "for pure DP give eps alone"),
        (1.0, "moments", "unknown accountant 'moments'"),
        ("1:2:3", "basic", "is not EPS or EPS:DELTA"),
    ],
)
def test_bad_budgets_are_one_clear_error(budget, accountant, msg):
    with pytest.raises(MarketSimError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        MarketModel(3, budget=budget, accountant=accountant)


def test_without_dp_accounting_basic_and_rdp_run_and_pld_says_what_to_install(monkeypatch):
    import sys

    for mod in [m for m in sys.modules if m.startswith("dp_accounting")]:
        monkeypatch.delitem(sys.modules, mod)
    monkeypatch.setitem(sys.modules, "dp_accounting", None)  # import fails
    for acc in ("basic", "rdp"):
        MarketModel(4, rounds=2, budget=(2.0, 1e-6), accountant=acc, measure_regret=False).run()
    with pytest.raises(MarketSimError, match=r"pip install 'market_sim\[accounting\]'"):
        MarketModel(4, budget=(2.0, 1e-6), accountant="pld")


def test_simulate_command_line_budget_and_accountant(tmp_path, capsys):
    from market_sim.cli import main

    out = tmp_path / "sim"
    args = ["simulate", "--dist", "uniform:0:1", "--sellers", "12", "--rounds", "40"]
    args += ["--mechanism", "posted-price:price=0.9:eps_level=0.1", "--no-regret", "--quiet"]
    assert main([*args, "--out", str(out), "--budget", "2:1e-6", "--accountant", "rdp"]) == 0
    import pandas as pd

    t = pd.read_csv(out / "ledger.csv")
    np.testing.assert_allclose(t.spent_rdp, t.eps_spent, rtol=1e-9)
    assert t.eps_spent.max() <= 2.0 + 1e-9 and (t.sales > 20).any()
    assert "ledger (rdp, budget 2 at delta 1e-06)" in capsys.readouterr().out
    for bad, msg in [
        (["--budget=-1"], "--budget '-1': eps must be a finite number > 0"),
        (["--budget", "3:1.5"], "--budget '3:1.5': delta must be in (0, 1)"),
        (["--budget", "3", "--accountant", "moments"], "--accountant 'moments': one of"),
    ]:
        assert main([*args, "--out", str(tmp_path / "bad"), *bad]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and msg in err, err
        assert not (tmp_path / "bad").exists()


def test_budget_parse_forms():
    assert Budget.parse("3") == Budget(3.0, 0.0)
    assert Budget.parse("3:1e-6") == Budget(3.0, 1e-6)
    assert Budget.parse((2, 1e-5)) == Budget(2.0, 1e-5)


def test_a_sale_too_large_for_an_rr_pld_falls_back_to_the_sum():
    import warnings

    led = PrivacyLedger(2, (2e3, 1e-6), "pld")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow on the way
        assert led.cap([0])[0] == pytest.approx(2e3, rel=1e-3)  # bisection tries eps > 700
        led.charge([0, 1], [800.0, 0.2])
        led.charge([0, 1], [0.1, 0.1])
    assert led.tight.spent[0] == math.inf  # no PLD past 700: its bound is the sum
    np.testing.assert_allclose(led.spent, [800.1, 0.3])
    assert np.isfinite(rr_rdp([800.0, 1e4])).all()


def test_a_budget_with_a_data_dependent_mechanism_is_refused(tmp_path, capsys):
    """The data-dependent mechanism computes eps_i from the sellers' rows, the secret the
    ledger protects: its composition (and a privacy filter's) assumes the levels are not
    functions of that secret, so the combination is one error line (docs/ledger.md).
    Without a budget the mechanism runs; a budget with a mechanism on the costs runs."""
    kw = {"mechanism": "data-dependent", "data": "synthetic", "measure_regret": False}
    with pytest.raises(MarketSimError, match="computed from the sellers' data rows"):
        MarketModel(6, budget=2.0, **kw)
    assert MarketModel(6, rounds=1, **kw).ledger is None
    assert MarketModel(6, rounds=1, budget=2.0, measure_regret=False).ledger is not None
    from market_sim.cli import main

    argv = ["simulate", "--dist", "uniform:0:1", "--sellers", "6", "--rounds", "1", "--quiet"]
    argv += ["--mechanism", "data-dependent", "--data", "--budget", "2"]
    assert main([*argv, "--out", str(tmp_path / "s")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "budget with mechanism data-dependent" in err[0]
