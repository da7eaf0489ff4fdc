"""The seller population: classes, data sources, the data-cost copula, specs, errors."""

import numpy as np
import pytest
from scipy import stats

from market_sim.distributions import SellerLaws, mixture, parse_distribution
from market_sim.errors import MarketSimError
from market_sim.population import Population, as_population


def rng(seed=0):
    return np.random.default_rng(seed)


def test_classes_group_and_plain_population_draws_like_its_law():
    pop = Population([("uniform:0:1", 7), ("uniform:1:2", 3)])
    assert pop.n_sellers == 10 and pop.n_classes == 2 and pop.counts == (7, 3)
    assert pop.group.tolist() == [0] * 7 + [1] * 3
    mk = pop.sample(rng(1))
    assert np.all(mk.costs[:7] <= 1) and np.all(mk.costs[7:] >= 1) and mk.data is None
    # one class without data is the shorthand of a cost law: the very same numbers
    one = as_population("uniform:1:5", 12)
    assert one.is_plain
    np.testing.assert_array_equal(
        one.sample(rng(3)).costs, parse_distribution("uniform:1:5").sample(12, rng(3))
    )


def test_same_seed_same_market_and_spec_round_trip():
    pop = Population.parse("40*uniform:0:1+iron+20*beta:2:5:0:2;data=synthetic;rho=-0.5;on=label")
    assert pop.counts == (40, 20) and pop.rho == -0.5 and pop.on == "label"
    assert Population.parse(pop.spec) == pop
    a, b = pop.sample(rng(9)), pop.sample(rng(9))
    np.testing.assert_array_equal(a.costs, b.costs)
    np.testing.assert_array_equal(a.data[0], b.data[0])


@pytest.mark.parametrize("rho", [-0.9, 0.6])
def test_copula_keeps_each_class_law_exactly(rho):
    """Pooled over markets, each class's costs pass a KS test against its own law, however
    strongly they depend on the data (the copula's marginal is F_g by construction)."""
    pop = Population(
        [("uniform:0:1", 60), ("truncnorm:1.5:0.5:1:3", 40)],
        data="synthetic",
        rho=rho,
        on="label_noise",
        n_test=1,
    )
    draws = [pop.sample(rng(s)) for s in range(40)]
    for g, law in enumerate(pop.laws):
        c = np.concatenate([mk.costs[mk.group == g] for mk in draws])
        assert stats.kstest(c, law.cdf).pvalue > 1e-3


def test_rho_minus_one_makes_the_mislabelled_sellers_the_cheapest():
    """rho = -1 on label_noise: Z = -g, and the flipped sellers are those with the largest g,
    so every mislabelled seller is cheaper than every correctly labelled one."""
    pop = Population([("uniform:0:1", 400)], data="synthetic", rho=-1.0, on="label_noise")
    mk = pop.sample(rng(2))
    bad = mk.mislabelled
    assert 0 < bad.sum() < 400
    assert mk.costs[bad].max() < mk.costs[~bad].min()
    # and with rho = +1 they are the dearest
    mk = Population([("uniform:0:1", 400)], data="synthetic", rho=1.0, on="label_noise").sample(
        rng(2)
    )
    assert mk.costs[mk.mislabelled].min() > mk.costs[~mk.mislabelled].max()


def test_dependence_grows_with_rho_on_wisconsin_features_and_labels():
    corr = []
    for rho in (-0.8, 0.0, 0.8):
        pop = Population([("uniform:0:1", 150)], data="wisconsin", rho=rho, on="mean radius")
        mk = pop.sample(rng(4))
        corr.append(stats.spearmanr(mk.costs, mk.data[0][:, 0])[0])
    assert corr[0] < -0.6 and abs(corr[1]) < 0.25 and corr[2] > 0.6
    mk = Population([("uniform:0:1", 150)], data="wisconsin", rho=-1, on="label").sample(rng(5))
    y = mk.data[1]
    assert mk.costs[y == 1].max() < mk.costs[y == 0].min()  # labels 1 are the cheap ones


def test_wisconsin_rows_without_replacement_and_the_rest_held_out():
    pop = Population([("uniform:0:1", 100)], data="wisconsin")
    mk = pop.sample(rng(6))
    X, y = mk.data
    Xt, yt = mk.test
    assert X.shape == (100, 30) and Xt.shape == (469, 30)
    both = np.vstack([X, Xt])
    assert np.unique(both, axis=0).shape[0] == 569  # every row once
    assert np.linalg.norm(both, axis=1).max() <= 1 + 1e-12
    assert set(np.unique(y)) <= {0, 1}


