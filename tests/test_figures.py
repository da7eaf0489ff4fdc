"""Every study's figure, and simulate's, read back as matplotlib objects.

Each study is drawn from a synthetic results frame with the columns its
``run()`` returns over its full grid (drawing is what is tested here, not the
studies), plus one study run end to end. ``figure_problems`` checks that every
axes has x and y labels, a title (its own or the figure's), finite data, and that
no legend repeats a label or covers data; its own tests come first.
"""

import importlib
import pkgutil

import numpy as np
import pandas as pd
import pytest

import market_sim.analysis as analysis
from market_sim.analysis.figures import figure_problems, new_figure, outside_legend
from market_sim.analysis.report import format_table

# --- the checker itself ----------------------------------------------------------


def _good():
    fig, ax = new_figure(1, 2)
    for a in ax:
        a.plot([0, 1, 2], [0, 1, 4], "o-", label="series")
        a.set(xlabel="x", ylabel="y", title="t")
    outside_legend(fig)  # one entry although both axes carry the label
    return fig


def test_a_readable_figure_has_no_problems():
    fig = _good()
    assert figure_problems(fig) == []
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["series"]


def test_missing_labels_titles_and_data_are_found():
    fig, ax = new_figure(1, 2)
    ax[0].plot([0, 1], [0, 1])
    ax[1].set(xlabel="x", ylabel="y", title="t")
    problems = figure_problems(fig)
    assert "axes 0 (untitled) has no x label" in problems
    assert "axes 0 (untitled) has no y label" in problems
    assert "axes 0 (untitled) has no title (and the figure none)" in problems
    assert "axes 1 (t) shows no data" in problems
    fig.suptitle("a title for all")
    assert not [p for p in figure_problems(fig) if "has no title" in p]


def test_infinite_data_repeated_legend_entries_and_a_legend_over_data_are_found():
    fig, ax = new_figure()
    x = np.linspace(0, 1, 50)
    ax.plot(x, x, label="a")
    ax.plot(x, 1 - x, label="a")
    ax.plot([0.5], [np.inf], "o")
    ax.legend(loc="center")  # the two lines cross at the centre
    ax.set(xlabel="x", ylabel="y", title="t")
    problems = figure_problems(fig)
    assert "axes 0 (t) plots an infinite value" in problems
    assert "a legend repeats ['a']" in problems
    assert any(p.startswith("a legend (a, a, ...) covers data of axes 0") for p in problems)


def test_a_legend_over_a_line_between_its_points_is_found():
    """The legend sits between two far-apart points of one segment."""
    fig, ax = new_figure()
    ax.plot([0, 1], [0.5, 0.5], label="flat")
    ax.plot([0, 1], [0, 0], "o", label="dots")
    ax.set(xlabel="x", ylabel="y", title="t", ylim=(-0.1, 1))
    ax.legend(loc="center")
    assert any("covers data" in p for p in figure_problems(fig))
    ax.legend(loc="upper right")
    assert figure_problems(fig) == []


# --- synthetic results of every study -----------------------------------------------


def _frame(study: str, run, reps: int = 2, seed: int = 0) -> pd.DataFrame:
    """The rows `market-sim run` would store: grid parameters, replication, run()'s rows."""
    scenario = importlib.import_module(f"market_sim.scenarios.{study}")
    rng = np.random.default_rng(seed)
    rows = []
    for task, params in enumerate(scenario.grid(quick=False)):
        for r in range(reps):
            for row in run(params, rng, r):
                rows.append(
                    {"scenario": study, "task": task, "replication": r, **params, **row}
                    | {"status": "ok", "error": None}
                )
    return pd.DataFrame(rows)


def _asymptotic(p, rng, r):
    m, d = p["m"], p["dist"]
    limit = 2.0 if d == "uniform:1:5" else 0.0
    rate = {"uniform:0:1": -0.25, "beta:2:2:0:1": -1 / 6}.get(d, -0.5)
    loss = limit + m**rate * (1 + 0.02 * rng.standard_normal())
    return [
        dict(proxy_loss=loss, n_bought=int(m**0.5), eta=m**0.5, solve_seconds=1e-3, limit=limit)
    ]


def _collaborative(p, rng, r):
    n = p["parties"]
    welfare = 3.0 - p["rho"] + 0.05 * rng.standard_normal()
    return [
        dict(
            party=i,
            size=int(50 * 1.6**i),
            eps=float(np.exp(rng.uniform(-1, 1))),
            eps_pref=1.0,
            value_alone=0.5 + i,
            shapley=0.3 + 0.1 * i,
            reward=1.0 + 0.2 * i,
            utility=0.5,
            similarity=-0.1,
            welfare=welfare,
            share_rational=1.0 - 0.3 * p["rho"],
            negative_shapley=0,
        )
        for i in range(n)
    ]


