"""The README's commands work in a fresh shell (issue #43: `market-sim` was "command
not found" after `make demo`).

Every ``market-sim ...`` command the README shows (inline code and the ``$`` session)
runs, in README order, in a new ``bash --noprofile --norc`` with an empty environment
but ``PATH=/usr/bin:/bin``, after ``source <venv>/bin/activate`` as the README says,
through the installed console script (the same entry point a user gets).  Sizes are
cut to a few sellers and markets (``SMALL``); a command the README only names, or one
that serves until Ctrl-C, is listed in ``NOT_RUN`` with the reason, so a new command in
the README must be classified here."""

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
VENV = Path(sys.executable).parent.parent  # the venv running the tests (.venv under make)

NOT_RUN = {
    "market-sim viz": "serves the page until Ctrl-C",
    "market-sim bne": "named in prose; docs/equilibrium.md has the full commands",
    "market-sim egta": "named in prose; docs/egta.md has the full commands",
    "market-sim compare --at equilibrium": "an option named in prose (docs/compare.md)",
    "market-sim audit": "named in the table of documentation pages",
}
SMALL = {"--markets": 2, "--sellers": 5}  # at most this many: seconds, not minutes
EXIT = {"audit": 3}  # the README says pay-as-bid is not IC: exit status 3


def readme_commands() -> list[str]:
    """The README's ``market-sim`` commands, whitespace normalised, in order, once each."""
    found = re.finditer(r"`(market-sim[^`]*)`|^\$ (market-sim .*)$", README, flags=re.M)
    out = []
    for m in found:
        cmd = " ".join((m.group(1) or m.group(2)).split())
        if cmd not in out:
            out.append(cmd)
    return out


def small(cmd: str) -> str:
    words = cmd.split()
    for i, w in enumerate(words[:-1]):
        if w in SMALL and int(words[i + 1]) > SMALL[w]:
            words[i + 1] = str(SMALL[w])
    return " ".join(words)


def test_small_cuts_sizes_only():
    assert small("market-sim audit --sellers 200 --markets 20 --seed 0") == (
        "market-sim audit --sellers 5 --markets 2 --seed 0"
    )
    assert small("market-sim x --markets 1") == "market-sim x --markets 1"


def test_the_readme_commands_run_in_a_fresh_shell(tmp_path):
    commands = readme_commands()
    assert "market-sim solve --costs examples/costs.csv --dist uniform:0:1 --gamma 0.2 " \
        "--out sellers.csv" in commands  # fmt: skip
    assert set(NOT_RUN) <= set(commands), "NOT_RUN names a command the README dropped"
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "MPLBACKEND": "Agg"}
    env["PYTHONPATH"] = str(ROOT)  # this checkout's code, wherever the venv installed it
    ran = []
    for cmd in commands:
        if cmd in NOT_RUN:
            continue
        line = f"source {shlex.quote(str(VENV / 'bin' / 'activate'))} && {small(cmd)} --quiet"
        if not any(q in cmd for q in ("audit", "compare", "run ")):
            line = line.removesuffix(" --quiet")
        proc = subprocess.run(
            ["bash", "--noprofile", "--norc", "-c", line],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        want = EXIT.get(cmd.split()[1], 0)
        assert proc.returncode == want, f"{small(cmd)}: exit {proc.returncode}\n{proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
        ran.append(cmd.split()[1])
    assert {"solve", "--help", "scenarios", "run", "report", "audit", "compare", "demo"} <= set(ran)
    assert (tmp_path / "sellers.csv").is_file() and (tmp_path / "demo_output").is_dir()
    assert (tmp_path / "results" / "asymptotic" / "report" / "report.md").is_file()
    assert not os.access(tmp_path / "market-sim", os.F_OK)


def test_the_readme_names_every_command():
    from market_sim.cli import COMMANDS

    listed = README.split("`market-sim --help` lists the commands:", 1)[1].split("\n\n", 1)[0]
    for name in COMMANDS:
        assert f"`{name.replace('_', '-')}`" in listed, name
