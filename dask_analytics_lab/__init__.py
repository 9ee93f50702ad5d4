"""dask-analytics-lab: record every Dask cluster and computation, and read it back.

The public names load on first use (PEP 562): a scheduler that imports this package
for its preload, or to unpickle the plugin, loads the collector and nothing of the
readers, reports, widgets or Jupyter hook-ups (tests/unit/test_layout.py holds it to that).
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import Any

__version__ = "0.1.0"

# Each public name and the module that defines it, imported when the name is first read.
_PUBLIC = {
    "cluster_findings": "api",
    "compare": "api",
    "ConfigError": "config",
    "cost_report": "api",
    "dask_setup": "api",
    "explain": "api",
    "export": "api",
    "flush": "api",
    "get_cluster": "api",
    "get_computation": "api",
    "get_profile": "api",
    "list_cluster_samples": "api",
    "list_clusters": "api",
    "list_computations": "api",
    "list_events": "api",
    "list_exceptions": "api",
    "list_gpu_metrics": "api",
    "list_runs": "api",
    "list_task_groups": "api",
    "list_task_stream": "api",
    "list_topics": "api",
    "list_worker_samples": "api",
    "Monitor": "gpu",
    "monitor": "widgets",
    "NoGPUWarning": "gpu",
    "performance_report": "reports",
    "list_performance_reports": "reports",
    "register": "api",
    "run_summary": "api",
    "status": "api",
    "where": "api",
}
# IPython's %load_ext looks these up here too; not part of `import *`.
_HOOKS = {
    "load_ipython_extension": "lab",
    "unload_ipython_extension": "lab",
}

__all__ = list(_PUBLIC)


def __getattr__(name: str) -> Any:
    home = _PUBLIC.get(name) or _HOOKS.get(name)
    if home is not None:
        value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    elif (
        name.isidentifier()
        and not name.startswith("__")
        and importlib.util.find_spec(f"{__name__}.{name}") is not None
    ):
        # `dal.config`, `dal.api`...: the eager root used to import these as a side effect.
        value = importlib.import_module(f"{__name__}.{name}")
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # looked up once: later reads are plain attribute reads
    return value


def __dir__() -> list[str]:
    # The public names and the module's own dunders; not the helpers, nor whichever
    # submodules happen to be loaded.
    return sorted({*_PUBLIC, *_HOOKS, *(name for name in globals() if name.startswith("__"))})
