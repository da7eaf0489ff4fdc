"""docs/four-questions.md: a researcher's four questions, answered from the CLI alone
(issue #51).  Every ``$ market-sim ...`` line of the page runs here, in page order, in a
temporary folder, at a reduced size (``REDUCE``: a few sellers, markets, rounds and
opponent draws), through the installed console script; each must exit with the status
the page says (0, or 3 where the audit finds a mechanism not IC) and write what the
page's next command reads."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent
PAGE = ROOT / "docs" / "four-questions.md"
MARKET_SIM = str(Path(sys.executable).with_name("market-sim"))

# option or --set key -> the value it takes here (only ever smaller than the page's)
REDUCE = {
    "--sellers": "6",
    "--markets": "2",
    "--bne-samples": "32",
    "--workers": "1",
    "m": "5",
    "rounds": "4",
    "sellers": "40",
    "n_noise": "1",
    "audit_sellers": "0",
    "bne_samples": "32",
    "bne_max_iter": "3",
}
# extra settings that keep a reduced run small, by command (and study)
RUN = [("--reps", "1"), ("--quiet",)]
EXTRA = {
    "compare": [("--bne-samples", "32")],
    "run correlation": [
        ("--set", "sellers=40"),
        ("--set", "n_noise=1"),
        ("--set", "audit_sellers=4"),
        ("--set", "audit_markets=1"),
        *RUN,
    ],
    "run dynamics": [
        ("--set", "rounds=4"),
        ("--set", "bne_samples=32"),
        ("--set", "bne_max_iter=3"),
        *RUN,
    ],
}
EXPECTED_EXIT = {"audit": 3}  # the page's own capped posted price is not IC


def page_commands() -> list[str]:
    """The page's ``$ market-sim ...`` lines (a trailing backslash continues a line)."""
    text = PAGE.read_text(encoding="utf-8").replace("\\\n", " ")
    return [" ".join(m.split()) for m in re.findall(r"^\$ (market-sim .*)$", text, flags=re.M)]


def _smaller(value: str, cut: str) -> str:
    return str(min(int(value), int(cut)))


def reduced(cmd: str) -> list[str]:
    """``cmd`` as argv with every size of REDUCE cut (never raised) and EXTRA added."""
    words = cmd.split()
    for i, w in enumerate(words[:-1]):
        if w in REDUCE:
            words[i + 1] = _smaller(words[i + 1], REDUCE[w])
        elif w == "--set" and "=" in words[i + 1]:
            key, value = words[i + 1].split("=", 1)
            if key in REDUCE:
                words[i + 1] = f"{key}={_smaller(value, REDUCE[key])}"
    key = " ".join(words[1:3]) if words[1] == "run" else words[1]
    for option in EXTRA.get(key, []):
        if option[0] == "--set" or option[0] not in words:
            words += option
    return [MARKET_SIM, *words[1:]]


def test_reduced_cuts_sizes_and_keeps_the_rest():
    argv = reduced("market-sim run dynamics --set m=30 --set dist=beta:2:5:0:2 --out q4")
    assert " ".join(argv[1:]) == (
        "run dynamics --set m=5 --set dist=beta:2:5:0:2 --out q4 --set rounds=4 "
        "--set bne_samples=32 --set bne_max_iter=3 --reps 1 --quiet"
    )
    assert reduced("market-sim audit --sellers 3 --markets 20")[1:] == (
        ["audit", "--sellers", "3", "--markets", "2"]  # never raised, only cut
    )


def test_the_four_questions_run_from_the_cli(tmp_path):
    cmds = page_commands()
    assert len(cmds) >= 6, cmds  # four questions: compare, run + report twice, audit
    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    for cmd in cmds:
        argv = reduced(cmd)
        done = subprocess.run(
            argv, cwd=tmp_path, capture_output=True, text=True, stdin=subprocess.DEVNULL
        )
        want = EXPECTED_EXIT.get(argv[1], 0)
        assert done.returncode == want, (cmd, done.stdout[-2000:], done.stderr[-2000:])
        assert "Traceback" not in done.stderr, (cmd, done.stderr[-2000:])
