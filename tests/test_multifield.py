"""Sellers with several fields (market_sim.multifield) and the multi-field mechanisms
(market_sim.mechanisms.multifield): draws, bad input, closed-form small cases."""

from __future__ import annotations

import numpy as np
import pytest

from market_sim.errors import MarketSimError
from market_sim.mechanisms.ghosh_roth import FairQuery
from market_sim.mechanisms.multifield import (
    CSRA,
    AllIn,
    CapThreshold,
    FairQueryCaps,
    OneField,
    PostedPricePerUnit,
    VCGProcurement,
    as_multifield_mechanism,
    utilities,
)
from market_sim.mechanisms.uniform_price import UniformPrice
from market_sim.multifield import MultiFieldPopulation, records
from market_sim.registry import MULTIFIELD_MECHANISMS

PEERS = "10*uniform:0:1;cap=uniform:0.1:5;size=integers:10:500"


# ---- types ----------------------------------------------------------------------------
def test_draw_shapes_laws_and_seed():
    pop = MultiFieldPopulation.parse(PEERS)
    assert pop.fields == ("cost", "cap", "size")
    assert pop.private == ("cost", "cap") and pop.verified == ("size",)
    t = pop.draw(300, np.random.default_rng(3))
    assert t.shape == (300, 10) and t.dtype.names == ("cost", "cap", "size")
    assert t["cost"].min() >= 0 and t["cost"].max() <= 1
    assert t["cap"].min() >= 0.1 and t["cap"].max() <= 5
    size = t["size"]
    assert np.all(size == np.round(size)) and size.min() >= 10 and size.max() <= 500
    # every size value is about equally likely: 491 values, 3000 draws, mean ~ 255
    assert abs(size.mean() - 255) < 8
    again = pop.draw(300, np.random.default_rng(3))
    assert np.array_equal(t, again)


def test_copula_correlation_matches_the_gaussian_copula():
    """Cost and cap uniform, latents correlated rho: Pearson corr of the two uniforms is
    (6 / pi) arcsin(rho / 2) (the Gaussian copula's Spearman rho); a cap is an affine
    map of its uniform, so corr(cost, cap) is that number.  20,000 pairs: SE < 0.01."""
    rho = 0.6
    pop = MultiFieldPopulation.parse(PEERS + f";rho_cap={rho}")
    t = pop.draw(2000, np.random.default_rng(0))
    r = np.corrcoef(t["cost"].ravel(), t["cap"].ravel())[0, 1]
    assert r == pytest.approx(6 / np.pi * np.arcsin(rho / 2), abs=0.03)
    s = np.corrcoef(t["cost"].ravel(), t["size"].ravel())[0, 1]
    assert abs(s) < 0.03  # rho_size = 0


def test_per_class_laws_and_spec_round_trip():
    pop = MultiFieldPopulation.parse(
        "5*uniform:0:1+5*uniform:1:2;cap=uniform:0.1:1|uniform:2:3;private=cost"
    )
    t = pop.draw(50, np.random.default_rng(1))
    assert t["cap"][:, :5].max() <= 1 and t["cap"][:, 5:].min() >= 2
    assert pop.private == ("cost",) and pop.verified == ("cap",)
    assert MultiFieldPopulation.parse(pop.spec) == pop
    python_form = MultiFieldPopulation(
        [("uniform:0:1", 5), ("uniform:1:2", 5)],
        cap=["uniform:0.1:1", "uniform:2:3"],
        private=("cost",),
    )
    assert python_form == pop


