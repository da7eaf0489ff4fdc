"""A Markdown + HTML report of a results folder (reads results only, re-runs nothing).

The section of a study comes from, in order: the study module's own
``section(df, folder) -> Section`` (found again from the manifest's ``source``,
wherever the module lives), ``market_sim.analysis.<study>.section``, or the
generic section: the mean of every numeric metric per key, where the keys are
the grid parameters, the text/boolean columns a study returns (e.g.
``mechanism``), the index-like columns (``INDEX_COLUMNS``: ``round``, ``k``, ...)
and any columns the study lists in ``KEYS``.

``report.md`` links the figure files; ``report.html`` embeds them (base64 data
URIs), so it can be mailed or moved alone. Table cells never read NaN or inf: an
undefined value is blank, an infinite one "—", and a note under the table says
which columns hold them. ``write_index`` puts several results folders on one page
with a table of contents.
"""

from __future__ import annotations

import base64
import html
import importlib
import mimetypes
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from market_sim.errors import MarketSimError
from market_sim.files import atomic_write
from market_sim.runner import read_results

META = {"scenario", "task", "replication", "seed", "status", "error", "elapsed"}
INDEX_COLUMNS = {
    "round",
    "step",
    "period",
    "t",
    "k",
    "iteration",
    "seller",
    "seller_id",
    "agent",
    "agent_id",
}
INFINITE = "—"  # the cell of an infinite value


@dataclass(frozen=True)
class Section:
    title: str
    text: str
    tables: list = field(default_factory=list)  # (caption, DataFrame)
    figures: list = field(default_factory=list)  # (caption, file name in the report folder)


@dataclass(frozen=True)
class StudyReport:
    """What one results folder contributes to a page."""

    name: str
    manifest: dict
    sections: list
    failures: pd.DataFrame
    folder: Path  # where its figures are
    prefix: str = ""  # the figures' folder relative to the page ("" beside it)


def key_columns(df: pd.DataFrame, manifest: dict, study=None) -> list[str]:
    """The columns a generic table groups by (see the module docstring)."""
    params = [c for c in manifest.get("grid", [{}])[0] if c in df.columns]
    declared = [c for c in (getattr(study, "KEYS", None) or ()) if c in df.columns]
    extra = [
        c
        for c in df.columns
        if c not in META
        and c not in params
        and c not in declared
        and (
            c in INDEX_COLUMNS
            or not pd.api.types.is_numeric_dtype(df[c])
            or pd.api.types.is_bool_dtype(df[c])
        )
    ]
    return params + declared + extra


def generic_section(df: pd.DataFrame, manifest: dict, folder: Path, study=None) -> Section:
    keys = key_columns(df, manifest, study)
    metrics = [
        c
        for c in df.columns
        if c not in META and c not in keys and pd.api.types.is_numeric_dtype(df[c])
    ]
    table = (
        df.groupby(keys, dropna=False, sort=True)[metrics].mean().reset_index()
        if keys
        else df[metrics].mean().to_frame("mean")
    )
    text = "Mean of each metric over replications"
    text += f", per {', '.join(keys)}." if keys else "."
    return Section(
        manifest.get("scenario", "results"), text, tables=[("means over replications", table)]
    )


def _study_module(manifest: dict):
    """The study of a results folder, or None when it cannot be loaded any more."""
    from market_sim.errors import MarketSimError
    from market_sim.runner import _load_source

    source = manifest.get("source") or manifest.get("scenario")
    if not source:
        return None
    try:
        return _load_source(source)
    except MarketSimError:
        return None


def study_section(ok: pd.DataFrame, manifest: dict, folder: Path) -> Section:
    """The section of a study (see the module docstring)."""
    study = _study_module(manifest)
    if study is not None and callable(getattr(study, "section", None)):
        sec = study.section(ok, folder)
        if isinstance(sec, str):  # plain Markdown: one untitled section
            return Section(manifest.get("scenario", "results"), sec)
        if not isinstance(sec, Section):
            raise MarketSimError(
                f"study {manifest.get('scenario')!r}: section() must return a "
                f"Section or a Markdown string, not {type(sec).__name__}"
            )
        return sec
    name = manifest.get("scenario", "")
    if name.isidentifier():
        try:
            module = importlib.import_module(f"market_sim.analysis.{name}")
        except ModuleNotFoundError:
            module = None
        if module is not None and callable(getattr(module, "section", None)):
            return module.section(ok, folder)
    return generic_section(ok, manifest, folder, study)


# --- tables ---------------------------------------------------------------------


