"""A real `jupyter lab` on 127.0.0.1 and Debian's Chromium driven by Playwright, for
tests/browser/ and benchmarks/flamegraph_bench.py."""

from __future__ import annotations

import contextlib
import http.server
import json
import os
import secrets
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from .waiting import wait_for

CHROMIUM = os.environ.get("DAL_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-gpu",
    "--disable-dev-shm-usage",
]
ARTIFACTS = Path(__file__).resolve().parent.parent / "test-artifacts"


def wait_until_serving(
    proc: subprocess.Popen, answers, log: Path, *, timeout: float, what: str
) -> None:
    """Wait until `answers()` is true (a connection refused counts as not yet), or fail
    with the end of the server's log when it exits or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if answers():
                return
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"{what} did not start:\n{log.read_text()[-3000:]}")
        time.sleep(0.3)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def chromium() -> Iterator[object]:
    """A headless Chromium browser (Playwright's sync API)."""
    from playwright.sync_api import sync_playwright

    if not Path(CHROMIUM).exists():
        raise RuntimeError(
            f"{CHROMIUM} not found: apt-get install -y chromium (never `playwright install`)"
        )
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            browser.close()


class JupyterLab:
    def __init__(
        self, root: Path, env: dict, port: int, token: str, proc: subprocess.Popen, log: Path
    ):
        self.root, self.env, self.port, self.token, self.proc, self.log = (
            root,
            env,
            port,
            token,
            proc,
            log,
        )

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        sep = "&" if "?" in path else "?"
        return f"{self.base}/{path.lstrip('/')}{sep}token={self.token}"


def _quiet_settings(settings: Path) -> None:
    # JupyterLab's news/update notification covers part of the page: off.
    apputils = settings / "@jupyterlab" / "apputils-extension"
    apputils.mkdir(parents=True, exist_ok=True)
    (apputils / "notification.jupyterlab-settings").write_text(
        json.dumps({"fetchNews": "false", "checkForUpdates": False})
    )
    # Keep every cell rendered (screenshots and the widget checks want the outputs in the DOM).
    notebook = settings / "@jupyterlab" / "notebook-extension"
    notebook.mkdir(parents=True, exist_ok=True)
    (notebook / "tracker.jupyterlab-settings").write_text(json.dumps({"windowingMode": "none"}))


@contextlib.contextmanager
def jupyter_lab(tmp: Path, store_url: str, extra_env: dict | None = None) -> Iterator[JupyterLab]:
    """`jupyter lab` with its own config, runtime, data and settings folders under tmp."""
    for d in ("config", "runtime", "data", "settings", "workspaces", "notebooks"):
        (tmp / d).mkdir(parents=True, exist_ok=True)
    # This checkout's build of the Lab extension, not the one pip installed into the
    # environment: JupyterLab takes the first it finds, and with JUPYTER_PREFER_ENV_PATH
    # off the user data folder (JUPYTER_DATA_DIR) comes before the environment's.
    built = Path(__file__).resolve().parent.parent / "dask_analytics_lab" / "labextension"
    prefer_env = {}
    if (built / "package.json").is_file():
        (tmp / "data" / "labextensions").mkdir(exist_ok=True)
        link = tmp / "data" / "labextensions" / "dask-analytics-lab"
        if not link.exists():
            link.symlink_to(built, target_is_directory=True)
        prefer_env = {"JUPYTER_PREFER_ENV_PATH": "0"}
    _quiet_settings(tmp / "settings")
    port, token = free_port(), secrets.token_hex(16)
    env = {
        **os.environ,
        "JUPYTER_CONFIG_DIR": str(tmp / "config"),
        "JUPYTER_RUNTIME_DIR": str(tmp / "runtime"),
        "JUPYTER_DATA_DIR": str(tmp / "data"),
        "DASK_ANALYTICS__STORE": store_url,
        "PYTHONUNBUFFERED": "1",
        **prefer_env,
        **(extra_env or {}),
    }
    log = tmp / "jupyter.log"
    cmd = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--ServerApp.ip=127.0.0.1",
        f"--ServerApp.port={port}",
        "--ServerApp.port_retries=0",
        f"--IdentityProvider.token={token}",
        f"--ServerApp.root_dir={tmp / 'notebooks'}",
        f"--LabApp.user_settings_dir={tmp / 'settings'}",
        f"--LabApp.workspaces_dir={tmp / 'workspaces'}",
        "--LabApp.expose_app_in_browser=True",
        "--LabApp.extension_manager=readonly",
    ]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # CI containers run as root
        cmd.append("--allow-root")
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=tmp)
    lab = JupyterLab(tmp / "notebooks", env, port, token, proc, log)
    try:

        def answers() -> bool:
            with urllib.request.urlopen(lab.url("api/status"), timeout=2) as r:
                return r.status == 200

        wait_until_serving(proc, answers, log, timeout=60, what="jupyter lab")
        yield lab
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()


