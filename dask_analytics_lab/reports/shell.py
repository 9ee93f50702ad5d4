"""A report page's HTML shell: the views' bundle and stylesheet inlined, the page's
state as JSON text, two scripts that a policy can name by their hashes.  What goes in
the state is twin_page.py's; this module only wraps it."""

from __future__ import annotations

import base64
import functools
import hashlib
import html
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# The views' bundle for a report page, built from js/ into the package's static folder.
REPORT_SCRIPT = Path(__file__).resolve().parent.parent / "static" / "report-page.js"

PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<style>{css}</style>
<style>
  body {{ margin: 0; padding: 28px 20px 40px; background: #f3f4f6; font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }}
  .wrap {{ max-width: 1280px; margin: 0 auto; }}
  h1 {{ font-size: 18px; font-weight: 650; margin: 0 0 4px; color: #1f2328; }}
  .sub {{ color: #59636e; font-size: 13px; margin-bottom: 16px; }}
  .foot {{ color: #8c959f; font-size: 12px; margin-top: 14px; }}
  #app .dal-side, #app .dal-pane {{ max-height: none; }}
</style></head>
<body><div class="wrap">
<h1>{title}</h1>
<div class="sub">{subtitle}</div>{links}
<div id="app"></div>
<div class="foot">Recorded by dask-analytics-lab; the data behind this page is its JSON twin
(this link with <code>.json</code> at the end).</div>
</div>
<script type="application/json" id="dal-state">{state}</script>
<script>{script}</script>
<script>{boot}</script>
</body></html>
"""
# The page's second script: the same on every page, so a policy can name it by its hash.
BOOT = """
  DaskAnalyticsReport.render(document.getElementById("app"),
    JSON.parse(document.getElementById("dal-state").textContent));
"""


@functools.cache
def _bundle() -> tuple[str, str]:
    """The views' bundle as the page inlines it, and the page's stylesheet."""
    script = REPORT_SCRIPT.read_text().replace("</script", "<\\/script")
    return script, (REPORT_SCRIPT.parent / "style.css").read_text()


def page_script_sources() -> str:
    """The page's two scripts as CSP sources ('sha256-...'): they are the same on every
    report page, so a page rendered once can be served to every reader under a policy
    that runs these and nothing else (a per-request nonce would need a render a request)."""
    return " ".join(
        "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"
        for text in (_bundle()[0], BOOT)
    )


def _script_json(value: Any) -> str:
    # Inside <script>, "</script" would end the element early and "<!--" can make it swallow
    # what follows: no "<" at all (JSON reads \u003c as "<").
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c")


def report_page(
    title: str,
    subtitle: str,
    state: dict,
    *,
    links: Sequence[tuple[str, str]] = (),
) -> str:
    """One self-contained report page: the views' bundle over `state`.  Every recorded
    string reaches the page as escaped text or inside the JSON state (which the views
    put in the DOM as text); its two scripts are page_script_sources(), for a policy
    that runs no other; `links` are (text, URL) shown under the title."""
    script, css = _bundle()
    shown = "".join(
        f' <a class="dal-report-link" href="{html.escape(url, quote=True)}">{html.escape(text)}</a>'
        for text, url in links
    )
    return PAGE.format(
        title=html.escape(title),
        subtitle=html.escape(subtitle),
        state=_script_json(state),
        css=css,
        script=script,
        boot=BOOT,
        links=f'<div class="sub">{shown}</div>' if shown else "",
    )
