"""The computation tracker over sequences of computations, with stand-in TaskGroups.

Fast unit tests of the collector's model, without Dask (none of it is imported: the
last test checks); test_record_truth.py runs the same sequences on a real cluster.
The stand-ins carry only what the tracker reads, and the counts are moved the way the
plugin's transition hook moves them.
"""

from __future__ import annotations

import subprocess
import sys
import uuid
from collections.abc import Collection
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import NamedTuple

from dask_analytics_lab.collect import (
    claim_queue,
    claims,
    computation_message,
    computation_record,
    computations,
    group_figures,
    labels,
)
from dask_analytics_lab.collect.computations import ComputationTracker
from dask_analytics_lab.collect.errors import ErrorCounter


class SourceCode(NamedTuple):
    """What distributed.client.SourceCode holds: one frame of the code that computed."""

    code: str
    lineno_frame: int
    lineno_relative: int
    filename: str


@dataclass(eq=False)
class Prefix:
    name: str


@dataclass(eq=False)
class Group:
    name: str
    states: dict = field(
        default_factory=lambda: dict.fromkeys(
            (
                "released",
                "waiting",
                "queued",
                "processing",
                "no-worker",
                "memory",
                "erred",
                "forgotten",
            ),
            0,
        )
    )
    all_durations: dict = field(default_factory=dict)
    nbytes_total: int = 0
    start: float = 0.0
    stop: float = 0.0
    duration: float = 0.0
    dependencies: set = field(default_factory=set)

    def __post_init__(self):
        self.prefix = Prefix(self.name)

    def __len__(self) -> int:  # as TaskGroup's: every task it was given, forgotten ones too
        return sum(self.states.values())


@dataclass(eq=False)
class Task:
    key: str
    group: Group
    state: str = "released"


@dataclass(eq=False)
class Computation:
    start: float
    groups: set = field(default_factory=set)
    code: list = field(default_factory=list)
    id: uuid.UUID = field(default_factory=uuid.uuid4)


class Sim:
    """A tiny scheduler: submits tasks into groups and moves them as Dask would."""

    def __init__(self):
        self.messages: list[tuple[str, dict]] = []
        self.tracker = ComputationTracker(
            lambda kind, data: self.messages.append((kind, data)), code_transmit=True
        )
        self.tasks: dict[str, Task] = {}
        self.task_groups: dict[str, Group] = {}
        self.computations: list[Computation] = []
        self.t = 1000.0
        self._n = 0

    def submit(
        self, name: str, n: int, *, new_computation: bool, deps: tuple = (), code=()
    ) -> list[Task]:
        if new_computation or not self.computations:
            self.computations.append(Computation(self.t))
        comp = self.computations[-1]
        comp.code.extend(code)
        tg = self.task_groups.get(name)
        if tg is None:
            tg = self.task_groups[name] = Group(name, start=0.0)
            comp.groups.add(tg)  # as Dask does: only a group it makes is listed
        tg.dependencies.update(self.task_groups[d] for d in deps)
        keys = []
        for _ in range(n):
            self._n += 1
            task = self.tasks[f"{name}-{self._n}"] = Task(f"{name}-{self._n}", tg)
            tg.states["released"] += 1
            keys.append(task.key)
        self.tracker.observe_graph(comp, self.tasks, keys)
        for key in keys:
            self.move(self.tasks[key], "waiting")
        return [self.tasks[k] for k in keys]

    def submit_groups(self, names: list[str], *, new_computation: bool) -> list[Task]:
        """One graph of one task in each of these groups (one update_graph)."""
        if new_computation or not self.computations:
            self.computations.append(Computation(self.t))
        comp = self.computations[-1]
        keys = []
        for name in names:
            tg = self.task_groups.get(name)
            if tg is None:
                tg = self.task_groups[name] = Group(name, start=0.0)
                comp.groups.add(tg)
            self._n += 1
            task = self.tasks[f"{name}-{self._n}"] = Task(f"{name}-{self._n}", tg)
            tg.states["released"] += 1
            keys.append(task.key)
        self.tracker.observe_graph(comp, self.tasks, keys)
        for key in keys:
            self.move(self.tasks[key], "waiting")
        return [self.tasks[k] for k in keys]

    def move(self, task: Task, finish: str) -> None:
        tg = task.group
        tg.states[task.state] -= 1
        tg.states[finish] += 1
        # As the hook: counts where it counts (a start, an end, a release of a task not
        # done), else marks the group as moved.
        if finish in ("processing", "memory", "erred") or (
            finish == "released" and task.state in group_figures.NOT_DONE
        ):
            counts = self.tracker.counts_for(tg)
        else:
            self.tracker.touched.add(tg)
        self.t += 0.01
        if finish == "memory":
            counts.done += 1
            counts.last = self.t
            tg.all_durations["compute"] = tg.all_durations.get("compute", 0.0) + 0.01
            tg.start = tg.start or self.t - 0.01
            tg.stop = self.t
        elif finish == "erred":
            counts.last = self.t
        elif finish == "processing":
            counts.first = counts.first or self.t
        task.state = finish

    def run(self, tasks, *, fail=lambda t: False) -> None:
        for task in tasks:
            self.move(task, "processing")
            if fail(task):
                self.move(task, "erred")
                self.tracker.counts_for(task.group).raised += 1
            else:
                self.move(task, "memory")

    def forget(self, tasks) -> None:
        for task in tasks:
            if task.state == "memory":
                self.move(task, "released")
            self.move(task, "forgotten")
            del self.tasks[task.key]
        for name, tg in list(self.task_groups.items()):
            if tg.states["forgotten"] == sum(tg.states.values()):
                del self.task_groups[name]

    def poll(self):
        self.messages.clear()
        self.tracker.poll(self.computations, self.task_groups, changed=True, now=self.t)
        return {m["id"]: m for kind, m in self.messages if kind == "computation"}

    def last(self, comp_index: int) -> dict:
        cid = str(self.computations[comp_index].id)
        return self.latest[cid]

    def settle(self):
        self.latest = getattr(self, "latest", {})
        self.latest.update(self.poll())


