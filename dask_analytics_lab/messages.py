"""The versioned messages that flow from the collectors to a store: the one contract.

`collect/` makes them inside the scheduler and workers; `store/` and `server/` ingest
them, both through `check_batch`.  On the wire (and from `make`) a message is a JSON
object:

    {"v": 1, "cluster_id": str, "seq": int, "kind": str, "time": float, "data": {...}}

`(cluster_id, seq)` is unique: ingest is idempotent on it, so a retried message is
stored once.  Times are seconds since the epoch.  The Structs below are the contract:
one envelope per `kind` (a tagged union on `kind`), each with its `data` Struct, whose
docstring says what the store does with it.  Fields not listed are ignored (a newer
collector may send more); a field left out is None unless it is required.

Bounds, and why:
- ids (computation id, code hash, monitor id, GPU uuid) at most 200 bytes of UTF-8,
  names (task group, prefix, topic, account, worker, host) at most 1000: they are keys
  of PostgreSQL indexes, whose entries must stay under ~2.7 kB;
- text may not hold NUL characters or lone surrogates (PostgreSQL refuses both);
- whole numbers fit in 64 bits (3.0 counts as one: some JSON writers know no ints);
  other numbers are finite and at most 1e15 either way (JavaScript and the CLI's
  formatting read them);
- times lie between 1970 and 2200: a time like 1e300 would break every reader that
  turns it into a date;
- general JSON (event msg, versions ...) at most MAX_JSON_DEPTH levels deep; profile
  trees deeper than MAX_PROFILE_DEPTH frames are cut there (their counts stay right).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from typing import (
    Annotated,
    Any,
    ClassVar,
    Literal,
    Union,
    get_args,
    get_origin,
)

import msgspec
from msgspec import Meta, Struct

VERSION = 1

# Longest cluster id we accept; scheduler ids are ~45 characters.
MAX_ID = 200
ID_BYTES = 200
NAME_BYTES = 1000
MAX_JSON_DEPTH = 100
MAX_PROFILE_DEPTH = 200
MAX_PROFILE_NODES = 1_000_000
MAX_NUMBER = 1e15
# From 1970 (the store tests write small synthetic clocks; nothing real reads earlier)
# to 2200-01-01.
TIME_RANGE = (0.0, 7_258_118_400.0)
STATES = ("running", "finished", "erred", "cancelled")

# A live cluster's scheduler promises a message at least every HEARTBEAT seconds and says
# so in its `cluster` message; readers call a cluster lost after LOST_AFTER_HEARTBEATS
# silent heartbeats of what it promised, so a killed scheduler reads lost within 9 s of
# its death (at most its last word plus 9 s).  Clusters keep the promise they recorded:
# 5 s from the releases before this one (lost after 15 s), and none from a release
# before heartbeats, which sent a sample at least every LEGACY_HEARTBEAT seconds.
# The writer thread, not the event loop, keeps the promise (a scheduler busy for
# seconds with a large graph lives): every write it makes carries a heartbeat made as
# the write starts, and it writes one alone BEAT seconds after the last write started.
# BEAT under HEARTBEAT is the margin for a slow store or a starved thread: the cluster
# reads lost only once a write waits 7 s (LOST_AFTER_HEARTBEATS * HEARTBEAT - BEAT).
# An idle recorder then writes every 2 s (or with the worker samples of the same
# interval): 1.5-2 ms of CPU a write into SQLite here, about 0.1% of a core.
HEARTBEAT = 3.0
BEAT = 2.0
LEGACY_HEARTBEAT = 30.0
LOST_AFTER_HEARTBEATS = 3


class MessageError(ValueError):
    """A message does not follow the contract; the text says which message, field and why."""


def code_hash(filename: str | None, text: str) -> str:
    """A code snippet's id: the server checks a `code` message's hash against it."""
    return hashlib.sha256(f"{filename}\0{text}".encode()).hexdigest()[:32]


# Prefixes of the stages of Dask's tree reductions (dask.array `sum-partial` and
# `sum-aggregate`, `mean_combine-partial`, dask.dataframe `sum-tree`, dask.bag
# `sum-aggregate`): whether a stage exists, and how deep, follows the number of chunks.
_REDUCTION_STAGE = re.compile(r"-(partial|aggregate|combine|tree)\Z")


def fingerprint(code_line: str | None, prefixes: Iterable[str]) -> str:
    """What the runs of the same code share, whatever their size.

    With the line that made the computation: that line alone.  Its task prefixes change
    with the size of the input (a tree reduction gains a `-partial` stage past
    `split_every` chunks, one chunk fuses into one task, dask.dataframe switches from a
    tree reduction to a shuffle past some partitions), so they cannot tell a re-run at
    another size from other code.  `compare` says when two runs' inputs differ, and
    when they share no prefix at all (the same line computing other work).

    Without a line (code not sent): the prefixes without the reduction stages, which
    are the ones that come and go with the number of chunks (all of them if nothing
    else is left)."""
    if code_line:
        text = "line\0" + code_line
    else:
        names = set(prefixes)
        kept = {p for p in names if not _REDUCTION_STAGE.search(p)} or names
        text = "prefixes\0" + "\0".join(sorted(kept))
    return hashlib.sha256(text.encode()).hexdigest()[:32]


# --- field types: each says in words what it takes (the errors quote it) --------------
_SAFE = "^[^\x00\ud800-\udfff]*\\Z"  # no NUL, no lone surrogate
_TEXT = "a string without NUL characters or lone surrogates"

Text = Annotated[str, Meta(pattern=_SAFE, description=_TEXT)]
RequiredText = Annotated[
    str, Meta(min_length=1, pattern=_SAFE, description="a non-empty " + _TEXT[2:])
]


def _key(limit: int, *, required: bool = False) -> Meta:
    # max_length counts characters; __post_init__ checks the UTF-8 bytes of non-ASCII keys.
    what = (
        f"{'a non-empty' if required else 'a'} string of at most {limit} bytes of UTF-8 without NUL "
        "characters (it is a key)"
    )
    return Meta(min_length=1 if required else 0, max_length=limit, pattern=_SAFE, description=what)


Id = Annotated[str, _key(ID_BYTES)]
RequiredId = Annotated[str, _key(ID_BYTES, required=True)]
Name = Annotated[str, _key(NAME_BYTES)]
RequiredName = Annotated[str, _key(NAME_BYTES, required=True)]
Time = Annotated[
    float,
    Meta(
        ge=TIME_RANGE[0],
        le=TIME_RANGE[1],
        description=(
            f"a time in seconds since the epoch from 1970 to 2200 ({TIME_RANGE[0]:.0f} to {TIME_RANGE[1]:.0f})"
        ),
    ),
]
Number = Annotated[
    float,
    Meta(
        ge=-MAX_NUMBER,
        le=MAX_NUMBER,
        description=f"a number from {-MAX_NUMBER:g} to {MAX_NUMBER:g}",
    ),
]
Count = Annotated[
    Annotated[int, Meta(ge=0, le=2**63 - 1)]
    | Annotated[float, Meta(ge=0, lt=2.0**63, multiple_of=1)],
    Meta(description="a whole number from 0 to 2**63-1"),
]
Whole = Annotated[
    Annotated[int, Meta(ge=-(2**63), le=2**63 - 1)]
    | Annotated[float, Meta(ge=-(2.0**63), lt=2.0**63, multiple_of=1)],
    Meta(description="a whole number that fits in 64 bits"),
]
Flag = Annotated[bool, Meta(description="true or false")]
JsonObject = Annotated[
    dict[str, Any], Meta(description=f"a JSON object at most {MAX_JSON_DEPTH} levels deep")
]


class _Record(Struct, omit_defaults=True):
    """A message's data or a part of it; a field left out is None (and left out on the wire)."""


