"""``market-sim scenarios STUDY``: every study explains its parameters, fast (issue #51,
items 3 and 8).

Speed is checked by what is imported, not by a clock: listing a study's parameters and
refusing a bad ``--set`` must not import Mesa, scikit-learn, scipy.stats or numba (each
costs seconds on a loaded machine; they load when a task runs).
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from market_sim.cli import main
from market_sim.parameters import COMMON_MEANINGS, Number, meaning
from market_sim.runner import describe_parameters, list_scenarios

HEAVY = ("mesa", "sklearn", "scipy.stats", "numba")
STUDIES = [name for name, _, _ in list_scenarios()]


def _heavy_imports(argv: list[str]) -> tuple[int, list[str]]:
    code = (
        "import sys\n"
        "from market_sim.cli import main\n"
        f"rc = main({argv!r})\n"
        f"print([m for m in {HEAVY!r} if m in sys.modules])\n"
        "print(rc)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=300
    ).stdout.splitlines()
    return int(out[-1]), eval(out[-2])  # noqa: S307 - our own list literal


@pytest.mark.parametrize("study", STUDIES)
def test_every_parameter_of_every_study_has_a_meaning_default_and_allowed(study):
    rows = describe_parameters(study)
    assert rows, study
    for r in rows:
        assert r.meaning, f"{study}: parameter {r.name!r} has no meaning"
        assert r.default != "" and r.allowed, (study, r)


@pytest.mark.parametrize("study", STUDIES)
def test_listing_a_study_imports_nothing_heavy(study):
    rc, heavy = _heavy_imports(["scenarios", study])
    assert rc == 0
    assert heavy == [], f"market-sim scenarios {study} imported {heavy}"


def test_a_bad_set_fails_before_heavy_imports(tmp_path):
    rc, heavy = _heavy_imports(["run", "ic_stress", "--set", "nonesuch=1", "--out", str(tmp_path)])
    assert rc == 2 and heavy == []
    rc, heavy = _heavy_imports(["run", "correlation", "--set", "rho=5", "--out", str(tmp_path)])
    assert rc == 2 and heavy == []
    assert not any(tmp_path.iterdir())  # nothing written


def test_the_listing_prints_each_parameter_with_its_default(capsys):
    assert main(["scenarios", "online_vs_offline"]) == 0
    out = capsys.readouterr().out
    assert "xi" in out and "share of the planned sellers that arrive" in out
    # the grid's values: xi is 1.0 on the m sweep and 0.75 ... 0.1 on the xi sweep
    assert "default: 1.0, 0.75, ..., 0.1 (5 values)" in out


def test_a_declaration_doc_wins_over_the_common_meaning():
    assert meaning("mu", Number(float, doc="mine")) == "mine"
    assert meaning("mu", Number(float)) == COMMON_MEANINGS["mu"]
    assert meaning("nonesuch", Number(float)) == ""


def test_an_unknown_study_is_one_line(capsys):
    assert main(["scenarios", "nonesuch"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nonesuch" in err[0]
