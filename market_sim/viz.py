"""An interactive page for the agent-based market: Mesa's SolaraViz (``market-sim viz``).

Needs the ``viz`` extra (``pip install 'market_sim[viz]'``); nothing else in the
package imports this module.  The panels are matplotlib images drawn on the
server, so the browser needs no plotting library; Solara's own front-end files
come from the ``solara-assets`` package, and :func:`serve` never fetches one from
a CDN: a file missing from the installed assets is named on stderr instead.

Runs on Mesa 3.3 (Python 3.11) and Mesa 3.5 (Python 3.12, 3.13) with the same code:
the page uses only what both offer (``SolaraViz(model, components=..., model_params=...)``,
components that are plain functions of the model, ``Slider`` and dict controls).
Mesa's own counter in the sidebar reads "Step: k" on 3.3 and "Time: k.0" on 3.5;
the summary panel's "round k of R" is the same on both.

    market-sim viz [--host 127.0.0.1] [--port 8765]
"""

from __future__ import annotations

import functools
import os
import sys

import numpy as np
import solara
from matplotlib.figure import Figure

# Solara checks each component's hooks when it is defined.  Mesa 3.3's ComponentsView
# fails the check (a hook after an early return, harmless there: a warning at import);
# Mesa 3.5's passes.  The check is off while Mesa's components are defined only, so
# this module's own components are checked as usual.
_check_hooks = solara.settings.main.check_hooks
solara.settings.main.check_hooks = "off"
try:
    from mesa.visualization import SolaraViz
    from mesa.visualization.user_param import Slider
finally:
    solara.settings.main.check_hooks = _check_hooks

from .agents.model import MarketModel  # noqa: E402

MECHANISMS = [
    "offline",
    "online",
    "pay-as-bid",
    "posted-price",
    "private-posted-price",
    "private-cutoff",
]  # data-dependent needs the sellers' data: not offered here
STRATEGIES = ["truthful", "shade", "random", "learning", "collusion", "best-response"]
COST_LAWS = ["uniform:0:1", "truncnorm:0.5:0.2:0:1", "beta:2:5:0:1", "truncexpon:0.3:0:1"]
DEFAULTS = dict(
    n_sellers=1000,
    dist="uniform:0:1",
    mechanism="offline",
    strategy="shade",
    strategic_fraction=0.5,
    rounds=200,
    mu=1.0,
    sigma=1.0,
    gamma=1.0,
    xi=1.0,
    measure_regret=False,
    regret_sample=50,
    seed=0,
)


class PageModel(MarketModel):
    """MarketModel for the page: no seller views, no per-seller history, regret off by default.

    The page shows the current round and the per-round series only, so rounds are
    not kept seller by seller (memory stays flat however long it plays).  Regret,
    when on, is measured on ``regret_sample`` sellers a round."""

    def __init__(
        self,
        n_sellers: int = 1000,
        *,
        dist: str = "uniform:0:1",
        mechanism: str = "offline",
        strategy: str = "shade",
        strategic_fraction: float = 0.5,
        rounds: int = 200,
        mu: float = 1.0,
        sigma: float = 1.0,
        gamma: float = 1.0,
        xi: float = 1.0,
        measure_regret: bool = False,
        regret_sample: int = 50,
        seed: int = 0,
    ):
        super().__init__(
            int(n_sellers),
            dist=dist,
            mechanism=mechanism,
            strategy=strategy,
            strategic_fraction=float(strategic_fraction),
            rounds=int(rounds),
            mu=mu,
            sigma=sigma,
            gamma=gamma,
            xi=float(xi),
            measure_regret=bool(measure_regret),
            regret_sample=int(regret_sample),
            agent_views=False,
            seed=int(seed),
        )
        self.page_seed = int(seed)

    def _record(self, active) -> None:  # the page keeps no per-seller rows
        pass


