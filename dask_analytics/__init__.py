"""`import dask_analytics` and `%load_ext dask_analytics`: the same API as dask_analytics_lab."""
from dask_analytics_lab import *  # noqa: F401,F403
from dask_analytics_lab import __all__, __version__, dask_setup  # noqa: F401
# IPython's %load_ext and the Jupyter server look these up on the imported module.
from dask_analytics_lab.lab import (  # noqa: F401
    _jupyter_server_extension_points,
    load_ipython_extension,
    unload_ipython_extension,
)
