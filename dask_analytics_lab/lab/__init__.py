"""JupyterLab and IPython hook-ups.

- `%load_ext dask_analytics`: see magics.py.
- The Jupyter server extension (enabled by
  etc/jupyter/jupyter_server_config.d/dask_analytics_lab.json, installed with the
  package): serves the analytics store's JSON API, team pages and report links under
  {base_url}dask-analytics/, for the sidebar and the widgets; see serverext.py.
"""

from __future__ import annotations

from typing import Any


def _jupyter_server_extension_points() -> list[dict]:
    return [{"module": "dask_analytics_lab.lab"}]


def _jupyter_labextension_paths() -> list[dict]:
    return [{"src": "../labextension", "dest": "dask-analytics-lab"}]  # relative to this module


def _load_jupyter_server_extension(serverapp: Any) -> None:
    from .serverext import load

    load(serverapp)


def load_ipython_extension(ipython: Any) -> None:
    from .magics import load

    load(ipython)


def unload_ipython_extension(ipython: Any) -> None:
    from .magics import unload

    unload(ipython)
