"""The settings the handlers share, parsed once when the routes are made.

See `routes.routes()` for the settings contract.
"""
from __future__ import annotations

import contextlib
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from .codecrypt import CodeCipher

logger = logging.getLogger("dask_analytics_lab.server")

# How long a token lookup is trusted before asking the database again: a revoked
# token stops working within this long, and a busy ingest does not hit the
# tokens table once per batch.
TOKEN_CACHE_SECONDS = 30.0

KNOWN_SETTINGS = frozenset({
    "store_url", "store", "token_required", "local_auth", "code_key", "public_url",
    "max_body_bytes", "max_report_bytes", "threads",
})


@dataclass(frozen=True)
class Principal:
    """Who is asking.  account None: a trusted local caller who sees every account."""

    account: str | None
    user: str | None
    via: str  # "token" (header or login cookie), "open" (no token, trusted host), "local" (in-process)


@dataclass
class Context:
    prefix: str
    store: Any
    team: Any
    token_required: bool
    cipher: CodeCipher
    local_auth: Callable[[Any], bool] | None
    public_url: str | None
    max_body_bytes: int
    max_report_bytes: int
    executor: ThreadPoolExecutor
    _tokens: dict[str, tuple[float, Principal | None]] = field(default_factory=dict)
    _tokens_lock: threading.Lock = field(default_factory=threading.Lock)
    _owners: dict[str, str] = field(default_factory=dict)
    # SQLite takes one writer at a time; threads waiting on its lock sleep in growing
    # steps (its busy handler), so this process queues its own writers instead.
    write_lock: Any = field(default_factory=contextlib.nullcontext)

    def cluster_owners(self, claims: dict[str, str]) -> dict[str, str]:
        """{cluster_id: owning account}, claiming unowned ids (blocking: call off the loop).

        An owner never changes, so each id costs one database round trip per process.
        """
        result, missing = {}, {}
        for cid, account in claims.items():
            owner = self._owners.get(cid)
            if owner is None:
                missing[cid] = account
            else:
                result[cid] = owner
        if missing:
            found = self.team.claim_clusters(missing)
            if len(self._owners) > 100_000:  # bounded memory on a long-lived server
                self._owners.clear()
            self._owners.update(found)
            result.update(found)
        return result

    def lookup_token(self, token_hash: str) -> Principal | None:
        """The principal a token stands for, or None; cached (blocking: call off the loop)."""
        now = time.monotonic()
        with self._tokens_lock:
            hit = self._tokens.get(token_hash)
        if hit is not None and now - hit[0] < TOKEN_CACHE_SECONDS:
            return hit[1]
        row = self.team.find_token(token_hash)
        principal = Principal(row["account"], row["user"], "token") if row else None
        with self._tokens_lock:
            if len(self._tokens) > 10_000:  # someone trying many tokens: keep memory bounded
                self._tokens.clear()
            self._tokens[token_hash] = (now, principal)
        return principal


def make_context(prefix: str, settings: dict) -> Context:
    unknown = set(settings) - KNOWN_SETTINGS
    if unknown:
        raise ValueError(f"unknown server settings {sorted(unknown)}; known: {sorted(KNOWN_SETTINGS)}")
    store = settings.get("store")
    if store is None:
        url = settings.get("store_url")
        if not url:
            raise ValueError("server settings need store_url (a sqlite:/// or postgresql:// URL) or store")
        from ..store import open_store

        store = open_store(url)
    from ..store.team import TeamStore

    cipher = CodeCipher(settings.get("code_key"))
    if not cipher.enabled and settings.get("token_required", True):
        logger.warning("dask-analytics server: no code key given; code snippets are stored as plain text")
    prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
    public_url = settings.get("public_url")
    return Context(
        prefix=prefix,
        store=store,
        team=TeamStore(store),
        token_required=bool(settings.get("token_required", True)),
        cipher=cipher,
        local_auth=settings.get("local_auth"),
        public_url=public_url.rstrip("/") if public_url else None,
        max_body_bytes=int(settings.get("max_body_bytes", 16 * 2**20)),
        max_report_bytes=int(settings.get("max_report_bytes", 64 * 2**20)),
        executor=ThreadPoolExecutor(int(settings.get("threads", 4)), thread_name_prefix="dal-server"),
        write_lock=threading.Lock() if store.dialect == "sqlite" else contextlib.nullcontext(),
    )
