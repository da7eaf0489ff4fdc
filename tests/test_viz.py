"""The interactive page (``market-sim viz``) in a real browser, and its missing-extra error.

The browser test starts ``market-sim viz`` on 127.0.0.1 (a free port), drives
Debian's chromium through playwright (the system browser, nothing downloaded),
presses Step three times and checks Mesa's step counter and ours, the summary
numbers against the same seeded model run here, and the panels' images; then
sets three controls, presses Reset and Step twice and checks the summary again.  Mesa's
counter is whatever Mesa's own ``ShowSteps`` shows for that model ("Step: 3" on
Mesa 3.3, "Time: 3.0" on Mesa 3.5), rendered here, so the test holds on both.  Screenshots
go to a tmp folder whose path is printed.  It skips, loudly, only where the viz
extra or the browser is not installed (``make test`` / ``.ci/run`` install both).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from market_sim import cli

BROWSERS = ("/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
STEPS = 3
SUMMARY = [  # summary cell, column of the model's per-round table
    ("proxy-loss", "proxy_loss"),
    ("total-payment", "total_payment"),
    ("share-misreporting", "share_misreporting"),
]


def _skip_loudly(reason: str):
    print(f"tests/test_viz.py: SKIPPED: {reason}", file=sys.stderr, flush=True)
    pytest.skip(reason)


def test_missing_extra_is_one_line_and_exit_2(monkeypatch, capsys):
    monkeypatch.delitem(sys.modules, "market_sim.viz", raising=False)
    monkeypatch.setitem(sys.modules, "solara", None)  # as if not installed
    assert cli.main(["viz", "--port", "1"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert "pip install 'market_sim[viz]'" in err and "missing: solara" in err


def test_bad_port_is_one_line_and_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        cli.main(["viz", "--port", "70000"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.strip().startswith("market-sim: error: argument --port")


def _viz_or_skip():
    try:
        from market_sim import viz
    except ImportError as exc:
        if os.environ.get("CI"):
            raise AssertionError(
                f"CI: the viz extra is not installed (make test installs .[test,viz]): {exc}"
            ) from None
        _skip_loudly(f"the viz extra is not installed ({exc}): pip install -e '.[test,viz]'")
    return viz


def test_no_cdn_names_the_missing_file(capsys):
    viz = _viz_or_skip()
    with pytest.raises(RuntimeError):
        viz._no_cdn("https://cdn.jsdelivr.net/npm/vega@5/build/vega.min.js")
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "vega@5/build/vega.min.js" in err and "solara-assets" in err


def test_the_cdn_proxy_serves_installed_files_and_downloads_nothing(tmp_path, monkeypatch, capsys):
    viz = _viz_or_skip()
    from solara.server import cdn_helper

    def no_download(*args, **kwargs):
        raise AssertionError("the CDN proxy tried to download")

    monkeypatch.setattr(cdn_helper.requests, "get", no_download)
    monkeypatch.setattr(cdn_helper, "get_cdn_url", cdn_helper.get_cdn_url)  # undone afterwards
    viz._block_cdn()
    viz._block_cdn()  # idempotent: wraps Solara's function, not its own wrapper
    assert cdn_helper.get_cdn_url.__wrapped__.__module__ == "solara.server.cdn_helper"
    installed = tmp_path / "present@1" / "a.js"
    installed.parent.mkdir()
    installed.write_text("ok")
    assert cdn_helper.get_path(tmp_path, "present@1/a.js") == installed
    for fetch in (cdn_helper.get_path, cdn_helper.get_data):
        with pytest.raises(RuntimeError, match="not in the installed assets"):
            fetch(tmp_path, f"absent-{fetch.__name__}@1/b.js")
    err = capsys.readouterr().err
    assert "absent-get_path@1/b.js" in err and "absent-get_data@1/b.js" in err


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_http(url: str, proc, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"market-sim viz exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    raise AssertionError(f"no answer from {url} within {timeout:.0f} s")


def _mesa_counter(model) -> str:
    """The text of Mesa's step counter for ``model``: its ``ShowSteps`` component, rendered here."""
    import ipyvuetify
    import solara
    from mesa.visualization.solara_viz import ShowSteps

    _, rc = solara.render(ShowSteps(model), handle_error=False)
    try:
        return "".join(rc.find(ipyvuetify.Html).widget.children)
    finally:
        rc.close()


def _cell(page, name: str) -> str:
    return page.locator(f".market-summary .market-{name}").inner_text().strip()


_PIXELS = """els => els.filter(e => e.naturalWidth > 0).map(e => {
    const c = document.createElement('canvas');
    c.width = e.naturalWidth; c.height = e.naturalHeight;
    const g = c.getContext('2d'); g.drawImage(e, 0, 0);
    const d = g.getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i] < 200 || d[i+1] < 200 || d[i+2] < 200) ink++;
    return {w: c.width, h: c.height, ink: ink, png: c.toDataURL()};
})"""


def _images(page) -> list[dict]:
    """Each shown panel image: size, count of dark pixels and its pixels as a PNG data URL."""
    return page.eval_on_selector_all(".vue-grid-item img", _PIXELS)


