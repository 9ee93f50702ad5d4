"""Malformed messages: a clear MessageError naming the kind and field, and nothing stored.

Property-based (hypothesis): garbage never stores anything and never raises anything
but MessageError, on SQLite and on PostgreSQL (which refuses more: NUL characters,
lone surrogates, oversized index keys).
"""

from __future__ import annotations

import copy
import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dask_analytics_lab.messages import MAX_PROFILE_DEPTH, MessageError, make
from dask_analytics_lab.store import open_store

from ..factories import Cluster, group, tree

HYPOTHESIS = settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@pytest.fixture
def store(store_url):
    s = open_store(store_url)
    yield s
    s.close()


def stored(store) -> dict:
    return {table: len(rows) for table, rows in store.export().items() if rows}


def templates() -> list[dict]:
    """One valid message of every kind, with every field filled in."""
    c = Cluster(cluster_id="tmpl")
    return [
        c.cluster(),
        c.sample(),
        c.stop(),
        c.computation("comp", code=["h"], groups=[group("ones")]),
        c.code("h"),
        c.exception("comp", "ones"),
        c.event(msg={"k": [1, "x"]}),
        c.profile("comp", tree("f", "g")),
        c.gpu(n=1),
    ]


def with_field(msg: dict, path: tuple, value) -> dict:
    msg = copy.deepcopy(msg)
    node = msg
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return msg


def deep(n: int):
    v: object = 1
    for _ in range(n):
        v = [v]
    return v


BAD_NUMBER = ["1.5", [], {}, True, math.nan, math.inf, -math.inf, 10**400, 1e300, -1e300, 1e16]
# A time (seconds since the epoch) must also fall between 1970 and 2200.
BAD_TIME = BAD_NUMBER + [-1.0, 7_258_118_401.0, 1e12]
BAD_INT = [1.5, "1", True, 2**63, -(2**63) - 1, [], math.nan, -1]
BAD_TEXT = [1, [], {}, True, "nul\x00here", "lone \ud800 surrogate"]
BAD_KEY = BAD_TEXT + ["k" * 5000, "é" * 600]
BAD_JSON_OBJECT = [[], "s", 1, {"a": math.nan}, {"a": deep(200)}, {"a": "\udfff"}, {"a": {1, 2}}]
BAD_REQUIRED = [None]

# (kind, path inside the message) -> values that must be refused there
FIELDS = {
    ("cluster", ("data", "started")): BAD_TIME,
    ("cluster", ("data", "price_per_core_hour")): BAD_NUMBER,
    ("cluster", ("data", "name")): BAD_TEXT,
    ("cluster", ("data", "account")): BAD_KEY,
    ("cluster", ("data", "versions")): BAD_JSON_OBJECT,
    ("cluster", ("data", "platform")): BAD_JSON_OBJECT,
    ("cluster_sample", ("data", "n_workers")): BAD_INT,
    ("cluster_sample", ("data", "memory_used")): BAD_INT,
    ("cluster_sample", ("data", "cost")): BAD_NUMBER,
    ("cluster_sample", ("data", "idle_since")): BAD_TIME,
    ("cluster_stop", ("data", "stopped")): BAD_TIME,
    ("cluster_stop", ("data", "idle_shutdown")): [1, "yes", [], "true"],
    ("computation", ("data", "id")): BAD_KEY + BAD_REQUIRED + [""],
    ("computation", ("data", "start")): BAD_TIME + BAD_REQUIRED,
    ("computation", ("data", "state")): ["done", 1, None, "Finished"],
    ("computation", ("data", "code")): ["h", [1], ["\x00"], {}],
    ("computation", ("data", "totals")): [[], "x", {"n_tasks": 1.5}, {"compute": "1"}],
    ("computation", ("data", "groups")): ["g", [1], [{}], [{"name": None}], {"name": "g"}],
    ("computation", ("data", "groups", 0, "name")): BAD_KEY + BAD_REQUIRED,
    ("computation", ("data", "groups", 0, "n_tasks")): BAD_INT,
    ("computation", ("data", "groups", 0, "compute")): BAD_NUMBER,
    ("computation", ("data", "groups", 0, "start")): BAD_TIME,
    ("computation", ("data", "stop")): BAD_TIME,
    ("exception", ("data", "last_time")): BAD_TIME,
    ("gpu_samples", ("data", "samples", 0, "time")): BAD_TIME,
    ("computation", ("data", "groups", 0, "states")): [
        [],
        {"memory": 1.5},
        {"memory": "1"},
        {"x" * 2000: 1},
    ],
    ("computation", ("data", "groups", 0, "dependencies")): ["ones", [1], [None], {}],
    ("code", ("data", "hash")): BAD_KEY + BAD_REQUIRED,
    ("code", ("data", "text")): BAD_TEXT + BAD_REQUIRED,
    ("code", ("data", "lineno_frame")): [1.5, "1", True, 2**64],
    ("exception", ("data", "hash")): BAD_KEY + BAD_REQUIRED,
    ("exception", ("data", "count")): BAD_INT,
    ("exception", ("data", "traceback_text")): BAD_TEXT,
    ("exception", ("data", "computation_id")): BAD_KEY,
    ("exception", ("data", "group")): BAD_KEY,
    ("event", ("data", "topic")): BAD_KEY + BAD_REQUIRED,
    ("event", ("data", "msg")): [
        math.nan,
        {"a": math.inf},
        deep(150),
        "\ud800",
        {"s": {1}},
        object(),
    ],
    ("event", ("data", "time")): BAD_TIME,
    ("profile", ("data", "tree")): [
        None,
        [],
        {},
        {"count": 1},
        tree("f") | {"identifier": "top"},
        tree("f") | {"children": []},
        tree("f") | {"count": -1},
    ],
    ("profile", ("data", "tree", "children", "f;file.py;0", "identifier")): ["other", 1],
    ("profile", ("data", "tree", "children", "f;file.py;0", "description")): [None, [], "x"],
    ("profile", ("data", "tree", "children", "f;file.py;0", "description", "line_number")): BAD_INT[
        :-1
    ],
    ("gpu_samples", ("data", "samples")): BAD_REQUIRED + ["x", [1], {}],
    ("gpu_samples", ("data", "samples", 0, "mem_used")): BAD_INT,
    ("gpu_samples", ("data", "samples", 0, "mem_util")): BAD_NUMBER,
    ("gpu_samples", ("data", "samples", 0, "gpu_uuid")): BAD_KEY,
    ("gpu_samples", ("data", "samples", 0, "task_groups")): ["g", [1], {}],
    ("gpu_samples", ("data", "host")): BAD_KEY,
}

