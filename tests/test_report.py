"""Reports: cells never read nan or inf, a one-replication CI is blank, the HTML page
embeds its figures, the quick-grid line, and one page across studies."""

import base64
import re
import textwrap

import numpy as np
import pandas as pd
import pytest

from market_sim.analysis.report import format_table, write_index, write_report
from market_sim.cli import main
from market_sim.runner import run_scenario

TOY = '''
"""A toy study: a figure, a CI, an infinite and an undefined value."""
import numpy as np
import pandas as pd

NAME = "{name}"
REPLICATIONS = {reps}


def grid(quick=False):
    return [dict(arm=a) for a in ("a", "b")]


def run(params, rng):
    return [dict(value=float(rng.normal()), top=np.inf if params["arm"] == "b" else 1.0)]


def section(df, folder):
    from market_sim.analysis.figures import saved_figure
    from market_sim.analysis.report import Section

    g = df.groupby("arm").value
    table = pd.DataFrame(dict(mean=g.mean(), ci=1.96 * g.std() / np.sqrt(g.size()),
                              top=df.groupby("arm").top.max(), empty=np.nan)).reset_index()
    with saved_figure(folder / "toy.png") as (fig, ax):
        ax.plot(table["mean"], "o")
    return Section("Toy section", "a toy", tables=[("per arm", table)],
                   figures=[("the means", "toy.png")])
'''


def _toy(tmp_path, name, reps, quick=True):
    tmp_path.mkdir(exist_ok=True)
    src = tmp_path / f"{name}.py"
    src.write_text(textwrap.dedent(TOY.format(name=name, reps=reps)))
    out = tmp_path / f"res_{name}"
    assert run_scenario(str(src), out, quick=quick).failed == 0
    return out


def test_cells_are_blank_for_undefined_and_a_dash_for_infinite_values():
    table = pd.DataFrame(
        dict(
            arm=["a", "b"],
            n=[1, 2],
            mean=[0.123456, np.inf],
            ci=[np.nan, 0.5],
            other=[np.nan, -np.inf],
            mixed=pd.Series([1.0, np.nan], dtype=object),
        )
    )
    cells, notes = format_table(table)
    assert cells.to_dict("list") == dict(
        arm=["a", "b"],
        n=["1", "2"],
        mean=["0.1235", "—"],
        ci=["", "0.5"],
        other=["", "—"],
        mixed=["1", ""],
    )
    assert notes == [
        "Blank in `ci`: a confidence interval is undefined from a single replication (or round).",
        "Blank in `other`, `mixed`: no value (the text says why).",
        "— in `mean`, `other`: an infinite value (see the text).",
    ]
    assert format_table(table[["arm", "n"]])[1] == []  # nothing to explain


def test_one_replication_gives_blank_intervals_and_a_self_contained_page(tmp_path):
    out = _toy(tmp_path, "toy_one", reps=1)
    md = write_report(out).read_text()
    page = (out / "report" / "report.html").read_text()
    assert "quick grid (`market-sim run --quick`" in md and "1 replication" in md
    assert "quick grid (<code>market-sim run --quick</code>" in page
    row_b = next(line for line in md.splitlines() if line.startswith("| b "))
    cells = [c.strip() for c in row_b.strip("|").split("|")]
    assert cells[2:] == ["", "—", ""]  # ci blank (one replication), top infinite, empty
    assert "Blank in `ci`: a confidence interval is undefined" in md
    for text in (md, page):
        words = set(re.findall(r"[a-z]+", text.lower()))
        assert not {"nan", "inf", "infinity"} & words
    # the Markdown links the figure, the HTML page carries it
    assert "![the means](toy.png)" in md
    src = re.search(r"<img src='data:image/png;base64,([^']+)'", page).group(1)
    assert base64.b64decode(src) == (out / "report" / "toy.png").read_bytes()
    assert "src='toy.png'" not in page


def test_full_grid_and_several_replications_say_so(tmp_path):
    out = _toy(tmp_path, "toy_full", reps=3, quick=False)
    md = write_report(out).read_text()
    assert "full grid, 3 replications" in md and "quick grid" not in md
    row_a = next(line for line in md.splitlines() if line.startswith("| a "))
    assert float(row_a.strip("|").split("|")[2]) > 0  # a CI from 3 replications


def test_report_across_studies_has_contents_and_each_section(tmp_path, capsys):
    one, two = _toy(tmp_path, "toy_one", 1), _toy(tmp_path, "toy_two", 2)
    again = _toy(tmp_path / "x", "toy_one", 1)  # the same study twice
    out = tmp_path / "all"
    assert main(["report", str(one), str(two), str(again), "--out", str(out)]) == 0
    assert f"report written to {out / 'report.md'}" in capsys.readouterr().out
    md = (out / "report.md").read_text()
    page = (out / "report.html").read_text()
    slugs = ["toy_one", "toy_two", "toy_one-2"]
    for i, slug in enumerate(slugs, 1):
        assert f"{i}. [{slug.split('-')[0]}](#{slug}) ([its own report]({slug}/report.md))" in md
        assert f'<a id="{slug}"></a>' in md and f"![the means]({slug}/toy.png)" in md
        assert f"<a href='#{slug}'>" in page and f"<h2 id='{slug}'>" in page
        assert (out / slug / "toy.png").is_file()
        assert "Toy section" in (out / slug / "report.md").read_text()
        assert "data:image/png;base64," in (out / slug / "report.html").read_text()
    assert md.count("### Toy section") == 3 and md.count("## toy_one") == 2
    assert page.count("<img src='data:image/png;base64,") == 3
    assert "toy.png'" not in page
    assert md.count("quick grid") == 3


def test_several_folders_need_an_out_folder(tmp_path, capsys):
    one, two = _toy(tmp_path, "toy_one", 1), _toy(tmp_path, "toy_two", 1)
    assert main(["report", str(one), str(two)]) == 2
    err = capsys.readouterr().err
    assert err == "market-sim: error: report: --out is needed with several results folders\n"
    assert not (one / "report").exists()
    with pytest.raises(Exception, match="no results folders"):
        write_index([], tmp_path / "none")