def figures(msg):
    t = msg["totals"]
    return msg["state"], t["n_tasks"], t["n_done"], t["n_erred"], t["n_not_run"]


def test_clean_rerun_in_the_same_live_group_is_finished():
    sim = Sim()
    first = sim.submit("f", 10, new_computation=True)
    sim.run(first, fail=lambda t: int(t.key.split("-")[1]) <= 4)
    sim.settle()
    second = sim.submit("f", 20, new_computation=True)  # the first's futures are still held
    sim.settle()
    assert figures(sim.last(1))[0] == "running"
    sim.run(second)
    sim.settle()
    assert figures(sim.last(0)) == ("erred", 10, 6, 4, 0)
    assert figures(sim.last(1)) == ("finished", 20, 20, 0, 0)
    (group,) = sim.last(1)["groups"]
    assert (group["n_tasks"], group["n_done"], group["n_erred"]) == (20, 20, 0)


def test_forgotten_failures_are_not_done_and_dependents_never_ran():
    sim = Sim()
    a = sim.submit("a", 3, new_computation=True)
    b = sim.submit("b", 3, new_computation=False, deps=("a",))
    sim.run(a, fail=lambda t: t.key != "a-3")
    for task in b[:2]:
        sim.move(task, "erred")  # a dependency failed: Dask errs it without running it
    sim.run(b[2:])
    sim.forget(a + b)
    sim.settle()
    msg = sim.last(0)
    assert figures(msg) == ("erred", 6, 2, 2, 2)
    groups = {g["name"]: g for g in msg["groups"]}
    assert (groups["b"]["n_done"], groups["b"]["n_erred"], groups["b"]["n_not_run"]) == (1, 0, 2)
    assert msg["stop"] and msg["stop"] >= msg["start"]


def test_all_erred_computation_has_a_real_stop():
    sim = Sim()
    tasks = sim.submit("g", 2, new_computation=True)
    sim.run(tasks, fail=lambda t: True)
    sim.settle()
    msg = sim.last(0)
    assert msg["state"] == "erred" and msg["start"] < msg["stop"] <= sim.t
    (group,) = msg["groups"]
    assert group["start"] and group["stop"] == msg["stop"]


def test_cancelled_then_clean():
    sim = Sim()
    first = sim.submit("h", 4, new_computation=True)
    sim.run(first[:1])
    for task in first[1:]:
        sim.move(task, "released")
        sim.tracker.counts_for(task.group).cancelled += 1
    sim.forget(first)
    sim.settle()
    second = sim.submit("h", 2, new_computation=True)
    sim.run(second)
    sim.settle()
    assert figures(sim.last(0)) == ("cancelled", 4, 1, 0, 3)
    assert figures(sim.last(1)) == ("finished", 2, 2, 0, 0)