def test_page_steps_in_a_real_browser(tmp_path):
    viz = _viz_or_skip()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_loudly("playwright is not installed: pip install -e '.[test,viz]'")
    browser_path = next((p for b in BROWSERS if (p := shutil.which(b))), None)
    if browser_path is None:
        _skip_loudly(
            "no chromium on this machine (as root with apt: apt-get install -y "
            "chromium; .ci/run does this)"
        )

    # What the page must show after STEPS rounds: the same seeded model, run here.
    ref = viz.PageModel(**viz.DEFAULTS)
    counters = [_mesa_counter(ref)]  # Mesa's counter after 0, 1, ..., STEPS rounds
    for _ in range(STEPS):
        ref.step()
        counters.append(_mesa_counter(ref))
    assert len(set(counters)) == STEPS + 1, counters  # the counter moves every round
    last = ref.datacollector.get_model_vars_dataframe().iloc[-1]
    # After Reset with other controls: two rounds of this one, whose numbers move each round.
    ref = viz.PageModel(
        **{**viz.DEFAULTS, "mechanism": "online", "strategy": "random", "measure_regret": True}
    )
    ref.step()
    ref.step()
    ref1, ref2 = ref.datacollector.get_model_vars_dataframe().iloc[[1, 2]].to_dict("records")
    assert all(viz._fmt(ref1[c]) != viz._fmt(ref2[c]) for c in ("proxy_loss", "total_payment"))

    port = _free_port()
    url = f"http://127.0.0.1:{port}/"
    err_path = tmp_path / "server.err"
    with open(err_path, "w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "market_sim.cli",
                "viz",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
            ],
            stdout=subprocess.DEVNULL,
            stderr=err,
            stdin=subprocess.DEVNULL,
        )
    shots = tmp_path / "screenshots"
    shots.mkdir()
    print(f"tests/test_viz.py: screenshots in {shots}", file=sys.stderr, flush=True)
    bad_responses, page_errors, step_seconds = [], [], []
    try:
        _wait_http(url, proc)
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path=browser_path, headless=True, args=CHROMIUM_ARGS
            )
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.set_default_timeout(40_000)
                page.on(
                    "response",
                    lambda r: r.status >= 400 and bad_responses.append(f"{r.status} {r.url}"),
                )
                page.on(
                    "requestfailed",
                    lambda r: (
                        not r.url.startswith("data:") and bad_responses.append(f"failed {r.url}")
                    ),
                )
                page.on("pageerror", lambda e: page_errors.append(str(e)))  # uncaught, in JS
                page.goto(url)
                page.locator(".market-summary").wait_for()
                page.get_by_text(counters[0], exact=True).wait_for()
                assert _cell(page, "round") == f"0 of {viz.DEFAULTS['rounds']}"
                assert _cell(page, "proxy-loss") == "–"  # nothing run yet
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.vue-grid-item img')]"
                    ".filter(e => e.naturalWidth > 0).length >= 3"
                )
                before = _images(page)
                page.screenshot(path=str(shots / "round0.png"))
                step = page.get_by_role("button", name="Step")
                for k in range(1, STEPS + 1):
                    t = time.perf_counter()
                    step.click()
                    page.get_by_text(counters[k], exact=True).wait_for()
                    page.locator(".market-summary .market-round", has_text=f"{k} of ").wait_for()
                    step_seconds.append(time.perf_counter() - t)
                page.wait_for_function(
                    "() => [...document.querySelectorAll('.vue-grid-item img')]"
                    ".filter(e => e.naturalWidth > 0).length >= 3"
                )
                page.wait_for_timeout(500)
                page.screenshot(path=str(shots / f"round{STEPS}.png"), full_page=True)
                after = _images(page)
                assert _cell(page, "round") == f"{STEPS} of {viz.DEFAULTS['rounds']}"
                for name, column in SUMMARY:
                    assert _cell(page, name) == viz._fmt(last[column]), name
                assert _cell(page, "mean-regret") == "off"  # regret is off by default
                assert _cell(page, "parameters") == "uniform:0:1, μ=1, σ=1, γ=1, ξ=1, seed=0"
                assert len(before) == len(after) == 3, (before, after)
                assert all(a["w"] >= 300 and a["h"] >= 200 for a in after), after
                assert all(a["ink"] > 500 for a in after)  # axes, labels and points drawn
                assert all(a["png"] != b["png"] for a, b in zip(after, before, strict=True)), (
                    "a panel shows the same picture after the rounds as before"
                )
                # The controls reach the model: mechanism -> online, strategy -> random
                # (its numbers change every round), regret on, Reset, Step twice; the
                # page shows what the same seeded model shows after two rounds.
                page.get_by_text("offline", exact=True).first.click()
                page.get_by_role("option", name="online", exact=True).click()
                page.get_by_text("shade", exact=True).first.click()
                page.get_by_role("option", name="random", exact=True).click()
                page.get_by_text("measure regret (on a sample)").click()
                page.get_by_role("button", name="Reset").click()
                page.locator(".market-summary .market-mechanism", has_text="online").wait_for()
                page.get_by_text(counters[0], exact=True).wait_for()  # a new model: round 0
                assert _cell(page, "round") == f"0 of {viz.DEFAULTS['rounds']}"
                assert _cell(page, "strategies") == "random, truthful"
                assert _cell(page, "proxy-loss") == "–"
                for k in (1, 2):
                    step.click()
                    page.locator(".market-summary .market-round", has_text=f"{k} of ").wait_for()
                    page.get_by_text(counters[k], exact=True).wait_for()
                for name, column in SUMMARY:
                    assert _cell(page, name) == viz._fmt(ref2[column]), name
                shown_regret = float(_cell(page, "mean-regret"))  # measured: a number
                assert shown_regret == pytest.approx(ref2["mean_regret"], rel=1e-3, abs=1e-12)
                page.screenshot(path=str(shots / "online_round2.png"), full_page=True)
            finally:
                browser.close()
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    print(
        f"tests/test_viz.py: seconds from Step to the new round: "
        f"{', '.join(f'{s:.2f}' for s in step_seconds)}",
        file=sys.stderr,
        flush=True,
    )
    server_err = err_path.read_text()
    assert "not in the installed assets" not in server_err, server_err
    assert "Traceback" not in server_err, server_err
    assert not bad_responses, bad_responses
    assert not page_errors, page_errors
