"""`import dask_analytics` and `%load_ext dask_analytics`: the same API as dask_analytics_lab."""
from dask_analytics_lab import *  # noqa: F401,F403
from dask_analytics_lab import __all__, __version__, dask_setup  # noqa: F401