def _is_interval(column: str) -> bool:
    c = str(column)
    return c in ("ci", "se", "sd", "std") or c.endswith(("_ci", "_se", "_sd"))


def _cell(v) -> str:
    if v is None or v is pd.NA or v is pd.NaT:
        return ""
    if isinstance(v, (bool, np.bool_)):
        return str(bool(v))
    if isinstance(v, (int, np.integer)):
        return str(int(v))
    if isinstance(v, (float, np.floating)):
        if np.isnan(v):
            return ""
        if np.isinf(v):
            return INFINITE
        return f"{float(v):.4g}"
    return str(v)


def format_table(table: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """(the table as text cells, notes on its blank and infinite cells)."""
    blank_ci: list[str] = []
    blank: list[str] = []
    infinite: list[str] = []
    for col in table.columns:
        values = pd.to_numeric(table[col], errors="coerce").to_numpy(dtype=float)
        numeric = pd.api.types.is_numeric_dtype(table[col])
        missing = table[col].isna().to_numpy()
        if missing.any():
            (blank_ci if _is_interval(col) else blank).append(str(col))
        if (numeric and np.isinf(values).any()) or (not numeric and _has_inf(table[col])):
            infinite.append(str(col))
    cells = table.apply(lambda s: s.map(_cell)) if len(table.columns) else table
    notes = []
    if blank_ci:
        notes.append(
            f"Blank in {_names(blank_ci)}: a confidence interval is undefined from a "
            "single replication (or round)."
        )
    if blank:
        notes.append(f"Blank in {_names(blank)}: no value (the text says why).")
    if infinite:
        notes.append(f"{INFINITE} in {_names(infinite)}: an infinite value (see the text).")
    return cells, notes


def _has_inf(s: pd.Series) -> bool:
    return any(isinstance(v, (float, np.floating)) and np.isinf(v) for v in s)


def _names(cols) -> str:
    return ", ".join(f"`{c}`" for c in cols)


# --- figures ----------------------------------------------------------------------


def _data_uri(path: Path) -> str | None:
    """The file as a base64 data URI when it is an image, else None."""
    mime, _ = mimetypes.guess_type(path.name)
    if not (mime and mime.startswith("image/") and path.is_file()):
        return None
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


# --- pages ----------------------------------------------------------------------


def provenance(manifest: dict) -> str:
    """One line: seed, code version, quick or full grid, replications."""
    reps = manifest.get("replications")
    grid = (
        "quick grid (`market-sim run --quick`: a smoke test, not the study's results)"
        if manifest.get("quick")
        else "full grid"
    )
    return (
        f"root seed {manifest.get('seed')}, code {manifest.get('version')}, {grid}, "
        f"{reps} replication{'' if reps == 1 else 's'}"
    )


def _md_study(rep: StudyReport, level: int) -> list[str]:
    h = "#" * level
    out = [provenance(rep.manifest), ""]
    for s in rep.sections:
        out += [f"{h} {s.title}", "", s.text, ""]
        for caption, table in s.tables:
            cells, notes = format_table(table)
            align = [
                "right" if pd.api.types.is_numeric_dtype(table[c]) else "left"
                for c in table.columns
            ]
            out += [
                f"**{caption}**",
                "",
                cells.to_markdown(index=False, disable_numparse=True, colalign=align),
                "",
            ]
            out += [f"*{n}*" for n in notes] + ([""] if notes else [])
        for caption, name in s.figures:
            out += [f"![{caption}]({rep.prefix}{name})", "", f"*{caption}*", ""]
    if len(rep.failures):
        out += [
            f"{h} Failed tasks",
            "",
            f"{len(rep.failures)} task(s) failed; first traceback:",
            "",
            "```",
            rep.failures.error.iloc[0].rstrip(),
            "```",
            "",
        ]
    return out


def _inline_code(text: str) -> str:
    """Escaped text with `code` spans as <code>."""
    parts = html.escape(text).split("`")
    return "".join(f"<code>{p}</code>" if i % 2 else p for i, p in enumerate(parts))


def _html_study(rep: StudyReport, level: int) -> list[str]:
    esc = html.escape
    out = [f"<p class='provenance'>{_inline_code(provenance(rep.manifest))}</p>"]
    for s in rep.sections:
        out += [f"<h{level}>{esc(s.title)}</h{level}>", f"<p>{_inline_code(s.text)}</p>"]
        for caption, table in s.tables:
            cells, notes = format_table(table)
            out += [f"<h{level + 2}>{esc(caption)}</h{level + 2}>", cells.to_html(index=False)]
            out += [f"<p class='note'>{_inline_code(n)}</p>" for n in notes]
        for caption, name in s.figures:
            src = _data_uri(rep.folder / name) or rep.prefix + name
            out += [
                f"<figure><img src='{esc(src)}' alt='{esc(caption)}' style='max-width:100%'>"
                f"<figcaption>{esc(caption)}</figcaption></figure>"
            ]
    if len(rep.failures):
        out += [
            f"<h{level}>Failed tasks</h{level}>",
            f"<p>{len(rep.failures)} task(s) failed; first traceback:</p>",
            f"<pre>{esc(rep.failures.error.iloc[0])}</pre>",
        ]
    return out


_STYLE = (
    "<style>body{font-family:sans-serif;max-width:1100px;margin:auto;padding:0 1em}"
    "table{border-collapse:collapse;font-size:90%}td,th{border:1px solid #ccc;"
    "padding:2px 6px}td{text-align:right}.note,.provenance{color:#555}"
    "figcaption{font-style:italic}</style>"
)


def _html_page(title: str, body: list[str]) -> str:
    esc = html.escape
    return "\n".join(
        [
            "<!doctype html><html><head><meta charset='utf-8'>",
            f"<title>{esc(title)}</title>",
            _STYLE,
            "</head><body>",
            f"<h1>{esc(title)}</h1>",
            *body,
            "</body></html>",
        ]
    )


def _write(path: Path, text: str) -> None:
    atomic_write(path, lambda fh: fh.write(text.encode()))


def study_report(results: str | Path, folder: Path, prefix: str = "", loaded=None) -> StudyReport:
    """Read a results folder (or take ``loaded`` = its (rows, manifest)) and draw its
    section's figures into ``folder``."""
    df, manifest = loaded if loaded is not None else read_results(results)
    folder.mkdir(parents=True, exist_ok=True)
    failures = df[df.status == "failed"]
    ok = df[df.status == "ok"].reset_index(drop=True)
    sections = [study_section(ok, manifest, folder)] if len(ok) else []
    return StudyReport(_name(results, manifest), manifest, sections, failures, folder, prefix)


def _name(results, manifest: dict) -> str:
    return str(manifest.get("scenario") or Path(results).name)


def _write_single(rep: StudyReport) -> Path:
    title = f"market_sim report: {rep.name}"
    md = rep.folder / "report.md"
    _write(md, "\n".join([f"# {title}", "", *_md_study(rep, 2), ""]))
    _write(rep.folder / "report.html", _html_page(title, _html_study(rep, 2)))
    return md


def write_report(results: str | Path, out: str | Path | None = None) -> Path:
    """Write report.md, report.html and figures; returns the path of report.md."""
    folder = Path(out) if out else Path(results) / "report"
    return _write_single(study_report(results, folder))


def _slug(name: str, taken: set) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip("-") or "study"
    slug, k = base, 2
    while slug in taken:
        slug, k = f"{base}-{k}", k + 1
    taken.add(slug)
    return slug


def write_index(results: list, out: str | Path) -> Path:
    """One page across studies: a table of contents, then each study's section
    (its figures and full report in ``out/<study>/``). Returns ``out/report.md``."""
    if not results:
        raise MarketSimError("no results folders to report")
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    taken: set = set()
    reports = []
    for r in results:
        loaded = read_results(r)
        slug = _slug(_name(r, loaded[1]), taken)
        rep = study_report(r, out / slug, prefix=f"{slug}/", loaded=loaded)
        _write_single(StudyReport(rep.name, rep.manifest, rep.sections, rep.failures, rep.folder))
        reports.append((slug, rep))
    title = f"market_sim report: {len(reports)} studies"
    md = [f"# {title}", "", "Contents:", ""]
    md += [
        f"{i}. [{rep.name}](#{slug}) ([its own report]({slug}/report.md))"
        for i, (slug, rep) in enumerate(reports, 1)
    ]
    body = ["<nav><p>Contents:</p><ol>"]
    body += [
        f"<li><a href='#{slug}'>{html.escape(rep.name)}</a> "
        f"(<a href='{slug}/report.html'>its own report</a>)</li>"
        for slug, rep in reports
    ]
    body.append("</ol></nav>")
    for slug, rep in reports:
        md += ["", f'<a id="{slug}"></a>', "", f"## {rep.name}", ""] + _md_study(rep, 3)
        body += [f"<h2 id='{slug}'>{html.escape(rep.name)}</h2>"] + _html_study(rep, 3)
    path = out / "report.md"
    _write(path, "\n".join([*md, ""]))
    _write(out / "report.html", _html_page(title, body))
    return path