def test_restart_ends_running_computations_as_cancelled():
    sim = Sim()
    tasks = sim.submit("k", 5, new_computation=True)
    sim.run(tasks[:2])
    sim.move(tasks[2], "processing")
    sim.settle()
    sim.messages.clear()
    sim.tracker.finalize(now=sim.t + 1)
    (msg,) = [m for kind, m in sim.messages if kind == "computation"]
    assert figures(msg) == ("cancelled", 5, 2, 0, 3)
    assert msg["stop"] == sim.t + 1
    # Afresh: a later run in a new group is its own.
    sim.computations.clear()
    sim.task_groups.clear()
    later = sim.submit("k", 1, new_computation=True)
    sim.run(later)
    sim.settle()
    assert figures(sim.last(0)) == ("finished", 1, 1, 0, 0)


def test_a_restart_before_any_tick_ends_the_computation_as_cancelled():
    """client.restart() right after a submission, before a tick sent the computation:
    its work was cut short all the same."""
    sim = Sim()
    sim.run(sim.submit("done", 2, new_computation=True))
    sim.settle()
    tasks = sim.submit("k", 4, new_computation=True)
    for task in tasks:
        sim.move(task, "processing")
    sim.messages.clear()
    sim.tracker.finalize(now=sim.t + 1)
    by_id = {m["id"]: m for kind, m in sim.messages if kind == "computation"}
    msg = by_id[str(sim.computations[1].id)]
    assert figures(msg) == ("cancelled", 4, 0, 0, 4)
    assert msg["stop"] == sim.t + 1


def test_label_runs_from_inputs_to_outputs():
    sim = Sim()
    sim.submit("read_parquet", 2, new_computation=True)
    sim.submit("assign", 2, new_computation=False, deps=("read_parquet",))
    sim.submit("groupby-agg", 1, new_computation=False, deps=("assign",))
    sim.settle()
    assert sim.last(0)["label"] == "read_parquet → assign → groupby-agg"


def _label_by_sorting(groups: Collection) -> str:
    """The label as defined: every group sorted by (level, start, name), the prefixes in
    the order of their first group, at most the first two, "…" and the last."""
    depth: dict = {}

    def level(g) -> int:
        if g not in depth:
            depth[g] = -1  # being visited: a cycle ends here
            inside = [level(d) for d in g.dependencies if d in groups and d is not g]
            depth[g] = 1 + max(inside, default=-1)
        return depth[g]

    ordered = sorted(groups, key=lambda g: (level(g), g.start or 0.0, g.name))
    prefixes = list(dict.fromkeys(g.prefix.name for g in ordered))
    if len(prefixes) > 4:
        prefixes = prefixes[:2] + ["…", prefixes[-1]]
    return " → ".join(prefixes)


class _Hashable(SimpleNamespace):
    """A stand-in TaskGroup that sets can hold (hashed by identity, as Dask's are)."""

    __hash__ = object.__hash__
    __eq__ = object.__eq__


def test_label_orders_groups_by_their_longest_path_on_random_graphs():
    """The label's iterative walk gives each group its longest path from a root, as the
    recursive definition does, on random DAGs with shared prefixes and equal starts (a
    group depending on a sibling of its own got a level too low: 17 of these 300)."""
    import random

    rng = random.Random(7)
    for trial in range(300):
        n = rng.randint(1, 40)
        prefixes = [SimpleNamespace(name=f"p{k}") for k in range(rng.randint(1, 8))]
        groups = []
        for i in range(n):
            deps = set(rng.sample(groups, rng.randint(0, min(3, len(groups))))) if groups else set()
            start = rng.choice([0.0, None, float(rng.randint(1, 5))])
            groups.append(
                _Hashable(name=f"g{i}", start=start, dependencies=deps, prefix=rng.choice(prefixes))
            )
        held = [SimpleNamespace(tg=tg) for tg in groups]
        got = labels.prefix_label(held)  # type: ignore[arg-type]
        assert got == _label_by_sorting(groups), (trial, got)


