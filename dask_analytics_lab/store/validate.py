"""Check each message's `data` against messages.py before anything is written.

The envelope is checked by messages.validate; this checks the fields of each kind
so that garbage neither lands in the store nor surfaces as a driver traceback: every
problem is a MessageError naming the message, the kind and the field.  Fields not
listed here are ignored (a newer collector may send more); a missing optional field
is None or the default noted below.

Limits worth knowing when producing messages:
- ids (computation id, code hash, monitor id, GPU uuid) at most 200 bytes of UTF-8,
  names (task group, prefix, topic, account, worker, host) at most 1000: they are
  keys of PostgreSQL indexes, whose entries must stay under ~2.7 kB;
- text may not hold NUL characters or lone surrogates (PostgreSQL refuses both);
- integers fit in 64 bits; numbers are finite and at most 1e15 in size (MAX_NUMBER);
- times (seconds since the epoch) lie between 1970 and 2200 (TIME_RANGE): a time like
  1e300 would break every reader that turns it into a date (the CLI, the pages);
- general JSON (event msg, versions ...) at most 100 levels deep; profile trees
  deeper than MAX_PROFILE_DEPTH frames are cut there (their counts stay right).
"""
from __future__ import annotations

import json
import math
from typing import Any, Callable

from ..messages import MessageError, validate as validate_envelope

ID_BYTES = 200
NAME_BYTES = 1000
MAX_JSON_DEPTH = 100
MAX_PROFILE_DEPTH = 200
MAX_PROFILE_NODES = 1_000_000
STATES = ("running", "finished", "erred", "cancelled")
_INT64 = 2**63
# Times are seconds since the epoch: from 1970 (the store tests write small synthetic
# clocks; nothing real reads earlier) to 2200-01-01.  Other numbers (durations, costs,
# utilisation) at most 1e15 either way: JavaScript and the CLI's formatting read them.
TIME_RANGE = (0.0, 7_258_118_400.0)
MAX_NUMBER = 1e15

Check = Callable[[Any, str], Any]  # (value, field path) -> clean value, or raise Bad


class Bad(Exception):
    """One field is wrong; turned into a MessageError that also names the message."""

    def __init__(self, path: str, problem: str, value: Any = None) -> None:
        shown = repr(value)
        super().__init__(f"data.{path} {problem}" + ("" if value is None else f", got {shown[:80]}"))


def _text_ok(s: str, path: str) -> str:
    if "\x00" in s:
        raise Bad(path, "must not contain NUL characters")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        raise Bad(path, "must be valid Unicode text (it holds a lone surrogate)") from None
    return s


def text(*, required: bool = False, max_bytes: int | None = None) -> Check:
    def check(v: Any, path: str) -> str | None:
        if v is None:
            if required:
                raise Bad(path, "is required (a string)")
            return None
        if not isinstance(v, str):
            raise Bad(path, "must be a string", v)
        _text_ok(v, path)
        if max_bytes is not None and len(v.encode("utf-8")) > max_bytes:
            raise Bad(path, f"must be at most {max_bytes} bytes of UTF-8 (it is a key)", v)
        if required and not v:
            raise Bad(path, "must not be empty")
        return v

    return check


def number(*, required: bool = False, bounds: tuple[float, float] = (-MAX_NUMBER, MAX_NUMBER),
           what: str = "a number", allowed: str | None = None) -> Check:
    low, high = bounds
    allowed = allowed or f"from {low:g} to {high:g}"

    def check(v: Any, path: str) -> float | None:
        if v is None:
            if required:
                raise Bad(path, f"is required ({what})")
            return None
        if isinstance(v, bool) or not isinstance(v, (int, float)):
            raise Bad(path, f"must be {what}", v)
        try:
            f = float(v)
        except OverflowError:
            f = math.inf
        if not math.isfinite(f):
            raise Bad(path, "must be a finite number", v)
        if not low <= f <= high:
            raise Bad(path, f"must be {what} {allowed}", v)
        return f

    return check


def time_value(*, required: bool = False) -> Check:
    """Seconds since the epoch, within TIME_RANGE."""
    return number(required=required, bounds=TIME_RANGE, what="a time in seconds since the epoch",
                  allowed=f"from 1970 to 2200 ({TIME_RANGE[0]:.0f} to {TIME_RANGE[1]:.0f})")


