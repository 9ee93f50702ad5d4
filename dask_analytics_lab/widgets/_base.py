"""The base of every view: the ES module it renders with, and the feed that fills it."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

try:
    import anywidget
    import traitlets as t
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "dask-analytics: the notebook widgets need anywidget and ipywidgets: "
        "pip install 'dask-analytics-lab[jupyter]'"
    ) from e

from ..polling import LIVE
from ._feed import Feed

STATIC = Path(__file__).resolve().parent.parent / "static"
_DISPLAYED = "(displayed by the kernel)"  # a view assumed on screen until views report
# Seconds after the cell that displayed a widget ends (the kernel is then free to hear
# its views) within which a view must speak; else no front end shows it (a terminal,
# nbconvert, a front end without the widget manager) and it stops reading the store.
SILENT_VIEW = 10.0

_MISSING = """
export default { render({ el }) {
  el.innerHTML = '<div style="padding:12px;border:1px solid #e5484d;border-radius:6px;color:#c0282d">' +
    'dask-analytics: the widget JavaScript (%s) was not built. Reinstall with <code>pip install -e .</code> ' +
    '(it runs npm), or run <code>npm install && npm run build</code> in the repository.</div>';
} };
"""


def bundle(name: str) -> Path | str:
    """dask_analytics_lab/static/<name>.js, built by js/build.mjs during pip install."""
    path = STATIC / f"{name}.js"
    return path if path.exists() else _MISSING % f"static/{name}.js"


def stylesheet() -> Path | str:
    """dask_analytics_lab/static/style.css (js/common/style.css): the views' one stylesheet,
    given to every widget through anywidget's _css instead of being copied into each bundle."""
    path = STATIC / "style.css"
    return path if path.exists() else ""


def table_traits(name: str) -> dict[str, Any]:
    """The two traits a KeyedTable travels in (see _sync.py)."""
    return {
        f"{name}_base": t.Dict({"v": 0, "rows": []}).tag(sync=True),
        f"{name}_patch": t.Dict({"v": 0, "rows": [], "removed": []}).tag(sync=True),
    }


class LiveView(anywidget.AnyWidget):
    """A view that polls the analytics store (through dask_analytics_lab.api) while shown.

    "Shown" is what its front-end views say (js/common/onscreen.ts): each sends
    {type: "view", id, visible} as it comes on or goes off screen and when it is removed.
    The feed runs while at least one view is visible, so a widget nobody displays, or
    whose outputs were cleared or scrolled away, costs the store nothing.  A view's
    messages reach the kernel only once it is free, so displaying the widget counts as
    a view on screen until the first message comes: `monitor(); x.compute()` in one
    cell updates live while the cell blocks.
    """

    _css = stylesheet()
    store = t.Unicode(None, allow_none=True)  # kernel-side only: which store to read
    interval = t.Float(LIVE)  # seconds between looks at the store (polling.json)
    error = t.Unicode("").tag(sync=True)

    def __init__(self, *, start: bool = True, **kwargs: Any):
        """start=False: never poll by itself (refresh() reads the store)."""
        super().__init__(**kwargs)
        self._feed = Feed(self)
        self._polls = start
        self._views_on_screen: set[str] = set()
        self._heard_from_views = False
        self.on_msg(self._on_view_msg)

    def _repr_mimebundle_(self, **kwargs: Any) -> Any:
        if not self._heard_from_views:
            self._views_on_screen.add(_DISPLAYED)
            self._follow_views()
            self._await_views()
        return super()._repr_mimebundle_(**kwargs)

    def _await_views(self) -> None:
        """A view speaks once the kernel is free to hear it: give it SILENT_VIEW seconds
        after the displaying cell ends, then take the display for nobody's."""
        try:
            from IPython import get_ipython
        except ImportError:
            return
        shell = get_ipython()
        if shell is None:
            return

        def cell_ended(*_: Any) -> None:
            shell.events.unregister("post_run_cell", cell_ended)
            timer = threading.Timer(SILENT_VIEW, self._views_silent)
            timer.daemon = True
            timer.start()

        shell.events.register("post_run_cell", cell_ended)

    def _views_silent(self) -> None:
        if not self._heard_from_views:
            self._views_on_screen.discard(_DISPLAYED)
            self._follow_views()

    @property
    def polling(self) -> bool:
        """Whether the feed is reading the store now (a view of it is on screen)."""
        return self._feed.running

    def _on_view_msg(self, _widget: Any, content: Any, _buffers: Any) -> None:
        if not (
            isinstance(content, dict)
            and content.get("type") == "view"
            and isinstance(content.get("id"), str)
        ):
            return
        self._heard_from_views = True
        self._views_on_screen.discard(_DISPLAYED)  # the views speak for themselves now
        if content.get("visible"):
            self._views_on_screen.add(content["id"])
        else:
            self._views_on_screen.discard(content["id"])
        self._follow_views()

    def _follow_views(self) -> None:
        if self._polls and self._views_on_screen:
            if not self._feed.running:
                self._feed.start()
                self._feed.poke()  # back on screen: what changed meanwhile, now
        else:
            self._feed.stop()

    def refresh(self) -> None:
        """Read the store now (tests and benchmarks call this instead of waiting)."""
        self._feed.tick()

    def close(self) -> None:
        self._feed.stop()
        super().close()