def _collaborative_tradeoff(p, rng, r):
    e = p["eps_1"]
    v1 = 2 * e / (1 + e)
    return [
        dict(
            rho=rho,
            v_1=v1,
            phi_1=v1 / 3,
            r_1=2.8 - rho * (1.3 - v1 / 3),
            r_2=2.8 - 0.8 * rho,
            r_3=2.8,
            v_grand=2.8,
            kappa_1=0.5,
            tau_1=0.1,
            similarity_temper=-0.1 / (1 + e) + 0.01 * rng.standard_normal(),
            similarity_noise=-0.5 / (1 + e) + 0.05 * rng.standard_normal(),
            negative_shapley=0,
        )
        for rho in (0.0, 0.2, 0.5, 1.0)
    ]


def _correlation(p, rng, r):
    noise = p["target"] == "label_noise"
    bias = max(0.0, -p["rho"]) if noise else 0.0
    synthetic = p["data"] == "synthetic"
    rows = []
    for mech, err, pay, weight in (
        ("offline", 0.3, 12.0, 0.8),
        ("oracle", 0.29, 11.5, 0.7),
        ("data_dependent", 0.15, 80.0, 0.4),
    ):
        if mech == "oracle" and abs(p["rho"]) == 1:
            continue
        rows.append(
            dict(
                mechanism=mech,
                test_error=0.3 + err * bias + 0.02 * rng.standard_normal(),
                payment=pay,
                payment_true=pay * (1 + 0.1 * p["rho"]),
                objective=40 + pay / 4 + 0.5 * abs(p["rho"]) * (mech == "offline"),
                eps_avg=0.1,
                n_bought=30,
                budget_on_mislabelled=0.15 + weight * bias if synthetic else np.nan,
                share_mislabelled=0.15 if synthetic else np.nan,
                cost_target_corr=0.9 * p["rho"],
            )
        )
    return rows


def _dynamics(p, rng, r):
    ic = p["mechanism"] != "pay-as-bid"
    out = []
    for k in range(1, p["rounds"] + 1):
        share = float(np.clip(0.6 / np.sqrt(k) + 0.05 * rng.standard_normal(), 0, 1))
        row = {
            "round": k,
            "participation": 1.0,
            "n_bought": 3,
            "report_ratio": 1 + share / 5,
            "bought_report_ratio": 1 + share / 4,
            "share_misreporting": share,
            "share_bought_misreporting": share,
            "mean_regret": 0.01 * share,
            "avg_external_regret": 0.5 / np.sqrt(k),
            "proxy_loss": 2.0 + share,
            "total_payment": 3.0 + share,
            "truthful_proxy_loss": 2.0,
            "truthful_payment": 3.0,
            "truth_gain": 0.0 if ic else 0.4,
        }
        if not ic:
            row |= dict(
                bne_report_ratio=1.1,
                bne_bought_report_ratio=1.2,
                bne_proxy_loss=2.1,
                bne_payment=2.7,
                bne_epsilon=1e-3,
            )
        out.append(row)
    return out


def _repeated(p, rng, r):
    """Sellers sell 0.1 a round; the sum exhausts a budget of 3 at 30 sales, a tight
    accountant later; the market closes when every seller has left."""
    m, rounds = p["m"], p["rounds"]
    tight = {"basic": 1.0, "rdp": 1.4, "pld": 1.6}[p["accountant"]]
    pure = ":" not in p["budget"]
    last = 30 * (1.0 if pure else tight)
    out = []
    for k in range(1, rounds + 1):
        sales = min(k, last)
        left = m if k < last else 0
        out.append(
            dict(
                round=k,
                test_error=0.25 + 0.02 * rng.standard_normal() if left else np.nan,
                sellers_in_market=left,
                n_bought=left,
                eps_bought=0.1 * left,
                total_payment=0.09 * left,
                mean_eps_spent=min(3.0, 0.1 * sales / (1.0 if pure else tight)),
                mean_eps_sum=0.1 * sales,
                max_eps_spent=3.0,
                mean_sales=float(sales),
                tightness=1.0 if pure else tight,
            )
        )
    return out


def _ic_scaling(p, rng, r):
    control = p["mechanism"] == "pay-as-bid"
    return [
        {
            "round": k,
            "max_regret": 0.1 if control else 1e-17,
            "mean_regret": 0.01 if control else 0.0,
            "rel_max_regret": 0.5 + 0.05 * rng.standard_normal() if control else 0.0,
            "share_profitable": 0.4 if control else 0.0,
            "ir_violations": 0,
            "share_misreporting": 0.5 if control else 0.0,
            "proxy_loss": 3 * p["m"] ** -0.25,
            "total_payment": 1.0,
            "mean_payment": 0.1,
        }
        for k in range(1, p["rounds"] + 1)
    ]


