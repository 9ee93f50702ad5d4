"""The settings the handlers share, parsed once when the routes are made.

See `routes.routes()` for the settings contract.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import hmac
import ipaddress
import logging
import secrets
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ..codecrypt import CodeCipher
from .deadlines import IngestQueue
from .errors import ApiError
from .looplag import LoopLag
from .metrics import Metrics
from .quota import KEYS as QUOTA_KEYS
from .quota import Quota
from .quota import limits_from as quota_limits
from .shares import ReadShares
from .throttle import SharedFailures

logger = logging.getLogger("dask_analytics_lab.server")

# How long a token lookup is trusted before asking the database again (a busy ingest
# does not hit the tokens table once per batch) ...
TOKEN_CACHE_SECONDS = 30.0
# ... unless the tokens changed: every TOKENS_CHECK_SECONDS a lookup first reads one
# aggregate of the tokens table (TeamStore.tokens_mark), and any token made or revoked
# by any process (another replica, `dask-analytics token revoke`) empties the cache.  So
# a revoked token stops working on every replica within this long, for one small query
# per replica this often instead of one per token.
TOKENS_CHECK_SECONDS = 2.0
# last_used is written at most this often per token (one small write a minute).
TOUCH_SECONDS = 60.0
# Failed authentications with one credential from one address: more than
# `auth_failures` (default FAILURES) in FAILURE_WINDOW seconds, and that credential is
# refused (429) from that address until the window ends, before it is looked up.  Other
# credentials from the same address (a proxy's) are not: a working one is never refused.
# Counted by every replica of the database together (throttle.py).
FAILURES = 10
FAILURE_WINDOW = 60.0
# The names a server without tokens answers to by default (DNS rebinding: a web page
# whose name was rebound to 127.0.0.1 sends its own name as Host).
LOCAL_HOSTS = ("localhost", "127.0.0.1", "::1")

KNOWN_SETTINGS = frozenset(
    {
        "store_url",
        "store",
        "token_required",
        "local_auth",
        "code_key",
        "public_url",
        "max_body_bytes",
        "max_json_bytes",
        "max_report_bytes",
        "body_memory",
        "body_timeout",
        "body_idle_timeout",
        "body_queue_timeout",
        "threads",
        "allowed_hosts",
        "session_secret",
        "auth_failures",
        "metrics_token",
        "retention",
        "max_answer_bytes",
        "query_timeout",
        *QUOTA_KEYS.values(),
        "forwarded_allow_ips",
        "report_url",
        "alerts",  # alerts.settings.AlertSettings (analytics.alerts of the server's config)
    }
)
# The largest answer one read may send (bytes of JSON; lists are cut into pages).
MAX_ANSWER_BYTES = 16 * 2**20
# Seconds a store read may run before it is cancelled (503).
QUERY_TIMEOUT = 30.0
# Threads that parse and store request bodies (apart from the reads' threads).
BODY_THREADS = 2


@dataclass(frozen=True)
class Principal:
    """Who is asking.  account None: a trusted local caller who sees every account."""

    account: str | None
    user: str | None
    via: str  # "token" (header or login session), "open" (no token, trusted host), "local" (in-process)
    token_id: str | None = None


@dataclass(frozen=True)
class TokenCheck:
    """What a token (or a session's token id) stands for: a principal, or why not."""

    principal: Principal | None
    problem: str | None = None  # "unknown" or "expired"
    expires: float | None = None


class MemoryBudget:
    """Bytes that request bodies in flight may take, shared by all requests (asyncio,
    event loop only).  Waiters are served first come, first served; one that waits
    longer than its timeout gets 503 with Retry-After (the plugin retries those)."""

    def __init__(self, total: int, name: str):
        self.total, self.name, self.used = int(total), name, 0
        self._waiters: collections.deque[tuple[int, asyncio.Future]] = collections.deque()

    async def acquire(self, n: int, timeout: float) -> int:
        n = max(0, int(n))
        if n > self.total:
            raise ValueError(f"{n} bytes is more than the whole {self.name} budget ({self.total})")
        if not self._waiters and self.used + n <= self.total:
            self.used += n
            return n
        fut = asyncio.get_running_loop().create_future()
        entry = (n, fut)
        self._waiters.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except (TimeoutError, asyncio.CancelledError) as e:
            if fut.done() and not fut.cancelled():
                if isinstance(e, asyncio.CancelledError):
                    self.release(n)
                    raise
                return n  # granted just as the timeout struck
            with contextlib.suppress(ValueError):
                self._waiters.remove(entry)
            fut.cancel()
            self._wake()
            if isinstance(e, asyncio.CancelledError):
                raise
            raise ApiError(
                503,
                f"the server is busy reading other large requests ({self.name}); try again",
                headers={"Retry-After": "5"},
            ) from None
        return n

    def release(self, n: int) -> None:
        self.used = max(0, self.used - int(n))
        self._wake()

    def _wake(self) -> None:
        while self._waiters:
            n, fut = self._waiters[0]
            if fut.done():
                self._waiters.popleft()
                continue
            if self.used + n > self.total:
                return
            self._waiters.popleft()
            self.used += n
            fut.set_result(None)


Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_forwarded_allow(value: Any) -> tuple[Network, ...] | str | None:
    """forwarded_allow_ips: addresses or networks (a list, or one comma-separated
    string, as uvicorn's --forwarded-allow-ips), "*" for any peer, None for none."""
    if value is None or value == "" or value == []:
        return None
    items = (
        [x.strip() for x in value.split(",")]
        if isinstance(value, str)
        else [str(x).strip() for x in value]
    )
    items = [x for x in items if x]
    if "*" in items:
        return "*"
    try:
        return tuple(ipaddress.ip_network(x, strict=False) for x in items)
    except ValueError as e:
        raise ValueError(
            f"forwarded_allow_ips takes IP addresses or networks (e.g. 10.0.0.0/8) or '*': {e}"
        ) from None


def _ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        return ipaddress.ip_address(text.strip().strip("[]"))
    except ValueError:
        return None


def report_origin(url: str | None, public_url: str | None) -> tuple[str, str] | None:
    """report_url as (origin URL, the Host header that names it), checked: an http(s)
    origin that is not the server's own public one."""
    if not url:
        return None
    import urllib.parse

    parts = urllib.parse.urlsplit(str(url).strip())
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path.strip("/")
        or parts.query
    ):
        raise ValueError(
            f"report_url must be an origin such as https://reports.example.com, got {url!r}"
        )
    default = {"http": 80, "https": 443}[parts.scheme]
    host = parts.hostname.lower() + ("" if parts.port in (None, default) else f":{parts.port}")
    if public_url:
        own = urllib.parse.urlsplit(public_url)
        if (own.scheme, (own.netloc or "").lower()) == (parts.scheme, parts.netloc.lower()):
            raise ValueError(
                "report_url must be another origin than public_url: uploaded report HTML must "
                "not run on the server's own origin"
            )
    return f"{parts.scheme}://{parts.netloc.lower()}", host


