import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from market_sim.cli import main
from market_sim.distributions import parse_distribution
from market_sim.mechanisms.payments import offline_payments

COLUMNS = ["seller_id", "cost", "virtual_cost", "a", "eps", "payment", "utility"]


@pytest.fixture
def costs_csv(tmp_path):
    c = parse_distribution("uniform:0:1").sample(30, np.random.default_rng(3))
    path = tmp_path / "costs.csv"
    pd.DataFrame({"seller_id": [f"s{i}" for i in range(30)], "cost": c}).to_csv(path, index=False)
    return path, c


def exit_code(argv):
    """main()'s status, whether it returns it or argparse exits with it."""
    try:
        return main(argv)
    except SystemExit as exc:
        return exc.code


def run(argv, capsys):
    code = main(argv)
    out = capsys.readouterr()
    return code, out.out, out.err


def test_solve_writes_the_seller_table(costs_csv, tmp_path, capsys):
    path, c = costs_csv
    out = tmp_path / "sellers.csv"
    code, stdout, _ = run(
        [
            "solve",
            "--costs",
            str(path),
            "--dist",
            "uniform:0:1",
            "--mu",
            "1",
            "--sigma",
            "0.5",
            "--gamma",
            "0.5",
            "--out",
            str(out),
        ],
        capsys,
    )
    assert code == 0
    df = pd.read_csv(out)
    assert list(df.columns) == COLUMNS
    eps, pay = offline_payments(c, parse_distribution("uniform:0:1"), mu=1, sigma=0.5, gamma=0.5)
    np.testing.assert_allclose(df.eps, eps, rtol=1e-15)
    np.testing.assert_allclose(df.payment, pay, rtol=1e-15)
    np.testing.assert_allclose(df.utility, pay - c * eps, rtol=1e-12, atol=1e-17)
    assert "total_payment: " in stdout and "proxy_loss: " in stdout
    total = float(stdout.split("total_payment: ")[1].split()[0])
    assert total == pytest.approx(pay.sum())


def test_solve_json(costs_csv, capsys):
    path, c = costs_csv
    code, stdout, _ = run(
        ["solve", "--costs", str(path), "--dist", "uniform:0:1", "--json", "--k", "3"], capsys
    )
    assert code == 0
    doc = json.loads(stdout)
    assert set(doc) == {"summary", "sellers"}
    assert len(doc["sellers"]) == 30 and list(doc["sellers"][0]) == COLUMNS
    s = doc["summary"]
    for key in ("eta", "cutoff", "proxy_loss", "total_payment", "n_bought"):
        assert key in s
    assert s["k"] == 3
    a = np.array([r["a"] for r in doc["sellers"]])
    assert a.max() <= 3 / 30 * (1 + 1e-12) and abs(a.sum() - 1) < 1e-12


def test_solve_to_stdout_keeps_summary_on_stderr(costs_csv, capsys):
    path, _ = costs_csv
    code, stdout, stderr = run(["solve", "--costs", str(path), "--dist", "uniform:0:1"], capsys)
    assert code == 0
    assert stdout.splitlines()[0] == ",".join(COLUMNS)
    assert "eta: " in stderr


def _write(tmp_path, text, name="in.csv", mode="w"):
    p = tmp_path / name
    if mode == "wb":
        p.write_bytes(text)
    else:
        p.write_text(text)
    return p


