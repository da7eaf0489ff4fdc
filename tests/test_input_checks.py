"""Every input check listed in docs/reliability.md ("Input checks, by command") gives its
one line and exit status 2, and writes nothing: the table in the doc is the test's table,
so the list and the behaviour cannot drift apart."""

import re
import shlex
from pathlib import Path

import pytest

from market_sim.cli import main

ROOT = Path(__file__).parent.parent
DOC = (ROOT / "docs" / "reliability.md").read_text(encoding="utf-8")


def rows() -> list[tuple[str, str, str]]:
    """(command, the mistake, the excerpt) of each row of the doc's table; an excerpt
    written `a` … `b` is two pieces that must both appear, in this order."""
    section = DOC.split("## Input checks, by command", 1)[1].split("\n## ", 1)[0]
    out = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1].startswith("`market-sim "):
            out.append((cells[0], cells[1].strip("`"), cells[2]))
    return out


ROWS = rows()


def test_the_table_is_read_and_covers_every_command_with_checks():
    assert len(ROWS) >= 50
    named = {c for c, _, _ in ROWS}
    for command in ("solve", "simulate", "run", "report", "audit", "compare", "egta", "bne"):
        assert command in named


@pytest.mark.parametrize("command,mistake,excerpt", ROWS, ids=[r[1][11:60] for r in ROWS])
def test_each_listed_check_gives_its_one_line_and_exit_2(
    command, mistake, excerpt, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "good.csv").write_text("seller_id,cost\na,0.5\nb,0.7\n")
    (tmp_path / "bad.csv").write_text("seller_id,cost\na,0.5\nb,x\n")
    try:
        code = main(shlex.split(mistake)[1:])
    except SystemExit as exc:  # argparse's own checks
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.endswith("\n") and err.count("\n") == 1, err  # one line
    assert err.startswith("market-sim: error: ")
    pieces = re.findall(r"`([^`]*)`", excerpt)
    at = 0
    for piece in pieces:
        found = err.find(piece, at)
        assert found >= 0, (piece, err)
        at = found + len(piece)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.csv", "good.csv"]
