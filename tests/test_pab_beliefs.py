"""benchmarks/pab_beliefs.py's table builders (the experiment on pay-as-bid at 30 sellers,
docs/equilibrium.md): steps at the indifferent cost, polynomial pieces, both branches
from one belief, and its one-line errors.  Pure numpy on made-up beliefs: no markets."""

import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import pab_beliefs as pb  # noqa: E402


def test_step_at_the_cost_where_both_reports_pay_the_same():
    """Reports 0.04 and 0.05 sell eps 1 and 0.6: (0.04 - c) 1 = (0.05 - c) 0.6 at
    c = 0.025, inside the grid's cell (0.02, 0.03): the table bids 0.04 below 0.025 and
    0.05 above, not at either end of the cell."""
    reports, E = np.array([0.04, 0.05]), np.array([1.0, 0.6])
    grid = np.linspace(0.0, 0.06, 7)
    best = pb.best_reports(E, grid, reports)
    assert best.tolist() == [0, 0, 0, 1, 1, 1, 1]
    xs, ys = pb.as_steps(grid, best, E, reports)
    assert np.all(np.diff(xs) > 0)
    assert np.interp([0.0249, 0.0251], xs, ys) == pytest.approx([0.04, 0.05])


def test_smoothed_pieces_fit_a_line_with_a_step_exactly():
    """A line with a step of 0.01 at 0.07: two lines split there fit it to rounding;
    one line through it is off by more than 1e-3."""
    c = np.linspace(0.035, 0.125, 181)
    line = 0.18 + 0.5 * c + 0.01 * (c >= 0.07)
    assert np.abs(pb.smoothed(c, line, 1, 0.07) - line).max() < 1e-12
    assert np.abs(pb.smoothed(c, line, 1, None) - line).max() > 1e-3


def test_best_split_finds_a_rise_and_not_the_report_grids_rounding():
    """A line with a step of 0.01 at 0.0701, on costs 0.0025 apart: two lines split at
    the first cost past the step, 0.0725, fit it exactly, and no other split does; a
    smooth quadratic rounded to the 5e-4 report grid has no split that halves the
    error of one quadratic (rounding is not a rise)."""
    c = np.linspace(0.035, 0.125, 37)
    line = 0.18 + 0.5 * c + 0.01 * (c >= 0.0701)
    assert pb.best_split(c, line, 1) == c[15] == pytest.approx(0.0725)
    assert np.abs(pb.smoothed(c, line, 1, "auto") - line).max() < 1e-12
    c = np.linspace(0.035, 0.125, 721)
    rounded = np.round((0.18 + 0.9 * c + 2 * c**2) / 5e-4) * 5e-4
    assert pb.best_split(c, rounded, 2) is None
    one = np.polyval(np.polyfit(c, rounded, 2), c)
    assert np.allclose(pb.smoothed(c, rounded, 2, "auto"), one, rtol=0, atol=1e-12)


def test_a_step_down_at_the_split_is_one_piece():
    """Responses with a step *down* of 0.01 at 0.07: two pieces would step down there,
    and an increasing table would fill it with a flat (an atom); one piece is fitted
    instead, and it increases."""
    c = np.linspace(0.035, 0.125, 181)
    down = 0.18 + 0.5 * c - 0.01 * (c >= 0.07)
    out = pb.smoothed(c, down, 1, 0.07)
    assert np.allclose(out, np.polyval(np.polyfit(c, down, 1), c))
    assert np.all(np.diff(out) > 0)


def test_joint_table_keeps_the_lower_steps_and_fits_the_upper_pieces():
    """The responses of a two-branch table (c + 0.035 below 0.028 on a 0.001 report
    grid; a line with a step at 0.07 above): the joint table is strictly increasing in
    cost, within half a report step below the jump, and within 1e-4 above it (the
    responses are the line rounded to the report grid)."""
    reports = np.r_[np.arange(0.03, 0.07, 0.001), np.arange(0.17, 0.25, 0.001)]
    grid = np.linspace(0.0, 0.125, 1001)
    truth = np.where(grid < 0.028, 0.035 + grid, 0.155 + 0.5 * grid + 0.01 * (grid >= 0.07))
    best = np.abs(reports[None, :] - truth[:, None]).argmin(1)
    xs, ys = pb.joint_table(grid, best, np.exp(-20 * reports), reports, 1, 0.07)
    assert np.all(np.diff(xs) > 0)
    table = np.interp(grid, xs, ys)
    assert np.abs(table - truth)[grid < 0.0275].max() <= 0.0005 + 1e-12
    assert np.abs(table - truth)[grid > 0.0285].max() < 1e-4
    # the jump (the largest rise) is the one step between the branches' reports
    assert np.interp(0.0275, xs, ys) < 0.07 < 0.16 < np.interp(0.0285, xs, ys)


@pytest.mark.parametrize(
    "argv, says",
    [
        (["--top", "0.5"], "--top must be in"),
        (["--bottom", "0.2", "--top", "0.1"], "--bottom must be in"),
        (["--smooth", "3", "--bottom", "0.01"], "--smooth takes a degree"),
        (["--split", "0.07"], "--split needs --smooth"),
        (["--smooth", "2", "--split", "half"], "is not a cost or 'auto'"),
        (["--rounds", "-1"], "--rounds must be at least 0"),
        (["--rounds", "0", "--skip-measure"], "at least 1 with --skip-measure"),
        (["--markets", "0"], "--markets must be at least 1"),
    ],
)
def test_bad_options_stop_with_one_line(argv, says, capsys, tmp_path):
    with pytest.raises(SystemExit) as stop:
        pb.main(["--bids", str(tmp_path / "none.npz"), *argv])
    assert stop.value.code == 2
    assert says in capsys.readouterr().err


def test_a_missing_table_is_one_line(capsys, tmp_path):
    with pytest.raises(SystemExit):
        pb.main(["--bids", str(tmp_path / "none.npz")])
    err = capsys.readouterr().err
    assert "not an .npz with costs and bids" in err and "Traceback" not in err
