"""Every figure the CLI writes keeps its titles, labels and legends inside the figure
(issue #43: the dynamics title was cut off at both edges), and ``cut_texts``, the
check, finds a cut title when there is one."""

import matplotlib
import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from market_sim.analysis.figures import cut_texts, figure_problems, new_figure
from market_sim.cli import main
from market_sim.files import fit_titles

matplotlib.use("Agg")

DIST = "uniform:1:5"
LONG = "a title far longer than the figure is wide, " * 4


def test_cut_texts_finds_a_title_wider_than_the_figure_and_fit_titles_wraps_it():
    """A 4-inch figure (400 px at 100 dpi) with a centred 180-character title at 12 pt
    (about 6 px a character, over 1000 px): the title sticks out on both sides, so the
    check must name both; wrapped to the figure's width it fits, and a short title is
    not flagged."""
    fig = Figure(figsize=(4, 3), dpi=100)  # no layout engine: the title stays centred
    ax = fig.add_axes((0.25, 0.25, 0.5, 0.5))
    ax.plot([0, 1], [0, 1])
    ax.set(xlabel="x", ylabel="y")
    fig.suptitle(LONG)
    cut = cut_texts(fig)
    assert len(cut) == 1 and "figure title" in cut[0] and "left and right" in cut[0]
    assert fit_titles(fig) and "\n" in fig._suptitle.get_text()
    assert cut_texts(fig) == []
    short, ax = new_figure(figsize=(4, 3))
    ax.set_title("fits")
    assert cut_texts(short) == [] and not fit_titles(short)


def test_cut_texts_finds_a_label_off_the_edge():
    fig = Figure(figsize=(4, 3))
    ax = fig.add_axes((0.0, 0.0, 1.0, 1.0))  # no room left for the labels
    ax.set(xlabel="cost", ylabel="payment")
    found = " ".join(cut_texts(fig))
    assert "x label of axes 0" in found and "bottom" in found
    assert "y label of axes 0" in found and "left" in found


def test_the_dynamics_figure_of_one_mechanism_keeps_its_title():
    """One mechanism makes the narrowest dynamics figure (4.6 in), the case of the issue."""
    from market_sim.analysis import dynamics

    rows = [
        dict(mechanism="pay-as-bid", learner="hedge", m=5, replication=rep, round=k,
             report_ratio=1.1, bought_report_ratio=1.1, share_bought_misreporting=0.5 / k,
             avg_external_regret=1.0 / k, proxy_loss=2.0, truthful_proxy_loss=1.0,
             total_payment=3.0, truthful_payment=2.0, truth_gain=0.3)
        for rep in range(2) for k in range(1, 11)
    ]  # fmt: skip
    fig = dynamics.plot(pd.DataFrame(rows))
    assert figure_problems(fig) == []


SMALL = {
    "audit": ["audit", "--mechanism", "pay-as-bid", "--dist", DIST, "--sellers", "3",
              "--markets", "2", "--grid", "5", "--random", "4", "--no-refine"],
    "compare": ["compare", "--mechanism", "offline", "--mechanism", "pay-as-bid",
                "--mechanism", "posted-price", "--dist", DIST, "--sellers", "5",
                "--markets", "2", "--grid", "5", "--random", "4", "--no-refine"],
    "egta": ["egta", "--mechanism", "pay-as-bid", "--dist", DIST, "--sellers", "4",
             "--strategy", "truthful", "--strategy", "shade:factor=1.2", "--samples", "2",
             "--players", "2", "--boot", "20"],
    "bne": ["bne", "--mechanism", "pay-as-bid", "--dist", DIST, "--sellers", "3",
            "--samples", "32", "--max-iter", "2", "--grid", "5", "--check-grid", "5",
            "--eval-grid", "4"],
    "psro": ["psro", "--mechanism", "pay-as-bid", "--dist", DIST, "--sellers", "2",
             "--iterations", "1", "--markets", "32"],
    "simulate": ["simulate", "--mechanism", "offline", "--dist", DIST, "--sellers", "6",
                 "--rounds", "2", "--strategy", "truthful"],
    "demo": ["demo", "--sellers", "12"],
}  # fmt: skip