def run_in_kernel(lab: JupyterLab, code: str) -> tuple[str, str]:
    """Start a kernel in `lab` through its REST API and run `code` there: (the kernel's id,
    what it printed and its errors).  A kernel that died, or code that failed, is an
    AssertionError that holds Jupyter's log or the output."""
    from jupyter_client import BlockingKernelClient

    req = urllib.request.Request(
        lab.url("api/kernels"),
        data=b"{}",
        method="POST",
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(req, timeout=60) as r:
        kernel_id = json.load(r)["id"]
    connection = Path(lab.env["JUPYTER_RUNTIME_DIR"]) / f"kernel-{kernel_id}.json"
    wait_for(connection.exists, timeout=60, what="the kernel's connection file", every=0.2)
    kc = BlockingKernelClient(connection_file=str(connection))
    kc.load_connection_file()
    # A kernel is "dead" to its client once a heartbeat goes unanswered for time_to_dead
    # (1 s): a kernel still starting on a busy machine misses that, and wait_for_ready
    # then says it died ("Kernel died before replying to kernel_info") while it lives.
    kc.hb_channel.time_to_dead = 30.0
    kc.start_channels()
    out: list[str] = []
    try:
        try:
            kc.wait_for_ready(timeout=120)
        except RuntimeError as e:  # the kernel died: Jupyter's log says why
            raise AssertionError(f"{e}\n{lab.log.read_text()[-3000:]}") from e
        reply = kc.execute_interactive(
            code,
            timeout=300,
            output_hook=lambda msg: (
                out.append(msg["content"]["text"])
                if msg["msg_type"] == "stream"
                else out.append(json.dumps(msg["content"]))
                if msg["msg_type"] == "error"
                else None
            ),
        )
    finally:
        kc.stop_channels()
    assert reply["content"]["status"] == "ok", "".join(out)
    return kernel_id, "".join(out)


def open_notebook(page: Any, url: str) -> None:
    """Open a notebook of a `jupyter_lab` in `page` and wait until its kernel is idle,
    saying yes when JupyterLab asks which kernel to use (the notebook's own)."""
    page.goto(url)
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
    # Either the notebook's session gets its kernel or JupyterLab asks which one to use.
    page.wait_for_function(
        """() => document.querySelector('.jp-Dialog .jp-mod-accept')
              || window.jupyterapp?.shell.currentWidget?.sessionContext?.session?.kernel""",
        timeout=60_000,
    )
    if page.locator(".jp-Dialog .jp-mod-accept").count():
        page.locator(".jp-Dialog .jp-mod-accept").click()
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60_000)


@contextlib.contextmanager
def static_server(root: Path) -> Iterator[str]:
    """Serve a folder on 127.0.0.1 (ES modules do not load from file://)."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **kw):
            super().__init__(*a, directory=str(root), **kw)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


def offline_page(browser: Any, **context_args: Any) -> Any:
    """A page of a new context whose requests go nowhere but 127.0.0.1 and files;
    the page's `.blocked` lists what it tried to load from elsewhere."""
    context = browser.new_context(**context_args)
    blocked: list[str] = []

    def route(r) -> None:
        url = r.request.url
        if url.startswith(("http://127.0.0.1:", "http://localhost:", "file:", "data:", "blob:")):
            r.continue_()
        else:
            blocked.append(url)
            r.abort()

    context.route("**/*", route)
    page = context.new_page()
    page.blocked = blocked  # type: ignore[attr-defined]
    return page


