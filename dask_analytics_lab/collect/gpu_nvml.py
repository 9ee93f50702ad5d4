"""Read NVIDIA GPUs through NVML, via NVIDIA's own `pynvml` module (nvidia-ml-py).

Everything here is blocking C calls: run it on a thread, never on an event loop
(nvmlInit alone can take seconds when the driver is not in persistence mode).

- Which devices: the ones this process may use, as CUDA_VISIBLE_DEVICES says (by
  index, by GPU-/MIG- UUID or unique UUID prefix, as CUDA accepts them); all GPUs
  when it is unset.  A MIG-enabled GPU brings its MIG devices along.
- A getter that says NotSupported (or NoPermission, or is missing from an old
  driver) gives None, and is not asked again for that device.
- A device that is lost (fell off the bus, MIG instance destroyed) is dropped with
  one log line; the others go on.
- No pynvml, no library, no driver, no device: `NVMLUnavailable` whose message
  starts "no NVIDIA GPU/driver found" and says why.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import EllipsisType
from typing import Any, TypedDict

try:
    import pynvml
except ImportError:  # nvidia-ml-py is the optional `gpu` extra
    pynvml = None

logger = logging.getLogger("dask_analytics_lab.gpu")

# Metric names of the dask-metrics API, plus power and temperature.
METRICS = ("total-mem", "mem-util", "compute-util", "power", "temperature")
DEFAULT_METRICS = METRICS

NO_GPU = "no NVIDIA GPU/driver found"


class NVMLUnavailable(RuntimeError):
    """This process cannot read any NVIDIA GPU; str() says why, for the user."""


def _code(name: str, default: int) -> int:
    return getattr(pynvml, name, default) if pynvml is not None else default


# Errors after which a device is gone for good (as far as this run goes).
_LOST = {
    _code("NVML_ERROR_GPU_IS_LOST", 15),
    _code("NVML_ERROR_NOT_FOUND", 6),
    _code("NVML_ERROR_INVALID_ARGUMENT", 2),
    _code("NVML_ERROR_GPU_NOT_FOUND", 28),
    _code("NVML_ERROR_RESET_REQUIRED", 16),
}
# Errors that will not change between samples: stop asking that getter.
_NEVER = {
    _code("NVML_ERROR_NOT_SUPPORTED", 3),
    _code("NVML_ERROR_NO_PERMISSION", 4),
    _code("NVML_ERROR_FUNCTION_NOT_FOUND", 13),
}


def _text(value: Any) -> str:
    # pynvml returns str from nvidia-ml-py >= 11.515, bytes before.
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class DeviceInfo(TypedDict):
    """What a worker says of one device (`describe`)."""

    uuid: str
    index: int | None
    name: str | None
    mem_total: int | None
    mig: bool


class Reading(TypedDict):
    """One device's figures at one moment, in the contract's field names (messages.GpuSample)."""

    gpu_uuid: str
    gpu_index: int | None
    gpu_name: str | None
    mem_used: int | None
    mem_total: int | None
    mem_util: float | None
    compute_util: float | None
    power_w: float | None
    temperature_c: float | None


@dataclass
class GPUDevice:
    """One device this process may use.  Rows are keyed by (host, uuid), not index."""

    uuid: str
    index: int | None  # NVML index of the physical GPU (the parent's, for a MIG device)
    name: str | None
    mem_total: int | None
    mig: bool = False
    handle: Any = field(default=None, repr=False, compare=False)
    # Getters found unsupported: skipped from then on (saves a C call per sample).
    unsupported: set[str] = field(default_factory=set, repr=False, compare=False)

    def describe(self) -> DeviceInfo:
        return {
            "uuid": self.uuid,
            "index": self.index,
            "name": self.name,
            "mem_total": self.mem_total,
            "mig": self.mig,
        }


def parse_visible(value: str | None) -> list[int | str] | None:
    """CUDA_VISIBLE_DEVICES as CUDA reads it: None = all devices, [] = none.

    Entries are indices or GPU-/MIG- UUIDs (or unique prefixes); like CUDA, the
    list ends at the first entry that is neither (e.g. "-1" hides every device).
    """
    if value is None:
        return None
    out: list[int | str] = []
    for raw in value.split(","):
        item = raw.strip()
        if not item:
            break
        if item.lstrip("+").isdigit():
            out.append(int(item))
        elif item.startswith(("GPU-", "MIG-")):
            out.append(item)
        else:
            if item != "-1":
                logger.warning(
                    "CUDA_VISIBLE_DEVICES entry %r is not an index or GPU-/MIG- UUID; "
                    "like CUDA, ignoring it and the entries after it",
                    item,
                )
            break
    return out


def _init() -> None:
    """nvmlInit, with the failure turned into a message a user can act on."""
    if pynvml is None:
        raise NVMLUnavailable(
            f"{NO_GPU}: the nvidia-ml-py package (module pynvml) is not installed "
            "in this worker's environment; pip install 'dask-analytics-lab[gpu]'"
        )
    try:
        pynvml.nvmlInit()  # reference-counted by NVML: safe next to distributed's own init
    except pynvml.NVMLError as e:
        code = getattr(e, "value", None)
        if code == _code("NVML_ERROR_LIBRARY_NOT_FOUND", 12):
            why = "the NVIDIA driver library libnvidia-ml.so.1 is not installed or not on the library path"
        elif code == _code("NVML_ERROR_DRIVER_NOT_LOADED", 9):
            why = "the NVIDIA kernel driver is not loaded"
        elif code == _code("NVML_ERROR_NO_PERMISSION", 4):
            why = "no permission to talk to the NVIDIA driver"
        else:
            why = f"NVML could not start ({e})"
        raise NVMLUnavailable(f"{NO_GPU}: {why}") from None
    except OSError as e:  # a broken libnvidia-ml (wrong architecture, missing symbols)
        raise NVMLUnavailable(f"{NO_GPU}: libnvidia-ml.so.1 could not be loaded ({e})") from None


def _shutdown() -> None:
    try:
        pynvml.nvmlShutdown()
    except Exception:  # already shut down, or the library went away: nothing to release
        pass


class GPUReader:
    """Open NVML, find this process's devices, and read them on demand.

    Not thread-safe by itself: one reader per sampling thread.
    """

    def __init__(self, visible: str | None | EllipsisType = ...):
        if visible is ...:
            visible = os.environ.get("CUDA_VISIBLE_DEVICES")
        _init()
        self._open = True
        try:
            self.driver = self._driver_version()
            self.devices: list[GPUDevice] = discover(parse_visible(visible))
        except BaseException:
            self.close()
            raise
        if not self.devices:
            self.close()
            if visible is not None and parse_visible(visible) == []:
                raise NVMLUnavailable(
                    f"{NO_GPU}: CUDA_VISIBLE_DEVICES={visible!r} hides every GPU from this worker"
                )
            raise NVMLUnavailable(
                f"{NO_GPU}: the driver is loaded but reports no usable GPU"
                + (f" for CUDA_VISIBLE_DEVICES={visible!r}" if visible else "")
            )

    @staticmethod
    def _driver_version() -> str | None:
        try:
            return _text(pynvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError:
            return None

    def close(self) -> None:
        if getattr(self, "_open", False):
            self._open = False
            _shutdown()

    def __enter__(self) -> GPUReader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def describe(self) -> list[DeviceInfo]:
        return [d.describe() for d in self.devices]

    def read(self, metrics: Iterable[str] = DEFAULT_METRICS) -> list[Reading]:
        """One reading per device still present, in the contract's field names.

        Memory is always read (peak memory needs it; it is one call); utilisation,
        power and temperature only when asked for.  Lost devices are dropped.
        """
        wanted = set(metrics)
        out: list[Reading] = []
        lost: list[tuple[GPUDevice, str]] = []
        for dev in self.devices:
            try:
                out.append(self._read_one(dev, wanted))
            except _Lost as e:
                lost.append((dev, e.reason))
        for dev, reason in lost:
            self.devices.remove(dev)
            logger.warning(
                "GPU %s (index %s, %s) vanished (%s); no longer sampled",
                dev.uuid,
                dev.index,
                dev.name,
                reason,
            )
        return out

    def _read_one(self, dev: GPUDevice, wanted: set[str]) -> Reading:
        mem = self._get(dev, "memory", pynvml.nvmlDeviceGetMemoryInfo)
        used = total = None
        if mem is not None:
            used, total = int(mem.used), int(mem.total)
            dev.mem_total = total
        util = (
            self._get(dev, "utilization", pynvml.nvmlDeviceGetUtilizationRates)
            if "compute-util" in wanted
            else None
        )
        power = (
            self._get(dev, "power", pynvml.nvmlDeviceGetPowerUsage) if "power" in wanted else None
        )
        temp = (
            self._get(
                dev,
                "temperature",
                pynvml.nvmlDeviceGetTemperature,
                _code("NVML_TEMPERATURE_GPU", 0),
            )
            if "temperature" in wanted
            else None
        )
        return {
            "gpu_uuid": dev.uuid,
            "gpu_index": dev.index,
            "gpu_name": dev.name,
            "mem_used": used,
            "mem_total": total,
            # % of total memory in use (what dask-metrics' mem-util meant), not NVML's
            # memory-controller busy time.
            "mem_util": round(100.0 * used / total, 2) if used is not None and total else None,
            "compute_util": float(util.gpu) if util is not None else None,
            "power_w": power / 1000.0 if power is not None else None,  # NVML says milliwatts
            "temperature_c": float(temp) if temp is not None else None,
        }

    @staticmethod
    def _get(dev: GPUDevice, what: str, fn: Any, *args: Any) -> Any:
        if what in dev.unsupported:
            return None
        try:
            return fn(dev.handle, *args)
        except pynvml.NVMLError as e:
            code = getattr(e, "value", None)
            if code in _NEVER:
                dev.unsupported.add(what)
                logger.debug("GPU %s: %s not available (%s)", dev.uuid, what, e)
                return None
            if code in _LOST:
                raise _Lost(str(e)) from None
            logger.debug("GPU %s: reading %s failed this time (%s)", dev.uuid, what, e)
            return None


class _Lost(Exception):
    def __init__(self, reason: str):
        self.reason = reason


def probe(visible: str | None | EllipsisType = ...) -> dict[str, Any]:
    """What a worker has, for `Monitor.attach`: {"ok", "devices", "driver"} or {"ok": False, "error"}."""
    try:
        with GPUReader(visible) as reader:
            return {"ok": True, "devices": reader.describe(), "driver": reader.driver}
    except NVMLUnavailable as e:
        return {"ok": False, "error": str(e)}
    except Exception as e:  # never let a strange driver break attach()
        return {
            "ok": False,
            "error": f"{NO_GPU}: NVML failed unexpectedly ({type(e).__name__}: {e})",
        }


# --- discovery ---------------------------------------------------------------
def discover(visible: list[int | str] | None) -> list[GPUDevice]:
    """Devices for a parsed CUDA_VISIBLE_DEVICES (None: every GPU), without duplicates."""
    if visible is None:
        count = pynvml.nvmlDeviceGetCount()
        wanted: list[int | str] = list(range(count))
    else:
        wanted = visible
    found: list[GPUDevice] = []
    seen: set[str] = set()
    for item in wanted:
        try:
            devices = _resolve(item)
        except pynvml.NVMLError as e:
            # CUDA stops at the first device it cannot use; so do we.
            logger.warning(
                "GPU %r from CUDA_VISIBLE_DEVICES cannot be used (%s); ignoring it and later entries",
                item,
                e,
            )
            break
        if not devices:  # _resolve said why
            break
        for dev in devices:
            if dev.uuid not in seen:
                seen.add(dev.uuid)
                found.append(dev)
    return found


def _resolve(item: int | str) -> list[GPUDevice]:
    if isinstance(item, int):
        return _with_migs(pynvml.nvmlDeviceGetHandleByIndex(item), item)
    try:
        handle = pynvml.nvmlDeviceGetHandleByUUID(item)
    except pynvml.NVMLError:
        handle = None
    if handle is not None:
        if _is_mig(handle):
            return [_mig_device(handle)]
        return _with_migs(handle, None)
    # CUDA also takes a unique prefix of a UUID: search all GPUs and MIG devices.
    matches: list[list[GPUDevice]] = []
    for i in range(pynvml.nvmlDeviceGetCount()):
        try:
            gpu = pynvml.nvmlDeviceGetHandleByIndex(i)
        except pynvml.NVMLError:
            continue
        if item.startswith("GPU-") and _text(pynvml.nvmlDeviceGetUUID(gpu)).startswith(item):
            matches.append(_with_migs(gpu, i))
        elif item.startswith("MIG-"):
            matches.extend([m] for m in _migs_of(gpu, i) if m.uuid.startswith(item))
    if len(matches) != 1:
        logger.warning(
            "CUDA_VISIBLE_DEVICES entry %r matches %s; like CUDA, ignoring it and later entries",
            item,
            "several devices" if matches else "no device",
        )
        return []
    return matches[0]


def _is_mig(handle: Any) -> bool:
    try:
        result = pynvml.nvmlDeviceIsMigDeviceHandle(handle)  # a ctypes c_uint
        return bool(getattr(result, "value", result))
    except pynvml.NVMLError:
        return False


def _physical(handle: Any, index: int | None) -> GPUDevice:
    if index is None:
        try:
            index = pynvml.nvmlDeviceGetIndex(handle)
        except pynvml.NVMLError:
            index = None
    dev = GPUDevice(
        uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
        index=index,
        name=None,
        mem_total=None,
        handle=handle,
    )
    _fill_static(dev)
    return dev


def _fill_static(dev: GPUDevice) -> None:
    try:
        dev.name = _text(pynvml.nvmlDeviceGetName(dev.handle))
    except pynvml.NVMLError:
        dev.name = None
    try:
        dev.mem_total = int(pynvml.nvmlDeviceGetMemoryInfo(dev.handle).total)
    except pynvml.NVMLError:
        dev.mem_total = None


def _with_migs(handle: Any, index: int | None) -> list[GPUDevice]:
    gpu = _physical(handle, index)
    return [gpu, *_migs_of(handle, gpu.index)]


def _migs_of(handle: Any, index: int | None) -> list[GPUDevice]:
    try:
        current, _pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError:  # NotSupported on GPUs without MIG
        return []
    if current != _code("NVML_DEVICE_MIG_ENABLE", 1):
        return []
    try:
        slots = pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)
    except pynvml.NVMLError:
        return []
    out: list[GPUDevice] = []
    for slot in range(slots):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot)
        except pynvml.NVMLError:  # NotFound: an empty slot
            continue
        out.append(_mig_device(mig, index))
    return out


def _mig_device(handle: Any, parent_index: int | None = None) -> GPUDevice:
    if parent_index is None:
        try:
            parent_index = pynvml.nvmlDeviceGetIndex(
                pynvml.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(handle)
            )
        except pynvml.NVMLError:
            parent_index = None
    dev = GPUDevice(
        uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
        index=parent_index,
        name=None,
        mem_total=None,
        mig=True,
        handle=handle,
    )
    _fill_static(dev)
    return dev
