"""Studies found by file, module and entry point; common random numbers; a study's
own report section; one-line errors for bad study references."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from market_sim.analysis.report import generic_section
from market_sim.cli import main
from market_sim.runner import _Chunker, crn_rng, mp_context, read_results, run_scenario

FILE_STUDY = '''
"""A study in a file outside the package."""
import numpy as np

REPLICATIONS = 2

def grid(quick=False):
    return [dict(arm=a, m=3) for a in ("a", "b")]

def run(params, rng, *, replication, crn):
    common = crn.random(params["m"])
    own = rng.random(params["m"])
    return [dict(k=k, common=float(c), own=float(o), rep_seen=replication)
            for k, (c, o) in enumerate(zip(common, own))]

def section(df, folder):
    from market_sim.analysis.report import Section
    (folder / "mine.txt").write_text("drawn by the study")
    return Section("My own section", f"custom text, {len(df)} rows",
                   tables=[("arms", df.groupby("arm").own.mean().reset_index())])
'''


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def test_a_file_study_runs_on_two_workers_resumes_and_reports_itself(tmp_path, monkeypatch, capsys):
    study = write(tmp_path / "elsewhere" / "my_study.py", FILE_STUDY)
    out = tmp_path / "out"
    assert main(["run", str(study), "--workers", "2", "--out", str(out), "--no-progress"]) == 0
    assert "4 tasks: 0 already done, 4 run, 0 failed" in capsys.readouterr().out
    df = pd.read_parquet(out / "results")
    assert len(df) == 4 * 3 and (df.status == "ok").all() and set(df.scenario) == {"my_study"}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["source"] == str(study.resolve()) and manifest["scenario"] == "my_study"
    # resumed from another folder, with a relative path: nothing is run again
    monkeypatch.chdir(study.parent)
    assert main(["run", "my_study.py", "--out", str(out), "--no-progress"]) == 0
    assert "4 tasks: 4 already done, 0 run" in capsys.readouterr().out
    # the same rows on one worker and on Dask (the Dask workers import the file too)
    run_scenario(str(study), tmp_path / "one")
    run_scenario(str(study), tmp_path / "dask", workers=2, executor="dask")
    key = ["arm", "replication", "k"]
    for other in ("one", "dask"):
        b, _ = read_results(tmp_path / other)
        pd.testing.assert_frame_equal(
            df.drop(columns="elapsed").sort_values(key, ignore_index=True),
            b.drop(columns="elapsed").sort_values(key, ignore_index=True),
        )
    # the report uses the study's own section, found from the manifest
    assert main(["report", str(out)]) == 0
    md = (out / "report" / "report.md").read_text()
    assert "## My own section" in md and "custom text, 12 rows" in md
    assert (out / "report" / "mine.txt").exists()


def test_common_random_numbers_are_shared_by_the_grid_points_of_a_replication(tmp_path):
    study = write(tmp_path / "crn_study.py", FILE_STUDY)
    run_scenario(str(study), tmp_path / "out", seed=7)
    df, _ = read_results(tmp_path / "out")
    assert (df.rep_seen == df.replication).all()
    wide = df.pivot_table(index=["replication", "k"], columns="arm", values=["common", "own"])
    np.testing.assert_array_equal(wide["common"]["a"], wide["common"]["b"])  # same markets
    assert not np.allclose(wide["own"]["a"], wide["own"]["b"])  # own streams differ
    rep0 = df[(df.replication == 0) & (df.arm == "a")].sort_values("k").common.to_numpy()
    rep1 = df[(df.replication == 1) & (df.arm == "a")].sort_values("k").common.to_numpy()
    assert not np.allclose(rep0, rep1)  # replications differ
    np.testing.assert_array_equal(rep0, crn_rng(7, "crn_study", 0).random(3))
    assert not np.array_equal(rep0, crn_rng(8, "crn_study", 0).random(3))


def test_old_and_kwargs_signatures(tmp_path):
    old = write(
        tmp_path / "old_sig.py",
        """
        REPLICATIONS = 1
        def grid(quick=False):
            return [dict(m=1), dict(m=2)]
        def run(params, rng):
            return [dict(x=float(rng.random()))]
    """,
    )
    kw = write(
        tmp_path / "kw_sig.py",
        """
        REPLICATIONS = 2
        def grid(quick=False):
            return [dict(m=1)]
        def run(params, rng, **extra):
            return [dict(keys=",".join(sorted(extra)), rep=extra["replication"],
                         c=float(extra["crn"].random()))]
    """,
    )
    assert run_scenario(str(old), tmp_path / "old").failed == 0
    df, _ = read_results(tmp_path / "old")
    assert len(df) == 2 and df.x.between(0, 1).all()
    assert run_scenario(str(kw), tmp_path / "kw").failed == 0
    df, _ = read_results(tmp_path / "kw")
    assert set(df["keys"]) == {"crn,replication"} and sorted(df.rep) == [0, 1]
    assert df.c.nunique() == 2


def test_generic_section_keeps_rounds_and_labels_as_keys():
    df = pd.DataFrame(
        {
            "m": [5] * 6,
            "replication": [0, 0, 0, 1, 1, 1],
            "round": [0, 1, 2, 0, 1, 2],
            "mechanism": ["x"] * 6,
            "value": [0.0, 10.0, 20.0, 2.0, 12.0, 22.0],
        }
    )
    table = generic_section(df, {"grid": [{"m": 5}]}, None).tables[0][1]
    assert list(table.columns) == ["m", "round", "mechanism", "value"]
    assert table.value.tolist() == [1.0, 11.0, 21.0]  # per round, not averaged over rounds


ENTRY_STUDY = '''
"""A third-party study registered through an entry point."""
REPLICATIONS = 2
QUICK_REPLICATIONS = 1
IMPORTED = True

def grid(quick=False):
    return [dict(n=n) for n in (1, 2)]

def run(params, rng):
    return [dict(y=float(rng.standard_normal()))]
'''


@pytest.fixture
def third_party(tmp_path, monkeypatch):
    """An installed distribution declaring a study in the market_sim.scenarios group."""
    site = tmp_path / "site"
    write(site / "thirdparty_studies" / "__init__.py", "")
    write(site / "thirdparty_studies" / "ext.py", ENTRY_STUDY)
    info = site / "thirdparty_studies-1.0.dist-info"
    write(info / "METADATA", "Metadata-Version: 2.1\nName: thirdparty-studies\nVersion: 1.0\n")
    write(info / "entry_points.txt", "[market_sim.scenarios]\next-study = thirdparty_studies.ext\n")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site))
    yield "ext-study"
    for name in [m for m in sys.modules if m.startswith("thirdparty_studies")]:
        del sys.modules[name]


def test_entry_point_studies_are_listed_without_import_and_run(third_party, tmp_path, capsys):
    assert main(["scenarios"]) == 0
    listed = capsys.readouterr().out.splitlines()
    ext = [line for line in listed if line.startswith("ext-study")]
    assert len(ext) == 1 and "A third-party study registered" in ext[0]
    assert "entry point (thirdparty-studies)" in ext[0]
    assert any(line.startswith("asymptotic ") and "Asymptotics" in line for line in listed)
    assert "thirdparty_studies.ext" not in sys.modules  # listed from the source, not imported
    out = tmp_path / "out"
    assert (
        main(["run", third_party, "--quick", "--workers", "2", "--out", str(out), "--no-progress"])
        == 0
    )
    df, manifest = read_results(out)
    assert manifest["source"] == "thirdparty_studies.ext" and len(df) == 2
    assert set(df.scenario) == {"ext-study"}


def test_scenarios_lists_built_ins_without_importing_them():
    code = (
        "import sys; from market_sim.cli import main; main(['scenarios']); "
        "print(sorted(m for m in sys.modules if m.startswith('market_sim.scenarios.')))"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip().splitlines()[-1] == "[]"
    assert "wisconsin" in r.stdout


@pytest.mark.parametrize(
    "case",
    [
        "import_error",
        "missing_file",
        "no_attribute",
        "no_module",
        "no_grid",
        "unknown_name",
        "syntax_error",
    ],
)
def test_bad_study_references_exit_2_with_one_line(case, tmp_path):
    broken = write(tmp_path / "broken.py", "import numpy\nraise RuntimeError('boom at import')\n")
    lacking = write(
        tmp_path / "lacking.py", "REPLICATIONS = 1\ndef run(params, rng):\n    return []\n"
    )
    bad_syntax = write(tmp_path / "bad_syntax.py", "def grid(:\n")
    ref, words = {
        "import_error": (str(broken), "boom at import"),
        "missing_file": (str(tmp_path / "nope.py"), "does not exist"),
        "no_attribute": ("market_sim.scenarios.asymptotic:nothing", "no attribute"),
        "no_module": ("no_such_pkg.study", "no module named"),
        "no_grid": (str(lacking), "does not define grid"),
        "unknown_name": ("asymptotc", "did you mean 'asymptotic'"),
        "syntax_error": (str(bad_syntax), "SyntaxError"),
    }[case]
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "market_sim.cli",
            "run",
            ref,
            "--out",
            str(tmp_path / "out"),
            "--no-progress",
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("market-sim: error:"), r.stderr
    assert words in lines[0] and "Traceback" not in r.stderr
    assert not (tmp_path / "out").exists()  # nothing written when the input is rejected


def test_the_pool_uses_its_own_start_method_even_after_import_mesa():
    code = (
        "import multiprocessing as mp, mesa; from market_sim.runner import mp_context; "
        "print(mp.get_start_method(), mp_context().get_start_method())"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    global_method, ours = r.stdout.split()
    expected = (
        "forkserver"
        if "forkserver" in __import__("multiprocessing").get_all_start_methods()
        else "spawn"
    )
    assert ours == expected
    assert mp_context().get_start_method() == expected


def test_small_tasks_are_batched_and_long_ones_are_not():
    """The chunking rule of the runner's docstring, step by step."""
    tasks = list(range(1000))

    def started(todo, first=(0.5, 0.5)):
        c = _Chunker(todo, workers=2)
        assert [len(c.next()) for _ in range(2)] == [1, 1]  # one each to start
        for seconds in first:  # the workers' first chunks: imports, not counted
            c.done(seconds, 1)
        assert len(c.next()) == 1  # nothing counted yet
        return c

    small = started(tasks)
    small.done(0.001, 2)  # 0.5 ms a task: CHUNK_SECONDS / 0.5 ms = 100, reached by doubling
    assert [len(small.next()) for _ in range(9)] == [2, 4, 8, 16, 32, 64, 100, 100, 100]
    big = started(tasks)
    big.done(4.0, 2)
    assert len(big.next()) == 1
    tail = started(tasks[:13])
    tail.done(1e-5, 1)
    # twice the previous chunk, then at most a 1/(2 workers) share of the 8, 6, 4 left
    assert [len(tail.next()) for _ in range(4)] == [2, 2, 2, 1]


def test_importing_market_sim_and_a_study_leaves_heavy_libraries_alone():
    code = (
        "import sys, market_sim, market_sim.mechanisms, market_sim.scenarios.asymptotic, "
        "market_sim.runner; "
        "print([m for m in ('sklearn', 'scipy.stats', 'mesa', 'pandas', 'matplotlib') "
        "if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert r.stdout.strip() == "[]"