def integer(*, minimum: int | None = 0) -> Check:
    def check(v: Any, path: str) -> int | None:
        if v is None:
            return None
        # 3.0 is fine (JSON from JavaScript has no ints); 3.5 and True are not.
        if isinstance(v, float) and math.isfinite(v) and v.is_integer():
            v = int(v)
        if isinstance(v, bool) or not isinstance(v, int):
            raise Bad(path, "must be a whole number", v)
        if not -_INT64 <= v < _INT64:
            raise Bad(path, "must fit in 64 bits", v)
        if minimum is not None and v < minimum:
            raise Bad(path, f"must be >= {minimum}", v)
        return v

    return check


def boolean() -> Check:
    def check(v: Any, path: str) -> bool | None:
        if v is None or isinstance(v, bool):
            return v
        raise Bad(path, "must be true or false", v)

    return check


def choice(options: tuple[str, ...]) -> Check:
    def check(v: Any, path: str) -> str:
        if v not in options:
            raise Bad(path, f"must be one of {', '.join(options)}", v)
        return v

    return check


class _NotPlain(Exception):
    pass


def _check_plain(v: Any, path: str) -> None:
    """Check that v is already plain JSON, at most MAX_JSON_DEPTH deep, in one walk that
    keeps only one iterator per level (not one entry per value: an event's message can
    hold millions of values).  _NotPlain: it needs normalising (tuples, non-string keys)
    or is no JSON at all; any_json then takes the slow path that says which."""

    def scalar(x: Any) -> None:
        if x is None or isinstance(x, (bool, int)):
            return
        if isinstance(x, float):
            if not math.isfinite(x):
                raise Bad(path, "must be plain JSON (no NaN or infinity)")
            return
        if isinstance(x, str):
            if not x.isascii():
                try:
                    x.encode("utf-8")
                except UnicodeEncodeError:
                    raise Bad(path, "must be plain JSON (a string holds a lone surrogate)") from None
            return
        raise _NotPlain

    if not isinstance(v, (dict, list)):
        scalar(v)
        return
    stack: list[tuple[bool, Any]] = [(isinstance(v, dict), iter(v.items() if isinstance(v, dict) else v))]
    while stack:
        is_dict, it = stack[-1]
        item = next(it, _END)
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
        # x sits one level below its container; as _depth counted, a leaf is a level too.
        if len(stack) + 1 > MAX_JSON_DEPTH:
            raise Bad(path, f"must be JSON at most {MAX_JSON_DEPTH} levels deep")
        if isinstance(x, dict):
            stack.append((True, iter(x.items())))
        elif isinstance(x, list):
            stack.append((False, iter(x)))
        else:
            scalar(x)


_END = object()


def any_json(*, object_only: bool = False) -> Check:
    """Any JSON value (an object with object_only).  Plain JSON (what a server's parser
    makes) is kept as it is; anything else is normalised by a JSON round trip (tuples
    become lists, keys strings: what reads will return)."""

    def check(v: Any, path: str) -> Any:
        if v is None:
            return None
        if object_only and not isinstance(v, dict):
            raise Bad(path, "must be a JSON object", v)
        try:
            _check_plain(v, path)
            return v
        except _NotPlain:
            pass
        try:
            s = json.dumps(v, ensure_ascii=False, allow_nan=False)
            s.encode("utf-8")
        except (TypeError, ValueError, RecursionError) as e:
            # ValueError covers NaN, circular references and lone surrogates.
            raise Bad(path, f"must be plain JSON ({type(e).__name__}: {str(e)[:80]})") from None
        clean = json.loads(s)
        if _depth(clean) > MAX_JSON_DEPTH:
            raise Bad(path, f"must be JSON at most {MAX_JSON_DEPTH} levels deep")
        return clean

    return check


def _depth(v: Any) -> int:
    deepest, stack = 0, [(v, 1)]
    while stack:
        node, d = stack.pop()
        deepest = max(deepest, d)
        if isinstance(node, dict):
            stack.extend((x, d + 1) for x in node.values())
        elif isinstance(node, list):
            stack.extend((x, d + 1) for x in node)
    return deepest