@pytest.mark.parametrize(
    "content, extra, msg",
    [
        (None, [], "no such file"),
        ("seller_id,price\na,0.5\n", [], "missing column 'cost'"),
        ("seller_id,cost\na,0.5\na,0.2\n", [], "duplicate seller_id 'a'"),
        ("seller_id,cost\na,0.5\nb,nan\n", [], "not a finite number"),
        ("seller_id,cost\na,0.5\nb,abc\n", [], "not a finite number"),
        ("seller_id,cost\na,-0.5\n", [], "negative"),
        ("seller_id,cost\na,1.5\n", [], "outside the support"),
        ("", [], "empty"),
        ("seller_id,cost\n", [], "no sellers"),
        (b"\xff\xfe\x00\x01garbage", [], "not UTF-8"),
        ("seller_id,cost\na,0.5\n", ["--dist", "weird:1"], "unknown distribution"),
        ("seller_id,cost\na,0.5\n", ["--dist", "beta:0.5:0.5:0:1"], "not regular"),
        ("seller_id,cost\na,0.5\n", ["--mu", "0"], "mu must be a finite number > 0"),
        ("seller_id,cost\na,0.5\n", ["--sigma", "-1"], "sigma must be"),
        ("seller_id,cost\na,0.5\n", ["--gamma", "inf"], "gamma must be"),
        ("seller_id,cost\na,0.5\n", ["--k", "0.5"], "k must be >= 1"),
    ],
)
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, capsys, content, extra, msg):
    if content is None:
        path = tmp_path / "missing.csv"
    else:
        path = _write(tmp_path, content, mode="wb" if isinstance(content, bytes) else "w")
    out = tmp_path / "result.csv"
    argv = ["solve", "--costs", str(path), "--out", str(out)]
    if "--dist" not in extra:
        argv += ["--dist", "uniform:0:1"]
    code = exit_code(argv + extra)
    err = capsys.readouterr().err
    assert code == 2
    assert msg in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not out.exists()
    assert list(tmp_path.glob(".result.csv.*")) == []


def test_bom_and_quoted_numbers_are_accepted(tmp_path, capsys):
    path = _write(tmp_path, '\ufeffseller_id,cost\n"a","0.25"\n b , 0.5 \n')
    code, stdout, _ = run(
        ["solve", "--costs", str(path), "--dist", "uniform:0:1", "--json"], capsys
    )
    assert code == 0
    doc = json.loads(stdout)
    assert [r["seller_id"] for r in doc["sellers"]] == ["a", "b"]
    assert [r["cost"] for r in doc["sellers"]] == [0.25, 0.5]


