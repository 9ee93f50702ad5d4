"""gpu_sampler: the worker-side sampling thread and plugin, with a fake worker and reader."""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from types import SimpleNamespace

import pytest

from dask_analytics_lab.collect import gpu_nvml, gpu_sampler
from dask_analytics_lab.collect.gpu_sampler import STREAM_OP, GPUSamplerPlugin, SamplingRun

from ..waiting import wait_for


class TS:
    def __init__(self, key):
        self.key = key


class FakeLoop:
    """Collects add_callback calls; the test runs them, as the event loop would."""

    def __init__(self):
        self.callbacks = []
        self.lock = threading.Lock()

    def add_callback(self, fn, *args):
        with self.lock:
            self.callbacks.append((fn, args))

    def run_pending(self):
        with self.lock:
            pending, self.callbacks = self.callbacks, []
        for fn, args in pending:
            fn(*args)
        return len(pending)


class FakeWorker:
    def __init__(self):
        self.address = "tcp://fake:1"
        self.loop = FakeLoop()
        self.state = SimpleNamespace(executing=set(), long_running=set())
        self.sent = []
        self.handlers = {}

    def batched_send(self, msg):
        self.sent.append(msg)


class FakeReader:
    def __init__(self, uuids=("GPU-0", "GPU-1")):
        self.devices = [
            gpu_nvml.GPUDevice(uuid=u, index=i, name="Fake", mem_total=100)
            for i, u in enumerate(uuids)
        ]
        self.closed = False
        self.reads = 0

    def read(self, metrics):
        self.reads += 1
        return [
            {"gpu_uuid": d.uuid, "gpu_index": d.index, "mem_used": self.reads} for d in self.devices
        ]

    def describe(self):
        return [d.describe() for d in self.devices]

    def close(self):
        self.closed = True


def make_run(worker, reader=None, **kw):
    kw = {
        "monitor_id": "m1",
        "interval": 0.01,
        "metrics": ["total-mem"],
        "flush_interval": 0.05,
        **kw,
    }
    return SamplingRun(worker, reader or FakeReader(), **kw)


def test_samples_carry_executing_groups_and_flush_into_the_batched_stream():
    worker = FakeWorker()
    worker.state.executing = {
        TS(("matmul-abc123", 0)),
        TS(("matmul-abc123", 1)),
        TS("inc-5f2a3b1c"),
    }
    worker.state.long_running = {TS("parent-9e8d")}
    run = make_run(worker)
    run.start()
    wait_for(lambda: worker.loop.callbacks, every=0.005)
    assert worker.loop.run_pending() == 1  # one pending flush at a time, however many samples
    assert len(worker.sent) == 1
    msg = worker.sent[0]
    assert (
        msg["op"] == STREAM_OP and msg["monitor_id"] == "m1" and msg["batch"] == 1 and msg["host"]
    )
    sample = msg["samples"][0]
    assert sample["task_groups"] == ["inc", "matmul-abc123", "parent"]
    assert sample["keys"] == sorted(
        ["('matmul-abc123', 0)", "('matmul-abc123', 1)", "inc-5f2a3b1c", "parent-9e8d"]
    )
    assert [g["gpu_uuid"] for g in sample["gpus"]] == ["GPU-0", "GPU-1"]
    assert sample["time"] == pytest.approx(time.time(), abs=5)

    run.request_stop()
    run.thread.join(5)
    final = run.close()
    assert final["batches_sent"] == 1
    assert final["samples_taken"] == len(msg["samples"]) + len(final["samples"])
    assert final["cpu_seconds"] >= 0 and run.reader.closed
    # A flush queued before the stop sends nothing after it.
    run.flush()
    assert len(worker.sent) == 1


def test_reading_worker_state_from_the_thread_while_the_loop_mutates_it(caplog):
    worker = FakeWorker()
    run = make_run(worker, interval=0.0005, flush_interval=10)
    stop = threading.Event()

    def churn():  # what the event loop does to these sets while tasks come and go
        i = 0
        while not stop.is_set():
            ts = TS((f"grp{i % 7}-x", i))
            worker.state.executing.add(ts)
            if len(worker.state.executing) > 3:
                worker.state.executing.pop()
            if i % 5 == 0:
                worker.state.long_running.add(ts)
                worker.state.long_running.discard(next(iter(worker.state.long_running)))
            i += 1

    t = threading.Thread(target=churn, daemon=True)
    with caplog.at_level(logging.WARNING):
        t.start()
        run.start()
        wait_for(lambda: run.samples_taken > 200, every=0.005)
        stop.set()
        t.join()
        run.request_stop()
        run.thread.join(5)
    assert not run.thread.is_alive()
    assert not [r for r in caplog.records if "failed" in r.getMessage()]
    samples = run.close()["samples"]
    groups = {g for s in samples for g in s["task_groups"]}
    assert all(len(s.get("keys", ())) <= gpu_sampler.MAX_KEYS for s in samples)
    assert groups and groups <= {f"grp{i}-x" for i in range(7)}