def host_name(host: str) -> str:
    """The name in a Host header: no port, no brackets, lower case, no trailing dot."""
    host = host.strip().lower()
    if host.startswith("["):
        host = host[1:].split("]", 1)[0]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


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
    max_json_bytes: int
    max_report_bytes: int
    executor: ThreadPoolExecutor
    # Request bodies are parsed and stored here, apart from the reads' threads, so a
    # big batch never makes a query wait for a thread.
    body_executor: ThreadPoolExecutor
    receiving: MemoryBudget  # decompressed bytes of bodies being received
    parsing: MemoryBudget  # estimated memory of bodies being parsed and stored
    body_timeout: float
    body_idle_timeout: float
    body_queue_timeout: float
    session_secret: bytes
    allowed_hosts: frozenset[str] | None
    quota: Quota
    auth_failures: int = FAILURES
    # /metrics: the operator's token (ops.py); retention: analytics.retention in seconds.
    metrics_token: str | None = None
    retention: float | None = None
    metrics: Metrics = field(default_factory=Metrics)
    max_answer_bytes: int = MAX_ANSWER_BYTES
    query_timeout: float | None = QUERY_TIMEOUT
    loop_lag: LoopLag = field(default_factory=LoopLag)
    # Report bodies being sent (report_handlers.SharedBodies): one copy per report
    # however many clients read it at once.
    report_bodies: Any = None
    read_shares: Any = (
        None  # shares.ReadShares: one caller's reads take at most half the read threads
    )
    # Proxies whose X-Forwarded-For names the client (None: none; "*": any peer).
    forwarded_allow: tuple[Network, ...] | str | None = None
    # Keys the credential fingerprints the throttle counts by: the credentials
    # themselves are never kept.  Made from the session secret (make_context), so the
    # replicas sharing that secret count a credential under the same fingerprint.
    _fingerprint_key: bytes = field(default_factory=lambda: secrets.token_bytes(32))
    # The count of failures all replicas share (throttle.py); None: this process's only.
    shared_failures: SharedFailures | None = None
    # The origin serving uploaded reports' own HTML (report_url), and its Host header
    # as a browser sends it; None: that HTML is served nowhere.
    report_url: str | None = None
    report_host: str | None = None
    _logged: dict[str, tuple[float, int]] = field(default_factory=dict)
    _tokens: dict[str, tuple[float, dict | None]] = field(default_factory=dict)
    _tokens_lock: threading.Lock = field(default_factory=threading.Lock)
    _tokens_mark: tuple | None = None
    _tokens_epoch: int = 0  # how many times the cache was emptied
    _tokens_checked: float = float("-inf")
    _touched: dict[str, float] = field(default_factory=dict)
    _failures: dict[tuple[str, str], tuple[float, int, bool]] = field(default_factory=dict)
    _owners: dict[str, str] = field(default_factory=dict)
    # SQLite takes one writer at a time; threads waiting on its lock sleep in growing
    # steps (its busy handler), so this process queues its own writers instead.
    write_lock: Any = field(default_factory=contextlib.nullcontext)
    # Ingest batches waiting for the body threads (deadlines.py): a request the queue
    # would keep past its deadline is answered 503 at once.
    ingest_queue: IngestQueue = field(default_factory=lambda: IngestQueue(BODY_THREADS))
    # alerts.rules.Evaluator: ingest hands it each stored batch; None: no alerts configured.
    alerts: Any = None
    # findings.keeper.Keeper: ingest hands it each stored batch, to keep the findings of
    # the computations that ended (what list filters by finding kind read).
    keeper: Any = None

    # --- cluster ownership (blocking: call off the loop) ------------------------
    def cluster_owners(self, claims: dict[str, str], *, now: float | None = None) -> dict[str, str]:
        """{cluster_id: owning account}, claiming unowned ids (at time `now`).

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
            with self.write_lock:
                found = self.team.claim_clusters(missing, now=now)
            if len(self._owners) > 100_000:  # bounded memory on a long-lived server
                self._owners.clear()
            self._owners.update(found)
            result.update(found)
        return result

    def release_claims(self, cluster_ids: list[str], *, account: str, claimed: float) -> None:
        """Take back the claims a refused batch made (see TeamStore.release_claims)."""
        if not cluster_ids:
            return
        with self.write_lock:
            released = self.team.release_claims(cluster_ids, account=account, claimed=claimed)
        for cid in released:
            self._owners.pop(cid, None)

    # --- tokens (blocking: call off the loop) -------------------------------------
    def _check_tokens_mark(self, now: float) -> None:
        """Empty the token cache when the tokens table changed (see TOKENS_CHECK_SECONDS)."""
        with self._tokens_lock:
            if now - self._tokens_checked < TOKENS_CHECK_SECONDS:
                return
            self._tokens_checked = now  # one thread asks; the others go on meanwhile
        try:
            mark = self.team.tokens_mark()
        except Exception:  # the lookup itself says whether the store is down
            with self._tokens_lock:
                self._tokens_checked = float("-inf")
            return
        with self._tokens_lock:
            if mark != self._tokens_mark:
                if self._tokens_mark is not None:
                    self._tokens.clear()
                    self._tokens_epoch += 1
                self._tokens_mark = mark

    def _cached(self, key: str, fetch: Callable[[], dict | None]) -> dict | None:
        now = time.monotonic()
        self._check_tokens_mark(now)
        with self._tokens_lock:
            hit = self._tokens.get(key)
        if hit is not None and now - hit[0] < TOKEN_CACHE_SECONDS:
            return hit[1]
        with self._tokens_lock:
            epoch = self._tokens_epoch
        row = fetch()
        with self._tokens_lock:
            if len(self._tokens) > 10_000:  # someone trying many tokens: keep memory bounded
                self._tokens.clear()
            if epoch == self._tokens_epoch:  # else the tokens changed while it was read: not kept
                self._tokens[key] = (now, row)
        return row

    def _check(self, row: dict | None) -> TokenCheck:
        if row is None:
            return TokenCheck(None, "unknown")
        expires = row.get("expires")
        if expires is not None and time.time() >= expires:
            return TokenCheck(None, "expired", expires)
        self._touch(row["token_id"])
        return TokenCheck(
            Principal(row["account"], row["user"], "token", row["token_id"]), expires=expires
        )

    def check_token(self, token_hash: str) -> TokenCheck:
        """What a token stands for (cached; an expired one says so)."""
        return self._check(self._cached(token_hash, lambda: self.team.find_token(token_hash)))

    def fresh_token(self, token_hash: str) -> TokenCheck | None:
        """check_token's answer where it needs no database (the look-up cached, the
        tokens table checked for changes less than TOKENS_CHECK_SECONDS ago), else None.
        Never blocks: the event loop asks this first and saves a thread hop a request."""
        now = time.monotonic()
        with self._tokens_lock:
            if now - self._tokens_checked >= TOKENS_CHECK_SECONDS:
                return None
            hit = self._tokens.get(token_hash)
        if hit is None or now - hit[0] >= TOKEN_CACHE_SECONDS:
            return None
        return self._check(hit[1])

    def check_session(self, session_id: str) -> TokenCheck:
        """What a login session's token stands for now: nothing once the session was
        logged out (on any server process of this database), expired, or its token
        revoked or expired.  Not cached: a logout holds from the next request on."""
        return self._check(self.team.find_session(session_id))

    def new_session(self, token_id: str, expires: float) -> str:
        """A new login session of a token, kept in the database; its id (128 random bits)."""
        session_id = secrets.token_urlsafe(16)
        with self.write_lock:
            self.team.add_session(session_id=session_id, token_id=token_id, expires=expires)
        return session_id

    def end_session(self, session_id: str) -> None:
        with self.write_lock:
            self.team.end_session(session_id)

    def cached_principal(self, token_hash: str) -> Principal | None:
        """A token already known good, without asking the database (for a throttled address)."""
        with self._tokens_lock:
            hit = self._tokens.get(token_hash)
        if hit is None or hit[1] is None or time.monotonic() - hit[0] >= TOKEN_CACHE_SECONDS:
            return None
        check = self._check(hit[1])
        return check.principal

    def lookup_token(self, token_hash: str) -> Principal | None:
        """The principal a token stands for, or None (unknown, revoked or expired)."""
        return self.check_token(token_hash).principal

    def _touch(self, token_id: str) -> None:
        """Record the token's use, at most once a minute, on a writer thread."""
        now = time.monotonic()
        with self._tokens_lock:
            if now - self._touched.get(token_id, -TOUCH_SECONDS) < TOUCH_SECONDS:
                return
            if len(self._touched) > 10_000:
                self._touched.clear()
            self._touched[token_id] = now
        try:
            self.body_executor.submit(self._write_touch, token_id, time.time())
        except RuntimeError:  # shutting down
            pass

    def _write_touch(self, token_id: str, when: float) -> None:
        try:
            with self.write_lock:
                self.team.touch_token(token_id, when)
        except Exception as e:  # the store being down must not fail the request that used it
            logger.debug(
                "dask-analytics server: could not record the use of token %s: %s", token_id, e
            )

    # --- who is calling, and failed authentication (event loop) ------------------
    def _trusted(self, address: str) -> bool:
        allow = self.forwarded_allow
        if allow == "*":
            return True
        ip = _ip(address)
        # Otherwise networks, or None.
        return ip is not None and isinstance(allow, tuple) and any(ip in n for n in allow)

    def trusted_proxy(self, peer: str) -> bool:
        """Whether the direct peer is a trusted proxy (forwarded_allow_ips): the one
        rule for every X-Forwarded-* header (For, Proto, Host).  From any other peer
        they are whatever the client wrote, and count for nothing."""
        return bool(self.forwarded_allow) and self._trusted(peer)

    def forwarded(self, peer: str, lines: list[str]) -> str | None:
        """What a trusted proxy says in an X-Forwarded-Proto or -Host header (its lines,
        as sent), else None.  The right-most entry: the one the proxy next to us wrote
        (as tornado's own xheaders reads X-Forwarded-Proto); one in front of it
        appends, and anything to its left came from further away."""
        if not lines or not self.trusted_proxy(peer):
            return None
        entries = [e.strip() for line in lines for e in line.split(",")]
        return entries[-1] or None

    def client_address(self, peer: str, forwarded: list[str]) -> str:
        """The client's address: the peer's, unless the peer is a trusted proxy; then
        the right-most X-Forwarded-For entry that is not a trusted proxy (entries to
        its left are whatever the client wrote).  A peer that is not trusted cannot
        choose its address by sending the header."""
        if not forwarded or not self.trusted_proxy(peer):
            return peer
        hops = [h.strip() for line in forwarded for h in line.split(",") if h.strip()]
        address = peer
        for hop in reversed(hops):
            ip = _ip(hop)
            if ip is None:
                break  # not an address: nothing left of it can be believed either
            address = str(ip)
            if not self._trusted(address):
                break
        return address

    def fingerprint(self, credential: str) -> str:
        """A keyed hash of a presented credential (token, header, cookie, metrics token)."""
        return hmac.new(
            self._fingerprint_key, credential.encode("utf-8", "replace"), hashlib.sha256
        ).hexdigest()[:32]

    def throttled(self, address: str, fingerprint: str) -> float:
        """Seconds until this credential may be tried again from `address` (0: now), by
        this process's count or the one all replicas share."""
        shared = self.shared_failures.refused(address, fingerprint) if self.shared_failures else 0.0
        entry = self._failures.get((address, fingerprint))
        if entry is None:
            return shared
        start, count, _ = entry
        left = start + FAILURE_WINDOW - time.monotonic()
        if left <= 0:
            del self._failures[address, fingerprint]
            return shared
        return max(shared, left if count >= self.auth_failures else 0.0)

    def auth_failed(
        self, address: str, fingerprint: str, reason: str, *, shared: bool = True
    ) -> Future | None:
        """Count one failed authentication with a credential from `address`, and log
        it (never the credential; at most `auth_failures` lines per address a minute).
        With `shared`, also counted in the database for every replica: a future of the
        count there (throttle.py), or None.  Not for what is never refused (a browser's
        stale session cookie, sent with every page): no write per page view."""
        counted = (
            self.shared_failures.count(address, fingerprint)
            if shared and self.shared_failures
            else None
        )
        now = time.monotonic()
        key = (address, fingerprint)
        start, count, said = self._failures.get(key, (now, 0, False))
        if now - start >= FAILURE_WINDOW:
            start, count, said = now, 0, False
        count += 1
        if len(self._failures) > 100_000:
            self._failures.clear()
        self._failures[key] = (start, count, said)
        if count > self.auth_failures:
            if not said:
                logger.warning(
                    "dask-analytics server: %d failed authentications with one credential from %s within "
                    "%.0f s; refusing it from there for the rest of the minute (%s)",
                    count,
                    address,
                    FAILURE_WINDOW,
                    reason,
                )
                self._failures[key] = (start, count, True)
            return counted
        # A client trying many credentials is not refused (each one might work), but
        # it cannot flood the log either.
        lstart, logged = self._logged.get(address, (now, 0))
        if now - lstart >= FAILURE_WINDOW:
            lstart, logged = now, 0
        if len(self._logged) > 100_000:
            self._logged.clear()
        self._logged[address] = (lstart, logged + 1)
        if logged < self.auth_failures:
            logger.warning(
                "dask-analytics server: failed authentication from %s: %s", address, reason
            )
        elif logged == self.auth_failures:
            logger.warning(
                "dask-analytics server: more failed authentications from %s within %.0f s; not logging "
                "each until the minute is over",
                address,
                FAILURE_WINDOW,
            )
        return counted

    def host_allowed(self, host: str) -> bool:
        if self.allowed_hosts is None or "*" in self.allowed_hosts:
            return True
        return host_name(host) in self.allowed_hosts

    def close(self) -> None:
        if self.shared_failures is not None:
            self.shared_failures.close()
        self.loop_lag.stop()
        if self.alerts is not None:
            self.alerts.close(10.0)
        if self.keeper is not None:
            self.keeper.close(10.0)
        self.executor.shutdown(wait=True)
        self.body_executor.shutdown(wait=True)
        self.store.close()