def test_code_line_per_computation_one_snippet():
    sim = Sim()
    cell = "x = 1\ny.compute()  # one\nz.compute()  # two\n"
    one = SourceCode(cell, 11, 1, "<cell>")
    two = SourceCode(cell, 12, 2, "<cell>")
    sim.run(sim.submit("a", 1, new_computation=True, code=[(one,)]))
    sim.settle()
    sim.run(sim.submit("b", 1, new_computation=True, code=[(two,)]))
    sim.settle()
    assert sim.last(0)["code_line"] == "y.compute()  # one"
    assert sim.last(1)["code_line"] == "z.compute()  # two"
    assert sim.last(0)["code"] == sim.last(1)["code"]
    assert [f["lineno_frame"] for f in sim.last(1)["code_frames"]] == [12]
    assert len([m for m in sim.messages if m[0] == "code"]) == 0  # sent once, with the first


def test_error_counter_groups_bounds_and_counts_exactly():
    errors = ErrorCounter(kinds_per_place=3)
    tb = '  File "/x/job.py", line 7, in load\n    raise KeyError(k)\n'
    for i in range(500):
        errors.record("c1", "load", f"load-{i}", f"KeyError('key-{i}')", tb, 1.0 + i)
    for word in ("alpha", "bravo", "charlie", "delta", "echo"):
        errors.record("c1", "load", "load-x", f"KeyError('{word}')", tb, 2.0)
    rows = {r["exc_type"]: r for r in errors.drain() if r["pattern"] == "KeyError('key-…')"}
    row = rows["KeyError"]
    assert row["count"] == 500 and row["location"] == "/x/job.py:7 in load"
    assert row["examples"] == ["KeyError('key-0')", "KeyError('key-1')", "KeyError('key-2')"]
    errors.record("c1", "load", "k", "KeyError('foxtrot')", tb, 3.0)
    drained = errors.drain()
    (overflow,) = [r for r in drained if r["pattern"].startswith("(")]
    assert overflow["count"] == 4  # charlie, delta, echo and foxtrot: counted, none lost
    assert overflow["exc_type"] == "KeyError" and overflow["location"] == "/x/job.py:7 in load"
    assert overflow["pattern"] == "(4 other distinct messages, counted together)"
    errors.forget({"c1"})
    assert errors.drain() == []


def test_counts_of_groups_nobody_claims_are_let_go():
    sim = Sim()
    for i in range(3000):  # e.g. scattered data: counted by the hook, never submitted
        tg = Group(f"data-{i}")
        sim.tracker.counts_for(tg).done += 1
    sim.run(sim.submit("kept", 1, new_computation=True))
    sim.settle()
    assert len(sim.tracker.counts) == 1


# The tracker's modules: their lines count as its work.
TRACKER = {
    m.__file__
    for m in (
        claim_queue,
        claims,
        computation_message,
        computation_record,
        computations,
        group_figures,
        labels,
    )
}


def lines_run(fn) -> int:
    """Lines of the tracker's modules that Python runs inside fn(): a count of its work
    that timing noise cannot move (a loop in C, as in map or dict.fromkeys, is one line)."""
    count = 0

    def local(frame, event, arg):
        nonlocal count
        if event == "line":
            count += 1
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename in TRACKER else None

    sys.settrace(calls)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


def test_a_rerun_into_live_groups_costs_the_same_per_group_at_any_size():
    """A re-run that lands in G live groups: claiming them (the update_graph hook) and the
    tick after it do a fixed amount of work per group.  Claiming used to look through
    every claim of the earlier run for each group: G * G / 2 steps, ~200 ms at 4,000."""
    per_group = {}
    for n in (200, 800):
        sim = Sim()
        names = [f"g{i}" for i in range(n)]
        sim.run(sim.submit_groups(names, new_computation=True))
        sim.settle()
        claim = lines_run(
            lambda: sim.submit_groups(names, new_computation=True)
        )  # the first results held
        tick = lines_run(sim.settle)
        per_group[n] = (claim / n, tick / n)
        assert figures(sim.last(0)) == ("finished", n, n, 0, 0)
        assert figures(sim.last(1)) == ("running", n, 0, 0, 0)
    # Linear work is the same per group at both sizes; G * G work is 4 times as much.
    assert per_group[800][0] < 1.3 * per_group[200][0], per_group
    assert per_group[800][1] < 1.3 * per_group[200][1], per_group