def list_of(item: Check, *, required: bool = False) -> Check:
    def check(v: Any, path: str) -> list | None:
        if v is None:
            if required:
                raise Bad(path, "is required (a list)")
            return None
        if not isinstance(v, (list, tuple)):
            raise Bad(path, "must be a list", v)
        return [item(x, f"{path}[{i}]") for i, x in enumerate(v)]

    return check


def counts() -> Check:
    """{name: whole number}, e.g. a task group's tasks per state."""
    key, value = text(max_bytes=NAME_BYTES), integer()

    def check(v: Any, path: str) -> dict | None:
        if v is None:
            return None
        if not isinstance(v, dict):
            raise Bad(path, "must be an object of counts", v)
        return {key(k, f"{path} key") or "": value(n, f"{path}[{k!r}]") for k, n in v.items()}

    return check


def record(fields: dict[str, Check], *, required: bool = True) -> Check:
    """A JSON object with these fields (others ignored); left out, all None unless required."""

    def check(v: Any, path: str) -> dict:
        if v is None and not required:
            v = {}
        if not isinstance(v, dict):
            raise Bad(path, "must be an object", v)
        return {name: f(v.get(name), f"{path}.{name}") for name, f in fields.items()}

    return check


def profile_tree() -> Check:
    """Dask's profile tree (distributed.profile), checked so profile.merge can read it."""
    count = integer()
    desc_fields = {"filename": text(), "name": text(), "line_number": integer(minimum=None), "line": text()}

    def node(v: Any, path: str, ident: str | None) -> dict:
        if not isinstance(v, dict) or not isinstance(v.get("children"), dict):
            raise Bad(path, "must be a profile node {count, identifier, description, children}", v)
        if not isinstance(v.get("identifier"), str):
            raise Bad(path + ".identifier", "must be a string", v.get("identifier"))
        if ident is not None and v["identifier"] != ident:
            # profile.merge pairs children by key and insists their identifiers agree
            raise Bad(path + ".identifier", "must be the node's key in its parent's children", v["identifier"])
        desc = v.get("description")
        if not isinstance(desc, dict):
            raise Bad(path + ".description", "must be an object", desc)
        return {
            "count": count(v.get("count"), path + ".count") or 0,
            "identifier": _text_ok(v["identifier"], path + ".identifier"),
            "description": {k: f(desc.get(k), f"{path}.description.{k}") for k, f in desc_fields.items()},
            "children": {},
        }

    def check(v: Any, path: str) -> dict:
        root = node(v, path, None)
        if root["identifier"] != "root":
            raise Bad(path + ".identifier", "of the tree's root must be 'root'", root["identifier"])
        # Iterative: a tree as deep as a recursion limit must not blow the stack here.
        stack = [(v, root, path, 0)]
        nodes = 1
        while stack:
            raw, clean, p, depth = stack.pop()
            if depth >= MAX_PROFILE_DEPTH:
                continue  # cut here; the node's count still holds its children's samples
            for key, child in raw["children"].items():
                if not isinstance(key, str):
                    raise Bad(p + ".children", "keys must be strings", key)
                cp = f"{p}.children[{key[:40]!r}]"
                nodes += 1
                if nodes > MAX_PROFILE_NODES:
                    raise Bad(path, f"must have at most {MAX_PROFILE_NODES} nodes")
                clean["children"][key] = c = node(child, cp, key)
                stack.append((child, c, cp, depth + 1))
        return root

    return check


def _req(check: Check, what: str) -> Check:
    def wrapped(v: Any, path: str) -> Any:
        if v is None:
            raise Bad(path, f"is required ({what})")
        return check(v, path)

    return wrapped


ID = text(max_bytes=ID_BYTES)
NAME = text(max_bytes=NAME_BYTES)
NAMES = list_of(text(required=True, max_bytes=NAME_BYTES))  # items of a list may not be null
NUM = number()
TIME = time_value()
INT = integer()
JSON_OBJECT = any_json(object_only=True)

GROUP = record({
    "name": text(required=True, max_bytes=NAME_BYTES), "prefix": NAME, "states": counts(),
    "n_tasks": INT, "compute": NUM, "transfer": NUM, "disk_read": NUM, "disk_write": NUM,
    "nbytes": INT, "start": TIME, "stop": TIME, "dependencies": NAMES,
    "n_done": INT, "n_erred": INT, "n_not_run": INT,
})

