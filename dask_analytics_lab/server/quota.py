"""Per-account storage quotas, in bytes, by kind and in total, kept in the database.

Without them any account can fill the team's disk.  What is counted and how:
store/usage.py (kinds: task stream, profiles, events with exceptions, samples with
GPU samples and metrics, reports, and the rest: clusters, computations, code).  Each
kind but that rest has a limit of its own, and the account one for all its bytes
(settings KEYS; None or 0: none, the bytes are still counted).  A write is refused
whole, nothing of it stored: 413 when it alone is larger than a quota (known from the
request, so before any work), else 507 when the account's usage would pass one,
decided in the transaction that would store it, so every replica of the database counts
against the same figure and a retried message is never counted twice.  Both say which
quota, how much is used and the option that raises it.  Blocking: call off the loop.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..store import usage
from ..store.usage import TOTAL, Charge, QuotaExceeded
from .errors import ApiError

GiB = 2**30
# Generous: a team of a hundred clusters recording all day keeps about 20 GiB at 30
# days' retention (docs/scale.md: ~290 kiB a busy cluster-hour, mostly samples); the
# defaults stop a runaway account, an operator sizes them to the disk.
DEFAULTS: dict[str, int] = {
    "task_stream": 64 * GiB,
    "profiles": 16 * GiB,
    "events": 2 * GiB,
    "samples": 32 * GiB,
    "reports": 2 * GiB,
    TOTAL: 128 * GiB,
}
KEYS = {
    "task_stream": "quota_task_stream_bytes",
    "profiles": "quota_profile_bytes",
    "events": "quota_event_bytes",
    "samples": "quota_sample_bytes",
    "reports": "quota_report_bytes",
    TOTAL: "quota_account_bytes",
}
FLAGS = {
    "task_stream": "--task-stream-quota-bytes",
    "profiles": "--profile-quota-bytes",
    "events": "--event-quota-bytes",
    "samples": "--sample-quota-bytes",
    "reports": "--report-quota-bytes",
    TOTAL: "--account-quota-bytes",
}
NAMES = {
    "task_stream": "task stream",
    "profiles": "profiles",
    "events": "events",
    "samples": "samples",
    "reports": "reports",
    TOTAL: "total storage",
}


def limits_from(settings: dict[str, Any]) -> dict[str, int | None]:
    """{kind: limit} from the server's settings (KEYS), DEFAULTS where unset."""
    return {kind: settings.get(KEYS[kind], DEFAULTS[kind]) for kind in KEYS}


class Quota:
    def __init__(self, team: Any, limits: dict[str, int | None]):
        self.team = team
        self.limits = {k: (int(v) if v else None) for k, v in limits.items()}

    def _how(self, kind: str) -> str:
        return (
            f"raise it with the server setting {KEYS[kind]} "
            f"(`dask-analytics server {FLAGS[kind]} N`)"
        )

    def check(self, account: str | None, need: dict[str, int]) -> None:
        """413 where one write's bytes ({kind: n}) alone pass a quota of the account."""
        if account is None:
            return
        for kind in KEYS:
            limit = self.limits.get(kind)
            n = sum(need.values()) if kind == TOTAL else need.get(kind, 0)
            if limit and n > limit:
                raise ApiError(
                    413,
                    f"this upload holds {n:,} bytes of {NAMES[kind]}, more than the whole "
                    f"{NAMES[kind]} quota of {limit:,} bytes of account {account!r}; send "
                    f"less, or {self._how(kind)}",
                )

    def charge(self, account: str | None, batch: Sequence[Any]) -> Charge | None:
        """What store.ingest charges a checked batch to (None: no account, no quota),
        after the 413 check of its bytes (store/usage.measure: each message's JSON)."""
        if account is None:
            return None
        sizes = usage.measure(batch)
        self.check(account, usage.by_kind(sizes.values()))
        return Charge(account, self.limits, sizes)

    def refusal(self, e: QuotaExceeded) -> ApiError:
        """The 507 answer to a charge the store refused."""
        kind = e.kind
        if kind == "reports":
            free = "retention does not delete reports"
        else:
            free = "retention (`--retention`) gives back what it deletes"
        return ApiError(
            507,
            f"account {e.account!r} has used {e.used:,} of its {e.limit:,}-byte {NAMES[kind]} "
            f"quota and this needs {e.need:,} more; {free}, or {self._how(kind)}",
        )

    def add_report(self, row: dict[str, Any]) -> None:
        """Store an upload's report row, charged to its account (413/507 as above)."""
        account = row["account"]
        n = len(row["html_gz"]) + len(row["twin_gz"])
        self.check(account, {"reports": n})
        try:
            self.team.add_report(row, charge=Charge(account, self.limits))
        except QuotaExceeded as e:
            raise self.refusal(e) from None
