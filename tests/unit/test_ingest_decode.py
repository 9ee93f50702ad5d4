"""The ingest body read in one pass (server/ingest.decode_messages) gives the messages
the two-step path (body.parse_json, then check_messages) gives, or steps aside for it:
never other messages, and never a body that path refuses."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dask_analytics_lab.messages import MessageError
from dask_analytics_lab.server.body import parse_json
from dask_analytics_lab.server.errors import ApiError
from dask_analytics_lab.server.ingest import MAX_MESSAGES, check_messages, decode_messages

from ..factories import Cluster, tree
from ..fuzz_helpers import FUZZ, hostile_batches
from ..server_helpers import full_cluster


def _two_step(raw: bytes) -> bytes | None:
    """The messages of the two-step path, as JSON (5 and 5.0 differ there), or None
    where it refuses the body."""
    try:
        return msgspec.json.encode(check_messages(parse_json(raw)))
    except (ApiError, MessageError):
        return None


def _same_or_aside(raw: bytes) -> bool:
    """Whether the one-pass read gave what the two-step path gives, or stepped aside."""
    fast = decode_messages(raw)
    if fast is None:
        return False
    assert msgspec.json.encode(fast) == _two_step(raw), raw[:300]
    return True


def _template() -> list[dict]:
    c, msgs = full_cluster("acme")
    comp = f"comp-{c.id}"
    return msgs + [
        c.metrics(comp),
        c.workers(3),
        c.tasks(comp),
        c.profile(comp, tree(*(f"f{i}" for i in range(30)))),
        c.stop(),
    ]


def test_a_collector_batch_is_read_in_one_pass_as_in_two():
    template = _template()
    for ascii_only in (True, False):  # json.dumps's escapes, and UTF-8 as it is
        raw = json.dumps(template, ensure_ascii=ascii_only).encode()
        assert _same_or_aside(raw), "a plain batch must take the one-pass read"


@pytest.mark.parametrize(
    "value, taken",
    [
        ('"na\\u00efve \\ud83d\\ude00"', True),  # escapes, a surrogate pair among them
        ("1e-400", True),
        ("12345678901234567", True),
        ("0.00022222222222222223", True),  # a long fraction: read alike
        ("-9223372036854775808", False),
        ("9223372036854775807", False),  # 19 digits: the two-step path checks its range
        ("123456789012345678901234", False),  # refused there (422), read by msgspec
        ('"a\\u0000b"', False),  # NUL: replaced there
        ('"\\ud800"', False),  # a lone surrogate: replaced there, refused by msgspec
        ("NaN", False),  # null there
        ("1e999", False),  # infinity: null there
    ],
)
def test_numbers_and_escapes_the_two_paths_read_differently(value, taken):
    c = Cluster()
    raw = json.dumps([c.event(msg="X")]).encode().replace(b'"X"', value.encode())
    assert _same_or_aside(raw) is taken


def test_bodies_the_two_step_path_refuses_are_left_to_it():
    c = Cluster()
    good = json.dumps([c.event()]).encode()
    for raw in [
        b"\xef\xbb\xbf" + good,  # a BOM: 400 there
        good[:-1],
        b'{"v": 1}',
        json.dumps([c.event()] * (MAX_MESSAGES + 1)).encode(),  # 413
        json.dumps([{**c.event(), "seq": -1}]).encode(),
    ]:
        assert decode_messages(raw) is None


@FUZZ
@given(batch=hostile_batches(_template()), ascii_only=st.booleans())
def test_hostile_batches_read_alike_or_are_left_to_the_two_step_path(batch, ascii_only):
    raw = json.dumps(batch, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    if decode_messages(raw) is not None:
        assert _same_or_aside(raw)