@pytest.mark.parametrize(
    "spec, words",
    [
        ("10*uniform:0:1;cap=uniform:0:5", "a cap must be > 0"),
        ("10*uniform:0:1;cap=uniform:-1:5", "support"),
        ("10*uniform:0:1;size=uniform:1:5", "positive integer law"),
        ("10*uniform:0:1;size=integers:0:5", "positive integer"),
        ("10*uniform:0:1;size=integers:1.5:5", "whole numbers"),
        ("10*uniform:0:1;private=cap", "has no law"),
        ("10*uniform:0:1;cap=uniform:1:2;private=cost,quality", "unknown field"),
        ("10*uniform:0:1;rho_cap=2", "rho_cap"),
        ("5*uniform:0:1+5*uniform:0:2;cap=uniform:1:2|uniform:1:2|uniform:1:3", "2 classes"),
        ("10*uniform:0:1;quality=uniform:1:2", "key one of .*cap, size, private"),
    ],
)
def test_bad_input_is_one_line(spec, words):
    with pytest.raises(MarketSimError, match=words) as err:
        MultiFieldPopulation.parse(spec)
    assert "\n" not in str(err.value)


def test_records_refuses_an_unknown_field():
    with pytest.raises(MarketSimError, match="unknown field 'quality'"):
        records(cost=[1.0], quality=[2.0])


# ---- utility with caps -------------------------------------------------------------
def test_utility_beyond_the_true_cap_is_unbounded_loss():
    types = records(cost=[0.5, 0.5], cap=[1.0, 1.0])
    out = PostedPricePerUnit(price=1.0, e_max=2.0).run(records(cost=[0.5, 0.5], cap=[1.0, 3.0]))
    u = utilities(out, types)
    assert u[0] == pytest.approx(0.5)  # (1 - 0.5) min(1, 2)
    assert u[1] == -np.inf  # eps = 2 > the true cap 1


# ---- the mechanisms: closed forms ---------------------------------------------------------
def test_pac_is_ghosh_roth_fair_query():
    """FairQueryCaps(scale=1, respect_caps=False) is PAC (MFG-RegretNet) and must equal
    the library's fair-query (an independent implementation) on every profile."""
    t = MultiFieldPopulation.parse(PEERS).draw(100, np.random.default_rng(2))
    for budget in (0.5, 2.0, 10.0):
        out = FairQueryCaps(budget=budget, scale=1.0, respect_caps=False).run(t)
        ref = FairQuery(dist="uniform:0:1", n_sellers=10, budget=budget)
        for j in range(t.shape[0]):
            o = ref.run(t["cost"][j])
            assert np.allclose(o.eps, out.eps[j]) and np.allclose(o.payments, out.payments[j])


def test_fair_query_caps_by_hand():
    """n = 4, costs .1 .2 .3 .4, e_k = 1/(4 - k), B = 1: k e_k r_(k) = 1/30, 0.2, 0.9 all
    <= 1, so k* = 3, eps 1, t = min(1/3, 0.4).  With the third seller's cap 0.5 < e_3 = 1,
    k* = 2: eps 1/2, t = min(1/2, 0.3 / 2) = 0.15."""
    c = [0.1, 0.2, 0.3, 0.4]
    mech = FairQueryCaps(budget=1.0, scale=1.0)
    out = mech.run(records(cost=c, cap=[1.0, 1.0, 1.0, 1.0]))
    assert np.allclose(out.eps, [1, 1, 1, 0]) and np.allclose(out.payments, [1 / 3] * 3 + [0])
    out = mech.run(records(cost=c, cap=[1.0, 1.0, 0.5, 1.0]))
    assert np.allclose(out.eps, [0.5, 0.5, 0, 0]) and np.allclose(out.payments, [0.15, 0.15, 0, 0])
    # FL-Market's scale: the largest reported cap (2 here): e_k = 2 / (4 - k)
    out = FairQueryCaps(budget=1.0).run(records(cost=c, cap=[2.0, 2.0, 2.0, 2.0]))
    # k = 1: 2/3 * .1 ok; k = 2: 2 * 1 * .2 = .4 ok; k = 3: 3 * 2 * .3 = 1.8 > 1
    assert np.allclose(out.eps, [1, 1, 0, 0]) and np.allclose(out.payments, [0.3, 0.3, 0, 0])