def model_params() -> dict:
    """The page's controls (Mesa's ``model_params``); they apply on Reset."""
    d = DEFAULTS
    return {
        "mechanism": {
            "type": "Select",
            "value": d["mechanism"],
            "values": MECHANISMS,
            "label": "mechanism",
        },
        "strategy": {
            "type": "Select",
            "value": d["strategy"],
            "values": STRATEGIES,
            "label": "strategy",
        },
        "strategic_fraction": Slider("strategic fraction", d["strategic_fraction"], 0.0, 1.0, 0.05),
        "dist": {"type": "Select", "value": d["dist"], "values": COST_LAWS, "label": "cost law"},
        "n_sellers": Slider("m (sellers)", d["n_sellers"], 10, 10_000, 10),
        "mu": Slider("μ (weight of ||a||)", d["mu"], 0.1, 5.0, 0.1),
        "sigma": Slider("σ (weight of 1/η)", d["sigma"], 0.1, 5.0, 0.1),
        "gamma": Slider("γ (weight of payments)", d["gamma"], 0.1, 5.0, 0.1),
        "xi": Slider("ξ (arrival probability)", d["xi"], 0.05, 1.0, 0.05),
        "seed": Slider("seed", d["seed"], 0, 999, 1),
        "rounds": Slider("rounds", d["rounds"], 10, 1000, 10),
        "measure_regret": {
            "type": "Checkbox",
            "value": d["measure_regret"],
            "label": "measure regret (on a sample)",
        },
        "regret_sample": Slider("regret sample (sellers)", d["regret_sample"], 10, 500, 10),
    }


# ---- panels -------------------------------------------------------------------------
def _sellers_text(model) -> str:
    """The cost law, or the population's spec when the sellers are not one law."""
    pop = getattr(model, "population", None)
    return pop.spec if pop is not None and not pop.is_plain else model.dist.spec


def _fmt(v) -> str:
    return "–" if v is None or not np.isfinite(v) else f"{v:.4g}"


def _figure(w=5.2, h=3.4, **adjust):
    fig = Figure(figsize=(w, h), dpi=80)  # fixed margins: constrained layout costs ~0.2 s
    fig.subplots_adjust(**{"left": 0.13, "right": 0.87, "bottom": 0.14, "top": 0.9, **adjust})
    return fig


def _show(fig):
    return solara.FigureMatplotlib(fig, format="png", dpi=80)


def render_png(fig) -> bytes:
    """The PNG the page sends for ``fig`` (for benchmarks)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=80)
    return buf.getvalue()


def Summary(model: MarketModel):
    """Round counter and the last round's numbers (text, for people and tests)."""
    df = model.datacollector.get_model_vars_dataframe()
    last = df.iloc[-1]
    n_active = int(np.count_nonzero(model.participating))
    rows = [
        ("round", f"{model.round} of {model.rounds}"),
        ("sellers", f"{model.n_sellers} ({n_active} taking part)"),
        ("mechanism", str(model.mechanism_name)),
        ("strategies", ", ".join(model.strategy_names)),
        (
            "parameters",
            f"{_sellers_text(model)}, μ={model.mu:g}, σ={model.sigma:g}, "
            f"γ={model.gamma:g}, ξ={model.xi:g}, seed={model.page_seed}",
        ),
        ("buyer loss", _fmt(last["buyer_loss"])),
        ("proxy loss", _fmt(last["proxy_loss"])),
        ("total payment", _fmt(last["total_payment"])),
        ("mean regret", _fmt(last["mean_regret"]) if model.measure_regret else "off"),
        ("share misreporting", _fmt(last["share_misreporting"])),
    ]
    html = "".join(
        f'<tr><td>{k}</td><td class="market-{k.replace(" ", "-")}">{v}</td></tr>' for k, v in rows
    )
    return solara.HTML(
        tag="div",
        classes=["market-summary"],
        unsafe_innerHTML=f"<table>{html}</table><p style='font-size:85%'>Change the "
        "parameters, then press Reset; Step and ▶ run rounds.</p>",
    )


def _groups(model):
    for g in model.groups:
        idx = g.ids[model.participating[g.ids]]
        if idx.size:
            yield g.name, idx


def ReportsPanel(model: MarketModel):
    """Each taking-part seller's report against its true cost, by strategy."""
    fig = _figure()
    ax = fig.subplots()
    lo, hi = model.dist.support
    ax.plot([lo, hi], [lo, hi], color="0.6", lw=1, label="truth")
    for name, idx in _groups(model):
        ax.plot(model.cost[idx], model.report[idx], ".", ms=3, alpha=0.6, label=name)
    ax.set(xlabel="true cost", ylabel="report", title=f"Reports vs costs (round {model.round})")
    ax.legend(loc="upper left", fontsize=8)
    return _show(fig)


