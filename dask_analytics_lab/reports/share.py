"""The "Share report" buttons (the notebook's monitor and the JupyterLab panel): a report
of one stored computation (render.py), stored like any other (publish.py)."""
from __future__ import annotations

from .. import config
from .publish import publish
from .render import computation_report


def share_computation(computation_id: str, *, store: str | None = None, private: bool = False) -> dict:
    """Store a report of one computation; its row with "url", "id" and "local"
    (True when the store is embedded, so Jupyter's server extension serves the link)."""
    page, twin, meta = computation_report(computation_id, store=store)
    safe = "".join(c if c.isalnum() or c in "-_" else "-" for c in meta["label"])[:60].strip("-") or "computation"
    row = publish(page, twin, filename=f"dask-report-{safe}.html", private=private, title=meta["title"], store=store)
    url = store if store is not None else config.get("analytics.store")
    return dict(row, local=not str(url or "").startswith(("http://", "https://")))