BAD_ENVELOPES = [
    None,
    1,
    "msg",
    [],
    {},
    {"v": 1, "cluster_id": "c", "seq": 0, "kind": "event", "time": 1.0},  # no data
    make("c", 0, "event", 1.0, {"topic": "t"}) | {"v": 2},
    make("c", -1, "event", 1.0, {"topic": "t"}),
    make("c", True, "event", 1.0, {"topic": "t"}),
    make("c", 2**62, "event", 1.0, {"topic": "t"}),
    make("", 0, "event", 1.0, {"topic": "t"}),
    make("c" * 201, 0, "event", 1.0, {"topic": "t"}),
    make(5, 0, "event", 1.0, {"topic": "t"}),
    make("c", 0, "events", 1.0, {"topic": "t"}),
    make("c", 0, ["event"], 1.0, {"topic": "t"}),  # unhashable kind
    make("c", 0, "event", math.nan, {"topic": "t"}),
    make("c", 0, "event", 10**400, {"topic": "t"}),
    make("c", 0, "event", "now", {"topic": "t"}),
    make("c", 0, "event", 1e300, {"topic": "t"}),  # a time past 2200
    make("c", 0, "event", -1.0, {"topic": "t"}),
    make("c", 0, "event", 1.0, [("topic", "t")]),
]


@pytest.mark.parametrize(
    "kind,path", list(FIELDS), ids=lambda x: x if isinstance(x, str) else ".".join(map(str, x[1:]))
)
def test_bad_field_is_refused_with_its_name(store, kind, path):
    (template,) = [m for m in templates() if m["kind"] == kind]
    field = ".".join(str(p) for p in path[1:])
    for bad in FIELDS[kind, path]:
        batch = templates() + [with_field(template, path, bad) | {"seq": 99}]
        with pytest.raises(MessageError) as info:
            store.ingest(batch)
        text = str(info.value)
        assert f"message {len(batch) - 1} of the batch" in text, text
        assert f"{kind} message" in text, text
        top = field.split(".")[0]
        assert f"data.{top}" in text, (bad, text)
        assert stored(store) == {}, bad


@pytest.mark.parametrize(
    "bad", BAD_ENVELOPES, ids=[f"envelope{i}" for i in range(len(BAD_ENVELOPES))]
)
def test_bad_envelope_is_refused(store, bad):
    with pytest.raises(MessageError, match="message 1 of the batch"):
        store.ingest(templates()[:1] + [bad])
    assert stored(store) == {}


def test_out_of_range_errors_say_what_is_allowed(store):
    (cluster,) = [m for m in templates() if m["kind"] == "cluster"]
    with pytest.raises(
        MessageError,
        match=r"data.started must be a time in seconds since the epoch from 1970 to "
        r"2200 \(0 to 7258118400\), got 1e\+300",
    ):
        store.ingest([with_field(cluster, ("data", "started"), 1e300)])
    with pytest.raises(MessageError, match="data.cost must be a number from -1e\\+15 to 1e\\+15"):
        store.ingest([with_field(templates()[1], ("data", "cost"), 1e300)])
    with pytest.raises(
        MessageError, match="time must be seconds since the epoch from 1970 to 2200"
    ):
        store.ingest([cluster | {"time": 1e300}])
    assert stored(store) == {}