class _Data(_Record):
    """Checks what a type alone cannot: UTF-8 bytes of keys, general JSON, profile trees."""

    # {field: most UTF-8 bytes} for key fields (str, list of str, or dict with str keys)
    _keys: ClassVar[dict[str, int]] = {}

    def __post_init__(self) -> None:
        for name, limit in self._keys.items():
            value = getattr(self, name)
            if value is None or (value.__class__ is str and value.isascii()):
                continue  # the common case, cheap: max_length already bounds ASCII
            for text in (
                (value,) if isinstance(value, str) else value
            ):  # a list's items, a dict's keys
                if not text.isascii() and len(text.encode("utf-8")) > limit:
                    raise ValueError(
                        f"`{name}` must be at most {limit} bytes of UTF-8 (it is a key), "
                        f"got {text!r:.80}"
                    )


# --- the data of each kind ----------------------------------------------------------
class Cluster(_Data):
    """`cluster`: insert or update the cluster row.  reported_user is set by a team
    server that took `user` from the token: what the client said."""

    _keys = {"account": NAME_BYTES}
    name: Text | None = None
    address: Text | None = None
    user: Text | None = None
    account: Name | None = None
    started: Time | None = None
    price_per_core_hour: Number | None = None
    versions: JsonObject | None = None  # {package: version}
    platform: JsonObject | None = None  # {arch, os, python, python_executable, hostname}
    settings: JsonObject | None = None  # {interval, code_transmit, profile_transmit, events_allow}
    reported_user: Text | None = None
    heartbeat: Number | None = None  # seconds: the scheduler is silent no longer while it lives

    def __post_init__(self) -> None:
        super().__post_init__()
        for name in ("versions", "platform", "settings"):
            setattr(self, name, plain_json(getattr(self, name), name))


