#!/usr/bin/env python3
"""Opens a `prune report` HTML file in headless Chromium and checks it as a reader would see it.

usage: browser_check.py REPORT.html --shots DIR [--expect-slim] [--chromium PATH]

The DOM contract is analysis/report/README.md. Over the Chrome DevTools Protocol it checks that
  - the report works offline and alone: no request leaves the file: URL (only file:, data: and blob:
    are allowed) and no file: URL other than the report itself is loaded;
  - nothing goes wrong in the page: no console.error, failed console.assert, uncaught exception or
    browser error log entry (e.g. a resource that failed to load);
  - report.js finishes: <html data-ready="1"> within 60 s and no data-error;
  - the nine panels exist, each showing a figure (figure.fig svg) or a note (p.note); every figure
    has report.js's button.save-svg; the head view draws line.attn-line and head swatches; the model
    view has layers x heads thumbnails; with --expect-slim, #head-view-slim draws lines too;
  - the views answer real mouse clicks (Input.dispatchMouseEvent at the centre of the element's
    box, so a covered or zero-sized element fails where element.click() would pass): a head swatch
    removes that head's lines and a second click brings them back; a thumbnail fills the zoom.
Screenshots (the page, each panel, the head view after the click) go to --shots for a person to
look at. Prints "ok: ..." or "FAIL: ..." per check and exits 0 if all pass, 1 if one fails, and 77
(ctest's skip) without the websocket-client package or a Chromium binary.
"""
import argparse
import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

try:
    import websocket
except ImportError as e:  # a skip, reported by main()
    websocket, WS_IMPORT_ERROR = None, e

PANELS = ("summary", "curves", "importance", "roles", "headmap", "gates", "attention", "tree", "rollout")
# panels whose pictures the contract does not put in figure.fig: report.js draws into #attention-root
# and #rollout-root, and the tree panel holds a <div class="tree"> per example
BARE_SVG_OK = {"attention", "tree", "rollout"}
MAX_SHOT_HEIGHT = 16000
LINES, SWATCHES = "#head-view line.attn-line", "#head-view .head-swatch[data-head]"


class Results:
    def __init__(self):
        self.failed = 0

    def check(self, good, message):
        print(("ok: " if good else "FAIL: ") + message, flush=True)
        self.failed += not good
        return good


class Cdp:
    """The page target: send() returns its command's result and queues the events read meanwhile."""

    def __init__(self, ws_url):
        self.ws = websocket.create_connection(ws_url, timeout=60, suppress_origin=True)
        self.last_id, self.events = 0, []

    def send(self, method, **params):
        self.last_id += 1
        self.ws.send(json.dumps({"id": self.last_id, "method": method, "params": params}))
        while True:
            try:
                msg = json.loads(self.ws.recv())
            except websocket.WebSocketTimeoutException:
                raise RuntimeError(f"{method}: no answer from Chromium in 60 s (is a script in the page stuck?)")
            if msg.get("id") == self.last_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error'].get('message')}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def eval(self, expression):
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in r:
            d = r["exceptionDetails"]
            raise RuntimeError(f"evaluate: {d.get('exception', {}).get('description') or d.get('text')}")
        return r["result"].get("value")

    def drain(self, seconds):
        self.ws.settimeout(seconds)
        try:
            while True:
                if "method" in (msg := json.loads(self.ws.recv())):
                    self.events.append(msg)
        except websocket.WebSocketTimeoutException:
            pass


def poll(get, done, timeout=3.0, every=0.1):
    """get() until done(value) or timeout seconds have passed; returns the last value."""
    deadline = time.monotonic() + timeout
    while not done(value := get()) and time.monotonic() < deadline:
        time.sleep(every)
    return value


def find_chromium(explicit):
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return shutil.which("chromium") or shutil.which("chromium-browser")