def test_csv_source_label_column_and_feature_by_name(tmp_path):
    r = rng(7)
    x = r.normal(size=(80, 2))
    path = tmp_path / "rows.csv"
    lines = ["a,b,outcome"] + [f"{u},{v},{'yes' if u > 0 else 'no'}" for u, v in x]
    path.write_text("\n".join(lines))
    pop = Population([("uniform:2:3", 50)], data=str(path), label="outcome", rho=1.0, on="b")
    mk = pop.sample(rng(8))
    X, y = mk.data
    assert X.shape == (50, 2) and mk.test[0].shape == (30, 2)
    assert stats.spearmanr(mk.costs, X[:, 1])[0] == pytest.approx(1.0)  # rho = 1: monotone
    assert X[y == 1, 0].min() > X[y == 0, 0].max()  # 'yes' (the second level) iff a > 0


def test_pooled_law_is_the_count_weighted_mixture():
    pop = Population([("uniform:0:1", 70), ("uniform:1:2", 30)])
    c = np.linspace(0, 2, 41)
    np.testing.assert_allclose(
        pop.pooled.cdf(c), 0.7 * np.clip(c, 0, 1) + 0.3 * np.clip(c - 1, 0, 1), atol=1e-12
    )
    assert not pop.pooled.ironed  # psi jumps up at 1: regular
    # 30 cheap and 70 dear sellers: psi falls at 1 (1 + 0.3/0.7 < 2), so the pooled law is ironed
    low_heavy = mixture(["uniform:0:1", "uniform:1:2"], [0.3, 0.7])
    assert low_heavy.ironed and not low_heavy.is_regular()  # raw psi falls; ironed psi does not
    psi = low_heavy.virtual_cost(np.linspace(0, 2, 201))
    assert np.all(np.diff(psi) >= -1e-12)
    with pytest.raises(MarketSimError, match="gap"):
        mixture(["uniform:0:1", "uniform:2:3"], [1, 1])


def test_seller_laws_give_each_seller_its_own_virtual_cost():
    laws = SellerLaws(("uniform:0:1", "uniform:1:2"), np.array([0, 1, 0]))
    np.testing.assert_allclose(laws.virtual_cost(np.array([0.5, 1.5, 0.25])), [1.0, 2.0, 0.5])
    rows = laws.virtual_cost(np.array([[0.5, 1.0], [1.0, 2.0]]), sellers=[0, 1])
    np.testing.assert_allclose(rows, [[1.0, 2.0], [1.0, 3.0]])
    np.testing.assert_array_equal(laws.high, [1, 2, 1])
    with pytest.raises(MarketSimError, match="class 0"):
        laws.check_in_support(np.array([1.5, 1.5, 0.5]))


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: Population([("uniform:0:1", 0)]), "positive integer"),
        (lambda: Population([("uniform:0:1", 2.5)]), "positive integer"),
        (lambda: Population([]), "at least one class"),
        (lambda: Population([("uniform:0:1", 5)], data="synthetic", rho=1.5, on="label"), "rho"),
        (lambda: Population([("uniform:0:1", 5)], data="synthetic", rho=0.5), "on="),
        (lambda: Population([("uniform:0:1", 5)], rho=0.5, on="label"), "need data"),
        (lambda: Population([("uniform:0:1", 5)], data="mnist"), "unknown data source"),
        (lambda: Population([("uniform:0:1", 5)], data="wisconsin", on="radius"), "not a target"),
        (lambda: Population([("uniform:0:1", 5)], data="synthetic", on=7), "not a target"),
        (lambda: Population([("uniform:0:1", 600)], data="wisconsin"), "fewer than"),
        (lambda: Population.parse("70*unifrom:0:1"), "unknown distribution"),
        (lambda: Population.parse("uniform:0:1*70"), "count first"),
        (lambda: Population.parse("70*uniform:0:1;rh=1"), "key one of"),
        (lambda: Population.parse("70*uniform:0:1;data=synthetic;rho=x;on=label"), "number"),
        (lambda: as_population(Population([("uniform:0:1", 5)]), n_sellers=6), "conflicts"),
        (lambda: as_population("uniform:0:1"), "number of sellers"),
    ],
)
def test_bad_input_is_one_line(make, message):
    with pytest.raises(MarketSimError, match=message) as err:
        make()
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("on, rho", [("label_noise", -0.7), (2, 0.6), ("label", 0.8)])
def test_conditional_virtual_cost_satisfies_myersons_revenue_identity(on, rho):
    """For a seller whose cost given its data has cdf G: E[psi(c) 1{c <= p}] = p G(p)
    (Myerson's identity for a posted price p).  Both sides by Monte Carlo over the
    copula given the data (U in the seller's band, fresh xi): an independent check of G, g."""
    pop = Population([("beta:2:3:0:2", 30)], data="synthetic", rho=rho, on=on)
    mk = pop.sample(rng(11))
    r, n = rng(12), 40_000
    for i in (0, 1, 2):
        a, b = mk.band[0][i], mk.band[1][i]
        u = a + (b - a) * r.uniform(size=n)
        z = rho * stats.norm.ppf(u) + np.sqrt(1 - rho**2) * r.standard_normal(n)
        c = pop.laws[0].ppf(stats.norm.cdf(z))
        one = type(mk)(c, np.zeros(n, int), band=(np.full(n, a), np.full(n, b)))
        psi = pop.conditional_virtual_cost(one, c)
        for p in (0.4, 0.9):
            lhs, rhs = psi * (c <= p), p * (c <= p)
            se = np.std(lhs - rhs) / np.sqrt(n)
            assert abs(lhs.mean() - rhs.mean()) < 4 * se + 1e-3


