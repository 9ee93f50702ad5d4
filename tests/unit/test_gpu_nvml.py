"""gpu_nvml: device discovery and reading, with pynvml's functions patched, and the
real pynvml ctypes path against the compiled fake libnvidia-ml.so.1 in a subprocess."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pynvml  # a test extra: a missing one fails the run
import pytest

from dask_analytics_lab.collect import gpu_nvml  # noqa: E402

sys.path.insert(0, str(Path(__file__).parents[1]))
import fake_nvml  # noqa: E402


def err(code: int) -> Exception:
    return pynvml.NVMLError(code)  # pynvml turns it into the matching subclass


class Dev:
    def __init__(
        self,
        uuid,
        index=None,
        name="Fake",
        total=100,
        used=10,
        util=5,
        power=1500,
        temp=40,
        mig_mode=0,
        migs=(),
        parent=None,
        fail=None,
    ):
        self.uuid, self.index, self.name = uuid, index, name
        self.total, self.used, self.util, self.power, self.temp = total, used, util, power, temp
        self.mig_mode, self.migs, self.parent = mig_mode, list(migs), parent
        self.fail = dict(fail or {})  # getter -> NVML error code
        self.calls: dict[str, int] = {}
        for m in self.migs:
            m.parent = self


class FakeNVML:
    """pynvml's functions replaced by Python, for unit tests (the C fake is used end to end)."""

    def __init__(self, monkeypatch, gpus, init_error=None):
        self.gpus = gpus
        self.init_error = init_error
        self.refs = 0
        p = monkeypatch.setattr
        for name in dir(self):
            if name.startswith("nvml"):
                p(pynvml, name, getattr(self, name))

    def _call(self, dev, what):
        dev.calls[what] = dev.calls.get(what, 0) + 1
        if what in dev.fail:
            raise err(dev.fail[what])
        if "all" in dev.fail:
            raise err(dev.fail["all"])

    def nvmlInit(self):
        if self.init_error:
            raise err(self.init_error)
        self.refs += 1

    def nvmlShutdown(self):
        self.refs -= 1

    def nvmlSystemGetDriverVersion(self):
        return "1.0"

    def nvmlDeviceGetCount(self):
        return len(self.gpus)

    def nvmlDeviceGetHandleByIndex(self, i):
        if i >= len(self.gpus):
            raise err(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return self.gpus[i]

    def _all(self):
        for g in self.gpus:
            yield g
            yield from g.migs

    def nvmlDeviceGetHandleByUUID(self, uuid):
        uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
        for d in self._all():
            if d.uuid == uuid:
                return d
        raise err(pynvml.NVML_ERROR_NOT_FOUND)

    def nvmlDeviceGetUUID(self, d):
        return d.uuid

    def nvmlDeviceGetName(self, d):
        self._call(d, "name")
        return d.name

    def nvmlDeviceGetIndex(self, d):
        if d.parent is not None:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return self.gpus.index(d)

    def nvmlDeviceGetMemoryInfo(self, d):
        self._call(d, "memory")
        return type("Mem", (), {"total": d.total, "used": d.used, "free": d.total - d.used})()

    def nvmlDeviceGetUtilizationRates(self, d):
        self._call(d, "utilization")
        return type("Util", (), {"gpu": d.util, "memory": 0})()

    def nvmlDeviceGetPowerUsage(self, d):
        self._call(d, "power")
        return d.power

    def nvmlDeviceGetTemperature(self, d, sensor):
        self._call(d, "temperature")
        return d.temp

    def nvmlDeviceGetMigMode(self, d):
        if d.parent is not None or d.mig_mode is None:
            raise err(pynvml.NVML_ERROR_NOT_SUPPORTED)
        return [d.mig_mode, d.mig_mode]

    def nvmlDeviceGetMaxMigDeviceCount(self, d):
        return 7 if d.mig_mode else 0

    def nvmlDeviceGetMigDeviceHandleByIndex(self, d, i):
        if i >= len(d.migs):
            raise err(pynvml.NVML_ERROR_NOT_FOUND)
        return d.migs[i]

    def nvmlDeviceIsMigDeviceHandle(self, d):
        return int(d.parent is not None)

    def nvmlDeviceGetDeviceHandleFromMigDeviceHandle(self, d):
        return d.parent


# --- CUDA_VISIBLE_DEVICES ---------------------------------------------------------
@pytest.mark.parametrize(
    "value, expected",
    [
        (None, None),
        ("", []),
        ("0,1", [0, 1]),
        (" 1 , 0 ", [1, 0]),
        ("GPU-abc,2", ["GPU-abc", 2]),
        ("MIG-abc", ["MIG-abc"]),
        ("0,nonsense,1", [0]),  # CUDA stops at the first invalid entry
        ("-1", []),
        ("1,-1,0", [1]),
    ],
)
def test_parse_visible(value, expected):
    assert gpu_nvml.parse_visible(value) == expected


def test_discovery_honours_visible_devices_and_mig(monkeypatch):
    mig_a, mig_b = Dev("MIG-aaaa-1", name="MIG 1g"), Dev("MIG-aaaa-2", name="MIG 2g")
    gpus = [Dev("GPU-0000"), Dev("GPU-1111"), Dev("GPU-2222", mig_mode=1, migs=[mig_a, mig_b])]
    FakeNVML(monkeypatch, gpus)
    uuids = lambda v: [d.uuid for d in gpu_nvml.GPUReader(v).devices]  # noqa: E731
    assert uuids(None) == ["GPU-0000", "GPU-1111", "GPU-2222", "MIG-aaaa-1", "MIG-aaaa-2"]
    assert uuids("1") == ["GPU-1111"]
    assert uuids("1,0,1") == ["GPU-1111", "GPU-0000"]  # no duplicates
    assert uuids("GPU-2222") == ["GPU-2222", "MIG-aaaa-1", "MIG-aaaa-2"]
    assert uuids("MIG-aaaa-2") == ["MIG-aaaa-2"]
    assert uuids("GPU-11") == ["GPU-1111"]  # a unique prefix, as CUDA takes it
    assert uuids("MIG-aaaa-1,5,0") == ["MIG-aaaa-1"]  # stops at the missing index 5
    reader = gpu_nvml.GPUReader("MIG-aaaa-1")
    assert reader.devices[0].index == 2 and reader.devices[0].mig
    with pytest.raises(gpu_nvml.NVMLUnavailable, match="hides every GPU"):
        gpu_nvml.GPUReader("")
    with pytest.raises(gpu_nvml.NVMLUnavailable, match="no usable GPU"):
        gpu_nvml.GPUReader("GPU-")  # ambiguous prefix


def test_read_fields_and_units(monkeypatch):
    FakeNVML(monkeypatch, [Dev("GPU-0", total=200, used=50, util=70, power=123456, temp=61)])
    with gpu_nvml.GPUReader(None) as reader:
        (row,) = reader.read()
    assert row == {
        "gpu_uuid": "GPU-0",
        "gpu_index": 0,
        "gpu_name": "Fake",
        "mem_used": 50,
        "mem_total": 200,
        "mem_util": 25.0,
        "compute_util": 70.0,
        "power_w": 123.456,
        "temperature_c": 61.0,
    }


def test_only_attached_metrics_are_read(monkeypatch):
    gpu = Dev("GPU-0")
    FakeNVML(monkeypatch, [gpu])
    with gpu_nvml.GPUReader(None) as reader:
        (row,) = reader.read(["total-mem"])
    assert row["compute_util"] is None and row["power_w"] is None and row["temperature_c"] is None
    assert row["mem_used"] == 10
    assert "utilization" not in gpu.calls and "power" not in gpu.calls


def test_not_supported_getter_is_none_and_not_asked_again(monkeypatch):
    gpu = Dev(
        "GPU-0",
        fail={
            "power": pynvml.NVML_ERROR_NOT_SUPPORTED,
            "temperature": pynvml.NVML_ERROR_NO_PERMISSION,
        },
    )
    FakeNVML(monkeypatch, [gpu])
    with gpu_nvml.GPUReader(None) as reader:
        rows = [reader.read()[0] for _ in range(3)]
    assert all(r["power_w"] is None and r["temperature_c"] is None for r in rows)
    assert all(r["mem_used"] == 10 and r["compute_util"] == 5.0 for r in rows)
    assert gpu.calls["power"] == 1 and gpu.calls["temperature"] == 1
    assert gpu.calls["utilization"] == 3


def test_every_getter_not_supported(monkeypatch):
    FakeNVML(monkeypatch, [Dev("GPU-0", fail={"all": pynvml.NVML_ERROR_NOT_SUPPORTED})])
    with gpu_nvml.GPUReader(None) as reader:
        (row,) = reader.read()
        dev = reader.devices[0]
    assert dev.name is None and dev.mem_total is None
    assert row["gpu_uuid"] == "GPU-0"
    assert all(
        row[k] is None
        for k in (
            "mem_used",
            "mem_total",
            "mem_util",
            "compute_util",
            "power_w",
            "temperature_c",
            "gpu_name",
        )
    )


def test_transient_error_is_none_this_time_only(monkeypatch):
    gpu = Dev("GPU-0", fail={"utilization": pynvml.NVML_ERROR_TIMEOUT})
    FakeNVML(monkeypatch, [gpu])
    with gpu_nvml.GPUReader(None) as reader:
        assert reader.read()[0]["compute_util"] is None
        del gpu.fail["utilization"]
        assert reader.read()[0]["compute_util"] == 5.0


@pytest.mark.parametrize("code", ["NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_NOT_FOUND"])
def test_vanishing_device_is_dropped_with_a_log_line(monkeypatch, caplog, code):
    a, b = Dev("GPU-a"), Dev("GPU-b")
    FakeNVML(monkeypatch, [a, b])
    with gpu_nvml.GPUReader(None) as reader:
        assert [r["gpu_uuid"] for r in reader.read()] == ["GPU-a", "GPU-b"]
        b.fail["memory"] = getattr(pynvml, code)
        with caplog.at_level(logging.WARNING, logger="dask_analytics_lab.gpu"):
            assert [r["gpu_uuid"] for r in reader.read()] == ["GPU-a"]
            assert [r["gpu_uuid"] for r in reader.read()] == ["GPU-a"]
    lines = [r.getMessage() for r in caplog.records if "vanished" in r.getMessage()]
    assert len(lines) == 1 and "GPU-b" in lines[0]


@pytest.mark.parametrize(
    "code, text",
    [
        ("NVML_ERROR_LIBRARY_NOT_FOUND", "libnvidia-ml.so.1 is not installed"),
        ("NVML_ERROR_DRIVER_NOT_LOADED", "kernel driver is not loaded"),
        ("NVML_ERROR_UNKNOWN", "NVML could not start"),
    ],
)
def test_no_library_or_driver(monkeypatch, code, text):
    FakeNVML(monkeypatch, [], init_error=getattr(pynvml, code))
    result = gpu_nvml.probe()
    assert result["ok"] is False
    assert result["error"].startswith("no NVIDIA GPU/driver found") and text in result["error"]


def test_driver_without_gpus(monkeypatch):
    nvml = FakeNVML(monkeypatch, [])
    result = gpu_nvml.probe(None)
    assert result == {
        "ok": False,
        "error": "no NVIDIA GPU/driver found: the driver is loaded but reports no usable GPU",
    }
    assert nvml.refs == 0  # the failed open shut NVML down again


def test_no_pynvml_module(monkeypatch):
    monkeypatch.setattr(gpu_nvml, "pynvml", None)
    result = gpu_nvml.probe()
    assert (
        result["ok"] is False and "nvidia-ml-py" in result["error"] and "[gpu]" in result["error"]
    )


def test_reader_close_balances_init(monkeypatch):
    nvml = FakeNVML(monkeypatch, [Dev("GPU-0")])
    reader = gpu_nvml.GPUReader(None)
    assert nvml.refs == 1
    reader.close()
    reader.close()
    assert nvml.refs == 0


# --- the real pynvml ctypes code against the compiled fake library ---------------------
PROBE = """
import json, os, sys, time
from dask_analytics_lab.collect import gpu_nvml
out = {}
for v in json.loads(sys.argv[1]):
    if v is None:
        os.environ.pop("CUDA_VISIBLE_DEVICES", None)
    else:
        os.environ["CUDA_VISIBLE_DEVICES"] = v
    p = gpu_nvml.probe()
    out[repr(v)] = [d["uuid"] for d in p["devices"]] if p["ok"] else p["error"]
os.environ.pop("CUDA_VISIBLE_DEVICES", None)
reader = gpu_nvml.GPUReader()
series = []
for _ in range(int(sys.argv[2])):
    series.append(reader.read())
    time.sleep(0.02)
    if len(series) == int(sys.argv[2]) // 2:
        open(sys.argv[3], "w").close()  # the lost flag: GPU-eeee falls off the bus
out["series"] = series
print(json.dumps(out))
"""


def test_real_pynvml_against_fake_library(tmp_path):
    gone = tmp_path / "gone"
    conf = fake_nvml.write_config(
        tmp_path / "nvml.conf",
        [
            fake_nvml.device(
                "GPU-aaaa-1111",
                name="Fake A100",
                total="40G",
                used=["1G", "2G", "3G"],
                util=[10, 50, 90],
                power=[250],
                temp=[60],
                step_ms=40,
            ),
            fake_nvml.device(
                "GPU-bbbb-2222", total="16G", used="4G", unsupported="power,temperature"
            ),
            fake_nvml.device("GPU-cccc-3333", total="80G", used="8G", mig=1),
            fake_nvml.mig(2, "MIG-dddd-4444", name="Fake MIG 1g.10gb", total="10G", used="1G"),
            fake_nvml.device("GPU-eeee-5555", total="16G", used="2G", lost_flag=str(gone)),
        ],
    )
    env = dict(os.environ, **fake_nvml.env(conf))
    env.pop("CUDA_VISIBLE_DEVICES", None)
    variants = [None, "", "1", "2", "2,0", "GPU-bbbb", "MIG-dddd-4444", "0,9,1", "-1"]
    n = 20
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(variants), str(n), str(gone)],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    every = ["GPU-aaaa-1111", "GPU-bbbb-2222", "GPU-cccc-3333", "MIG-dddd-4444", "GPU-eeee-5555"]
    assert out["None"] == every
    assert "hides every GPU" in out["''"] and "hides every GPU" in out["'-1'"]
    assert out["'1'"] == ["GPU-bbbb-2222"]
    assert out["'2'"] == ["GPU-cccc-3333", "MIG-dddd-4444"]
    assert out["'2,0'"] == ["GPU-cccc-3333", "MIG-dddd-4444", "GPU-aaaa-1111"]
    assert out["'GPU-bbbb'"] == ["GPU-bbbb-2222"]
    assert out["'MIG-dddd-4444'"] == ["MIG-dddd-4444"]
    assert out["'0,9,1'"] == ["GPU-aaaa-1111"]

    series = out["series"]
    by_uuid = lambda s, u: next((g for g in s if g["gpu_uuid"] == u), None)  # noqa: E731
    a = [by_uuid(s, "GPU-aaaa-1111") for s in series]
    assert {r["compute_util"] for r in a} == {10.0, 50.0, 90.0}  # the utilisation series went by
    assert {r["mem_used"] for r in a} == {1 << 30, 2 << 30, 3 << 30}
    assert all(
        r["mem_total"] == 40 << 30 and r["power_w"] == 250.0 and r["temperature_c"] == 60.0
        for r in a
    )
    b = by_uuid(series[0], "GPU-bbbb-2222")
    assert b["power_w"] is None and b["temperature_c"] is None and b["mem_util"] == 25.0
    mig = by_uuid(series[0], "MIG-dddd-4444")
    assert (
        mig["gpu_index"] == 2
        and mig["gpu_name"] == "Fake MIG 1g.10gb"
        and mig["mem_used"] == 1 << 30
    )
    assert mig["compute_util"] is None and mig["power_w"] is None
    assert by_uuid(series[0], "GPU-cccc-3333")["compute_util"] is None  # MIG parent: no utilisation
    # GPU-eeee answered until its flag appeared, then was dropped; the rest went on.
    present = [by_uuid(s, "GPU-eeee-5555") is not None for s in series]
    assert present[: n // 2] == [True] * (n // 2) and not any(present[n // 2 + 1 :])
    assert all(len([g for g in s if g["gpu_uuid"] != "GPU-eeee-5555"]) == 4 for s in series)
    assert "GPU-eeee-5555" in proc.stderr and "vanished" in proc.stderr
