"""A Markdown + HTML report of a results folder (reads results only, re-runs nothing).

Each scenario may have ``analysis/<scenario>.py`` with ``section(df, folder) ->
Section``; otherwise a generic section tabulates the mean of every numeric
metric per parameter point.
"""

from __future__ import annotations

import html
import importlib
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from market_sim.files import atomic_write
from market_sim.runner import read_results

META = {"scenario", "task", "replication", "seed", "status", "error", "elapsed"}


@dataclass(frozen=True)
class Section:
    title: str
    text: str
    tables: list = field(default_factory=list)  # (caption, DataFrame)
    figures: list = field(default_factory=list)  # (caption, file name in the report folder)


def generic_section(df: pd.DataFrame, manifest: dict, folder: Path) -> Section:
    params = [c for c in manifest.get("grid", [{}])[0] if c in df.columns]
    metrics = [c for c in df.columns if c not in META and c not in params
               and pd.api.types.is_numeric_dtype(df[c])]
    table = df.groupby(params, dropna=False)[metrics].mean().reset_index() if params else \
        df[metrics].mean().to_frame("mean")
    return Section(manifest.get("scenario", "results"), "Mean of each metric per parameter point.",
                   tables=[("means over replications", table)])


def _markdown(sections, failures: pd.DataFrame, manifest: dict) -> str:
    out = [f"# market_sim report: {manifest.get('scenario', '?')}", "",
           f"root seed {manifest.get('seed')}, code {manifest.get('version')}, "
           f"{'quick' if manifest.get('quick') else 'full'} grid, "
           f"{manifest.get('replications')} replications", ""]
    for s in sections:
        out += [f"## {s.title}", "", s.text, ""]
        for caption, table in s.tables:
            out += [f"**{caption}**", "", table.to_markdown(index=False, floatfmt=".4g"), ""]
        for caption, name in s.figures:
            out += [f"![{caption}]({name})", "", f"*{caption}*", ""]
    if len(failures):
        out += ["## Failed tasks", "", f"{len(failures)} task(s) failed; first traceback:", "",
                "```", failures.error.iloc[0].rstrip(), "```", ""]
    return "\n".join(out)


def _html(sections, failures: pd.DataFrame, manifest: dict) -> str:
    esc = html.escape
    out = ["<!doctype html><html><head><meta charset='utf-8'>",
           f"<title>market_sim report: {esc(str(manifest.get('scenario')))}</title>",
           "<style>body{font-family:sans-serif;max-width:1100px;margin:auto}"
           "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:2px 6px}</style>",
           "</head><body>", f"<h1>market_sim report: {esc(str(manifest.get('scenario')))}</h1>",
           f"<p>root seed {manifest.get('seed')}, code {esc(str(manifest.get('version')))}</p>"]
    for s in sections:
        out += [f"<h2>{esc(s.title)}</h2>", f"<p>{esc(s.text)}</p>"]
        for caption, table in s.tables:
            out += [f"<h4>{esc(caption)}</h4>", table.to_html(index=False, float_format="%.4g")]
        for caption, name in s.figures:
            out += [f"<figure><img src='{esc(name)}' width='100%'><figcaption>{esc(caption)}"
                    "</figcaption></figure>"]
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
    name = manifest.get("scenario", "")
    try:
        module = importlib.import_module(f"market_sim.analysis.{name}")
    except ModuleNotFoundError:
        module = None
    if len(ok) == 0:
        sections = []
    elif module is not None and hasattr(module, "section"):
        sections = [module.section(ok, folder)]
    else:
        sections = [generic_section(ok, manifest, folder)]
    md = folder / "report.md"
    atomic_write(md, lambda fh: fh.write(_markdown(sections, failures, manifest).encode()))
    atomic_write(folder / "report.html",
                 lambda fh: fh.write(_html(sections, failures, manifest).encode()))
    return md
