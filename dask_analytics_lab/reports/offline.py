"""Reports that render with no internet: BokehJS inside the page, not from its CDN.

distributed's report loads BokehJS from cdn.bokeh.org unless made with mode="inline"
(ours are, unless the user asks otherwise); a stored report is served under a policy
that loads nothing from elsewhere (server/report_handlers.py), and an air-gapped viewer
could not reach the CDN anyway.  So every report is stored with the CDN's script tags
replaced by the installed bokeh's own files, inline: a plain Dask report uploaded to the
server, or one made with mode="cdn", opens as one made inline does.
"""

from __future__ import annotations

import functools
import re

# <script src="https://cdn.bokeh.org/bokeh/release/bokeh-widgets-3.9.2.min.js"></script>:
# the component is "bokeh-widgets".
CDN_SCRIPT = re.compile(
    r"""<script\b[^>]*?\bsrc=["']https?://cdn\.bokeh\.org/bokeh/[a-z]+/(bokeh(?:-[a-z]+)*?)-\d[^"'/]*?\.js["']"""
    r"""[^>]*>\s*</script\s*>""",
    re.IGNORECASE,
)


@functools.cache
def _inline_component(name: str) -> str | None:
    """The installed BokehJS component `name` as an inline <script>, or None when this
    bokeh has no such component."""
    from bokeh.resources import Resources

    if name not in Resources(mode="inline").components:
        return None
    source = Resources(mode="inline", components=[name]).js_raw[0]
    return "<script>" + source.replace("</script", "<\\/script") + "</script>"


def inline_bokeh(html: str) -> str:
    """`html` with each BokehJS script from the CDN replaced by the installed one, inline.
    (A different version than the page was made with still draws its plots; a CDN that
    cannot be reached draws nothing.)"""
    if "cdn.bokeh.org" not in html:
        return html
    return CDN_SCRIPT.sub(lambda m: _inline_component(m.group(1).lower()) or m.group(0), html)