def test_a_tick_reads_only_the_groups_that_moved():
    """Each tick after one task of a large computation finished summarises that task's
    group: its work does not grow with the groups that did not move."""
    work = {}
    for n in (100, 1000):
        sim = Sim()
        tasks = sim.submit_groups([f"g{i}" for i in range(n)], new_computation=True)
        sim.run(tasks[:-1])
        sim.settle()
        assert figures(sim.last(0)) == ("running", n, n - 1, 0, 0)
        sim.run(tasks[-1:])
        work[n] = lines_run(sim.settle)
        assert figures(sim.last(0)) == ("finished", n, n, 0, 0)
    assert work[1000] < 1.3 * work[100] + 50, work


def observed_lines(sim: Sim) -> list[int]:
    """lines_run of each observe_graph call (the update_graph hook) from now on."""
    lines: list[int] = []
    observe = sim.tracker.observe_graph

    def counted(*args, **kwargs):
        lines.append(lines_run(lambda: observe(*args, **kwargs)))

    sim.tracker.observe_graph = counted
    return lines


class LookedUp(dict):
    """The scheduler's tasks, counting the keys looked up in it."""

    looked_up = 0

    def get(self, key, default=None):
        self.looked_up += 1
        return super().get(key, default)


def test_a_first_graph_of_new_groups_is_taken_without_reading_its_keys():
    """A computation's first graph whose tasks are all new, in groups Dask made for it,
    takes no live group: update_graph does not look its keys up (O(tasks): 60 ms at
    100,000), and the record is the same."""
    sim = Sim()
    sim.tasks = LookedUp()
    tasks = sim.submit("f", 400, new_computation=True, deps=())
    assert sim.tasks.looked_up == 0
    sim.run(tasks)
    sim.settle()
    assert figures(sim.last(0)) == ("finished", 400, 400, 0, 0)
    # A second graph into the same computation is read key by key: it may reach groups
    # of another computation.
    sim.submit("f", 40, new_computation=False)
    assert sim.tasks.looked_up == 40


def test_a_first_graph_that_also_reaches_a_live_group_takes_that_group():
    """New groups and one task into a live group of an earlier computation, in one graph:
    the live group is taken (found by the keys), its first run's figures stay."""
    sim = Sim()
    sim.tasks = LookedUp()
    sim.run(sim.submit("f", 10, new_computation=True))
    sim.settle()
    comp = Computation(sim.t)
    sim.computations.append(comp)
    g = sim.task_groups["g"] = Group("g")
    comp.groups.add(g)
    keys = []
    for tg, n in ((g, 30), (sim.task_groups["f"], 1)):
        for _ in range(n):
            sim._n += 1
            key = f"{tg.name}-{sim._n}"
            sim.tasks[key] = Task(key, tg)
            tg.states["released"] += 1
            keys.append(key)
    sim.tracker.observe_graph(comp, sim.tasks, keys)
    assert sim.tasks.looked_up == 31
    sim.run([sim.tasks[k] for k in keys])
    sim.settle()
    assert figures(sim.last(0)) == ("finished", 10, 10, 0, 0)
    assert figures(sim.last(1)) == ("finished", 31, 31, 0, 0)


def test_a_rerun_after_a_tick_reads_no_group_inside_update_graph():
    """The groups of a re-run that did not move since the last tick are taken in passes
    in C: update_graph's own work is the same at any number of groups.  Their claims are
    built by the next poll."""
    lines = {}
    for n in (200, 800):
        sim = Sim()
        names = [f"g{i}" for i in range(n)]
        sim.run(sim.submit_groups(names, new_computation=True))
        sim.settle()  # a tick after the first run's last task
        observed = observed_lines(sim)
        sim.submit_groups(names, new_computation=True)
        (lines[n],) = observed
        assert sim.tracker.behind  # claims left to build: the next tick comes soon
        sim.settle()
        assert figures(sim.last(0)) == ("finished", n, n, 0, 0)
        assert figures(sim.last(1)) == ("running", n, 0, 0, 0)
    assert lines[800] == lines[200], lines


