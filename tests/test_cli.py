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
        exe + ["demo", "--out-dir", str(tmp_path / "fig"), "--m", "40"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "fig" / "offline_market.png").stat().st_size > 10_000
    assert "IR: min truthful utility" in r.stdout
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
