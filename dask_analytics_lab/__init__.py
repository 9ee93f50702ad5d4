"""dask-analytics-lab: record every Dask cluster and computation, and read it back."""
from .api import (
    compare,
    cost_report,
    dask_setup,
    export,
    flush,
    get_cluster,
    get_computation,
    get_profile,
    list_cluster_samples,
    list_clusters,
    list_computations,
    list_events,
    list_exceptions,
    list_gpu_metrics,
    list_runs,
    list_task_groups,
    list_task_stream,
    list_worker_samples,
    register,
    status,
    where,
)
from .config import ConfigError
from .gpu import Monitor, NoGPUWarning
from .reports import list_performance_reports, performance_report
from .lab import load_ipython_extension, unload_ipython_extension
from .widgets import monitor

__version__ = "0.1.0"

__all__ = [
    "compare",
    "ConfigError",
    "cost_report",
    "dask_setup",
    "export",
    "flush",
    "get_cluster",
    "get_computation",
    "get_profile",
    "list_cluster_samples",
    "list_clusters",
    "list_computations",
    "list_events",
    "list_exceptions",
    "list_gpu_metrics",
    "list_runs",
    "list_task_groups",
    "list_task_stream",
    "list_worker_samples",
    "Monitor",
    "monitor",
    "NoGPUWarning",
    "performance_report",
    "list_performance_reports",
    "register",
    "status",
    "where",
]
