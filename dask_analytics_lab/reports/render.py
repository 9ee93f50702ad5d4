"""A stored computation as a report: one self-contained page and its twin.

distributed's `performance_report` records what happens inside a `with` block, so it
cannot describe a computation that already ran.  The Share buttons instead report the
computation from the store: its twin is the store's rows (twin.py) and its page the
monitor's own views over the state twin_page.py makes of that twin (task groups,
findings, time breakdown, task stream, profile flamegraph, code, cluster with its
workers over time, GPU), in one HTML file with its JavaScript inlined (shell.py).  The
same twin makes the same page wherever it is rendered: here for Download HTML, on the
team server and in the Jupyter extension for a stored report's link.

It honours the privacy switches of both this process's config and the cluster's
recorded settings (twin.py): with code off it holds no snippet and no code line, with
the profile off no profile (an empty tree); `summary.recorded` says which were kept.
"""

from __future__ import annotations

from ..readers import open_reader
from .shell import BOOT, REPORT_SCRIPT, page_script_sources, report_page
from .twin import build_twin
from .twin_page import page_title, twin_report_page

__all__ = [
    "BOOT",
    "REPORT_SCRIPT",
    "computation_report",
    "page_script_sources",
    "report_page",
]


def computation_report(computation_id: str, *, store: str | None = None) -> tuple[str, dict, dict]:
    """(html, twin, meta) of one stored computation: its twin from the store's rows
    (twin.py) and the page made from that twin (twin_page.py), as every report page is."""
    twin = build_twin(open_reader(store), [computation_id])
    meta = {"title": page_title(twin), "label": twin["summary"]["label"] or computation_id}
    return twin_report_page(twin, meta), twin, meta
