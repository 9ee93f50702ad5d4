"""The Jupyter server this kernel runs under, when it serves report links for the store.

A report link into Jupyter (`<server url>dask-analytics/reports/<id>`, served by
lab/serverext.py) opens only if (1) this process is a kernel of that server and (2) the
server's extension serves the store the report went into.  Both are checked, not
guessed, with the server's own answers:

- the running servers are Jupyter's `list_running_servers()` (its runtime files, each
  with the server's URL and token); the kernel's own server is the one whose
  `api/kernels/<id>` knows this kernel's id (the name of its connection file, as
  Jupyter names it: kernel-<id>.json).  Servers whose process is this kernel's parent
  are asked first, so a usual local lab answers with one request;
- `dask-analytics/lab-info` says which store the extension serves (masked as in logs).

Anything else (a plain script, a console kernel, a server behind a password only, a
unix socket or JupyterHub's proxy, a different store) is None: no link is better than a
dead one.
"""

from __future__ import annotations

import logging
import os
import re
import sys
from pathlib import Path

from ..remote import ServerClient

logger = logging.getLogger("dask_analytics_lab")

# Each answer comes from a server on this host: a short wait, then a file:// link instead.
TIMEOUT = 3.0
EXTENSION_PATH = "dask-analytics"
_KERNEL_FILE = re.compile(r"^kernel-(.+)\.json$")


def this_kernel_id() -> str | None:
    """This process's kernel id (from its connection file), or None outside a kernel."""
    if "ipykernel.kernelapp" not in sys.modules:
        return None  # not imported: not an IPython kernel (and no import for a script to pay)
    from ipykernel.kernelapp import IPKernelApp

    if not IPKernelApp.initialized():
        return None
    match = _KERNEL_FILE.match(Path(IPKernelApp.instance().connection_file).name)
    return match.group(1) if match else None


def _running_servers() -> list[dict]:
    try:
        from jupyter_server.serverapp import list_running_servers
    except ImportError:
        return []
    servers = [
        s
        for s in list_running_servers()
        if str(s.get("url", "")).startswith(("http://", "https://"))
    ]
    parent = os.getppid()
    return sorted(servers, key=lambda s: s.get("pid") != parent)


def _runs_kernel(client: ServerClient, kernel_id: str) -> bool:
    try:
        client.get(f"/api/kernels/{kernel_id}")
    except Exception:  # another server's kernel (404), or a server that does not answer
        return False
    return True


def _serves(client: ServerClient, store_url: str) -> bool:
    """Whether the server's dask-analytics extension serves `store_url`."""
    from ..urls import mask_url

    try:
        info = client.get(f"/{EXTENSION_PATH}/lab-info")
    except Exception as e:  # the extension is off, or serves nothing (a team server store)
        logger.info("dask-analytics: Jupyter server %s serves no reports: %s", client.url, e)
        return False
    return isinstance(info, dict) and info.get("store") == mask_url(store_url)


def report_base(store_url: str) -> str | None:
    """`<server url>dask-analytics` of the Jupyter server running this kernel, when its
    extension serves `store_url` (a config.validate_store URL); else None."""
    kernel_id = this_kernel_id()
    if kernel_id is None:
        return None
    for server in _running_servers():
        if not server.get("token"):
            continue  # a password-only server: nothing here can ask it, so nothing is known
        client = ServerClient(server["url"], token=server["token"], timeout=TIMEOUT)
        try:
            if _runs_kernel(client, kernel_id):
                return (
                    server["url"].rstrip("/") + "/" + EXTENSION_PATH
                    if _serves(client, store_url)
                    else None
                )
        finally:
            client.close()
    return None