def _ic_stress(p, rng, r):
    control = p["mechanism"] == "pay-as-bid"
    truthful = p["strategy"] in ("best-response", "collusion") and not control
    return [
        {
            "round": k,
            "max_regret": 0.0 if truthful else abs(0.05 + 0.01 * rng.standard_normal()),
            "q90_regret": 0.0 if truthful else 0.03,
            "share_profitable_deviation": 0.0 if truthful else 0.5,
            "share_misreporting": 0.0 if truthful else float(rng.uniform(0.5, 1)),
            "min_utility": 0.0,
            "proxy_loss": 1.0,
        }
        for k in range(1, p["rounds"] + 1)
    ]


def _ir(p, rng, r):
    rent = p["mechanism"] in ("offline", "online") and p["sellers"] == 20
    return [
        {
            "round": k,
            "min_utility": 0.0,
            "q01_utility": 0.0,
            "median_utility": float(rng.uniform(1e-6, 1e-3)) if rent else 0.0,
            "share_negative": 0.0,
            "participation": 1.0,
        }
        for k in range(1, p["rounds"] + 1)
    ]


def _online_vs_offline(p, rng, r):
    ratio = 1 + p["m"] ** -0.5 * (1 + 0.1 * rng.standard_normal()) / p["xi"]
    off = 3 * p["m"] ** -0.25
    return [
        dict(
            online_loss=off * ratio,
            offline_loss=off,
            ratio=ratio,
            n_arrived=int(p["m"] * p["xi"]),
            online_payment=1.0,
            cutoff=0.1,
        )
    ]


def _private_mechanisms(p, rng, r):
    out = [
        dict(
            mechanism="exact",
            proxy_loss=1.0,
            p_empty=0.0,
            total_payment=1.0,
            max_gain=np.nan,
            gain_bound=0.0,
        )
    ]
    for mech, extra in (("private-cutoff", 0.1), ("private-posted-price", 0.4)):
        ratio = 1 + extra / (1 + p["privacy"]) + 0.02 * abs(rng.standard_normal())
        out.append(
            dict(
                mechanism=mech,
                proxy_loss=ratio,
                p_empty=0.0,
                total_payment=1.1,
                max_gain=1e-3,
                gain_bound=1e-2,
                sensitivity=1.0,
            )
        )
    for row in out:
        row["loss_ratio"] = row["proxy_loss"]
    return out


def _wisconsin(p, rng, r):
    g = p["gamma"]
    rows = []
    for method, err, pay in (("ours", 0.05, 1.7), ("naive", 0.45, 0.002), ("offline", 0.05, 4.0)):
        e = err + 0.02 * rng.standard_normal()
        pay = pay * min(1.0, 0.01 / g) ** 0.5
        rows.append(
            dict(
                method=method,
                test_error=e,
                test_error_sd=0.01,
                payment=pay,
                overall=e + g * pay,
                eps_avg=1.0,
                n_bought=300,
                max_guarantee=2.0,
                reg_lambda=0.01,
                mu=100.0,
                sigma=10.0,
            )
        )
    rows.append(
        dict(
            method="non_private",
            test_error=0.03,
            test_error_sd=0.0,
            payment=0.0,
            overall=0.03,
            eps_avg=np.inf,
            n_bought=341,
            max_guarantee=np.inf,
            reg_lambda=0.01,
            mu=np.nan,
            sigma=np.nan,
        )
    )
    return rows


def _multidim(p, rng, r):
    """The study's own rows at a tiny size (its table needs its own measures)."""
    from market_sim.scenarios import multidim

    tiny = dict(sellers=6, profiles=4, cost_grid=25, field_grid=5, joint_grid=3, local_steps=2)
    return multidim.run({**p, **tiny}, rng)


def _learned(p, rng, r):
    """The study's own rows at a tiny size, on an IC test network (tests/onnx_networks.py)."""
    import tempfile
    from pathlib import Path

    from onnx_networks import smooth_myerson

    from market_sim.scenarios import learned

    net = smooth_myerson(Path(tempfile.mkdtemp()) / "net.onnx")
    tiny = dict(network=str(net), sellers=4, markets=6, audit_markets=1, bne_max_iter=2)
    tiny |= dict(mu=1.0, sigma=1.0, gamma=1.0)  # the test network records no weights
    return learned.run({**p, **tiny}, rng)


