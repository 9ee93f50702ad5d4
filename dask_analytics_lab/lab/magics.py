"""`%load_ext dask_analytics`: record the current Client's cluster and every Client
made later in this kernel, and say where it records.

    %load_ext dask_analytics
    %dask_analytics            # where it records, and what each cluster's plugin did
    %dask_analytics monitor    # show the live monitor widget
"""

from __future__ import annotations

import sys
from typing import Any

import dask.config

PRELOAD = "dask_analytics_lab.lab.preload"
_registered: dict[str, str] = {}  # client id -> cluster id


def _say(text: str) -> None:
    print(f"dask-analytics: {text}", file=sys.stdout, flush=True)


def register_and_say(client: Any) -> dict | None:
    """Register analytics on `client`'s cluster (once per cluster) and say so."""
    from .. import api

    address = getattr(getattr(client, "scheduler", None), "address", None)
    if client.id in _registered:
        return None
    try:
        info = api.register(client)
    except Exception as e:  # never break the user's Client over analytics
        _say(f"could not record the cluster at {address}: {e}")
        return None
    _registered[client.id] = info["cluster_id"]
    cluster = getattr(client, "cluster", None)
    name = type(cluster).__name__ if cluster is not None else address
    _say(f"recording {name} (cluster {info['cluster_id']}) into {info['store']}")
    return info


def _running_clients() -> list[Any]:
    try:
        from distributed.client import _global_clients
    except ImportError:
        return []
    return [c for c in list(_global_clients.values()) if getattr(c, "status", None) == "running"]


def load(ipython: Any) -> None:
    from .. import api, config
    from ..collect.endings import install_sigterm_handler

    # Validate the analytics config now: a bad key fails here, with its name.
    settings = config.resolve()
    if settings["code_transmit"]:
        # Clients send their code only when nframes > 0; set before any computation.
        dask.config.set({"distributed.diagnostics.computations.nframes": settings["code_nframes"]})
    # The preload registers each Client in a thread, where Python cannot set a signal
    # handler: set here (the main thread) the one that ends a recording on SIGTERM.
    install_sigterm_handler()
    preloads = list(dask.config.get("distributed.client.preload", []) or [])
    if PRELOAD not in preloads:
        dask.config.set({"distributed.client.preload": preloads + [PRELOAD]})
    _say(f"recording into {api.where()}")
    found = False
    for client in _running_clients():
        found = True
        register_and_say(client)
    _say(
        ("every Client" if not found else "every other Client")
        + " you create in this kernel is recorded too; "
        "see it live with: from dask_analytics_lab import monitor; monitor()"
    )
    if ipython is not None:
        ipython.register_magic_function(_magic, magic_kind="line", magic_name="dask_analytics")


def unload(ipython: Any) -> None:
    preloads = [p for p in dask.config.get("distributed.client.preload", []) or [] if p != PRELOAD]
    dask.config.set({"distributed.client.preload": preloads})
    _say(
        "new Clients are no longer recorded (clusters registered so far keep recording until they close)"
    )


def _magic(line: str) -> Any:
    from .. import api

    command = line.strip() or "status"
    if command == "monitor":
        from ..widgets import monitor

        return monitor()
    if command == "status":
        _say(f"recording into {api.where()}")
        for client in _running_clients():
            try:
                info = api.status(client)
                _say(
                    f"cluster {info['cluster_id']}: {info['stored']} messages stored, {info['pending']} pending, "
                    f"{info['dropped']} dropped"
                )
            except Exception:
                _say(
                    f"the cluster at {client.scheduler.address} is not recorded (run %load_ext dask_analytics again)"
                )
        return None
    _say(f"unknown command {command!r}; use %dask_analytics [status|monitor]")
    return None