def test_console_script_and_demo(tmp_path):
    exe = [sys.executable, "-m", "market_sim.cli"]
    r = subprocess.run(
        exe + ["demo", "--out", str(tmp_path / "fig"), "--sellers", "40"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "fig" / "offline_market.png").stat().st_size > 10_000
    assert "IR: min truthful utility" in r.stdout
    # the cut-off twice: lambda (gamma psi units) and the cost where buying stops
    cutoff = float(r.stdout.split("  cutoff ")[1].split()[0])
    cost = float(r.stdout.split("  cutoff_cost ")[1].split()[0])
    assert "gamma*psi units" in r.stdout and "the cost where buying stops" in r.stdout
    assert 0.2 * 2 * cost == pytest.approx(cutoff, rel=1e-5)  # demo: uniform:0:1, gamma 0.2
    gain = float(
        r.stdout.split("largest gain from a misreport (3 sellers x 41 reports) = ")[1].split()[0]
    )
    assert gain <= 1e-8
    r = subprocess.run(
        exe + ["solve", "--costs", str(tmp_path / "nope.csv"), "--dist", "uniform:0:1"],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and r.stderr.count("\n") == 1


def test_ids_with_commas_round_trip(tmp_path, capsys):
    path = _write(tmp_path, 'seller_id,cost\n"Smith, J",0.1\nplain,0.3\n')
    out = tmp_path / "o.csv"
    assert main(["solve", "--costs", str(path), "--dist", "uniform:0:1", "--out", str(out)]) == 0
    assert list(pd.read_csv(out).seller_id) == ["Smith, J", "plain"]


def test_solve_online_matches_the_mechanism(costs_csv, capsys):
    from market_sim.mechanisms.online import OnlineMechanism

    path, c = costs_csv
    code, stdout, _ = run(
        [
            "solve",
            "--costs",
            str(path),
            "--dist",
            "uniform:0:1",
            "--mechanism",
            "online",
            "--planned-m",
            "100",
            "--json",
        ],
        capsys,
    )
    assert code == 0
    doc = json.loads(stdout)
    mech = OnlineMechanism(parse_distribution("uniform:0:1"), 100, mu=1, sigma=1, gamma=1)
    np.testing.assert_allclose([r["eps"] for r in doc["sellers"]], mech.eps(c))
    np.testing.assert_allclose([r["payment"] for r in doc["sellers"]], mech.payments(c))
    assert doc["summary"]["rule"] == "fluid" and doc["summary"]["planned_m"] == 100
    assert doc["summary"]["cutoff"] == pytest.approx(mech.cutoff)


def test_online_option_errors(costs_csv, capsys):
    path, _ = costs_csv
    for extra, msg in (
        (["--mechanism", "online", "--k", "2"], "offline mechanism only"),
        (["--planned-m", "10"], "online mechanism only"),
        (["--mechanism", "online", "--planned-m", "0"], "planned-m must be >= 1"),
    ):
        code = exit_code(["solve", "--costs", str(path), "--dist", "uniform:0:1"] + extra)
        err = capsys.readouterr().err
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1
    code = exit_code(
        [
            "solve",
            "--costs",
            str(path),
            "--dist",
            "uniform:0.001:1",
            "--mechanism",
            "online",
            "--rule",
            "alg3",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "use rule='fluid'" in err


def test_online_stream_answers_each_line_as_it_comes():
    """A live feed: each decision is read back before the next line is sent."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "market_sim.cli",
            "online-stream",
            "--dist",
            "uniform:0:1",
            "--planned-m",
            "1000",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        header = proc.stdout.readline().decode().strip()
        assert header == "seller_id,cost,virtual_cost,eps,payment,utility,error"
        answers = {}
        for line in (
            b"seller_id,cost\n",
            b"a,0.01\n",
            b"b,abc\n",
            b"a,0.02\n",
            b"c,1.5\n",
            b"\xff\xfe,1\n",
            b"d,0.3,4\n",
            b'"e, f",0.005\n',
        ):
            proc.stdin.write(line)
            proc.stdin.flush()
            if line.startswith(b"seller_id"):
                continue
            answers[line] = proc.stdout.readline().decode().strip()
    finally:
        proc.stdin.close()
        rest = proc.stdout.read().decode()
        proc.wait(timeout=60)
    assert proc.returncode == 0 and rest == ""
    rows = {k: next(__import__("csv").reader([v])) for k, v in answers.items()}
    assert rows[b"a,0.01\n"][0] == "a" and float(rows[b"a,0.01\n"][3]) > 0
    assert rows[b"a,0.01\n"][6] == ""
    assert "not a number" in rows[b"b,abc\n"][6]
    assert "duplicate seller_id" in rows[b"a,0.02\n"][6]
    assert "outside the support" in rows[b"c,1.5\n"][6]
    assert "not UTF-8" in rows[b"\xff\xfe,1\n"][6]
    assert "expected 2 fields" in rows[b"d,0.3,4\n"][6]
    assert rows[b'"e, f",0.005\n'][0] == "e, f"


# ---- fail early and cleanly ------------------------------------------------------------
def _one_line_error(capsys, code, *needles):
    err = capsys.readouterr().err
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert err.startswith("market-sim: error: "), err
    for n in needles:
        assert n in err, err
    return err


def _commands(out, costs):
    """Every command with an --out, pointed at ``out``."""
    return {
        "solve": ["solve", "--costs", str(costs), "--dist", "uniform:0:1", "--out", f"{out}/x.csv"],
        "simulate": ["simulate", "--dist", "uniform:0:1", "--sellers", "4", "--out", str(out)],
        "run": ["run", "ir", "--quick", "--quiet", "--out", str(out)],
        "report": ["report", str(out), "--out", f"{out}/report"],
        "demo": ["demo", "--sellers", "10", "--out", str(out)],
        "audit": ["audit", "--mechanism", "offline", "--dist", "uniform:0:1", "--out", str(out)],
    }


@pytest.mark.parametrize("command", ["solve", "simulate", "run", "report", "demo", "audit"])
def test_an_unwritable_out_is_refused_before_any_work(tmp_path, capsys, monkeypatch, command):
    """--out under a file: one line, exit 2, and nothing ran (the work is booby-trapped)."""
    import market_sim.agents
    import market_sim.auditing
    import market_sim.demo
    import market_sim.runner

    def trap(*a, **k):
        raise AssertionError("work started before --out was checked")

    monkeypatch.setattr(market_sim.agents, "MarketModel", trap)
    monkeypatch.setattr(market_sim.runner, "execute", trap)
    monkeypatch.setattr(market_sim.auditing, "audit", trap)
    monkeypatch.setattr(market_sim.demo, "run_demo", trap)
    monkeypatch.setattr("market_sim.markets.read_costs", trap)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    argv = _commands(blocker / "out", tmp_path / "costs.csv")[command]
    _one_line_error(capsys, exit_code(argv), "cannot write to", "is not a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file"]


def test_an_unwritable_folder_is_named_with_the_systems_reason(tmp_path, capsys, monkeypatch):
    """A folder the process may not create files in (a read-only or foreign folder)."""
    import errno
    import tempfile

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(tempfile, "mkstemp", denied)
    for argv in _commands(tmp_path, tmp_path / "costs.csv").values():
        _one_line_error(capsys, exit_code(argv), "cannot write to", "Permission denied")
    assert list(tmp_path.iterdir()) == []


def test_any_oserror_is_one_line_and_a_bug_stays_visible(costs_csv, tmp_path, capsys, monkeypatch):
    import errno

    import market_sim.cli.solve as solve_command

    path, _ = costs_csv
    argv = [
        "solve",
        "--costs",
        str(path),
        "--dist",
        "uniform:0:1",
        "--out",
        str(tmp_path / "o.csv"),
    ]

    def full(table, fh):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "o.csv"))

    monkeypatch.setattr(solve_command, "_write_csv", full)
    _one_line_error(capsys, main(argv), "o.csv: No space left on device")
    assert not (tmp_path / "o.csv").exists() and list(tmp_path.glob(".o.csv*")) == []

    def bug(table, fh):
        raise ZeroDivisionError("a real bug")

    monkeypatch.setattr(solve_command, "_write_csv", bug)
    with pytest.raises(ZeroDivisionError):  # not swallowed into a one-line "error"
        main(argv)


def test_a_closed_pipe_ends_quietly(tmp_path):
    rows = "".join(f"s{i},{(i % 997) / 997}\n" for i in range(20_000))  # > a pipe's buffer
    (tmp_path / "c.csv").write_text("seller_id,cost\n" + rows)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "market_sim.cli",
            "solve",
            "--costs",
            "c.csv",
            "--dist",
            "uniform:0:1",
        ],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdout.readline().startswith(b"seller_id,cost")
    proc.stdout.close()  # the reader goes away, as `| head -1` does
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 1
    assert "Traceback" not in err and "BrokenPipe" not in err


# ---- did you mean ------------------------------------------------------------------
@pytest.mark.parametrize(
    "argv, hint",
    [
        (["simulat"], "did you mean 'simulate'?"),
        (["run", "ir", "--exector", "dask"], "did you mean '--executor'?"),
        (["demo", "--seeds", "3"], "did you mean '--seed'?"),
        (["run", "ir", "--executor", "dsk"], "did you mean 'dask'?"),
        (["run", "ic_stres"], "did you mean 'ic_stress'?"),
        (["simulate", "--dist", "uniform:0:1", "--mechanism", "ofline"], "did you mean 'offline'?"),
        (["simulate", "--dist", "uniform:0:1", "--strategy", "shadee"], "did you mean 'shade'?"),
        (["audit", "--mechanism", "pay-as-bd", "--dist", "uniform:0:1"], "'pay-as-bid'?"),
    ],
)
def test_misspelt_names_get_one_line_with_a_suggestion(tmp_path, capsys, argv, hint):
    if argv[0] in ("simulate", "audit"):
        argv = argv + ["--out", str(tmp_path / "o")]
    _one_line_error(capsys, exit_code(argv), hint)
    assert not (tmp_path / "o").exists()


# ---- one vocabulary ------------------------------------------------------------------
def test_old_option_names_still_work_and_are_not_listed(tmp_path, capsys):
    import contextlib
    import io

    from market_sim.cli import build_parser

    parser = build_parser()
    new = parser.parse_args(["demo", "--out", "d", "--sellers", "7"])
    old = parser.parse_args(["demo", "--out-dir", "d", "--m", "7"])
    assert (new.out, new.sellers) == (old.out, old.sellers) == ("d", 7)
    assert parser.parse_args(["demo"]).out == "demo_output"
    assert parser.parse_args(["run", "ir", "--no-progress"]).quiet
    assert parser.parse_args(["run", "ir", "--quiet"]).quiet
    help_text = io.StringIO()
    with contextlib.redirect_stdout(help_text), pytest.raises(SystemExit):
        parser.parse_args(["demo", "--help"])
    assert "--sellers" in help_text.getvalue() and "--out" in help_text.getvalue()
    assert "--out-dir" not in help_text.getvalue() and "--m " not in help_text.getvalue()
    assert main(["demo", "--out-dir", str(tmp_path / "old"), "--m", "12"]) == 0
    old_out = capsys.readouterr().out
    assert main(["demo", "--out", str(tmp_path / "new"), "--sellers", "12"]) == 0
    new_out = capsys.readouterr().out
    same = old_out.replace(str(tmp_path / "old"), str(tmp_path / "new"))
    assert same == new_out and "12 sellers" in new_out
    assert (tmp_path / "old" / "offline_market.png").exists()


def test_every_command_with_such_a_notion_says_out_sellers_seed():
    from market_sim.cli import build_parser

    parser = build_parser()
    subs = next(
        a for a in parser._actions if isinstance(a, __import__("argparse")._SubParsersAction)
    )
    options = {
        name: {o for a in p._actions for o in a.option_strings} for name, p in subs.choices.items()
    }
    for name in ("simulate", "audit", "demo"):
        assert {"--out", "--sellers", "--seed"} <= options[name], name
    for name in ("solve", "run", "report"):
        assert "--out" in options[name]
    for name in ("run", "simulate", "audit"):
        assert "--quiet" in options[name]


# ---- cut-off in cost units ---------------------------------------------------------------
@pytest.mark.parametrize(
    "extra", [[], ["--k", "3"], ["--mechanism", "online", "--planned-m", "50"]]
)
def test_the_cutoff_is_also_given_as_a_cost(costs_csv, capsys, extra):
    path, c = costs_csv
    code, stdout, _ = run(
        [
            "solve",
            "--costs",
            str(path),
            "--dist",
            "uniform:0:1",
            "--gamma",
            "0.5",
            "--json",
            *extra,
        ],
        capsys,
    )
    assert code == 0
    doc = json.loads(stdout)
    s = doc["summary"]
    dist = parse_distribution("uniform:0:1")
    assert 0.5 * dist.virtual_cost(np.array([s["cutoff_cost"]]))[0] == pytest.approx(s["cutoff"])
    eps = np.array([r["eps"] for r in doc["sellers"]])
    assert (c[eps > 0] < s["cutoff_cost"]).all() and (c[eps == 0] >= s["cutoff_cost"] - 1e-12).all()
    if "online" in extra:
        from market_sim.mechanisms.online import OnlineMechanism

        mech = OnlineMechanism(dist, 50, mu=1, sigma=1, gamma=0.5)
        assert s["cutoff_cost"] == pytest.approx(mech.threshold_cost, rel=1e-12)


def test_cutoff_cost_when_everybody_is_bought_is_the_top_of_the_support():
    from market_sim.markets import cutoff_cost

    dist = parse_distribution("beta:2:2:1:5")
    assert cutoff_cost(dist, float("inf"), 1.0) == 5.0
    c = cutoff_cost(dist, 3.0, 0.5)
    assert 0.5 * dist.virtual_cost(np.array([c]))[0] == pytest.approx(3.0, rel=1e-12)


# ---- slow runs are announced ------------------------------------------------------------
def test_the_cost_model_warns_for_large_capped_and_data_dependent_runs():
    from market_sim import estimates as E

    # solve --k 5 on 10^6 sellers: minutes... days re-solving, about a second compiled
    assert E.capped_offline_seconds(10**6, 200_000, compiled=False) > 86400
    assert E.capped_offline_seconds(10**6, 200_000, compiled=True) < E.SLOW_SECONDS
    assert E.capped_offline_seconds(30, 10, compiled=False) < E.SLOW_SECONDS
    # the regret's curves of every seller: 16 s measured at 10^5, minutes at 10^6
    assert E.capped_offline_seconds(10**5, 20_000, 10**5, compiled=True) < E.SLOW_SECONDS
    assert E.capped_offline_seconds(10**6, 200_000, 10**6, compiled=True) > E.SLOW_SECONDS
    default = 3 * E.data_dependent_round_seconds(20, regret=True)  # simulate's defaults
    assert default < E.SLOW_SECONDS / 10  # measured: 2.1 s (compiled solver)
    large = 3 * E.data_dependent_round_seconds(1000, regret=True)
    assert large > E.SLOW_SECONDS  # a round of 500 sellers without regret: 16 s measured
    assert 3 * E.data_dependent_round_seconds(1000, regret=False) < large / 2
    assert E.data_dependent_round_seconds(2, regret=False) < E.SLOW_SECONDS / 10
    assert E.format_duration(45) == "about 45 s" and E.format_duration(264) == "about 4.4 min"
    assert E.format_duration(2.0e7) == "about 231 days"


def test_the_cost_model_counts_the_adaptive_payments_of_curved_laws():
    """A Beta's curved psi costs hundreds of solves per seller (measured 528-1,128 per
    seller, 10-16 s a round at 20-50 sellers); a uniform law's about one: the model
    must tell them apart, or a long Beta run goes unannounced."""
    from market_sim import estimates as E
    from market_sim.agents.model import MarketModel
    from market_sim.mechanisms.builtin import DataDependentMechanism

    def model(law, **kw):
        return MarketModel(n_sellers=100, dist=parse_distribution(law), data="synthetic",
                           mechanism=DataDependentMechanism(parse_distribution(law), **kw),
                           measure_regret=False, rng=np.random.default_rng(0))  # fmt: skip

    for law in ("beta:2:5:0:2", "truncnorm:0.5:0.3:0:1"):
        assert model(law).mechanism.curved_payments
        assert not model(law, payment_rule="trapezoid").mechanism.curved_payments
    assert not model("uniform:0:1").mechanism.curved_payments
    beta, _ = E.simulation_seconds(model("beta:2:5:0:2"), rounds=3)
    uniform, _ = E.simulation_seconds(model("uniform:0:1"), rounds=3)
    assert uniform < E.SLOW_SECONDS / 10 < E.SLOW_SECONDS < beta
    assert beta > 100 * uniform


def test_solve_with_a_cap_on_many_sellers_warns_once_and_small_ones_do_not(
    tmp_path, capsys, monkeypatch
):
    import market_sim.mechanisms.payments as payments

    monkeypatch.setattr(payments, "capped_oracle_compiled", lambda: False)  # no numba

    rng = np.random.default_rng(0)
    big = tmp_path / "big.csv"
    pd.DataFrame({"seller_id": np.arange(5000), "cost": rng.random(5000)}).to_csv(big, index=False)
    calls = []

    def instant(costs, dist, **kw):  # the warning comes before the long part: skip that
        calls.append(kw["k"])
        return np.zeros(len(costs)), np.zeros(len(costs))

    monkeypatch.setattr(payments, "offline_payments", instant)
    code, _, err = run(
        ["solve", "--costs", str(big), "--dist", "uniform:0:1", "--k", "5", "--json"], capsys
    )
    lines = [ln for ln in err.splitlines() if "warning" in ln]
    assert code == 0 and calls == [5] and len(lines) == 1
    assert lines[0].startswith("market-sim: warning: the capped payments (--k)")
    assert "without --k" in lines[0] and ("h" in lines[0] or "days" in lines[0])
    assert "re-solves" in lines[0]
    monkeypatch.setattr(payments, "capped_oracle_compiled", lambda: True)
    code, _, err = run(
        ["solve", "--costs", str(big), "--dist", "uniform:0:1", "--k", "5", "--json"], capsys
    )
    assert code == 0 and calls == [5, 5] and "warning" not in err  # compiled: seconds
    monkeypatch.undo()
    small = tmp_path / "small.csv"
    pd.DataFrame({"seller_id": np.arange(30), "cost": rng.random(30)}).to_csv(small, index=False)
    code, _, err = run(
        ["solve", "--costs", str(small), "--dist", "uniform:0:1", "--k", "3", "--json"], capsys
    )
    assert code == 0 and "warning" not in err


def test_simulate_warns_for_long_runs_and_not_for_short_ones(capsys):

    from market_sim.agents import MarketModel
    from market_sim.cli.simulate import _warn_if_slow

    def warning(n, rounds, regret=True, **kw):
        model = MarketModel(n, rounds=rounds, measure_regret=regret, seed=0, **kw)
        _warn_if_slow(model, rounds)
        return capsys.readouterr().err

    dd = dict(mechanism="data-dependent", data="synthetic")
    slow = warning(1000, 3, **dd)  # simulate --mechanism data-dependent --data: minutes
    assert slow.count("\n") == 1 and "market-sim: warning: this simulation will take" in slow
    assert "--no-regret" in slow and "min" in slow
    assert warning(2, 1, regret=False, **dd) == ""
    import market_sim.mechanisms.payments as payments

    assert warning(300, 3, mechanism="offline:k=5") == ""  # compiled: seconds
    real, payments.capped_oracle_compiled = payments.capped_oracle_compiled, lambda: False
    try:  # without numba every point of a capped curve re-solves the market
        capped = warning(300, 3, mechanism="offline:k=5")
    finally:
        payments.capped_oracle_compiled = real
    assert "without the cap k" in capped and "--no-regret" in capped
    assert warning(300, 3, mechanism="offline") == ""
    assert warning(20, 3, mechanism="online") == ""


def test_simulate_prints_the_warning_and_still_runs(tmp_path, capsys, monkeypatch):
    import market_sim.estimates as estimates

    monkeypatch.setattr(estimates, "SLOW_SECONDS", 0.0)  # every capped run counts as long
    argv = ["simulate", "--dist", "uniform:0:1", "--mechanism", "offline:k=2", "--sellers", "6"]
    code, stdout, err = run(
        argv + ["--rounds", "1", "--quiet", "--out", str(tmp_path / "s")], capsys
    )
    assert code == 0 and err.count("market-sim: warning:") == 1 and "rounds:" not in err
    assert "written to" in stdout


# ---- simulate's manifest ---------------------------------------------------------------
def test_simulate_writes_a_manifest_and_refuses_a_run_folder(tmp_path, capsys):
    from market_sim.runner import _code_version

    out = tmp_path / "sim"
    argv = ["simulate", "--dist", "uniform:0:1", "--sellers", "5", "--rounds", "2", "--seed", "7"]
    assert main(argv + ["--quiet", "--out", str(out)]) == 0
    doc = json.loads((out / "manifest.json").read_text())
    assert doc["kind"] == "simulate" and doc["seed"] == 7
    assert doc["parameters"]["sellers"] == 5 and doc["parameters"]["rounds"] == 2
    assert doc["command"].startswith("market-sim simulate --dist uniform:0:1")
    assert doc["version"] == _code_version() and doc["time"][:2] == "20"
    assert set(doc["files"]) <= {p.name for p in out.iterdir()}
    capsys.readouterr()
    # a folder made by `run` is refused, and nothing in it changes
    swept = tmp_path / "swept"
    (swept / "results").mkdir(parents=True)
    (swept / "results" / "done-0123.parquet").write_bytes(b"PAR1")
    _one_line_error(capsys, main(argv + ["--out", str(swept)]), "market-sim run")
    assert sorted(p.name for p in swept.rglob("*")) == ["done-0123.parquet", "results"]
    # and `run` refuses the simulate folder
    before = sorted(p.name for p in out.iterdir())
    _one_line_error(
        capsys, main(["run", "ir", "--quick", "--out", str(out)]), "market-sim simulate"
    )
    assert sorted(p.name for p in out.iterdir()) == before


@pytest.mark.parametrize(
    "release, needle",
    [
        ("laplace:x", "expected NOISE:EPS[:DELTA] with numbers"),
        ("laplace", "expected NOISE:EPS[:DELTA]"),
        ("gaussian:1", "needs delta"),
        ("cauchy:1", "unknown 'cauchy'"),
    ],
)
def test_simulate_rejects_a_bad_release_in_one_line(release, needle, tmp_path, capsys):
    argv = ["simulate", "--dist", "uniform:0:1", "--release", release, "--payment-bound", "5"]
    code = exit_code(argv + ["--quiet", "--out", str(tmp_path / "s")])
    _one_line_error(capsys, code, needle)
    assert not (tmp_path / "s").exists()


# ---- a setting that has no effect without another is an error or a warning -----------------
@pytest.mark.parametrize(
    "extra, needles",
    [
        (["--accountant", "pld"], ("--accountant has no effect without --budget",)),
        (["--accountant", "basic"], ("--accountant has no effect without --budget",)),
        (["--payment-bound", "5"], ("--payment-bound has no effect without --release",)),
        (["--strategic-fraction", "0.5"], ("--strategic-fraction", "without --strategy")),
        (
            ["--strategy", "shade@0.5", "--strategic-fraction", "0.5"],
            ("--strategic-fraction has no effect with --strategy SPEC@FRACTION",),
        ),
    ],
)
def test_simulate_refuses_a_setting_without_the_one_it_needs(extra, needles, tmp_path, capsys):
    argv = ["simulate", "--dist", "uniform:0:1", "--sellers", "4", "--rounds", "1", "--quiet"]
    code = exit_code([*argv, *extra, "--out", str(tmp_path / "s")])
    _one_line_error(capsys, code, *needles)
    assert not (tmp_path / "s").exists()


def test_simulate_settings_that_take_effect_still_run(tmp_path, capsys):
    """The same settings with what they need run; --privacy with a mechanism that draws
    nothing privately is one warning line naming both, and the run goes on."""
    base = ["simulate", "--dist", "uniform:0:1", "--sellers", "4", "--rounds", "1", "--quiet"]
    argv = [*base, "--budget", "2", "--accountant", "rdp", "--strategic-fraction", "0.5"]
    assert main([*argv, "--strategy", "shade", "--out", str(tmp_path / "a")]) == 0
    assert "ledger (rdp, budget 2" in capsys.readouterr().out
    assert main([*base, "--privacy", "2", "--out", str(tmp_path / "b")]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [
        "market-sim: warning: --privacy has no effect with --mechanism offline "
        "(it draws nothing privately)"
    ]
    argv = [*base, "--mechanism", "private-posted-price", "--privacy", "2"]
    assert main([*argv, "--out", str(tmp_path / "c")]) == 0
    assert "warning" not in capsys.readouterr().err


def test_egta_refuses_new_costs_with_one_round(tmp_path, capsys):
    argv = ["egta", "--mechanism", "posted-price", "--dist", "uniform:1:5", "--sellers", "4"]
    argv += ["--strategy", "truthful", "--strategy", "shade", "--new-costs", "--quiet"]
    code = exit_code([*argv, "--out", str(tmp_path / "e")])
    _one_line_error(capsys, code, "--new-costs has no effect without --rounds")


def test_simulate_new_costs_redraws_each_round_and_the_default_keeps_them(tmp_path):
    """--new-costs: the Bayesian game (each round's costs a fresh draw of the law); without
    it the same costs every round.  Same seed, same first round either way."""
    import pandas as pd

    base = ["simulate", "--dist", "uniform:0:1", "--sellers", "6", "--rounds", "3", "--quiet"]
    assert main([*base, "--no-regret", "--out", str(tmp_path / "fixed")]) == 0
    assert main([*base, "--no-regret", "--new-costs", "--out", str(tmp_path / "new")]) == 0
    fixed = pd.read_csv(tmp_path / "fixed" / "agents.csv").pivot(
        index="seller_id", columns="round", values="cost"
    )
    new = pd.read_csv(tmp_path / "new" / "agents.csv").pivot(
        index="seller_id", columns="round", values="cost"
    )
    assert (fixed.nunique(axis=1) == 1).all()
    assert (new.nunique(axis=1) == 3).all()  # continuous law: three distinct draws
    assert new[new.columns[0]].tolist() == fixed[fixed.columns[0]].tolist()
    assert ((new >= 0) & (new <= 1)).all().all()
