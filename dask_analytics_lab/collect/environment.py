"""What a cluster runs on: package versions and platform, read once at start."""
from __future__ import annotations

import os
import platform
import socket
import sys
from importlib import metadata

PACKAGES = ("dask", "distributed", "msgpack", "cloudpickle", "lz4", "numpy", "pandas")


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            pass
    return found


def platform_info() -> dict[str, str]:
    return {
        "arch": platform.machine(),
        "os": f"{platform.system()} {platform.release()}",
        "python": sys.version.split()[0],
        "python_executable": sys.executable,
        "hostname": socket.gethostname(),
        "pid": str(os.getpid()),
    }