def transitions_done(page: Any) -> None:
    """Wait until no CSS transition runs on the page (bars grow to their width): before a
    screenshot."""
    page.wait_for_function(
        "() => !document.getAnimations()"
        ".some(a => a instanceof CSSTransition && a.playState === 'running')"
    )


def save(name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / name


def copy_tree(src: Path, dst: Path) -> None:
    shutil.copytree(src, dst, dirs_exist_ok=True)


# --- the notebook monitor without a kernel ----------------------------------------------
# A page that renders the built monitor.js with a stand-in model over the state a
# kernel-side MonitorWidget had (no kernel needed for what is drawn).
WIDGET_HARNESS = """<!doctype html>
<html><head><meta charset="utf-8"><title>views</title><link rel="icon" href="data:,">
<link rel="stylesheet" href="./style.css"></head>
<body style="margin:0;padding:16px;background:#f3f4f6"><div id="app" style="max-width:1360px"></div>
<script type="module">
import monitor from "./monitor.js";
// The anywidget model's interface, over the state the kernel-side widget had.
class Model {
  constructor(state) { this.state = state; this.handlers = {}; }
  get(name) { return this.state[name]; }
  set(name, value) { this.state[name] = value; for (const cb of this.handlers[`change:${name}`] || []) cb(); }
  on(event, cb) { (this.handlers[event] = this.handlers[event] || []).push(cb); }
  off() {}
  save_changes() {}
  send() {}
}
let cleanup = null;
window.show = async (name) => {
  const state = await (await fetch(`./${name}.json`)).json();
  if (cleanup) cleanup();
  const el = document.createElement("div");
  document.getElementById("app").replaceChildren(el);
  window.model = new Model(state);
  cleanup = monitor.render({ model: window.model, el });
  return true;
};
window.harnessReady = true;
</script></body></html>
"""


def widget_state(url: str, cluster_id: str, computation_id: str | None) -> dict:
    """What the notebook's monitor() holds after reading the store: its synced traits."""
    from dask_analytics_lab.widgets.monitor_widget import MonitorWidget

    w = MonitorWidget(cluster_id, computation_id=computation_id, store=url, start=False)
    try:
        for _ in range(3):  # the cluster, then the computation, then its exceptions
            w.refresh()
        assert not w.error, w.error
        state = {k: v for k, v in w.get_state().items() if not k.startswith("_") and k != "layout"}
    finally:
        w.close()
    return json.loads(json.dumps(state))


def browser_table(state: Any, name: str, key: str) -> dict:
    """A KeyedTable as js/common/table.ts readTable() rebuilds it from its two traits,
    by key; `state` is a widget or its state dict."""

    def get(trait: str, default: dict) -> dict:
        return (
            state.get(trait, default) if isinstance(state, dict) else getattr(state, trait, default)
        )

    base = get(f"{name}_base", {"v": 0, "rows": []})
    patch = get(f"{name}_patch", {"v": 0, "rows": [], "removed": []})
    rows = {r[key]: r for r in base["rows"]}
    if patch["v"] == base["v"]:
        for k in patch["removed"]:
            rows.pop(k, None)
        for r in patch["rows"]:
            rows[r[key]] = r
    return rows


def open_sidebar(browser: Any, lab: JupyterLab, errors: list[str]) -> tuple[Any, Any]:
    """A new page on `lab` with the Dask analytics sidebar shown (its page errors go to
    `errors`): (page, the sidebar's locator)."""
    page = browser.new_context(viewport={"width": 1300, "height": 900}).new_page()
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(lab.url("lab"))
    sidebar = page.locator("#dask-analytics-sidebar")
    sidebar.wait_for(state="attached", timeout=60_000)
    # Once the layout is restored: on a busy machine the restore comes after the panel
    # attached, and shows the file browser in its place.
    page.evaluate(
        "async () => { await window.jupyterapp.restored;"
        " window.jupyterapp.shell.activateById('dask-analytics-sidebar'); }"
    )
    sidebar.wait_for(state="visible", timeout=30_000)
    return page, sidebar
