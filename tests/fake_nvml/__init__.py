"""Build and configure the fake `libnvidia-ml.so.1` (see fake_nvml.c).

Tests put the built library's folder on LD_LIBRARY_PATH of a process *before* it
starts (the dynamic loader reads LD_LIBRARY_PATH once, at process start), and
point FAKE_NVML_CONFIG at a config file written by `write_config`.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("fake_nvml.c")
LIBNAME = "libnvidia-ml.so.1"


def build() -> Path:
    """Compile the fake library once per source version; return the folder holding it.

    Cached under the temp dir by a hash of the source, built to a temporary name
    and renamed, so concurrent test processes never load a half-written file.
    """
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"dal-fake-nvml-{digest}"
    lib = folder / LIBNAME
    if lib.exists():
        return folder
    gcc = shutil.which("gcc") or shutil.which("cc")
    if gcc is None:
        raise RuntimeError("the GPU tests need a C compiler (gcc) to build the fake NVML library")
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{LIBNAME}.{os.getpid()}"
    subprocess.run(
        [
            gcc,
            "-shared",
            "-fPIC",
            "-O2",
            "-Wall",
            "-Wno-format-truncation",
            "-o",
            str(tmp),
            str(SOURCE),
            "-lpthread",
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    os.replace(tmp, lib)
    return folder


def device(uuid: str, **fields: object) -> str:
    """One `device` config line; values that are lists become comma series."""
    return "device " + _pairs(uuid=uuid, **fields)


def mig(parent: int, uuid: str, **fields: object) -> str:
    return "mig " + _pairs(parent=parent, uuid=uuid, **fields)


def _pairs(**fields: object) -> str:
    out = []
    for key, value in fields.items():
        if isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        value = str(value)
        out.append(f'{key}="{value}"' if " " in value else f"{key}={value}")
    return " ".join(out)


def write_config(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


def env(config: Path, lib_folder: Path | None = None) -> dict[str, str]:
    """Environment for a process that should see the fake GPUs of `config`."""
    folder = lib_folder or build()
    prior = os.environ.get("LD_LIBRARY_PATH")
    return {
        "LD_LIBRARY_PATH": str(folder) + (os.pathsep + prior if prior else ""),
        "FAKE_NVML_CONFIG": str(config),
    }