CODE_FRAME = record({
    "hash": text(required=True, max_bytes=ID_BYTES), "lineno_frame": integer(minimum=None),
    "lineno_relative": integer(minimum=None),
})

GPU_SAMPLE = record({
    "timestamp": NUM, "time": TIME, "gpu_uuid": ID, "gpu_index": INT, "gpu_name": text(),
    "mem_used": INT, "mem_total": INT, "mem_util": NUM, "compute_util": NUM, "power_w": NUM,
    "temperature_c": NUM, "job": text(), "dag": text(), "task_groups": NAMES,
})

SAMPLE_FIELDS = {
    "n_workers": INT, "n_threads": INT, "memory_used": INT, "memory_total": INT, "processing": INT,
    "worker_seconds": NUM, "core_seconds": NUM, "cost": NUM, "idle_since": TIME,
    "last_activity": TIME, "dropped_messages": INT,
}

KINDS: dict[str, dict[str, Check]] = {
    "cluster": {
        "name": text(), "address": text(), "user": text(), "account": NAME, "started": TIME,
        "price_per_core_hour": NUM, "versions": JSON_OBJECT, "platform": JSON_OBJECT,
        "settings": JSON_OBJECT, "reported_user": text(),
    },
    "cluster_sample": SAMPLE_FIELDS,
    "cluster_stop": {"stopped": TIME, "reason": text(), "idle_shutdown": boolean()},
    "computation": {
        "id": text(required=True, max_bytes=ID_BYTES),
        "start": time_value(required=True),
        "stop": TIME,
        "state": choice(STATES),
        "code": list_of(text(required=True, max_bytes=ID_BYTES)),
        "code_frames": list_of(CODE_FRAME),
        "code_line": text(),
        "label": text(),
        "totals": record({"n_tasks": INT, "n_groups": INT, "n_erred": INT, "n_done": INT,
                          "n_not_run": INT, "compute": NUM, "transfer": NUM, "disk": NUM,
                          "nbytes": INT}, required=False),
        "groups": list_of(GROUP),
    },
    "code": {
        "hash": text(required=True, max_bytes=ID_BYTES), "text": _req(text(), "a string"),
        "filename": text(), "lineno_frame": integer(minimum=None),
        "lineno_relative": integer(minimum=None),
    },
    "exception": {
        "computation_id": ID, "group": NAME, "hash": text(required=True, max_bytes=ID_BYTES),
        "exception_text": text(), "traceback_text": text(), "key": text(), "count": INT,
        "first_time": TIME, "last_time": TIME, "exc_type": text(), "location": text(),
        "pattern": text(), "examples": list_of(text(required=True)), "workers": NAMES,
    },
    "event": {"topic": text(required=True, max_bytes=NAME_BYTES), "time": TIME, "msg": any_json()},
    "profile": {"computation_id": ID, "tree": _req(profile_tree(), "a profile tree"), "count": INT},
    "gpu_samples": {"worker": NAME, "host": NAME, "monitor_id": ID,
                    "samples": list_of(GPU_SAMPLE, required=True)},
}


def clean(index: int, msg: Any) -> dict:
    """The message with its `data` checked and normalised; MessageError if anything is off."""
    try:
        validate_envelope(msg)
    except MessageError as e:
        raise MessageError(f"message {index} of the batch: {e}") from None
    except (TypeError, ValueError, OverflowError) as e:
        # e.g. an unhashable "kind", or a time too large for a float
        raise MessageError(f"message {index} of the batch: malformed envelope ({type(e).__name__}: {e})") from None
    kind = msg["kind"]
    data = msg["data"]
    low, high = TIME_RANGE
    if not low <= msg["time"] <= high:
        raise MessageError(
            f"message {index} of the batch (cluster {msg['cluster_id']!r}, seq {msg['seq']}): time must be "
            f"seconds since the epoch from 1970 to 2200, got {msg['time']!r:.40}")
    try:
        checked = {name: check(data.get(name), name) for name, check in KINDS[kind].items()}
    except Bad as e:
        raise MessageError(
            f"message {index} of the batch (cluster {msg['cluster_id']!r}, seq {msg['seq']}): "
            f"{kind} message: {e}"
        ) from None
    return {**msg, "time": float(msg["time"]), "data": checked}