class ClusterSample(_Record):
    """`cluster_sample`: one time-series row, the cluster row's latest figures and
    peaks.  Sent on change and at least every 30 s; memory in bytes;
    worker_seconds, core_seconds, cost and dropped_messages (what the shipper had to
    drop) are cumulative."""

    n_workers: Count | None = None
    n_threads: Count | None = None
    memory_used: Count | None = None
    memory_total: Count | None = None
    processing: Count | None = None
    worker_seconds: Number | None = None
    core_seconds: Number | None = None
    cost: Number | None = None
    idle_since: Time | None = None
    last_activity: Time | None = None
    dropped_messages: Count | None = None


SAMPLE_FIELDS = ClusterSample.__struct_fields__


class Heartbeat(_Record):
    """`heartbeat`: the scheduler is alive.  It moves the cluster's last_seen and stores
    no row (nor an `ingested` claim: applying it twice changes nothing)."""


class ClusterStop(_Record):
    """`cluster_stop`: the cluster row's end."""

    stopped: Time | None = None
    reason: Text | None = None
    idle_shutdown: Flag | None = None


class TaskGroup(_Data):
    """One task group of a computation; counts are this computation's own tasks:
    n_done finished, n_erred raised, n_cancelled running when they were cancelled,
    n_not_run never ran (a dependency failed, released, cancelled before they ran)."""

    _keys = {
        "name": NAME_BYTES,
        "prefix": NAME_BYTES,
        "states": NAME_BYTES,
        "dependencies": NAME_BYTES,
    }
    name: RequiredName
    prefix: Name | None = None
    states: dict[Name, Count] | None = None  # {state: count}
    n_tasks: Count | None = None
    n_done: Count | None = None
    n_erred: Count | None = None
    n_not_run: Count | None = None
    n_cancelled: Count | None = None
    compute: Number | None = None
    transfer: Number | None = None
    disk_read: Number | None = None
    disk_write: Number | None = None
    nbytes: Count | None = None
    start: Time | None = None
    stop: Time | None = None
    dependencies: list[RequiredName] | None = None  # group names


class Totals(_Record):
    n_tasks: Count | None = None
    n_groups: Count | None = None
    n_done: Count | None = None
    n_erred: Count | None = None
    n_not_run: Count | None = None
    n_cancelled: Count | None = None
    compute: Number | None = None
    transfer: Number | None = None
    disk: Number | None = None
    nbytes: Count | None = None
    # The scheduler's host while it ran: percent of all its cores busy (anything running
    # there, not only Dask), and how many cores it has.  Sent once it stopped running.
    host_cpu: Annotated[float, Meta(ge=0, le=100, description="a percent from 0 to 100")] | None = (
        None
    )
    host_cores: Count | None = None


class CodeFrame(_Data):
    """Where in a snippet a computation was made."""

    _keys = {"hash": ID_BYTES}
    hash: RequiredId
    lineno_frame: Whole | None = None
    lineno_relative: Whole | None = None


class Computation(_Data):
    """`computation`: upsert the computation row and each group row.  label: its
    task-group prefixes in order ("read_parquet → groupby-agg"); code: snippet hashes;
    code_line: the line that made it; groups: only those changed since the last message
    of this computation."""

    _keys = {"id": ID_BYTES, "code": ID_BYTES}
    id: RequiredId
    start: Time
    state: Literal["running", "finished", "erred", "cancelled"]
    stop: Time | None = None  # None while running
    label: Text | None = None
    code: list[RequiredId] | None = None
    code_frames: list[CodeFrame] | None = None
    code_line: Text | None = None
    fingerprint: Id | None = None
    totals: Totals | None = None
    groups: list[TaskGroup] | None = None


class Code(_Data):
    """`code`: one row per distinct snippet (by hash), stored once.  lineno_* are the
    first sender's, kept for old readers; each computation's are in its code_frames."""

    _keys = {"hash": ID_BYTES}
    hash: RequiredId
    text: Text
    filename: Text | None = None
    lineno_frame: Whole | None = None
    lineno_relative: Whole | None = None