@pytest.mark.parametrize("command", sorted(SMALL))
def test_every_figure_the_cli_writes_keeps_its_texts_inside(command, tmp_path, monkeypatch):
    checked = []
    save = Figure.savefig

    def checking_save(fig, *args, **kw):
        checked.append(cut_texts(fig))
        return save(fig, *args, **kw)

    monkeypatch.setattr(Figure, "savefig", checking_save)
    quiet = [] if command == "demo" else ["--quiet"]  # demo has no progress to hide
    assert main(SMALL[command] + ["--out", str(tmp_path / "o")] + quiet) in (0, 3)
    assert checked and all(c == [] for c in checked), checked
    assert np.all([p.stat().st_size > 5000 for p in (tmp_path / "o").glob("*.png")])


# ---- compare.png ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "ic,ir,flag",
    [
        (["ic"], ["ir"], ""),
        (["not_ic"], ["ir"], "not IC"),
        (["ic"], ["not_ir"], "not IR"),
        (["not_ic", "ic"], ["ir", "not_ir"], "not IC/IR"),
        (["inconclusive"], ["ir"], "IC inconclusive"),
        (["not_audited"], ["not_audited"], "not audited"),
    ],
)
def test_the_compare_legend_names_the_property_that_failed(ic, ir, flag):
    from market_sim.comparison import _failed_properties

    assert _failed_properties(ic, ir) == flag


@pytest.mark.parametrize(
    "values,scale",
    [
        ([1.0, 2.0, 3.0], "linear"),  # even spread
        ([5.0, 6.0, 7.0, 80.0], "log"),  # one high payment squashes three into 3% of the axis
        ([1.0, 100.0], "log"),  # two decades
        ([0.0, 5.0, 6.0, 500.0], "symlog"),  # the same with a mechanism that pays nothing
        ([0.0, 1.0, 2.0], "linear"),
    ],
)
def test_compare_axes_go_logarithmic_when_one_value_squashes_the_others(values, scale):
    from market_sim.comparison import axis_scale

    assert axis_scale(values) == scale


def test_compare_png_says_not_ic_for_pay_as_bid(tmp_path, monkeypatch):
    """Pay-as-bid is IR (a seller is paid its report, at least its cost) but not IC: its
    legend entry says "not IC", the IC and IR ones say nothing."""
    from market_sim.comparison import compare, plot

    seen = []
    save = Figure.savefig

    def keep(fig, *args, **kw):
        seen.append([t.get_text() for leg in [fig.axes[0].get_legend()] for t in leg.get_texts()])
        return save(fig, *args, **kw)

    monkeypatch.setattr(Figure, "savefig", keep)
    r = compare(["offline", "pay-as-bid"], DIST, 5, 2, np.random.default_rng(0), n_grid=5,
                n_random=4, refine=False)  # fmt: skip
    plot(r, tmp_path / "c.png")
    assert "pay-as-bid (not IC)" in seen[0] and "offline" in seen[0]


def _plane(points):
    fig, ax = new_figure(figsize=(6, 4))
    drawn = []
    for x, y in points:
        x, y = np.array([x]), np.array([y])
        ax.errorbar(x, y, ls="none", marker="o")
        drawn.append((x, y, np.zeros((2, 1)), np.zeros((2, 1)), {"marker": "o", "ls": "none"}))
    return ax, drawn


def test_compare_insets_the_crowd_that_one_far_point_squashes():
    """Four mechanisms within 1% of each other and two far off (the U[0, 1] leaderboard's
    shape): an inset shows exactly the four; evenly spread points get none."""
    from market_sim.comparison import _zoom_on_crowd

    crowd = [(1.0, 1.0), (1.01, 1.0), (1.0, 1.01), (1.01, 1.01)]
    ax, drawn = _plane([*crowd, (100.0, 0.1), (0.01, 10.0)])
    _zoom_on_crowd(ax, drawn)
    (inset,) = ax.child_axes
    shown = np.vstack([line.get_xydata() for line in inset.lines if len(line.get_xydata())])
    assert sorted(map(tuple, shown)) == sorted(crowd)
    spread, drawn = _plane([(float(i), float(i)) for i in range(6)])
    _zoom_on_crowd(spread, drawn)
    assert spread.child_axes == []
