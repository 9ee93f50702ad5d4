"""Send a table to the browser in small, incremental updates.

A table travels as two traits: `<name>_base` = {"v", "rows"} (every row at version v)
and `<name>_patch` = {"v", "rows", "removed"} (rows changed since that base).  Each tick
resends only the patch; when the patch grows past a fraction of the base, the table is
rebased (one full send) and the patch starts empty again.  So a live view of a big
computation sends what changed, and a view opened later (or a reloaded page) still
rebuilds everything from the two traits alone: nothing depends on the browser having
seen earlier messages, which custom messages could not promise (they are dropped
while a view's module is still loading).  js/common/table.ts is the receiving half.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any


class KeyedTable:
    """The kernel's copy of one table and the two traits that carry it."""

    def __init__(self, owner: Any, name: str, key: str, *, min_patch: int = 4, ratio: float = 0.25):
        self.owner = owner
        self.name = name
        self.key = key
        self.min_patch = min_patch
        self.ratio = ratio
        self.version = 0
        self._base: dict[Hashable, dict] = {}
        self._patch: dict[Hashable, dict] = {}
        self._removed: set[Hashable] = set()

    def rows(self) -> list[dict]:
        merged = {k: v for k, v in self._base.items() if k not in self._removed}
        merged.update(self._patch)
        return list(merged.values())

    def __len__(self) -> int:
        return len(self.rows())

    def update(self, rows: Iterable[dict], *, complete: bool = True) -> bool:
        """Bring the table to `rows` (all rows when complete, else only some).

        Returns True when anything was sent.  Call inside `owner.hold_sync()` to send
        one message per tick.
        """
        current = {k: v for k, v in self._base.items() if k not in self._removed}
        current.update(self._patch)
        changed: dict[Hashable, dict] = {}
        seen: set[Hashable] = set()
        for row in rows:
            k = row[self.key]
            seen.add(k)
            if current.get(k) != row:
                changed[k] = row
        gone = set(current) - seen if complete else set()
        if not changed and not gone:
            return False
        for k in gone:
            self._patch.pop(k, None)
            if k in self._base:
                self._removed.add(k)
        for k, row in changed.items():
            self._patch[k] = row
            self._removed.discard(k)
        # Rebase once the patch is a sizeable part of the table: a tick then costs the
        # rows that moved lately, and a rebase (the whole table) comes rarely.
        if not self._base or len(self._patch) + len(self._removed) > max(
            self.min_patch, self.ratio * len(self._base)
        ):
            self._rebase()
        else:
            self._send_patch()
        return True

    def replace(self, rows: Iterable[dict]) -> None:
        """Start over with exactly `rows` (another computation chosen, a resampled series)."""
        self._base = {r[self.key]: r for r in rows}
        self._patch.clear()
        self._removed.clear()
        self.version += 1
        self._send_all()

    def _rebase(self) -> None:
        merged = {k: v for k, v in self._base.items() if k not in self._removed}
        merged.update(self._patch)
        self._base = merged
        self._patch = {}
        self._removed = set()
        self.version += 1
        self._send_all()

    def _send_all(self) -> None:
        setattr(
            self.owner, f"{self.name}_base", {"v": self.version, "rows": list(self._base.values())}
        )
        self._send_patch()

    def _send_patch(self) -> None:
        setattr(
            self.owner,
            f"{self.name}_patch",
            {"v": self.version, "rows": list(self._patch.values()), "removed": list(self._removed)},
        )
