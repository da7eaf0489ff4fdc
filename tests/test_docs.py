"""The documentation: the site builds in strict mode, and the README's examples are true.

`make test` installs the `docs` extra (mkdocs, mkdocs-material, mkdocstrings[python]);
without it the build test fails and says how to install it.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def _blocks(text, lang):
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.M | re.S)


def test_site_builds_in_strict_mode(tmp_path):
    if importlib.util.find_spec("mkdocs") is None:
        pytest.fail("mkdocs is not installed: pip install -e '.[docs]' (make test installs it)")
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(site),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    log = proc.stdout + proc.stderr
    # strict mode turns every warning (broken link or anchor, page missing from the nav,
    # docstring mkdocstrings cannot render) into a failure; check both anyway
    assert proc.returncode == 0, log
    assert "WARNING" not in log, log
    api = (site / "api" / "mechanisms" / "index.html").read_text(encoding="utf-8")
    assert "offline_payments" in api and "myerson_mechanism" in api  # docstrings rendered
    for fig in (ROOT / "docs" / "figures").glob("*.png"):
        assert (site / "figures" / fig.name).is_file()


@pytest.mark.parametrize("doc", ["README.md", "scenarios/README.md", "analysis/README.md"])
def test_relative_links_of_the_readmes_exist(doc):
    text = (ROOT / doc).read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [link for link in links if "://" not in link]
    missing = [link for link in local if not (ROOT / doc).parent.joinpath(link).exists()]
    assert not missing, f"{doc}: {missing}"


def test_no_internal_references_in_the_documentation():
    docs = [
        ROOT / "README.md",
        ROOT / "scenarios" / "README.md",
        ROOT / "analysis" / "README.md",
        *(ROOT / "docs").glob("*.md"),
    ]
    # the papers are cited by their keys ([AES], ...), not by the seed files' numbers;
    # the bibliography alone gives that mapping
    pattern = re.compile(
        r"\bissues? \d+|\bP1\b|shared/seeds|[Ff]illed by later|EXP3|(?<![\d.,\w])00[0-4](?![\d\w])"
    )
    found = [
        (p.name, m.group())
        for p in docs
        if p.name != "bibliography.md"
        for m in pattern.finditer(p.read_text(encoding="utf-8"))
    ]
    assert not found, "internal references (issue numbers, seed numbers): " + repr(found)


def test_readme_python_quick_start_prints_what_it_shows(tmp_path):
    code, shown = _blocks(README, "python")[0], _blocks(README, "text")[0]
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n") == shown.split("\n")


def _numbers_close(got: str, want: str):
    """Equal text, numbers equal to 1e-9 relative (the last digits vary by machine)."""
    num = r"-?\d+\.\d+(?:e-?\d+)?"
    assert re.sub(num, "#", got) == re.sub(num, "#", want), (got, want)
    for g, w in zip(re.findall(num, got), re.findall(num, want), strict=True):
        assert float(g) == pytest.approx(float(w), rel=1e-9, abs=1e-12)


def test_readme_command_line_example_prints_what_it_shows(tmp_path):
    session = next(b for b in _blocks(README, "text") if b.startswith("$ market-sim solve"))
    parts = re.split(r"^\$ (.*)\n", session, flags=re.M)[1:]  # command, output, ...
    (solve, solve_out), (head, head_out) = zip(parts[::2], parts[1::2], strict=True)
    argv = solve.split()[1:]
    argv[argv.index("--costs") + 1] = str(ROOT / argv[argv.index("--costs") + 1])
    proc = subprocess.run(
        [sys.executable, "-m", "market_sim.cli", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    _numbers_close(proc.stdout, solve_out)
    n = int(head.split()[1].lstrip("-"))
    rows = (tmp_path / "sellers.csv").read_text(encoding="utf-8").splitlines()[:n]
    _numbers_close("\n".join(rows) + "\n", head_out)