class Failure(_Data):
    """`exception`: upsert on (computation_id, group, hash); count (cumulative, exact)
    replaces.  hash is of (exc_type, location, pattern); location is the frame that
    raised; pattern the message with its literals masked; exception_text the first
    example."""

    _keys = {
        "computation_id": ID_BYTES,
        "group": NAME_BYTES,
        "hash": ID_BYTES,
        "workers": NAME_BYTES,
    }
    hash: RequiredId
    computation_id: Id | None = None
    group: Name | None = None
    exc_type: Text | None = None
    location: Text | None = None
    pattern: Text | None = None
    examples: list[RequiredText] | None = None
    workers: list[RequiredName] | None = None  # addresses involved
    exception_text: Text | None = None
    traceback_text: Text | None = None
    key: Text | None = None
    count: Count | None = None
    # Of count: attempts Dask ran again (a task's retries=), and tasks that then succeeded.
    retried: Count | None = None
    recovered: Count | None = None
    first_time: Time | None = None
    last_time: Time | None = None


class Event(_Data):
    """`event`: one row of a recorded topic; msg is any JSON."""

    _keys = {"topic": NAME_BYTES}
    topic: RequiredName
    time: Time | None = None
    msg: Any = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.msg = plain_json(self.msg, "msg", object_only=False)


class Profile(_Data):
    """`profile`: upsert on (cluster_id, computation_id, prefix); computation_id None is
    the whole cluster's; prefix: one task prefix's samples (None: the whole
    computation's, as collectors before per-prefix profiles sent).  tree is Dask's
    profile tree (distributed.profile)."""

    _keys = {"computation_id": ID_BYTES, "prefix": NAME_BYTES}
    tree: dict[str, Any]
    computation_id: Id | None = None
    prefix: Name | None = None
    count: Count | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        self.tree = profile_tree(self.tree)


class GpuSample(_Data):
    """One GPU's reading: mem_* bytes, *_util percent; any figure may be None."""

    _keys = {"gpu_uuid": ID_BYTES, "task_groups": NAME_BYTES, "shared_by": NAME_BYTES}
    timestamp: Number | None = None
    time: Time | None = None
    gpu_uuid: Id | None = None
    gpu_index: Count | None = None
    gpu_name: Text | None = None
    mem_used: Count | None = None
    mem_total: Count | None = None
    mem_util: Number | None = None
    compute_util: Number | None = None
    power_w: Number | None = None
    temperature_c: Number | None = None
    job: Text | None = None
    dag: Text | None = None
    task_groups: list[RequiredName] | None = None
    # No task ran on its workers then: what they waited on ("inputs", "memory", "nothing").
    waiting: Name | None = None
    # Every [job, dag] running then, when more than one (job and dag above are the first).
    jobs: list[list[Text | None]] | None = None
    # The workers that see this GPU, when more than one (the row counts it once).
    shared_by: list[RequiredName] | None = None


class GpuSamples(_Data):
    """`gpu_samples`: one row per sample."""

    _keys = {"worker": NAME_BYTES, "host": NAME_BYTES, "monitor_id": ID_BYTES}
    samples: list[GpuSample]
    worker: Name | None = None
    host: Name | None = None
    monitor_id: Id | None = None


class Metric(_Record):
    """One of Dask's fine performance metrics (distributed's spans docs): e.g. context
    "execute", activity "thread-cpu", unit "seconds"."""

    context: RequiredName
    activity: RequiredName
    unit: RequiredName
    value: Number
    prefix: Name | None = None  # None: not tied to a task prefix (e.g. gather-dep)


class Metrics(_Data):
    """`metrics`: a computation's fine performance metrics, its totals so far; each
    row upserts on (computation_id, prefix, context, activity, unit)."""

    _keys = {"computation_id": ID_BYTES}
    computation_id: RequiredId
    rows: list[Metric]

    def __post_init__(self) -> None:
        super().__post_init__()
        for row in self.rows:
            for name in ("prefix", "context", "activity", "unit"):
                text = getattr(row, name)
                if (
                    text is not None
                    and not text.isascii()
                    and len(text.encode("utf-8")) > NAME_BYTES
                ):
                    raise ValueError(
                        f"`rows[].{name}` must be at most {NAME_BYTES} bytes of UTF-8 (it is a key), "
                        f"got {text!r:.80}"
                    )