def _metrics_token(token: str | None) -> str | None:
    if token is None:
        return None
    token = str(token).strip()
    if len(token) < 16:
        raise ValueError("metrics_token must be at least 16 characters")
    return token


def make_context(prefix: str, settings: dict) -> Context:
    unknown = set(settings) - KNOWN_SETTINGS
    if unknown:
        raise ValueError(
            f"unknown server settings {sorted(unknown)}; known: {sorted(KNOWN_SETTINGS)}"
        )
    store = settings.get("store")
    if store is None:
        url = settings.get("store_url")
        if not url:
            raise ValueError(
                "server settings need store_url (a sqlite:/// or postgresql:// URL) or store"
            )
        from ..store import open_store

        store = open_store(url)
    from ..store.team import TeamStore

    cipher = CodeCipher(settings.get("code_key"))
    token_required = bool(settings.get("token_required", True))
    if not cipher.enabled and token_required:
        logger.warning(
            "dask-analytics server: no code key given; code snippets are stored as plain text"
        )
    prefix = "/" + prefix.strip("/") if prefix.strip("/") else ""
    public_url = settings.get("public_url")
    hosts = settings.get("allowed_hosts")
    if hosts is None and not token_required and settings.get("local_auth") is None:
        hosts = LOCAL_HOSTS  # no tokens and no host app judging callers: local names only
    reports = report_origin(settings.get("report_url"), public_url)
    if hosts is not None and reports is not None:
        hosts = [*hosts, host_name(reports[1])]  # the report origin is this server too
    allowed = None if hosts is None else frozenset(host_name(h) if h != "*" else "*" for h in hosts)
    secret = settings.get("session_secret")
    if isinstance(secret, str):
        secret = secret.encode()
    if secret is not None and len(secret) < 16:
        raise ValueError("session_secret must be at least 16 bytes")
    memory = int(settings.get("body_memory", 320 * 2**20))
    max_json = int(settings.get("max_json_bytes", 32 * 2**20))
    max_report = int(settings.get("max_report_bytes", 64 * 2**20))
    receiving = MemoryBudget(memory // 5, "memory for bodies being received")
    if max(max_json, max_report) > receiving.total:
        raise ValueError(
            f"body_memory ({memory}) must be at least 5 times max_json_bytes and max_report_bytes"
        )
    query_timeout = settings.get("query_timeout", QUERY_TIMEOUT)
    store.read_timeout = float(query_timeout) if query_timeout else None
    team = TeamStore(store)
    threads = int(settings.get("threads", 4))
    secret = secret or secrets.token_bytes(32)
    write_lock = threading.Lock() if store.dialect == "sqlite" else contextlib.nullcontext()
    failures = int(settings.get("auth_failures", FAILURES))
    return Context(
        max_answer_bytes=int(settings.get("max_answer_bytes") or MAX_ANSWER_BYTES),
        query_timeout=store.read_timeout,
        quota=Quota(team, quota_limits(settings)),
        prefix=prefix,
        store=store,
        team=team,
        token_required=token_required,
        cipher=cipher,
        local_auth=settings.get("local_auth"),
        public_url=public_url.rstrip("/") if public_url else None,
        max_body_bytes=int(settings.get("max_body_bytes", 16 * 2**20)),
        max_json_bytes=max_json,
        max_report_bytes=max_report,
        executor=ThreadPoolExecutor(threads, thread_name_prefix="dal-server"),
        body_executor=ThreadPoolExecutor(BODY_THREADS, thread_name_prefix="dal-server-body"),
        receiving=receiving,
        parsing=MemoryBudget(memory - receiving.total, "memory for bodies being parsed and stored"),
        body_timeout=float(settings.get("body_timeout", 120.0)),
        body_idle_timeout=float(settings.get("body_idle_timeout", 10.0)),
        body_queue_timeout=float(settings.get("body_queue_timeout", 30.0)),
        session_secret=secret,
        _fingerprint_key=hmac.new(
            secret, b"dask-analytics: credential fingerprints", hashlib.sha256
        ).digest(),
        shared_failures=SharedFailures(team, failures, FAILURE_WINDOW, lambda: write_lock),
        allowed_hosts=allowed,
        auth_failures=failures,
        forwarded_allow=parse_forwarded_allow(settings.get("forwarded_allow_ips")),
        report_url=reports[0] if reports else None,
        report_host=reports[1] if reports else None,
        metrics_token=_metrics_token(settings.get("metrics_token")),
        retention=float(settings["retention"]) if settings.get("retention") else None,
        write_lock=write_lock,
        report_bodies=_shared_bodies(),
        read_shares=ReadShares(threads),
        alerts=_alerts(settings.get("alerts"), store, public_url),
        keeper=_keeper(store),
    )


def _keeper(store: Any) -> Any:
    from ..findings.keeper import Keeper

    return Keeper(store)


def _alerts(settings: Any, store: Any, public_url: str | None) -> Any:
    """The evaluator of analytics.alerts over the server's store (its own threads)."""
    if settings is None or not settings.enabled:
        return None
    from ..alerts.rules import Evaluator

    base = settings.link_base or (public_url.rstrip("/") if public_url else None)
    return Evaluator(settings, store, link_base=base)


def _shared_bodies() -> Any:
    from .report_bodies import SharedBodies

    return SharedBodies()
