"""Hostile inputs: every entry point answers correctly or with a one-line error."""

import functools
import io
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from market_sim.cli import main
from market_sim.cli.online_stream import answer_stream_row, stream_rows
from market_sim.distributions import parse_distribution
from market_sim.errors import MarketSimError
from market_sim.mechanisms.online import OnlineMechanism
from market_sim.runner import plan

HEADERS = [
    b"",
    b"seller_id,cost\n",
    b"\xef\xbb\xbfseller_id,cost\n",
    b"id,price\n",
    b"cost,seller_id,extra\n",
]
CELLS = st.sampled_from(
    [
        b"0.1",
        b"0.5",
        b'"0.25"',
        b"1e-300",
        b"1e308",
        b"-0.1",
        b"nan",
        b"inf",
        b"",
        b"abc",
        b"0x10",
        b"\xff",
        b"1,5",
        b"0.3 ",
        b"\x00",
    ]
)
LINES = st.lists(
    st.tuples(st.text(max_size=4).map(str.encode) | st.binary(max_size=4), CELLS), max_size=12
)
ROWS = st.builds(
    lambda h, rows, junk: h + b"".join(i + b"," + c + b"\n" for i, c in rows) + junk,
    st.sampled_from(HEADERS),
    LINES,
    st.binary(max_size=20),
)


@functools.cache
def _mechanism():
    return OnlineMechanism(parse_distribution("uniform:0:1"), 100, mu=1.0, sigma=1.0, gamma=1.0)


@settings(max_examples=300, deadline=None)
@given(ROWS)
def test_solve_on_malformed_csv_answers_or_refuses_in_one_line(tmp_path_factory, content):
    tmp_path = tmp_path_factory.mktemp("fuzz")
    capsys_out = io.StringIO()
    old = sys.stderr
    sys.stderr = capsys_out
    try:
        src, out = tmp_path / "in.csv", tmp_path / "out.csv"
        src.write_bytes(content)
        code = main(["solve", "--costs", str(src), "--dist", "uniform:0:1", "--out", str(out)])
    finally:
        sys.stderr = old
    err = capsys_out.getvalue()
    if code == 0:
        assert out.exists() and out.read_text().startswith("seller_id,cost,")
    else:
        assert code == 2 and not out.exists()
        assert (
            err.count("\n") == 1 and err.startswith("market-sim: error:") and "Traceback" not in err
        )


@settings(max_examples=300, deadline=None)
@given(st.lists(st.binary(max_size=30) | ROWS, max_size=8))
def test_online_stream_answers_every_line(chunks):
    mech = _mechanism()
    data = b"\n".join(chunks)
    seen = set()
    n_lines = 0
    for lineno, row in stream_rows(io.BytesIO(data)):
        _, record = answer_stream_row(mech, row, lineno, seen)
        n_lines += 1
        if record is None:
            continue
        assert len(record) == 7
        if record[6]:  # an error record: nothing else filled in
            assert record[6].startswith(f"line {lineno}:") and record[1:6] == [""] * 5
        else:
            eps, pay, cost = float(record[3]), float(record[4]), float(record[1])
            assert eps >= 0 and pay >= cost * eps - 1e-12
    assert n_lines <= data.count(b"\n") + 1


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["m", "dist", "xi", "nope", ""]), st.text(max_size=12))
def test_run_set_values_are_typed_or_refused(key, text):
    from market_sim.runner import parse_overrides

    try:
        tasks = plan("online_vs_offline", quick=True, overrides=parse_overrides([f"{key}={text}"]))
    except MarketSimError as exc:
        assert "\n" not in str(exc)
        return
    values = {t.params[key] for t in tasks}
    assert len(values) == 1
    v = values.pop()
    assert isinstance(v, str) if key == "dist" else isinstance(v, (int, float))
    if key == "m":
        assert isinstance(v, int)


def test_run_set_type_errors_are_clear():
    with pytest.raises(MarketSimError, match="m must be a number"):
        plan("online_vs_offline", quick=True, overrides={"m": "many"})
    with pytest.raises(MarketSimError, match="m must be an integer"):
        plan("online_vs_offline", quick=True, overrides={"m": 1.5})
    assert {
        t.params["dist"]
        for t in plan("online_vs_offline", quick=True, overrides={"dist": "uniform:0:2"})
    } == {"uniform:0:2"}
