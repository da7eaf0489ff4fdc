"""scenarios/ and analysis/ install as market_sim.scenarios and market_sim.analysis."""

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).parent.parent


def test_pyproject_lists_every_package_and_maps_the_two_folders():
    tool = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = {
        ".".join(p.parent.relative_to(ROOT).parts)
        for p in (ROOT / "market_sim").rglob("__init__.py")
    }
    assert found <= set(tool["packages"]), f"add {sorted(found - set(tool['packages']))}"
    assert tool["package-dir"]["market_sim.scenarios"] == "scenarios"
    assert tool["package-dir"]["market_sim.analysis"] == "analysis"
    assert not [p for p in tool["packages"] if not p.startswith("market_sim")]


def test_the_installed_names_work_outside_the_checkout(tmp_path):
    code = (
        "import market_sim.scenarios.asymptotic as s, market_sim.analysis.report as r; "
        "print(s.__file__); print(r.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, check=True
    ).stdout.split()
    assert Path(out[0]).parent.name == "scenarios" and Path(out[1]).parent.name == "analysis"
    bare = subprocess.run(
        [sys.executable, "-c", "import scenarios"], cwd=tmp_path, capture_output=True, text=True
    )
    assert bare.returncode != 0  # nothing but market_sim at the top level
