"""What a cluster runs on: package versions and platform, read once at start, through
distributed's own report (what `client.get_versions()` shows)."""

from __future__ import annotations

import os
import platform
import socket
import sys

from distributed.versions import (
    get_package_info,
    get_system_info,
    optional_packages,
    required_packages,
)


def versions() -> dict[str, str]:
    """{"python": "3.11.9", "dask": ..., ...}: distributed's required and optional
    packages that are installed."""
    found = {"python": platform.python_version()}
    for name, version in get_package_info([*required_packages, *optional_packages]).items():
        if version is not None and name != "python":
            found[name] = str(version)
    return found


def platform_info() -> dict[str, str]:
    host = get_system_info()
    return {
        "arch": host["machine"],
        "os": f"{host['OS']} {host['OS-release']}",
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "hostname": socket.gethostname(),
        "pid": str(os.getpid()),
    }