SYNTHETIC = {
    "asymptotic": _asymptotic,
    "collaborative": _collaborative,
    "collaborative_tradeoff": _collaborative_tradeoff,
    "correlation": _correlation,
    "dynamics": _dynamics,
    "ic_scaling": _ic_scaling,
    "ic_stress": _ic_stress,
    "ir": _ir,
    "learned": _learned,
    "multidim": _multidim,
    "online_vs_offline": _online_vs_offline,
    "private_mechanisms": _private_mechanisms,
    "repeated": _repeated,
    "wisconsin": _wisconsin,
}


def _draw(study: str, df: pd.DataFrame, path=None):
    module = importlib.import_module(f"market_sim.analysis.{study}")
    if study == "ic_scaling":
        return module.figure(module.summarise(df), path)
    return module.plot(df, path)


def test_every_study_with_a_figure_is_covered():
    drawn = {
        m.name
        for m in pkgutil.iter_modules(analysis.__path__)
        if hasattr(importlib.import_module(f"market_sim.analysis.{m.name}"), "section")
        and any(
            hasattr(importlib.import_module(f"market_sim.analysis.{m.name}"), f)
            for f in ("plot", "figure")
        )
    }
    assert drawn == set(SYNTHETIC)


@pytest.mark.parametrize("study", sorted(SYNTHETIC))
def test_the_study_figure_reads_well(study, tmp_path):
    df = _frame(study, SYNTHETIC[study])
    fig = _draw(study, df, tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 10_000
    assert figure_problems(fig) == []
    # the report section draws the same figure and its tables have no nan/inf cell
    module = importlib.import_module(f"market_sim.analysis.{study}")
    sec = module.section(df, tmp_path)
    for _, name in sec.figures:
        assert (tmp_path / name).stat().st_size > 10_000
    for _, table in sec.tables:
        cells, _ = format_table(table)
        text = " ".join(cells.astype(str).to_numpy().ravel()).lower()
        assert "nan" not in text.split() and "inf" not in text.split()


def test_ic_stress_marks_the_control_and_shows_intervals_over_replications():
    from market_sim.analysis.figures import CONTROL_COLOR
    from market_sim.analysis.ic_stress import by_replication

    df = _frame("ic_stress", _ic_stress, reps=3)
    fig = _draw("ic_stress", df)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    control = [t for t in ax.get_yticklabels() if t.get_text().startswith("pay-as-bid")]
    assert len(control) == 4 and all(t.get_color() == CONTROL_COLOR for t in control)
    assert labels.index(control[0].get_text()) > labels.index("offline · best-response")
    assert any("negative control" in t.get_text() for t in fig.legends[0].get_texts())
    # the error bars are the CIs over replications of the per-replication means
    t = by_replication(df)
    row = t[
        (t.mechanism == "offline")
        & (t.strategy == "shade")
        & (t.dist == "uniform:0:1")
        & (t.strategic_fraction == 1.0)
    ].iloc[0]
    per_rep = (
        df[
            (df.mechanism == "offline")
            & (df.strategy == "shade")
            & (df.dist == "uniform:0:1")
            & (df.strategic_fraction == 1.0)
        ]
        .groupby("replication")
        .max_regret.mean()
    )
    assert row.max_regret == pytest.approx(per_rep.mean())
    assert row.max_regret_ci == pytest.approx(1.96 * per_rep.std() / np.sqrt(3))
    one = by_replication(_frame("ic_stress", _ic_stress, reps=1))
    assert one.max_regret_ci.isna().all()  # undefined from one replication, not 0
    assert (
        "one replication: no CI"
        in _draw("ic_stress", _frame("ic_stress", _ic_stress, 1))._suptitle.get_text()
    )


def test_ir_figure_shows_utilities_with_the_zero_line_and_legible_labels():
    df = _frame("ir", _ir)
    fig = _draw("ir", df)
    up = fig.axes[0]
    assert up.get_xscale() == "symlog"
    assert [t.get_text() for t in up.get_yticklabels()] == [
        "offline",
        "online",
        "pay-as-bid",
        "posted-price",
    ]
    assert all(t.get_rotation() == 0 and t.get_fontsize() >= 8 for t in up.get_yticklabels())
    zero = [ln for ln in up.lines if list(ln.get_xdata()) == [0, 0]]
    assert zero, "no zero line"
    medians = [ln for ln in up.lines if ln.get_label() == "median utility, 20 sellers"]
    assert medians and max(medians[0].get_xdata()) > 0  # the rents are visible
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert len(legend) == len(set(legend)) == 4


def test_asymptotic_legend_names_the_theory_once():
    fig = _draw("asymptotic", _frame("asymptotic", _asymptotic))
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert sum("theory's rate" in lab for lab in labels) == 1
    assert "uniform:0:1 (theory: slope −1/4)" in labels


# --- one study end to end --------------------------------------------------------------


def test_a_quick_run_is_reported_with_a_readable_figure_and_a_self_contained_page(tmp_path):
    from market_sim.analysis import online_vs_offline
    from market_sim.cli import main
    from market_sim.runner import read_results, run_scenario

    out = tmp_path / "res"
    assert run_scenario("online_vs_offline", out, quick=True, workers=1).failed == 0
    df, _ = read_results(out)
    assert figure_problems(online_vs_offline.plot(df[df.status == "ok"])) == []
    assert main(["report", str(out)]) == 0
    md = (out / "report" / "report.md").read_text()
    page = (out / "report" / "report.html").read_text()
    assert "quick grid (`market-sim run --quick`" in md
    assert "quick grid (<code>market-sim run --quick</code>" in page
    assert "](online_vs_offline.png)" in md  # Markdown links the file
    assert "src='data:image/png;base64," in page and "src='online_vs_offline.png'" not in page
    assert "nan" not in page.lower().split() and ">inf<" not in page and ">nan<" not in page


# --- simulate's figures ------------------------------------------------------------


def _market(data: bool, rounds: int = 3):
    from market_sim.agents import MarketModel

    model = MarketModel(
        30,
        dist="uniform:0:1",
        mechanism="pay-as-bid",
        strategy="best-response",
        strategic_fraction=0.5,
        rounds=rounds,
        seed=1,
        data="synthetic" if data else None,
    )
    model_df, agent_df = model.run()
    return agent_df, model_df


def _axes(fig, ylabel):
    found = [a for a in fig.axes if a.get_ylabel() == ylabel]
    assert len(found) == 1, [a.get_ylabel() for a in fig.axes]
    return found[0]


@pytest.mark.parametrize("data", [False, True])
def test_simulation_png_plots_eps_and_payment_against_cost_one_axis_per_unit(data, tmp_path):
    from market_sim.analysis.simulation import plot_simulation

    agent_df, model_df = _market(data)
    fig = plot_simulation(agent_df, model_df, tmp_path / "s.png", "a market", data=data)
    assert (tmp_path / "s.png").stat().st_size > 10_000
    assert figure_problems(fig) == []
    order = agent_df.sort_values("round", kind="stable")
    for ylabel, col in (("privacy level ε", "eps"), ("payment", "payment")):
        ax = _axes(fig, ylabel)
        assert ax.get_xlabel() == "true cost c"
        xy = ax.collections[0].get_offsets()
        np.testing.assert_allclose(xy[:, 0], order.cost)  # against the cost, not the index
        np.testing.assert_allclose(xy[:, 1], order[col])
    regret, share = _axes(fig, "regret (utility)"), _axes(fig, "share of sellers")
    assert regret is not share
    np.testing.assert_allclose(share.lines[0].get_ydata(), model_df.share_misreporting)
    np.testing.assert_allclose(regret.lines[0].get_ydata(), model_df.max_regret)
    titles = [a.get_title() for a in fig.axes]
    if data:
        err = _axes(fig, "test error (share misclassified)")
        assert "test_error" in model_df and model_df.test_error.notna().any()
        np.testing.assert_allclose(err.lines[0].get_ydata(), model_df.test_error)
        assert "the buyer's loss" not in titles
    else:
        assert "private model's test error" not in titles
        loss = _axes(fig, "loss (Eq. 11)")  # the payments made, then the virtual costs
        np.testing.assert_allclose(loss.lines[0].get_ydata(), model_df.buyer_loss)
        np.testing.assert_allclose(loss.lines[1].get_ydata(), model_df.proxy_loss)


def test_simulation_gif_has_a_colour_bar_and_the_round_in_its_title(tmp_path):
    from PIL import Image

    from market_sim.analysis.simulation import animate_simulation

    agent_df, _ = _market(False, rounds=3)
    fig = animate_simulation(agent_df, tmp_path / "s.gif")
    with Image.open(tmp_path / "s.gif") as im:
        assert im.n_frames == 3
    assert fig._suptitle.get_text() == "round 3 of 3"  # the last frame drawn
    bars = [a for a in fig.axes if getattr(a, "_colorbar", None) is not None]
    assert len(bars) == 1 and bars[0].get_ylabel() == "privacy level ε bought"
    assert bars[0]._colorbar.norm.vmax == pytest.approx(agent_df.eps.max())
    assert figure_problems(fig) == []
