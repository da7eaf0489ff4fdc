"""A mechanism, a strategy and a study written outside the package, against the documented
API only, installed as a package with entry points (a dist-info folder on PYTHONPATH) and
used through the command line: listed, simulated, audited, run on 2 workers, resumed and
reported."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    site = tmp_path_factory.mktemp("site")
    shutil.copy(EXAMPLES / "uniform_price.py", site / "ext_mech.py")
    shutil.copy(EXAMPLES / "threshold_shading.py", site / "ext_strat.py")
    study = (EXAMPLES / "two_arm_study.py").read_text()
    (site / "ext_study.py").write_text(
        study.replace('with_name("uniform_price.py")', 'with_name("ext_mech.py")')
    )
    info = site / "ext_market-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: ext-market\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        "[market_sim.mechanisms]\next-uniform-price = ext_mech:UniformPrice\n"
        "uniform-price = ext_mech:UniformPrice\n\n"  # hidden by the built-in of that name
        "[market_sim.strategies]\nthreshold-shading = ext_strat:ThresholdShading\n\n"
        "[market_sim.scenarios]\ntwo-arm = ext_study\n"
    )
    return site


def cli(site, *args, cwd):
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run(
        [sys.executable, "-m", "market_sim.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_third_party_entries_are_listed(site, tmp_path):
    for kind, name in [
        ("mechanisms", "ext-uniform-price"),
        ("strategies", "threshold-shading"),
        ("scenarios", "two-arm"),
    ]:
        out = cli(site, kind, cwd=tmp_path)
        assert out.returncode == 0, out.stderr
        line = next(ln for ln in out.stdout.splitlines() if ln.startswith(name))
        assert "ext-market" in line  # the entry point's distribution
        hidden = [ln for ln in out.stderr.splitlines() if "warning" in ln]
        if kind == "mechanisms":  # the built-in uniform-price wins, and the listing says so
            listed = [ln for ln in out.stdout.splitlines() if ln.startswith("uniform-price ")]
            assert len(listed) == 1 and "[" not in listed[0]
            assert (
                len(hidden) == 1
                and "'uniform-price' (ext_mech:UniformPrice) is hidden" in hidden[0]
            )
        else:
            assert hidden == []


def test_simulate_and_audit_a_third_party_mechanism_and_strategy(site, tmp_path):
    out = cli(
        site,
        "simulate",
        "--dist",
        "uniform:1:5",
        "--mechanism",
        "ext-uniform-price:n_buy=3",
        "--strategy",
        "threshold-shading:quantile=0.5@0.5",
        "--sellers",
        "10",
        "--rounds",
        "2",
        "--quiet",
        "--out",
        "sim",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    agents = pd.read_csv(tmp_path / "sim" / "agents.csv")
    assert set(agents.strategy) == {"threshold-shading:quantile=0.5", "truthful"}
    shaders = agents[agents.strategy != "truthful"]
    cheap = shaders[shaders.cost < 3.0]
    assert len(cheap) and (cheap.report > cheap.cost).all()
    assert (agents.eps > 0).groupby(agents["round"]).sum().eq(3).all()  # n_buy = 3
    # the same classes by file path
    out = cli(
        site,
        "simulate",
        "--dist",
        "uniform:1:5",
        "--mechanism",
        f"{site / 'ext_mech.py'}:UniformPrice:n_buy=2",
        "--strategy",
        f"{site / 'ext_strat.py'}:ThresholdShading",
        "--sellers",
        "6",
        "--rounds",
        "1",
        "--quiet",
        "--out",
        "sim2",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    out = cli(
        site,
        "audit",
        "--mechanism",
        "ext-uniform-price:n_buy=3",
        "--dist",
        "uniform:1:5",
        "--sellers",
        "6",
        "--markets",
        "3",
        "--seed",
        "0",
        "--out",
        "aud",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    summary = json.loads((tmp_path / "aud" / "summary.json").read_text())
    assert summary["verdict"] == "ic" and summary["ir_violations"] == 0


def test_run_resume_and_report_a_third_party_study(site, tmp_path):
    out = cli(
        site,
        "run",
        "two-arm",
        "--quick",
        "--workers",
        "2",
        "--no-progress",
        "--out",
        "res",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    df = pd.read_parquet(tmp_path / "res" / "results")
    assert set(df.arm) == {"uniform-price", "offline"} and df.replication.nunique() == 3
    # common random numbers: both arms of one replication saw the same market
    assert (df.groupby("replication").mean_cost.nunique() == 1).all()
    again = cli(
        site,
        "run",
        "two-arm",
        "--quick",
        "--workers",
        "2",
        "--no-progress",
        "--out",
        "res",
        cwd=tmp_path,
    )
    assert again.returncode == 0 and "6 already done, 0 run" in again.stdout
    out = cli(site, "report", "res", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "Uniform price vs offline" in (tmp_path / "res" / "report" / "report.md").read_text()
    out = cli(
        site,
        "run",
        str(site / "ext_study.py"),
        "--quick",
        "--no-progress",
        "--out",
        "res2",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr
    by_file = pd.read_parquet(tmp_path / "res2" / "results")
    assert len(by_file) == 6 and (by_file.groupby("replication").mean_cost.nunique() == 1).all()


@pytest.mark.parametrize(
    "args, msg",
    [
        (
            ["simulate", "--dist", "uniform:0:1", "--mechanism", "nopkg_xyz:Thing", "--out", "x"],
            "no module named 'nopkg_xyz'",
        ),
        (
            ["simulate", "--dist", "uniform:0:1", "--mechanism", "ext_mech:Nothing", "--out", "x"],
            "has no attribute 'Nothing'",
        ),
        (
            [
                "simulate",
                "--dist",
                "uniform:0:1",
                "--strategy",
                "ext_strat:ThresholdShading:bad=1",
                "--out",
                "x",
            ],
            "no parameter 'bad'",
        ),
        (
            [
                "audit",
                "--mechanism",
                "ext_strat:ThresholdShading",
                "--dist",
                "uniform:0:1",
                "--sellers",
                "3",
                "--markets",
                "2",
                "--out",
                "x",
            ],
            "not a Mechanism",
        ),
        (["run", "missing_study.py", "--out", "x"], "does not exist"),
    ],
)
def test_bad_extension_references_get_one_line_and_exit_2(site, tmp_path, args, msg):
    out = cli(site, *args, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and msg in lines[0]
    assert not (tmp_path / "x").exists()
