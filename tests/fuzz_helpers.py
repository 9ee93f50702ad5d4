"""Hypothesis strategies for hostile input: JSON values of every shape and batches of
valid messages with parts replaced, dropped or added (the fuzz tests and the one-pass
ingest read's property test share them)."""

from __future__ import annotations

import json
import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

# Enough to find the usual suspects in a run that stays short; raise to dig deeper.
EXAMPLES = int(os.environ.get("DAL_FUZZ_EXAMPLES", "60"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

any_char = st.characters(exclude_categories=())  # NUL, surrogates, everything
texts = st.text(alphabet=any_char, max_size=12) | st.sampled_from(
    [
        "",
        "\x00",
        "\ud800",
        "x" * 5000,
        "<script>alert(1)</script>",
        "'; DROP TABLE clusters; --",
        "../..",
        "NaN",
    ]
)
leaves = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | texts
)
json_values = st.recursive(
    leaves,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(texts, inner, max_size=4),
    max_leaves=12,
)


@st.composite
def hostile_batches(draw, template: list[dict]) -> list:
    """Valid messages with a few parts replaced, dropped or added; or plain garbage."""
    if draw(st.integers(0, 9)) == 0:
        return draw(json_values)
    batch = json.loads(
        json.dumps(draw(st.lists(st.sampled_from(template), min_size=1, max_size=4)))
    )
    for _ in range(draw(st.integers(1, 3))):
        msg = draw(st.sampled_from(batch))
        target = (
            msg if draw(st.booleans()) or not isinstance(msg.get("data"), dict) else msg["data"]
        )
        keys = sorted(target)
        action = draw(st.sampled_from(["replace", "drop", "add", "deep"]))
        if action == "replace" and keys:
            target[draw(st.sampled_from(keys))] = draw(json_values)
        elif action == "drop" and keys:
            target.pop(draw(st.sampled_from(keys)))
        elif action == "add":
            target[draw(texts)] = draw(json_values)
        else:  # somewhere one level down (groups, totals, samples, tree ...)
            inner = [k for k in keys if isinstance(target[k], (dict, list)) and target[k]]
            if inner:
                node = target[draw(st.sampled_from(inner))]
                if isinstance(node, list):
                    node[draw(st.integers(0, len(node) - 1))] = draw(json_values)
                else:
                    node[draw(st.sampled_from(sorted(node)))] = draw(json_values)
    return batch