class WorkerSample(_Record):
    """One worker at one moment; memory in bytes as Dask splits it (managed by Dask,
    unmanaged: the rest of the process, spilled: on disk); cpu in percent."""

    worker: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=NAME_BYTES,
            pattern=_SAFE,
            description=f"a worker address of at most {NAME_BYTES} characters",
        ),
    ]
    time: Time
    name: Text | None = None
    host: Text | None = None
    nthreads: Count | None = None
    memory_limit: Count | None = None
    managed: Count | None = None
    unmanaged: Count | None = None
    spilled: Count | None = None
    cpu: Number | None = None
    processing: Count | None = None


class WorkerSamples(_Data):
    """`worker_samples`: one row per worker per sample."""

    samples: list[WorkerSample]


class TaskRun(_Record):
    """One task's execution (n_tasks 1), or, binned, the tasks of one worker and prefix
    that ran within [start, stop) and their `busy` seconds there."""

    start: Time
    stop: Time
    worker: Name | None = None
    thread: Whole | None = None
    prefix: Name | None = None
    task_group: Name | None = None
    state: Name | None = None
    n_tasks: Count = 1
    busy: Number | None = None
    binned: Flag = False


class TaskStream(_Data):
    """`task_stream`: rows of one computation's task stream, added to what is stored;
    replace: they replace all of it (the collector switched to bins)."""

    _keys = {"computation_id": ID_BYTES}
    computation_id: RequiredId
    rows: list[TaskRun]
    replace: Flag = False


# --- the envelope, one per kind ---------------------------------------------------
class Envelope(Struct, tag_field="kind"):
    v: Annotated[Literal[1], Meta(description=f"{VERSION}")]
    cluster_id: Annotated[
        str,
        Meta(
            min_length=1,
            max_length=MAX_ID,
            pattern=_SAFE,
            description=(f"a non-empty string of at most {MAX_ID} characters"),
        ),
    ]
    seq: Annotated[int, Meta(ge=0, lt=2**62, description="a non-negative integer")]
    time: Annotated[
        float,
        Meta(
            ge=TIME_RANGE[0],
            le=TIME_RANGE[1],
            description=(
                f"seconds since the epoch from 1970 to 2200 ({TIME_RANGE[0]:.0f} to {TIME_RANGE[1]:.0f})"
            ),
        ),
    ]


class ClusterMessage(Envelope, tag="cluster"):
    data: Cluster


class ClusterSampleMessage(Envelope, tag="cluster_sample"):
    data: ClusterSample


class ClusterStopMessage(Envelope, tag="cluster_stop"):
    data: ClusterStop


class HeartbeatMessage(Envelope, tag="heartbeat"):
    data: Heartbeat


class ComputationMessage(Envelope, tag="computation"):
    data: Computation


class CodeMessage(Envelope, tag="code"):
    data: Code


class ExceptionMessage(Envelope, tag="exception"):
    data: Failure


class EventMessage(Envelope, tag="event"):
    data: Event


class ProfileMessage(Envelope, tag="profile"):
    data: Profile


class GpuSamplesMessage(Envelope, tag="gpu_samples"):
    data: GpuSamples


class MetricsMessage(Envelope, tag="metrics"):
    data: Metrics


class WorkerSamplesMessage(Envelope, tag="worker_samples"):
    data: WorkerSamples


class TaskStreamMessage(Envelope, tag="task_stream"):
    data: TaskStream


Message = (
    ClusterMessage
    | ClusterSampleMessage
    | ClusterStopMessage
    | ComputationMessage
    | CodeMessage
    | ExceptionMessage
    | EventMessage
    | ProfileMessage
    | GpuSamplesMessage
    | MetricsMessage
    | WorkerSamplesMessage
    | TaskStreamMessage
    | HeartbeatMessage
)
ENVELOPES: dict[str, type[Envelope]] = {cls.__struct_config__.tag: cls for cls in get_args(Message)}
KINDS = frozenset(ENVELOPES)


def make(
    cluster_id: str, seq: int, kind: str, time: float, data: Mapping[str, Any]
) -> dict[str, Any]:
    """A message in its wire form (what `check` reads)."""
    return {
        "v": VERSION,
        "cluster_id": cluster_id,
        "seq": seq,
        "kind": kind,
        "time": time,
        "data": data,
    }


class _Batch(Struct):
    # Converting through a Struct keeps msgspec's compiled type on the class: a bare
    # Union would be looked up (hashed) on every call.
    messages: list[Message]