def test_a_rerun_before_a_tick_reads_its_groups_after_update_graph():
    """Groups that moved since the last tick (their old claim's last summary is out of
    date) are read after update_graph too: before the re-run's first count in each, or
    when its claim is built.  update_graph's own work does not grow with them."""
    lines = {}
    for moved in (50, 200):
        sim = Sim()
        names = [f"g{i}" for i in range(400)]
        tasks = sim.submit_groups(names, new_computation=True)
        sim.run(tasks[moved:])
        sim.settle()
        sim.run(tasks[:moved])  # no tick since these finished
        observed = observed_lines(sim)
        sim.submit_groups(names, new_computation=True)
        (lines[moved],) = observed
        sim.settle()
        assert figures(sim.last(0)) == ("finished", 400, 400, 0, 0)
        assert figures(sim.last(1)) == ("running", 400, 0, 0, 0)
    assert lines[200] == lines[50], lines


def test_the_record_is_the_same_whether_a_tick_ran_before_the_rerun():
    """A re-run taken over quiet groups (their last summary is final) and over groups that
    moved since (read before the re-run's first count in each, or when a tick builds the
    claims) gives the same record, failures, cancels and dependencies included."""
    records = []
    for tick_between, tick_after in ((True, False), (False, False), (False, True)):
        sim = Sim()
        sim.submit("load", 4, new_computation=True)
        first = sim.submit("f", 6, new_computation=False, deps=("load",))
        sim.submit("g", 2, new_computation=False)  # still waiting when the re-run comes
        sim.run([t for t in sim.tasks.values() if t.group.name == "load"])
        sim.run(first[:4], fail=lambda t: t is first[0])
        for task in first[4:]:
            sim.move(task, "released")
            sim.tracker.counts_for(task.group).cancelled += 1
        if tick_between:
            sim.settle()
            assert sim.last(0)["state"] == "running"
        sim.submit("load", 2, new_computation=True)
        second = sim.submit("f", 3, new_computation=False, deps=("load",))
        sim.submit("g", 1, new_computation=False)
        if tick_after:  # the claims built before any task of the re-run started
            sim.settle()
        sim.run([t for t in sim.tasks.values() if t.state == "waiting"])
        sim.run(second)
        sim.settle()
        # (The label is made when a group set is first seen, from the groups' starts then:
        # a tick between the runs makes it earlier.)
        records.append(
            [{k: v for k, v in sim.last(i).items() if k not in ("id", "label")} for i in (0, 1)]
        )
    assert records[0] == records[1] == records[2]
    first_run = records[0][0]
    assert first_run["state"] == "erred"
    assert {g["name"]: g["states"] for g in first_run["groups"]} == {
        "load": {"memory": 4},
        "f": {"memory": 3, "erred": 1, "released": 2},
        "g": {"waiting": 2},
    }
    assert first_run["totals"]["n_not_run"] == 4  # the two cancelled, the two never run
    assert records[0][1]["totals"]["n_tasks"] == 6


def test_a_workers_clock_estimate_never_moves_a_group_outside_what_the_scheduler_saw():
    """Dask's group start and stop are a worker's clock plus its estimate of the
    scheduler's (tens of ms off on a busy machine): the group stops no later than the
    scheduler heard its last task end, and starts no earlier than it sent the first."""
    sim = Sim()
    tasks = sim.submit("f", 2, new_computation=True)
    sim.run(tasks)
    tg = tasks[0].group
    counts = sim.tracker.counts_for(tg)
    tg.start, tg.stop = counts.first - 0.02, counts.last + 0.02
    sim.settle()
    (group,) = sim.last(0)["groups"]
    assert (group["start"], group["stop"]) == (counts.first, counts.last)
    assert sim.last(0)["stop"] == counts.last
    # A task shorter than the error: moved into what the scheduler saw, it never ends
    # before it starts.
    tg.start, tg.stop = counts.first - 0.02, counts.first - 0.015
    sim.tracker.touched.add(tg)
    sim.settle()
    (group,) = sim.last(0)["groups"]
    assert group["start"] == counts.first <= group["stop"]


def test_the_model_runs_without_dask():
    """The tracker and its model import nothing of Dask: they are plain functions and
    classes over snapshots (issue 45), which these tests run in a second or two."""
    script = (
        "import sys\n"
        "import dask_analytics_lab.collect.computations\n"
        "import dask_analytics_lab.collect.gpu_run\n"
        "print(sorted(m for m in ('dask', 'distributed') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout + out.stderr
