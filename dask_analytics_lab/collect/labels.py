"""A computation's label and the line that made it: what the widget, the Lab and the
CLI list it by (`read_parquet → groupby-agg`, `df.groupby("k").x.sum().compute()`)."""

from __future__ import annotations

import heapq
from typing import Any

from ..messages import fingerprint
from .group_figures import Claim


def code_line(text: str, lineno_relative: int) -> str | None:
    """The line that made the computation: distributed's lineno_relative counts from 0."""
    lines = text.splitlines()
    if 0 <= lineno_relative < len(lines):
        return lines[lineno_relative].strip()[:500] or None
    return None


def prefix_label(claims: list[Claim]) -> str:
    """Its task-group prefixes from inputs to outputs: `read_parquet → groupby-agg`."""
    depth: dict[Any, int] = {}
    groups = {c.tg for c in claims}

    def level(tg: Any) -> int:
        # Longest path from a root over this computation's groups, by an iterative
        # depth-first walk: a group on the current path is skipped, so a cycle (a group
        # feeding itself) ends; a group only waiting on the stack is not (it was, and a
        # group depending on a sibling of its own got the wrong level).  Each group's
        # level is worked out once (the walk of an earlier group may have), and each
        # dependency looked at once: a frame keeps the highest level among its group's
        # dependencies so far, and a group's level goes to its parent's frame as it is
        # known.
        known = depth.get(tg)
        if known is not None:
            return known
        path = {tg}
        stack: list[list[Any]] = [[tg, iter(tg.dependencies), -1]]
        while stack:
            frame = stack[-1]
            for d in frame[1]:
                found = depth.get(d)
                if found is not None:
                    if found > frame[2]:
                        frame[2] = found
                elif d in groups and d not in path:
                    path.add(d)
                    stack.append([d, iter(d.dependencies), -1])
                    break
            else:
                stack.pop()
                path.discard(frame[0])
                found = depth[frame[0]] = frame[2] + 1
                if stack and found > stack[-1][2]:
                    stack[-1][2] = found
        return depth[tg]

    # The prefixes in the order of their first group by (level, start, name): each
    # prefix's least key, in one pass, and of those only the two least and the greatest
    # when there are more than four (no sort of every group: a new set of 4,000 groups
    # is labelled in a turn of the loop of its own).  A root is at level 0 without the
    # walk (the walk gives it the same); `i` orders equal keys as a stable sort would.
    first: dict[str, tuple[int, float, str, int]] = {}
    for i, g in enumerate(groups):
        key = (level(g) if g.dependencies else 0, g.start or 0.0, g.name, i)
        prefix = g.prefix.name
        least = first.get(prefix)
        if least is None or key < least:
            first[prefix] = key
    if len(first) <= 4:
        return " → ".join(sorted(first, key=first.__getitem__))
    two = heapq.nsmallest(2, first, key=first.__getitem__)
    return " → ".join([*two, "…", max(first, key=first.__getitem__)])


def relabel(record: Any) -> None:
    """A computation record's label from its claims now (computation_record.Tracked)."""
    record.labelled = len(record.claims)
    record.label = prefix_label(record.claims)


def refingerprint(record: Any) -> None:
    """Its prefixes and its line only: made where a new group set is seen."""
    record.fingerprinted = len(record.claims)
    record.fingerprint = fingerprint(record.code_line, record.prefixes)