_AT_MESSAGE = re.compile(r"`\$\.messages\[(\d+)\]")


def check(msg: Any, index: int = 0) -> Envelope:
    """The typed message, or MessageError naming message `index` of its batch, the kind,
    the field and what it must be."""
    return _convert([msg], index)[0]


def check_batch(batch: Any) -> list[Envelope]:
    """Every message of a batch, typed; MessageError at the first that is wrong.

    A message that is typed already passes as it is (msgspec does not check a Struct
    again): it came from here, or from code that built it and answers for its bounds."""
    if not isinstance(batch, (list, tuple)):
        raise MessageError(f"a batch must be a list of messages, got {type(batch).__name__}")
    return _convert(batch, 0)


def _convert(batch: list[Any] | tuple[Any, ...], first: int) -> list[Envelope]:
    try:
        typed: list[Envelope] = list(msgspec.convert({"messages": batch}, _Batch).messages)
        return typed
    except msgspec.ValidationError as e:
        text = str(e)
        at = _AT_MESSAGE.search(text)
        if at is None:
            raise MessageError(f"the batch is malformed: {text[:200]}") from None
        i = int(at.group(1))
        inner = text[: at.start()] + "`$" + text[at.end() :]
        raise MessageError(_explain(batch[i], first + i, inner)) from None
    except (TypeError, ValueError, OverflowError) as e:
        # e.g. msgspec describing a string with a lone surrogate in it: find which message
        for i, msg in enumerate(batch):
            try:
                msgspec.convert({"messages": [msg]}, _Batch)
            except (TypeError, ValueError, OverflowError):
                raise MessageError(
                    f"message {first + i} of the batch: malformed ({type(e).__name__}: "
                    f"{str(e)[:200]})"
                ) from None
        raise MessageError(f"the batch is malformed ({type(e).__name__}: {str(e)[:200]})") from None


# --- what a type alone cannot check ---------------------------------------------------
class _NotPlain(Exception):
    pass


_END = object()


def _check_plain(v: Any, name: str) -> None:
    """Check that v is already plain JSON, at most MAX_JSON_DEPTH deep, in one walk that
    keeps only one iterator per level (not one entry per value: an event's message can
    hold millions of values).  _NotPlain: it needs normalising (tuples, non-string keys)
    or is no JSON at all; plain_json then takes the slow path that says which."""

    def scalar(x: Any) -> None:
        if x is None or isinstance(x, (bool, int)):
            return
        if isinstance(x, float):
            if not math.isfinite(x):
                raise ValueError(f"`{name}` must be plain JSON (no NaN or infinity)")
            return
        if isinstance(x, str):
            if not x.isascii():
                try:
                    x.encode("utf-8")
                except UnicodeEncodeError:
                    raise ValueError(
                        f"`{name}` must be plain JSON (a string holds a lone surrogate)"
                    ) from None
            return
        raise _NotPlain

    if not isinstance(v, (dict, list)):
        scalar(v)
        return
    stack: list[tuple[bool, Any]] = [
        (isinstance(v, dict), iter(v.items() if isinstance(v, dict) else v))
    ]
    while stack:
        is_dict, it = stack[-1]
        item: Any = next(it, _END)
        if item is _END:
            stack.pop()
            continue
        if is_dict:
            key, x = item
            if not isinstance(key, str):
                raise _NotPlain
            scalar(key)
        else:
            x = item
        # x sits one level below its container; a leaf is a level too.
        if len(stack) + 1 > MAX_JSON_DEPTH:
            raise ValueError(f"`{name}` must be JSON at most {MAX_JSON_DEPTH} levels deep")
        if isinstance(x, dict):
            stack.append((True, iter(x.items())))
        elif isinstance(x, list):
            stack.append((False, iter(x)))
        else:
            scalar(x)


