"""`import dask_analytics` and `%load_ext dask_analytics`: the same API as dask_analytics_lab.

As lazy as dask_analytics_lab: a name loads its module when first read here.
"""

from typing import Any

import dask_analytics_lab
from dask_analytics_lab import __all__, __version__  # noqa: F401

# IPython's %load_ext and the Jupyter server look these up on the imported module.
from dask_analytics_lab.lab import (  # noqa: F401
    _jupyter_server_extension_points,
    load_ipython_extension,
    unload_ipython_extension,
)


def __getattr__(name: str) -> Any:
    # The names `from dask_analytics_lab import *` gave this module before.
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(dask_analytics_lab, name)


def __dir__() -> list[str]:
    return sorted(
        {
            *__all__,
            *(name for name in globals() if name.startswith("__")),
            "load_ipython_extension",
            "unload_ipython_extension",
            "_jupyter_server_extension_points",
        }
    )