def AllocationPanel(model: MarketModel):
    """ε and payment of each taking-part seller against its true cost."""
    fig = _figure()
    ax = fig.subplots()
    on = model.participating
    ax.plot(model.cost[on], model.eps[on], ".", ms=3, color="C0", label="ε")
    ax.set(xlabel="true cost", ylabel="ε", title=f"ε and payment vs cost (round {model.round})")
    ax2 = ax.twinx()
    ax2.plot(model.cost[on], model.payment[on], "x", ms=3, color="C3", label="payment")
    ax2.set_ylabel("payment", color="C3")
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    ax.legend(h1 + h2, l1 + l2, loc="upper right", fontsize=8)
    return _show(fig)


def HistoryPanel(model: MarketModel):
    """Per round: the buyer's loss (payments made) and proxy loss (virtual costs), total
    payment, regret and share misreporting."""
    df = model.datacollector.get_model_vars_dataframe().iloc[1:]
    r = np.arange(1, len(df) + 1)
    fig = _figure(5.2, 4.2, left=0.1, right=0.97, bottom=0.11, top=0.93, hspace=0.3, wspace=0.3)
    axes = fig.subplots(2, 2, sharex=True).ravel()
    series = [
        ("loss (Eq. 11)", ["buyer_loss", "proxy_loss"]),
        ("total payment", ["total_payment"]),
        ("regret", ["mean_regret", "max_regret"]),
        ("share misreporting", ["share_misreporting"]),
    ]
    for ax, (title, cols) in zip(axes, series, strict=True):
        for c in cols:
            ax.plot(r, df[c].to_numpy(float), marker="." if len(r) < 30 else None, label=c)
        ax.set_title(
            title if title != "regret" or model.measure_regret else "regret (off)", fontsize=9
        )
        ax.tick_params(labelsize=7)
    axes[2].legend(fontsize=7)
    for ax in axes[2:]:
        ax.set_xlabel("round", fontsize=8)
    return _show(fig)


COMPONENTS = [Summary, ReportsPanel, AllocationPanel, HistoryPanel]


@solara.component
def Page():
    """One model per browser session, with Mesa's controls and the panels above."""
    model = solara.use_memo(lambda: PageModel(**DEFAULTS), [])
    return SolaraViz(
        model,
        components=COMPONENTS,
        model_params=model_params(),
        name="market_sim: privacy data market",
    )


page = Page


# ---- serving ------------------------------------------------------------------------
_told: set[str] = set()


def _no_cdn(url):
    """Stands in for Solara's CDN fetch: name the missing front-end file, fetch nothing."""
    if url not in _told:
        _told.add(url)
        print(
            f"market-sim viz: front-end file {url.rsplit('/npm/', 1)[-1]} is not in the "
            "installed assets (pip install solara-assets, or the viz extra); "
            "not fetched",
            file=sys.stderr,
            flush=True,
        )
    raise RuntimeError(f"not in the installed assets: {url}")


def _block_cdn() -> None:
    """Route Solara's CDN proxy to ``_no_cdn``: a front-end file missing from the
    installed assets is named, not downloaded.  The proxy (``cdn_helper.get_path``
    and ``get_data``) builds every download address with ``get_cdn_url``."""
    from solara.server import cdn_helper

    url_of = getattr(cdn_helper.get_cdn_url, "__wrapped__", cdn_helper.get_cdn_url)

    @functools.wraps(url_of)
    def refuse(path):
        _no_cdn(url_of(path))

    cdn_helper.get_cdn_url = refuse


def serve(host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve the page with uvicorn until interrupted; front-end files from packages only."""
    os.environ["SOLARA_APP"] = "market_sim.viz:page"
    os.environ.setdefault("SOLARA_TELEMETRY_MIXPANEL_ENABLE", "False")
    os.environ["SERVER_NAME"], os.environ["SERVER_PORT"] = host, str(port)
    import warnings

    import uvicorn
    from solara.server import settings

    settings.telemetry.mixpanel_enable = False  # no calls home
    warnings.filterwarnings("ignore", message="Cookies with samesite=none")  # plain http

    _block_cdn()
    if host not in ("127.0.0.1", "localhost", "::1"):
        print(
            f"market-sim viz: serving on {host}, not only this machine: anyone who reaches "
            "it can run the model",
            file=sys.stderr,
            flush=True,
        )
    print(f"market-sim viz: serving on http://{host}:{port}/ (Ctrl-C to stop)", flush=True)
    uvicorn.run("solara.server.starlette:app", host=host, port=port, log_level="warning")