def json_depth(v: Any) -> int:
    """How many levels deep a JSON value is (a scalar: 1); without recursion."""
    deepest, stack = 0, [(v, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(node, dict):
            stack.extend((x, d + 1) for x in node.values())
        elif isinstance(node, list):
            stack.extend((x, d + 1) for x in node)
    return deepest


def plain_json(v: Any, name: str, *, object_only: bool = True) -> Any:
    """Any JSON value (an object with object_only).  Plain JSON (what a server's parser
    makes) is kept as it is; anything else is normalised by a JSON round trip (tuples
    become lists, keys strings: what reads will return)."""
    if v is None:
        return None
    if object_only and not isinstance(v, dict):
        raise ValueError(f"`{name}` must be a JSON object, got {v!r:.80}")
    try:
        _check_plain(v, name)
        return v
    except _NotPlain:
        pass
    try:
        s = json.dumps(v, ensure_ascii=False, allow_nan=False)
        s.encode("utf-8")
    except (TypeError, ValueError, RecursionError) as e:
        # ValueError covers NaN, circular references and lone surrogates.
        raise ValueError(
            f"`{name}` must be plain JSON ({type(e).__name__}: {str(e)[:80]})"
        ) from None
    clean = json.loads(s)
    if json_depth(clean) > MAX_JSON_DEPTH:
        raise ValueError(f"`{name}` must be JSON at most {MAX_JSON_DEPTH} levels deep")
    return clean


def _safe_text(s: str, where: str) -> str:
    if re.match(_SAFE, s) is None:
        raise ValueError(f"`{where}` must be {_TEXT}")
    return s


def _profile_node(v: Any, where: str, ident: str | None) -> dict[str, Any]:
    def bad(field: str, problem: str, value: Any = None) -> ValueError:
        return ValueError(
            f"`{where}{field}` {problem}" + ("" if value is None else f", got {value!r:.80}")
        )

    if not isinstance(v, dict) or not isinstance(v.get("children"), dict):
        raise bad("", "must be a profile node {count, identifier, description, children}", v)
    identifier = v.get("identifier")
    if not isinstance(identifier, str):
        raise bad(".identifier", "must be a string", identifier)
    if ident is not None and identifier != ident:
        # profile.merge pairs children by key and insists their identifiers agree
        raise bad(".identifier", "must be the node's key in its parent's children", identifier)
    try:
        head = msgspec.convert(v, _NodeHead)
    except msgspec.ValidationError as e:
        problem, _, at = str(e).partition(" - at `$")
        raise ValueError(f"`{where}{at.rstrip('`')}` is wrong: {problem}") from None
    return {
        "count": head.count or 0,
        "identifier": _safe_text(identifier, where + ".identifier"),
        "description": msgspec.structs.asdict(head.description),
        "children": {},
    }


class _Frame(_Record):
    filename: Text | None = None
    name: Text | None = None
    line_number: Whole | None = None
    line: Text | None = None


class _NodeHead(_Record):
    """What a profile node holds besides its identifier and children."""

    description: _Frame
    count: Count | None = None


def profile_tree(v: Any) -> dict[str, Any]:
    """Dask's profile tree, checked so profile.merge can read it, cut at MAX_PROFILE_DEPTH."""
    root = _profile_node(v, "tree", None)
    if root["identifier"] != "root":
        raise ValueError(
            f"`tree.identifier` of the tree's root must be 'root', got {root['identifier']!r:.80}"
        )
    # Iterative: a tree as deep as a recursion limit must not blow the stack here.
    stack = [(v, root, "tree", 0)]
    nodes = 1
    while stack:
        raw, clean, where, depth = stack.pop()
        if depth >= MAX_PROFILE_DEPTH:
            continue  # cut here; the node's count still holds its children's samples
        for key, child in raw["children"].items():
            if not isinstance(key, str):
                raise ValueError(f"`{where}.children` keys must be strings, got {key!r:.80}")
            child_where = f"{where}.children[{key[:40]!r}]"
            nodes += 1
            if nodes > MAX_PROFILE_NODES:
                raise ValueError(f"`tree` must have at most {MAX_PROFILE_NODES} nodes")
            clean["children"][key] = c = _profile_node(child, child_where, key)
            stack.append((child, c, child_where, depth + 1))
    return root


# --- errors in words ----------------------------------------------------------------
_PATH_PART = re.compile(r"\.(\w+)|\[(\d+)\]|\[\.\.\.\]")
_MISSING = re.compile(r"Object missing required field `(\w+)`")
_TYPE_NAMES = {
    "object": "a JSON object",
    "array": "a list",
    "str": "a string",
    "int": "a whole number",
    "float": "a number",
    "bool": "true or false",
    "null": "null",
}


def _explain(msg: Any, index: int, error: str) -> str:
    """msgspec's "Expected `float` <= 7258118400.0 - at `$.data.started`" in words:
    which message, which field, what it must be (from the type's description), what it got."""
    problem, _, at = error.partition(" - at `")
    in_key = at.startswith("key` in `")  # "... - at `key` in `$.data.groups[0].states`"
    if in_key:
        at = at[len("key` in `") :]
    parts = [(m.group(1), m.group(2)) for m in _PATH_PART.finditer(at.rstrip("`")[1:])]
    # None: a dict's key or value (msgspec's "[...]")
    path = [name if name is not None else (int(i) if i is not None else None) for name, i in parts]
    shown = ".".join(f"[{p}]" if isinstance(p, int) else "[...]" if p is None else p for p in path)
    shown = shown.replace(".[", "[")
    where = _where(msg, index, path)
    if problem.startswith("`"):  # from a __post_init__: "`field...` problem"
        inner, _, problem = problem[1:].partition("` ")
        return f"{where}{shown}.{inner} {problem}"
    missing = _MISSING.match(problem)
    if missing:
        path.append(missing.group(1))
        shown = f"{shown}.{missing.group(1)}" if shown else missing.group(1)
    if not path:
        got = problem.rpartition("got `")[2].rstrip("`")
        return f"message {index} of the batch: a message must be a JSON object, got {_TYPE_NAMES.get(got, got)}"
    if path == ["kind"] and not missing:
        kind = msg.get("kind")
        if isinstance(kind, str):
            return f"{where}unknown message kind {kind!r}; known kinds: {sorted(KINDS)}"
        return f"{where}kind must be a string, one of {sorted(KINDS)}, got {kind!r:.80}"
    if path == ["v"] and not missing:
        return (
            f"{where}message version {msg.get('v')!r:.20} is not supported (this store reads v{VERSION}); "
            "upgrade the server"
        )
    what = _description(msg, path, key=in_key)
    if missing:
        return f"{where}{shown} is required" + (f" ({what})" if what else "")
    found, value = _lookup(msg, path)
    got = f", got {value!r:.80}" if found else ""
    if what is None:
        return f"{where}{shown}: {problem}{got}"
    return f"{where}{shown}{' keys' if in_key else ''} must be {what}{got}"


def _where(msg: Any, index: int, path: list[str | int | None]) -> str:
    if path and path[0] == "data":
        return (
            f"message {index} of the batch (cluster {msg.get('cluster_id')!r:.80}, seq {msg.get('seq')!r:.30}): "
            f"{msg.get('kind')} message: "
        )
    return f"message {index} of the batch: "


def _lookup(msg: Any, path: list[str | int | None]) -> tuple[bool, Any]:
    node = msg
    for p in path:
        try:
            node = node[p]
        except (KeyError, IndexError, TypeError):
            return False, None
    return True, node


def _description(msg: Any, path: list[str | int | None], *, key: bool = False) -> str | None:
    """The description the contract gives the field at `path` of this kind's message
    (at a dict's "[...]": of its keys when `key`, else of its values)."""
    kind = msg.get("kind") if isinstance(msg, dict) else None
    tp: Any = (ENVELOPES.get(kind) if isinstance(kind, str) else None) or Envelope
    described = None
    for p in path:
        tp, described = _unwrap(tp)
        if isinstance(tp, type) and issubclass(tp, Struct):
            fields = {f.name: f.type for f in msgspec.structs.fields(tp)}
            if p not in fields:
                return None
            tp = fields[p]
        elif get_origin(tp) is list:
            tp = get_args(tp)[0]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[0 if key else 1]
        else:
            return None
    tp, described = _unwrap(tp)
    if key and get_origin(tp) is dict:  # msgspec names the dict, not the key, that is wrong
        tp, described = _unwrap(get_args(tp)[0])
    if described:
        return described
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(map(str, get_args(tp)))
    if get_origin(tp) is list:
        return "a list"
    if get_origin(tp) is dict or (isinstance(tp, type) and issubclass(tp, Struct)):
        return "a JSON object"
    return None


def _unwrap(tp: Any) -> tuple[Any, str | None]:
    """(the type inside Optional/Annotated, its description)."""
    described = None
    while True:
        if get_origin(tp) is Annotated:
            args = get_args(tp)
            described = described or next(
                (m.description for m in args[1:] if isinstance(m, Meta) and m.description), None
            )
            tp = args[0]
        elif get_origin(tp) is Union and type(None) in get_args(tp):
            rest = [a for a in get_args(tp) if a is not type(None)]
            tp = rest[0] if len(rest) == 1 else Union[tuple(rest)]  # noqa: UP007 (built at run time)
        else:
            return tp, described


# msgspec builds a Struct's type information at its first use, and doing so on several
# threads at once crashes the process (msgspec 0.22: the server's body threads did):
# build it here, under the import lock.
msgspec.convert({"messages": []}, _Batch)
msgspec.convert({"description": {}}, _NodeHead)