def test_vcg_procurement_by_hand():
    """costs .1 .2 .3 .4, B = 0.5: k r_(k+1)/(4 - k) = .2/3, .3, 1.2: k* = 2, eps 1/2,
    each winner paid r_(3) eps = 0.15."""
    out = VCGProcurement(budget=0.5).run(records(cost=[0.3, 0.1, 0.4, 0.2]))
    assert np.allclose(out.eps, [0, 0.5, 0, 0.5]) and np.allclose(out.payments, [0, 0.15, 0, 0.15])


def test_csra_by_hand_and_its_cap_misreport():
    """costs .1 .2 .4, caps and sizes 1: q = 1/9 each, sorted by cost; k = 1 costs
    (0.2 / (1/9)) (1/9) = 0.2 <= 0.5, k = 2 costs 3.6 (2/9) = 0.8 > 0.5: k* = 1, eps 1/2,
    t = 0.2.  Seller 0 reporting cap 2: q = (1/6, 1/12, 1/12), still first; k = 1 costs
    2.4 / 6 = 0.4 <= 0.5, k = 2 costs 4.8 / 4 = 1.2: k* = 1, t = 2.4 / 6 = 0.4."""
    mech = CSRA(budget=0.5)
    out = mech.run(records(cost=[0.1, 0.2, 0.4], cap=[1.0, 1.0, 1.0], size=[1.0, 1.0, 1.0]))
    assert np.allclose(out.eps, [0.5, 0, 0]) and np.allclose(out.payments, [0.2, 0, 0])
    lie = mech.run(records(cost=[0.1, 0.2, 0.4], cap=[2.0, 1.0, 1.0], size=[1.0, 1.0, 1.0]))
    assert np.allclose(lie.eps, [0.5, 0, 0]) and np.allclose(lie.payments, [0.4, 0, 0])


def test_all_in_by_hand():
    """costs 1, 2; caps and sizes 1: unit prices 1, 2.  B = 3: the first fits (1 * 1 <= 3),
    the second does not ((1 + 1) 2 = 4 > 3): price B / W = 3, t = (3, 0).  B = 4: both fit,
    price 2, t = (2, 2), eps = the caps."""
    t = records(cost=[1.0, 2.0], cap=[1.0, 1.0], size=[1.0, 1.0])
    out = AllIn(budget=3.0).run(t)
    assert np.allclose(out.eps, [1, 0]) and np.allclose(out.payments, [3, 0])
    out = AllIn(budget=4.0).run(t)
    assert np.allclose(out.eps, [1, 1]) and np.allclose(out.payments, [2, 2])


def test_cap_threshold_and_posted_price_by_hand():
    out = CapThreshold(k=2, e_max=1.0).run(
        records(cost=[0.3, 0.1, 0.2, 0.4], cap=[0.5, 2.0, 0.6, 1.0])
    )
    assert np.allclose(out.eps, [0, 1, 0.6, 0]) and np.allclose(out.payments, [0, 0.3, 0.18, 0])
    out = PostedPricePerUnit(price=0.5, e_max=1.0).run(records(cost=[0.2, 0.7], cap=[0.4, 3.0]))
    assert np.allclose(out.eps, [0.4, 0]) and np.allclose(out.payments, [0.2, 0])


def test_batches_are_markets_priced_one_by_one():
    t = MultiFieldPopulation.parse(PEERS).draw(20, np.random.default_rng(5))
    for mech in (CSRA(budget=10.0), AllIn(budget=10.0), FairQueryCaps(budget=10.0)):
        batch = mech.run(t.reshape(4, 5, 10))
        for j in range(20):
            one = mech.run(t[j])
            assert np.allclose(batch.eps.reshape(20, 10)[j], one.eps)
            assert np.allclose(batch.payments.reshape(20, 10)[j], one.payments)


