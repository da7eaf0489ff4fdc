"""The Python blocks of docs/*.md run as pasted (issue #43: a snippet failed with
``NameError: np``).

The convention (docs/reliability.md, "Snippets in the docs"): a page's ```python blocks
run in order in one Python session started in a folder where ``examples/`` is the
repository's, as a reader pasting the page top to bottom would run them; a block whose
first line is ``# NAME.py`` is also saved as NAME.py there (the file the next blocks
import).  Each block imports the modules it uses itself (np, pd, plt), so it also pastes
alone (docs/reliability.md, "Snippets in the docs").  A block that must not run says
so on the line before its fence:
``<!-- not run by tests/test_doc_snippets.py: REASON -->`` (a package not installed, a
run too long for the suite, a fragment); nothing is skipped without that marker."""

import ast
import contextlib
import io
import os
import re
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
MARKER = re.compile(r"<!-- not run by tests/test_doc_snippets\.py: (.+?) -->")
FENCE = re.compile(r"^```python\n(.*?)^```", flags=re.M | re.S)
ALIASES = {"np": "numpy", "pd": "pandas", "plt": "matplotlib.pyplot"}


def blocks(text: str) -> list[tuple[int, str, str | None]]:
    """(line, code, the marker's reason or None) of every python block of ``text``."""
    out = []
    for m in FENCE.finditer(text):
        before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = MARKER.fullmatch(before.strip())
        out.append((text.count("\n", 0, m.start()) + 1, m.group(1), reason and reason.group(1)))
    return out


PAGES = sorted(p.name for p in (ROOT / "docs").glob("*.md") if blocks(p.read_text("utf-8")))


def test_blocks_finds_code_and_markers():
    text = (
        "a\n```python\nx = 1\n```\n\n<!-- not run by tests/test_doc_snippets.py: needs ray -->"
        "\n```python\nimport ray\n```\n```text\nnot python\n```\n"
    )
    assert blocks(text) == [(2, "x = 1\n", None), (7, "import ray\n", "needs ray")]
    shown = "```text\n<!-- not run by tests/test_doc_snippets.py: an example -->\n```\n"
    assert MARKER.findall(_prose(text + shown)) == ["needs ray"]


def _prose(text: str) -> str:
    """``text`` without its fenced blocks (a marker shown in a text block is no marker)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            out.append(line)
    return "\n".join(out)


def test_every_marker_sits_on_a_python_block_and_says_why():
    for page in (ROOT / "docs").glob("*.md"):
        text = page.read_text("utf-8")
        marked = [b for b in blocks(text) if b[2] is not None]
        assert len(MARKER.findall(_prose(text))) == len(marked), f"{page.name}: stray marker"
        assert all(len(reason) > 5 for _, _, reason in marked), page.name


@pytest.mark.parametrize("page", PAGES)
def test_each_block_imports_the_modules_it_uses(page):
    """Pasted alone, a block must not fail on ``np`` (or ``pd``, ``plt``) it did not import."""
    for line, code, _ in blocks((ROOT / "docs" / page).read_text("utf-8")):
        tree = ast.parse(code)
        used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        imported = {
            a.asname or a.name
            for n in ast.walk(tree)
            if isinstance(n, ast.Import | ast.ImportFrom)
            for a in n.names
        }
        missing = sorted((used & set(ALIASES)) - imported)
        assert not missing, f"docs/{page}:{line} uses {missing} without importing them"


@pytest.mark.parametrize("page", PAGES)
def test_the_blocks_of_the_page_run_in_order(page, tmp_path, monkeypatch):
    import matplotlib

    matplotlib.use("Agg")
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    monkeypatch.chdir(tmp_path)
    session: dict = {"__name__": "__main__"}
    start = time.perf_counter()
    for line, code, reason in blocks((ROOT / "docs" / page).read_text("utf-8")):
        if reason is not None:
            continue
        first = code.split("\n", 1)[0]
        if re.fullmatch(r"# [\w/]+\.py", first):  # a file the next blocks use
            (tmp_path / first[2:]).write_text(code)
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(code, f"docs/{page}:{line}", "exec"), session)
        except Exception as exc:  # name the block
            pytest.fail(f"docs/{page}:{line}: {type(exc).__name__}: {exc}")
    assert os.getcwd() == str(tmp_path)
    print(f"{page}: {time.perf_counter() - start:.1f} s")
