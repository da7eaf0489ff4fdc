"""A Markdown + HTML report of a results folder (reads results only, re-runs nothing).

The section of a study comes from, in order: the study module's own
``section(df, folder) -> Section`` (found again from the manifest's ``source``,
wherever the module lives), ``market_sim.analysis.<study>.section``, or the
generic section: the mean of every numeric metric per key, where the keys are
the grid parameters, the text/boolean columns a study returns (e.g.
``mechanism``), the index-like columns (``INDEX_COLUMNS``: ``round``, ``k``, ...)
and any columns the study lists in ``KEYS``.
"""

from __future__ import annotations

import html
import importlib
from dataclasses import dataclass, field
from pathlib import Path

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


@dataclass(frozen=True)
class Section:
    title: str
    text: str
    tables: list = field(default_factory=list)  # (caption, DataFrame)
    figures: list = field(default_factory=list)  # (caption, file name in the report folder)


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


def _markdown(sections, failures: pd.DataFrame, manifest: dict) -> str:
    out = [
        f"# market_sim report: {manifest.get('scenario', '?')}",
        "",
        f"root seed {manifest.get('seed')}, code {manifest.get('version')}, "
        f"{'quick' if manifest.get('quick') else 'full'} grid, "
        f"{manifest.get('replications')} replications",
        "",
    ]
    for s in sections:
        out += [f"## {s.title}", "", s.text, ""]
        for caption, table in s.tables:
            out += [f"**{caption}**", "", table.to_markdown(index=False, floatfmt=".4g"), ""]
        for caption, name in s.figures:
            out += [f"![{caption}]({name})", "", f"*{caption}*", ""]
    if len(failures):
        out += [
            "## Failed tasks",
            "",
            f"{len(failures)} task(s) failed; first traceback:",
            "",
            "```",
            failures.error.iloc[0].rstrip(),
            "```",
            "",
        ]
    return "\n".join(out)


def _html(sections, failures: pd.DataFrame, manifest: dict) -> str:
    esc = html.escape
    out = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>market_sim report: {esc(str(manifest.get('scenario')))}</title>",
        "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}</style>",
        "</head><body>",
        f"<h1>market_sim report: {esc(str(manifest.get('scenario')))}</h1>",
        f"<p>root seed {manifest.get('seed')}, code {esc(str(manifest.get('version')))}</p>",
    ]
    for s in sections:
        out += [f"<h2>{esc(s.title)}</h2>", f"<p>{esc(s.text)}</p>"]
        for caption, table in s.tables:
            out += [f"<h4>{esc(caption)}</h4>", table.to_html(index=False, float_format="%.4g")]
        for caption, name in s.figures:
            out += [
                f"<figure><img src='{esc(name)}' width='100%'><figcaption>{esc(caption)}"
                "</figcaption></figure>"
            ]
    if len(failures):
        out += ["<h2>Failed tasks</h2>", f"<pre>{esc(failures.error.iloc[0])}</pre>"]
    return "\n".join(out + ["</body></html>"])


def write_report(results: str | Path, out: str | Path | None = None) -> Path:
    """Write report.md, report.html and figures; returns the path of report.md."""
    df, manifest = read_results(results)
    folder = Path(out) if out else Path(results) / "report"
    folder.mkdir(parents=True, exist_ok=True)
    failures = df[df.status == "failed"]
    ok = df[df.status == "ok"].reset_index(drop=True)
    sections = [study_section(ok, manifest, folder)] if len(ok) else []
    md = folder / "report.md"
    atomic_write(md, lambda fh: fh.write(_markdown(sections, failures, manifest).encode()))
    atomic_write(
        folder / "report.html", lambda fh: fh.write(_html(sections, failures, manifest).encode())
    )
    return md