def test_one_field_mechanisms_run_unchanged():
    mech = UniformPrice(dist="uniform:0:1", n_buy=2, eps_level=1.0)
    adapted = as_multifield_mechanism(mech)
    assert isinstance(adapted, OneField) and adapted.report_fields == ("cost",)
    t = records(cost=[0.4, 0.1, 0.3, 0.2], cap=[1.0, 1.0, 1.0, 1.0])
    out, ref = adapted.run(t), mech.run(t["cost"])
    assert np.allclose(out.eps, ref.eps) and np.allclose(out.payments, ref.payments)


def test_registered_and_built_by_name():
    names = set(MULTIFIELD_MECHANISMS.names())
    assert {"posted-price-caps", "cap-threshold", "fair-query-caps", "all-in"} <= names
    assert {"vcg-procurement", "csra"} <= names
    mech = as_multifield_mechanism("csra:budget=10")
    assert isinstance(mech, CSRA) and mech.budget == 10
    with pytest.raises(MarketSimError, match="reads cost, cap, size"):
        mech.run(records(cost=[0.1, 0.2]))
    with pytest.raises(MarketSimError, match="budget"):
        as_multifield_mechanism("all-in:budget=-1")


def test_a_mechanism_declaring_an_unknown_field_is_refused():
    class Quality(PostedPricePerUnit):
        report_fields = ("cost", "quality")

    with pytest.raises(MarketSimError, match="unknown field 'quality'"):
        as_multifield_mechanism(Quality())


def test_with_data_the_costs_are_the_populations_and_caps_follow_them():
    """With data the cost comes from Population.sample (its data copula); a cap with
    rho_cap = 1 is a monotone function of the cost: F_cap^-1(F_cost(c)), here
    0.1 + 4.9 c for c ~ U[0, 1] (exactly, up to the clipping of the uniform)."""
    pop = MultiFieldPopulation.parse(
        "8*uniform:0:1;data=synthetic;rho=-0.5;on=label_noise;n_test=10;cap=uniform:0.1:5;rho_cap=1"
    )
    t = pop.draw(4, np.random.default_rng(6))
    assert t.shape == (4, 8)
    assert t["cap"] == pytest.approx(0.1 + 4.9 * t["cost"], abs=1e-9)


@pytest.mark.parametrize("mech", [PostedPricePerUnit(price=0.5, e_max=1.0), CapThreshold(k=2)])
def test_the_truthful_claims_hold_on_a_dense_grid_of_reports(mech):
    """Brute force, independent of the audit: every seller of 20 markets of 4 tries every
    report on a 41 x 41 grid of (cost, cap) (and its own type's neighbours); none beats
    the truth, and the truth never loses (the proofs in the docstrings)."""
    pop = MultiFieldPopulation.parse("4*uniform:0:1;cap=uniform:0.1:2")
    types = pop.draw(20, np.random.default_rng(21))
    c, k = np.meshgrid(np.linspace(0, 1, 41), np.linspace(0.1, 2, 41))
    truthful = utilities(mech.run(types), types)
    assert np.all(truthful >= 0)
    for i in range(4):
        near_c = types["cost"][:, i : i + 1] + np.array([-1e-9, 0.0, 1e-9])
        near_k = types["cap"][:, i : i + 1] + np.array([-1e-9, 0.0, 1e-9])
        cost = np.concatenate([np.broadcast_to(c.ravel(), (20, c.size)), near_c], 1)
        cap = np.concatenate([np.broadcast_to(k.ravel(), (20, k.size)), near_k], 1)
        profiles = np.repeat(types[:, None, :], cost.shape[1], axis=1)
        profiles["cost"][:, :, i], profiles["cap"][:, :, i] = cost, cap
        out = mech.run(profiles)
        mine = type(out)(out.eps[:, :, i], out.payments[:, :, i])
        u = utilities(mine, np.broadcast_to(types[:, i : i + 1], cost.shape))
        assert np.all(u <= truthful[:, i : i + 1] + 1e-12)