def start_chromium(binary, tmp):
    with open(tmp / "chromium.log", "wb") as log:
        return subprocess.Popen(
            [binary, "--headless=new", "--no-sandbox", "--disable-gpu", "--remote-debugging-port=0",
             f"--user-data-dir={tmp / 'profile'}", "--no-first-run", "--no-default-browser-check",
             "--window-size=1400,1000", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)


def page_target(proc, tmp):
    """The websocket URL of Chromium's page, found through the port in <profile>/DevToolsActivePort."""
    port_file, deadline = tmp / "profile" / "DevToolsActivePort", time.monotonic() + 20
    while True:
        lines = port_file.read_text().split("\n") if port_file.exists() else []
        if len(lines) >= 2 and lines[0].strip().isdigit():
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{int(lines[0])}/json", timeout=5) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages:
                    return pages[0]["webSocketDebuggerUrl"]
            except OSError:
                pass
        if proc.poll() is not None or time.monotonic() > deadline:
            state = f"exited with {proc.returncode}" if proc.poll() is not None else "gave no page in 20 s"
            log = (tmp / "chromium.log").read_text(errors="replace")[-1500:].strip() or "(empty)"
            raise RuntimeError(f"chromium {state}; its log ends:\n{log}")
        time.sleep(0.1)


def stop(proc):
    """Ends the Chromium this script started, with its helpers (its own process group)."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        if proc is None or proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
            proc.wait(5)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass


def nth(selector, i=0):
    return f"document.querySelectorAll({json.dumps(selector)})[{i}]"


def box_js(element, block):
    """JS: scrolls the element into view; its box in page and viewport coordinates and what is at its centre."""
    return f"""(() => {{ const e = {element}; if (!e) return null;
        e.scrollIntoView({{block: '{block}', inline: 'nearest', behavior: 'instant'}});
        const r = e.getBoundingClientRect(), cx = r.left + r.width / 2, cy = r.top + r.height / 2;
        const hit = document.elementFromPoint(cx, cy);
        return {{x: r.left + scrollX, y: r.top + scrollY, width: r.width, height: r.height, cx, cy,
                 hit: !!hit && (hit === e || e.contains(hit)),
                 what: hit ? hit.tagName.toLowerCase() + (hit.id ? '#' + hit.id : '') : 'nothing'}}; }})()"""


def mouse_click(cdp, element):
    """Clicks the centre of the element's box as a mouse does; '' if the element got it, else why not."""
    box = cdp.eval(box_js(element, "center"))
    if box is None:
        return " (the element is gone)"
    for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
        cdp.send("Input.dispatchMouseEvent", type=kind, x=box["cx"], y=box["cy"],
                 button="none" if kind == "mouseMoved" else "left", clickCount=int(kind != "mouseMoved"))
    if box["width"] <= 0 or box["height"] <= 0:
        return f" (its box is {box['width']}x{box['height']})"
    return "" if box["hit"] else f" ({box['what']} covers its centre)"


def screenshot(cdp, path, rect):
    if not rect or rect["width"] <= 0 or rect["height"] <= 0:
        raise RuntimeError(f"nothing to capture for {path.name}: {rect}")
    clip = {k: rect[k] for k in ("x", "y", "width")} | {"height": min(rect["height"], MAX_SHOT_HEIGHT), "scale": 1}
    shot = cdp.send("Page.captureScreenshot", format="png", captureBeyondViewport=True, clip=clip)
    path.write_bytes(base64.b64decode(shot["data"]))
    print(f"screenshot: {path}")


DOM_JS = """(() => {
  const all = (s, root = document) => Array.from(root.querySelectorAll(s));
  const panels = {}, zoom = document.getElementById('model-view-zoom');
  for (const name of %s) {
    const p = document.getElementById('panel-' + name);
    panels[name] = p && {figures: all('figure.fig svg', p).length, notes: all('p.note', p).length,
                         tables: all('table', p).length, svgs: all('svg', p).length};
  }
  let data;
  try { const d = JSON.parse(document.getElementById('hp-data').textContent);
        data = {layers: d.layers, heads: d.heads, pruned: d.pruned || []}; } catch (e) { data = String(e); }
  const saved = f => f.querySelector('button.save-svg') || f.nextElementSibling?.matches('button.save-svg');
  const slim = document.getElementById('head-view-slim');
  return {panels, data, lines: all('%s').length, swatches: all('%s').length,
    thumbs: all('#model-view .thumb[data-layer][data-head]').filter(t => !zoom?.contains(t)).length,
    figs: all('figure.fig').length, unsaved: all('figure.fig').filter(f => !saved(f)).map(f => f.id || '?'),
    slim: slim ? all('line.attn-line', slim).length : null, empty: slim ? all('.hv-empty', slim).length : null,
    layer: document.getElementById('layer-select')?.value ?? null};
})()""" % (json.dumps(PANELS), LINES, SWATCHES)


def check_dom(cdp, res, expect_slim, shots):
    d = cdp.eval(DOM_JS)
    for name, p in d["panels"].items():
        if p is None:
            res.check(False, f"#panel-{name} is missing")
        elif p["figures"] or p["notes"] or p["tables"]:
            shows = ([f"{p['figures']} figure(s)"] * bool(p["figures"]) + [f"{p['tables']} table(s)"] * bool(p["tables"]) +
                     [f"{p['notes']} note(s)"] * bool(p["notes"]))
            res.check(True, f"#panel-{name} shows {' and '.join(shows)}")
        else:
            res.check(name in BARE_SVG_OK and p["svgs"] > 0, f"#panel-{name} shows " + (
                f"{p['svgs']} svg(s) outside figure.fig" if p["svgs"] else "neither a figure.fig svg, a table nor a p.note"))
    res.check(d["figs"] > 0 and not d["unsaved"], f"{d['figs']} figure.fig, " + (
        f"without button.save-svg: {', '.join(d['unsaved'])}" if d["unsaved"] else "each with button.save-svg"))
    res.check(d["lines"] > 0, f"#head-view draws {d['lines']} line.attn-line")
    res.check(d["swatches"] > 0, f"#head-view has {d['swatches']} .head-swatch[data-head]")
    L, H = (d["data"].get("layers"), d["data"].get("heads")) if isinstance(d["data"], dict) else (None, None)
    if res.check(isinstance(L, int) and isinstance(H, int), f"#hp-data gives layers {L} and heads {H}"
                 + ("" if isinstance(d["data"], dict) else f": {d['data']}")):
        res.check(d["thumbs"] == L * H, f"#model-view has {d['thumbs']} .thumb, hp-data says {L}x{H} = {L * H}")
    if expect_slim:
        check_slim(cdp, res, d, shots)


def check_slim(cdp, res, d, shots):
    """#head-view-slim draws lines; where the shown layer lost every head, it says so, and a layer that kept
    heads (picked in select#layer-select as a reader would) draws them."""
    if not res.check(d["slim"] is not None, "#head-view-slim " + ("is missing" if d["slim"] is None else "exists")):
        return
    data = d["data"] if isinstance(d["data"], dict) else {}
    L, H, layer = data.get("layers") or 0, data.get("heads") or 0, int(d["layer"] or 0)
    removed = {l: {h for l2, h in data.get("pruned", []) if l2 == l} for l in range(L)}
    if len(removed.get(layer, ())) < H:
        res.check(d["slim"] > 0 and not d["empty"], f"#head-view-slim draws {d['slim']} lines in layer {layer}"
                  + (" and says every head is removed" if d["empty"] else ""))
        return
    res.check(d["slim"] == 0 and d["empty"] == 1, f"layer {layer} lost every head: #head-view-slim draws {d['slim']}"
              f" lines and {d['empty']} .hv-empty note (want 0 and 1)")
    screenshot(cdp, shots / "head_view_slim_empty.png", cdp.eval(box_js(nth("#head-view-slim"), "start")))
    kept = next((l for l in range(L) if len(removed[l]) < H), None)
    if not res.check(kept is not None, "a layer whose heads the slimmed model keeps" + ("" if kept is not None else ": none")):
        return
    cdp.eval(f"""(() => {{ const s = document.getElementById('layer-select'); s.value = '{kept}';
                 s.dispatchEvent(new Event('change')); }})()""")
    n = poll(lambda: cdp.eval("document.querySelectorAll('#head-view-slim line.attn-line').length"), bool)
    res.check(bool(n), f"picking layer {kept} in select#layer-select: #head-view-slim draws {n} lines")


def check_clicks(cdp, res, shots):
    def counts(h):
        return cdp.eval(f"""({{head: document.querySelectorAll('{LINES}[data-head="{h}"]').length,
                              total: document.querySelectorAll('{LINES}').length}})""")

    heads = cdp.eval(f"Array.from(document.querySelectorAll('{SWATCHES}'), s => s.dataset.head)") or []
    pick = next(((i, h) for i, h in enumerate(heads) if counts(h)["head"] > 0), None)
    if not res.check(pick is not None, "a #head-view swatch whose head has lines" + ("" if pick else ": none")):
        return
    i, head = pick
    swatch, before = nth(SWATCHES, i), counts(head)
    why = mouse_click(cdp, swatch)
    after = poll(lambda: counts(head), lambda c: c["head"] != before["head"])
    res.check(after["head"] == 0, f"clicking head {head}'s swatch: its lines {before['head']} -> {after['head']}{why}")
    res.check(after["total"] != before["total"],
              f"clicking head {head}'s swatch: all lines {before['total']} -> {after['total']}")
    res.check(cdp.eval(f"{swatch}.classList.contains('off')"), f"head {head}'s swatch has class 'off' after the click")
    screenshot(cdp, shots / "head_view_after_click.png", cdp.eval(box_js(nth("#head-view"), "start")))
    why = mouse_click(cdp, swatch)
    again = poll(lambda: counts(head), lambda c: c == before)
    res.check(again == before, f"second click on head {head}'s swatch restores its lines: {again['head']} of "
              f"{before['head']}, all lines {again['total']} of {before['total']}{why}")
    res.check(cdp.eval(f"!{swatch}.classList.contains('off')"),
              f"head {head}'s swatch loses class 'off' after the second click")
    n = cdp.eval("document.querySelectorAll('#model-view .thumb').length")
    if not res.check(n > 0, f"#model-view has {n} .thumb to click"):
        return
    why = mouse_click(cdp, nth("#model-view .thumb", n - 1))
    svgs = poll(lambda: cdp.eval("document.getElementById('model-view-zoom')?.querySelectorAll('svg').length"), bool)
    res.check(bool(svgs), "clicking the last .thumb fills #model-view-zoom: "
              + ("there is no #model-view-zoom" if svgs is None else f"{svgs} svg") + why)


def check_events(events, report, res):
    errors, outside, others, n_requests = [], [], [], 0
    for method, p in ((ev["method"], ev.get("params", {})) for ev in events):
        if method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            errors.append(f"console.{p['type']}: " + " ".join(str(a.get("value", a.get("description", "")))
                                                            for a in p.get("args", [])))
        elif method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            text = d.get("exception", {}).get("description") or d.get("text", "")
            errors.append(f"uncaught exception ({d.get('url', '?')}:{d.get('lineNumber', -1) + 1}): "
                          + text.split("\n")[0])
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            errors.append(f"browser error: {p['entry'].get('text')} {p['entry'].get('url', '')}".rstrip())
        elif method == "Network.requestWillBeSent":
            n_requests += 1
            url = p["request"]["url"]
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("file", "data", "blob"):
                outside.append(url)
            elif parts.scheme == "file" and Path(urllib.parse.unquote(parts.path)) != report:
                others.append(url)
    for problem in errors + [f"request leaves the file: URL: {u}" for u in outside] \
            + [f"the report is not self-contained, it loads another file: {u}" for u in others]:
        res.check(False, problem[:500])
    if not errors:
        res.check(True, "no console error, failed assertion, uncaught exception or browser error")
    if not outside and not others:
        res.check(True, f"{n_requests} request(s), none leaves the file: URL or loads another file")


def wait_ready(cdp, url, res):
    """Waits up to 60 s for report.js: data-ready="1" or data-error on the report's <html>."""
    def state():
        try:
            s = cdp.eval("({href: location.href, ready: document.documentElement.dataset.ready ?? null,"
                         " error: document.documentElement.dataset.error ?? null})")
        except RuntimeError:  # the page's context changed under us while navigating
            return None
        return s if s["href"] == url else None

    s = poll(state, lambda s: s is not None and (s["ready"] == "1" or s["error"] is not None), 60, 0.2)
    if s and s["error"] is not None:
        return res.check(False, f'report.js failed: data-error="{s["error"]}"')
    return res.check(bool(s) and s["ready"] == "1", 'report.js rendered (data-ready="1")'
                     + ("" if s and s["ready"] == "1" else f": not within 60 s, page state {s}"))


def run_checks(cdp, report, args, res):
    try:
        for domain in ("Runtime", "Log", "Network", "Page"):
            cdp.send(f"{domain}.enable")
        url = report.as_uri()
        error = cdp.send("Page.navigate", url=url).get("errorText")
        if not res.check(not error, f"open {url}" + (f": {error}" if error else "")) or not wait_ready(cdp, url, res):
            return
        check_dom(cdp, res, args.expect_slim, args.shots)
        screenshot(cdp, args.shots / "report_full.png", cdp.eval(
            "(e => ({x: 0, y: 0, width: e.scrollWidth, height: e.scrollHeight}))(document.documentElement)"))
        for name in PANELS:
            if rect := cdp.eval(box_js(nth(f"#panel-{name}"), "start")):
                screenshot(cdp, args.shots / f"panel-{name}.png", rect)
        check_clicks(cdp, res, args.shots)
    finally:
        try:
            cdp.drain(0.5)
        except (OSError, websocket.WebSocketException):  # a dead connection: judge what was read
            pass
        check_events(cdp.events, report, res)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("report", type=Path, help="the report.html written by `prune report`")
    ap.add_argument("--shots", type=Path, required=True, help="folder for the screenshots (created)")
    ap.add_argument("--expect-slim", action="store_true", help="the report has a slimmed model: check #head-view-slim")
    ap.add_argument("--chromium", help="Chromium binary (default: chromium or chromium-browser on PATH)")
    args = ap.parse_args()
    if websocket is None:
        print(f"SKIP: the websocket-client package is not importable ({WS_IMPORT_ERROR})")
        return 77
    if (binary := find_chromium(args.chromium)) is None:
        print(f"SKIP: no Chromium ({args.chromium or 'chromium, chromium-browser'}: not found or not executable; scripts/setup.sh --tests installs it)")
        return 77
    report, res = args.report.resolve(), Results()
    if not res.check(report.is_file(), f"the report {report} exists"):
        return 1
    args.shots = args.shots.resolve()
    args.shots.mkdir(parents=True, exist_ok=True)
    tmp, proc, cdp = Path(tempfile.mkdtemp(prefix="headprune_browser_")), None, None
    try:
        proc = start_chromium(binary, tmp)
        cdp = Cdp(page_target(proc, tmp))
        run_checks(cdp, report, args, res)
    except Exception as e:  # noqa: BLE001 - whatever breaks the session is a failed check
        res.check(False, f"browser session: {type(e).__name__}: {e}")
    finally:
        if cdp is not None:
            cdp.ws.close()
        stop(proc)
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{'FAIL' if res.failed else 'ok'}: {res.failed} check(s) failed for {report}")
    return 1 if res.failed else 0


if __name__ == "__main__":
    sys.exit(main())