def test_an_event_message_of_many_values_is_kept_as_sent(store):
    """Plain JSON is checked in one walk and stored as it is (no copy per value)."""
    c = Cluster()
    msg = {"rows": [{"i": i, "x": [1.5, "s"]} for i in range(20_000)]}
    assert store.ingest([c.event(msg=msg)]) == 1
    assert store.list_events()[0]["msg"] == msg


def test_batch_must_be_a_list(store):
    for bad in (None, "x", {"v": 1}, 3):
        with pytest.raises(MessageError, match="a batch must be a list"):
            store.ingest(bad)


def test_every_template_is_valid(store):
    assert store.ingest(templates()) == len(templates())


def test_lenient_where_harmless(store):
    """Optional fields may be left out, unknown ones are ignored, 3.0 is a whole number."""
    c = Cluster()
    msgs = [
        c.msg("cluster", {}),
        c.msg("cluster_sample", {"n_workers": 3.0, "future_field": [1, 2]}),
        c.msg("computation", {"id": "comp", "start": 5, "state": "running"}),
        c.msg("exception", {"hash": "e"}),
        c.msg("event", {"topic": "t", "msg": {1: ("a", "b")}}),
        c.msg("gpu_samples", {"samples": []}),
        c.msg("cluster_stop", {}),
    ]
    assert store.ingest(msgs) == len(msgs)
    assert store.get_cluster(c.id)["n_workers"] == 3
    assert store.get_cluster(c.id)["stopped"] == msgs[-1]["time"]
    assert store.get_computation("comp")["groups"] == []
    (exc,) = store.list_exceptions()
    assert exc["count"] == 1 and exc["computation_id"] is None and exc["task_group"] is None
    assert store.list_events()[0]["msg"] == {"1": ["a", "b"]}  # what JSON makes of it


def test_deep_profile_tree_is_cut_not_refused(store):
    c = Cluster()
    frames = [f"f{i}" for i in range(MAX_PROFILE_DEPTH + 100)]
    assert store.ingest([c.profile(None, tree(*frames, count=3))]) == 1
    node, depth = store.get_profile(cluster_id=c.id), 0
    while node["children"]:
        (node,) = node["children"].values()
        depth += 1
    assert depth == MAX_PROFILE_DEPTH and node["count"] == 3


# --- property-based ---------------------------------------------------------------

json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(st.characters(exclude_categories=()), max_size=30),
    st.sampled_from(["", "\x00", "\ud800", "x" * 3000, "é" * 700, "root", "running", "finished"]),
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)
    ),
    max_leaves=20,
)
KINDS = sorted({m["kind"] for m in templates()})
FIELD_NAMES = sorted({k for m in templates() for k in m["data"]})


@st.composite
def data_dicts(draw):
    """Data made of the real field names and arbitrary values: sometimes valid, mostly not."""
    keys = draw(st.lists(st.sampled_from(FIELD_NAMES), max_size=8, unique=True))
    return {k: draw(json_values) for k in keys}


envelopes = st.builds(
    lambda cid, seq, kind, t, data: {
        "v": 1,
        "cluster_id": cid,
        "seq": seq,
        "kind": kind,
        "time": t,
        "data": data,
    },
    st.one_of(st.sampled_from(["c1", "c2"]), st.text(max_size=5)),
    st.integers(min_value=-2, max_value=2**63),
    st.sampled_from(KINDS),
    st.one_of(st.floats(), st.integers()),
    data_dicts(),
)


@HYPOTHESIS
@given(batch=st.lists(st.one_of(json_values, envelopes), min_size=1, max_size=5))
def test_garbage_raises_only_message_error(store, batch):
    """Random batches: stored whole when valid by chance, else MessageError and nothing new."""
    before = stored(store)
    try:
        store.ingest(batch)
    except MessageError:
        assert stored(store) == before


mutations = st.sampled_from([(k, p, bad) for (k, p), bads in FIELDS.items() for bad in bads])


@HYPOTHESIS
@given(
    mutation=mutations,
    position=st.integers(min_value=0, max_value=9),
    first_seq=st.integers(0, 10**6),
)
def test_one_bad_message_stores_nothing_of_its_batch(store, mutation, position, first_seq):
    kind, path, bad = mutation
    (template,) = [m for m in templates() if m["kind"] == kind]
    batch = [m | {"seq": first_seq + i} for i, m in enumerate(templates())]
    batch.insert(position, with_field(template, path, bad) | {"seq": first_seq + 50})
    with pytest.raises(MessageError, match=f"message {position} of the batch"):
        store.ingest(batch)
    assert stored(store) == {}