def test_conditional_virtual_cost_is_the_marginal_one_without_dependence():
    pop = Population([("uniform:0:1", 20), ("uniform:1:3", 10)], data="synthetic")
    mk = pop.sample(rng(13))
    np.testing.assert_array_equal(
        pop.conditional_virtual_cost(mk), pop.seller_laws.virtual_cost(mk.costs)
    )
    with pytest.raises(MarketSimError, match="no density"):
        tied = Population([("uniform:0:1", 5)], data="synthetic", rho=1.0, on="label")
        tied.conditional_virtual_cost(tied.sample(rng(1)))


def test_every_population_option_acts_or_is_refused(tmp_path):
    """#47: options a data source does not take, rho on a constant column, a column whose
    name is a number, no silent label column, and the missing-label count."""
    with pytest.raises(MarketSimError, match="d= has no effect with data=wisconsin"):
        Population.parse("10*uniform:0:1;data=wisconsin;label_noise=0.4;d=3")
    with pytest.raises(MarketSimError, match="d= has no effect with data=wisconsin"):
        Population.parse("10*uniform:0:1;data=wisconsin;d=5")  # even at its default
    with pytest.raises(MarketSimError, match="label= has no effect with data=synthetic"):
        Population([("uniform:0:1", 5)], data="synthetic", label="y")
    with pytest.raises(MarketSimError, match="d= has no effect without data="):
        Population.parse("10*uniform:0:1;d=3")
    r = rng(2)
    x = r.normal(size=(40, 2))
    path = tmp_path / "rows.csv"
    lines = ["1,flat,b,label"] + [f"{u},7,{v},{int(u > 0)}" for u, v in x]
    path.write_text("\n".join(lines))
    with pytest.raises(MarketSimError, match="column 'flat' .* is constant"):
        Population([("uniform:0:1", 10)], data=str(path), rho=0.5, on="flat")
    # on=name:1 is the column named "1" (feature 0 here), on=1 feature index 1 ("flat")
    pop = Population.parse(f"10*uniform:0:1;data={path};rho=0.9;on=name:1")
    assert pop.on == "1" and "on=name:1" in pop.spec
    assert Population.parse(pop.spec).on == "1"
    mk = pop.sample(rng(3))
    assert stats.spearmanr(mk.costs, mk.data[0][:, 0])[0] > 0.5
    with pytest.raises(MarketSimError, match="column 'flat' .* is constant"):
        Population.parse(f"10*uniform:0:1;data={path};rho=0.9;on=1")
    nolabel = tmp_path / "nolabel.csv"
    nolabel.write_text("\n".join(["a,b"] + [f"{u},{int(v > 0)}" for u, v in x]))
    with pytest.raises(MarketSimError, match="no column named label; name the label column"):
        Population([("uniform:0:1", 10)], data=str(nolabel))
    gaps = tmp_path / "gaps.csv"
    gaps.write_text("\n".join(["a,label"] + [f"{u}," + ("" if i == 4 else str(int(v > 0)))
                                              for i, (u, v) in enumerate(x)]))  # fmt: skip
    with pytest.raises(MarketSimError, match="label 'label' is missing in 1 row"):
        Population([("uniform:0:1", 10)], data=str(gaps))