def test_buffer_is_bounded_when_the_loop_cannot_ship(monkeypatch):
    monkeypatch.setattr(gpu_sampler, "MAX_BUFFERED_SAMPLES", 5)
    worker = FakeWorker()
    run = make_run(worker, interval=0.001)
    run.start()
    wait_for(lambda: run.samples_taken >= 20, every=0.005)
    run.request_stop()
    run.thread.join(5)
    final = run.close()
    assert len(final["samples"]) == 5
    assert final["dropped"] == final["samples_taken"] - 5


def test_thread_ends_when_every_gpu_vanished(caplog):
    reader = FakeReader()

    def read(metrics):
        reader.devices.clear()
        return []

    reader.read = read
    run = make_run(FakeWorker(), reader)
    with caplog.at_level(logging.WARNING, logger="dask_analytics_lab.gpu"):
        run.start()
        run.thread.join(5)
    assert not run.thread.is_alive() and reader.closed
    assert any("every GPU" in r.getMessage() for r in caplog.records)


def test_plugin_handlers(monkeypatch):
    readers = []

    def open_reader():
        readers.append(FakeReader())
        return readers[-1]

    async def main():
        worker = FakeWorker()

        worker.scheduler = SimpleNamespace()  # the plugin asks the scheduler nothing
        plugin = GPUSamplerPlugin()
        plugin.setup(worker)
        await plugin._join_task  # no run settings: stays idle, no error
        assert plugin.run is None
        assert {"analytics_gpu_probe", "analytics_gpu_start", "analytics_gpu_stop"} <= set(
            worker.handlers
        )

        monkeypatch.setattr(gpu_nvml, "GPUReader", open_reader)
        reply = await worker.handlers["analytics_gpu_start"](
            monitor_id="m1", interval=0.01, metrics=["total-mem"]
        )
        assert reply["ok"] and [d["uuid"] for d in reply["devices"]] == ["GPU-0", "GPU-1"]
        again = await worker.handlers["analytics_gpu_start"](monitor_id="m1", interval=0.01)
        assert again["ok"] and len(readers) == 1  # same run: not restarted
        wait_for(lambda: plugin.run.samples_taken >= 1, what="a sample", every=0.005)
        assert await worker.handlers["analytics_gpu_stop"](monitor_id="other") is None
        final = await worker.handlers["analytics_gpu_stop"](monitor_id="m1")
        assert final["monitor_id"] == "m1" and final["samples_taken"] >= 1
        assert await worker.handlers["analytics_gpu_stop"]() is None

        def no_gpu():
            raise gpu_nvml.NVMLUnavailable("no NVIDIA GPU/driver found: test")

        monkeypatch.setattr(gpu_nvml, "GPUReader", no_gpu)
        reply = await worker.handlers["analytics_gpu_start"](monitor_id="m2")
        assert reply["ok"] is False and reply["error"] == "no NVIDIA GPU/driver found: test"
        assert plugin.run is None
        await plugin.teardown(worker)
        assert "analytics_gpu_start" not in worker.handlers

    asyncio.run(main())


def test_plugin_with_run_settings_samples_as_it_is_set_up(monkeypatch):
    """What a worker that joins during a run gets from the scheduler's registry."""
    monkeypatch.setattr(gpu_nvml, "GPUReader", FakeReader)

    async def main():
        worker = FakeWorker()
        worker.scheduler = SimpleNamespace()
        plugin = GPUSamplerPlugin(
            {"monitor_id": "m7", "interval": 0.01, "metrics": ["total-mem"], "flush_interval": 0.05}
        )
        plugin.setup(worker)
        await plugin._join_task
        assert plugin.run is not None and plugin.run.monitor_id == "m7"
        wait_for(lambda: plugin.run.samples_taken >= 1, what="a sample", every=0.005)
        # The scheduler's start broadcast for the same run finds it running: not restarted.
        again = await worker.handlers["analytics_gpu_start"](monitor_id="m7", interval=0.01)
        assert again["ok"] and plugin.run.monitor_id == "m7"
        await plugin.teardown(worker)  # stops the thread
        assert plugin.run is None

    asyncio.run(main())
