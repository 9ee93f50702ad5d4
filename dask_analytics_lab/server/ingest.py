"""POST {prefix}/api/ingest: a batch of messages (messages.py) from a scheduler plugin.

The body is read as body.py says: the token is checked from the headers before any of
it is read, and parsing, checking and storing run on the body threads.  A batch the
server could not store before the client stops waiting is refused at once, or dropped
before any work when its time ran out in the queue (deadlines.py).

What the server adds to the store's own checks, because here the sender is remote:
- the account comes from the token, never from the message (a `cluster` message's
  `account` is overwritten), and a cluster id belongs to the first account that sent
  it;
- messages for a cluster id another account owns are not stored, and the answer is
  the one an unknown id gets (the same status and body: ingest is no oracle of other
  accounts' ids; the server log says what was dropped).  Dropped messages are
  remembered by (account, cluster, seq), so the same batch sent again answers
  "stored": 0 as a repeat for an unknown id does, after a database write as that
  does.  The batch is checked whole first, so a bad message is refused the same way
  wherever it points;
- the user comes from the token too: a `cluster` message's `user` becomes the
  token's user, and what the client said (on a JupyterHub often `jovyan`) is kept in
  `reported_user`; without a token (`--no-token`) the client's word is all there is;
- a code snippet's hash must be the hash of its text, and its text is encrypted
  before it is stored.
The batch is checked whole against the contract (messages.py) before any of this, and
the store takes the checked messages as they are.  The whole batch is refused or
stored, and a refused one leaves nothing behind: the cluster ids it claimed are
released again.  The plugin retries a batch as one.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import msgspec

from ..messages import (
    ClusterMessage,
    CodeMessage,
    ComputationMessage,
    Envelope,
    Message,
    check_batch,
    code_hash,
)
from ..store.usage import QuotaExceeded
from . import deadlines
from .body import BodyReader
from .context import Principal
from .errors import ApiError

logger = logging.getLogger("dask_analytics_lab.server")

MAX_MESSAGES = 10_000


def check_messages(batch: Any) -> list[Envelope]:
    """The batch, typed (messages.check_batch: MessageError is a 422 naming the field)."""
    if not isinstance(batch, list):
        raise ApiError(400, "the body must be a JSON list of messages")
    if len(batch) > MAX_MESSAGES:
        raise ApiError(413, f"a batch holds at most {MAX_MESSAGES} messages, got {len(batch)}")
    return check_batch(batch)


_DECODER = msgspec.json.Decoder(list[Message])
# What the body's parser (body.parse_json) reads otherwise than msgspec does: the
# escape of NUL (replaced there), and integers of 19 digits or more (past 64 bits: 422
# there; msgspec reads them).  Those are looked for in the body's shape (`re` took
# longer than the decoding): digits as 0, what ends a number's integer part as '.',
# the rest as ' ', so a long integer reads ' 000...' and a float's long fraction does
# not.  Bytes that are no UTF-8 (400 there) msgspec reads where they encode a
# surrogate, so they are looked for too.  An escaped lone surrogate (replaced there)
# and a non-finite number (NaN, 1e999: null there) msgspec refuses, as anything else
# that is wrong.
_SHAPE = bytes(
    ord("0") if 48 <= b <= 57 else ord(".") if b in b".eE" else ord(" ") for b in range(256)
)
_LONG_INTEGER = b" " + b"0" * 19


def decode_messages(raw: bytes | bytearray) -> list[Envelope] | None:
    """The batch typed straight from its JSON in one pass, or None where the two-step
    path (body.parse_json, then check_messages) must answer: a body it would refuse
    (for the words of its error) or read otherwise.  Parsing to Python objects and
    converting those took a third of a replica's CPU under load; this takes half of
    that, and gives the same messages (tests/unit/test_ingest_decode.py)."""
    if b"\\u0000" in raw or _LONG_INTEGER in raw.translate(_SHAPE):
        return None
    if not raw.isascii():
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return None
    try:
        batch: list[Any] = _DECODER.decode(raw)  # of Envelope subclasses (list is invariant)
    except Exception:  # malformed, or a check of the contract failed: said the slow way
        return None
    if len(batch) > MAX_MESSAGES:
        return None
    return batch


def prepare(batch: list[Envelope], principal: Principal, cipher: Any) -> dict[str, str | None]:
    """Fix accounts and users and encrypt code in place; return {cluster_id: account claimed}."""
    claims: dict[str, str | None] = {}
    for i, msg in enumerate(batch):
        cid = msg.cluster_id
        claims.setdefault(cid, principal.account)
        if isinstance(msg, ClusterMessage):
            data = msg.data
            if principal.via == "token":
                data.reported_user = data.user
                data.user = principal.user
            if principal.account is not None:
                data.account = principal.account
            else:
                account = data.account or "default"
                if len(account) > 200:
                    raise ApiError(
                        422, f"message {i}: account must be a string of at most 200 characters"
                    )
                data.account = claims[cid] = account
        elif isinstance(msg, CodeMessage):
            if code_hash(msg.data.filename, msg.data.text) != msg.data.hash:
                raise ApiError(422, f"message {i}: code hash does not match its filename and text")
            msg.data.text = cipher.encrypt(msg.data.text)
        elif isinstance(msg, ComputationMessage) and msg.data.code_line is not None:
            msg.data.code_line = cipher.encrypt(msg.data.code_line)  # a line of the user's code
    return claims


class IngestHandler(BodyReader):
    deadline = float("inf")  # time.monotonic() when the client stops waiting (admit)
    refusal: str | None = None  # the metrics' reason, where the status alone does not say

    def admit(self) -> None:
        self.deadline = deadlines.deadline(
            self.request.headers, from_proxy=self.ctx.trusted_proxy(self.request.remote_ip or "")
        )
        self._refuse_if_late()

    def queue_timeout(self) -> float:
        return min(self.ctx.body_queue_timeout, max(0.0, self.deadline - time.monotonic()))

    def _refuse_if_late(self) -> None:
        try:
            self.ctx.ingest_queue.refuse_if_late(self.deadline)
        except ApiError:
            self.refusal = "busy"
            raise

    async def post(self) -> None:
        if self._finished:
            return  # refused while the body came in
        # A cookie never authorises a write: prepare() took the token from the header.
        principal = self.body_principal
        raw = await self.body_raw()
        self._refuse_if_late()  # the body took its time: is there still time to store it?
        queue = self.ctx.ingest_queue
        queue.handed()
        # Parsed and stored in one call on a body thread: each hand-over to a thread and
        # back costs the loop a share of a small batch's CPU.
        stored, received, dropped = await self.call(
            self._ingest_in_time, principal, raw, executor=self.ctx.body_executor
        )
        self.ctx.metrics.ingested(received, stored - dropped, dropped)
        self.write_json({"stored": stored, "received": received})

    def on_finish(self) -> None:
        super().on_finish()
        status = self.get_status()
        if status >= 400:  # refused anywhere: the token, the body's size or shape, the store
            self.ctx.metrics.refused_ingest(status, self.refusal)

    def _ingest_in_time(self, principal: Principal, raw: bytearray) -> tuple[int, int, int]:
        queue = self.ctx.ingest_queue
        t0 = queue.started()
        if time.monotonic() >= self.deadline:
            # The client gave up while this waited: its batch comes again.
            queue.done(t0, worked=False)
            self.refusal = "expired"
            raise ApiError(
                503,
                "the server was too busy to store this batch before the request's timeout "
                f"({deadlines.TIMEOUT_HEADER}); try again",
                headers={"Retry-After": "1"},
            )
        try:
            return self._ingest(principal, raw)
        finally:
            queue.done(t0)

    def _ingest(self, principal: Principal, raw: bytearray) -> tuple[int, int, int]:
        # Runs on a body thread: parsing, checks, ownership and the write are blocking work.
        batch = decode_messages(raw)
        if batch is None:
            batch = check_messages(self.parse_body(raw))
        received = len(batch)
        if not batch:
            return 0, 0, 0
        claims = prepare(batch, principal, self.ctx.cipher)
        # Measured as stored (code encrypted); 413 here, before any write: quota.py.
        charge = self.ctx.quota.charge(principal.account, batch)
        claimed_at = time.time()
        wanted = {cid: acc for cid, acc in claims.items() if acc is not None}
        owners = self.ctx.cluster_owners(wanted, now=claimed_at)
        try:
            foreign: set[str] = set()
            dropped: list[Envelope] = []
            if principal.account is not None:
                foreign = {cid for cid in claims if owners.get(cid) != principal.account}
            if foreign:
                # The batch was checked whole above: a bad message reads the same (same
                # index, same words) whoever owns the id it names.
                dropped = [m for m in batch if m.cluster_id in foreign]
                batch = [m for m in batch if m.cluster_id not in foreign]
                logger.warning(
                    "dask-analytics server: dropped %d messages of account %r for cluster(s) %s owned "
                    "by another account",
                    len(dropped),
                    principal.account,
                    sorted(foreign)[:5],
                )
            stored = 0
            if batch:
                with self.ctx.write_lock:
                    t0 = time.perf_counter()
                    try:
                        # 507 where the new messages would pass a quota: decided in the
                        # transaction that stores them (quota.py), which then rolls back.
                        stored = self.ctx.store.ingest(batch, charge=charge)
                    except QuotaExceeded as e:
                        raise self.ctx.quota.refusal(e) from None
                    finally:
                        self.ctx.metrics.store_call("ingest", time.perf_counter() - t0)
                if self.ctx.alerts is not None:
                    # Committed: the evaluator queues it and runs the rules on its own
                    # thread, so no request waits for a rule or a webhook.
                    self.ctx.alerts.written(batch, principal.account)
                if self.ctx.keeper is not None:
                    self.ctx.keeper.written(batch, principal.account)
            # Remembered, so a repeat answers "stored": 0 as an unknown id's repeat does,
            # and a write either way (the same class of time for both).
            n_dropped = 0
            if dropped:
                with self.ctx.write_lock:
                    n_dropped = self.ctx.team.remember_dropped(
                        principal.account, [(m.cluster_id, m.seq) for m in dropped], now=claimed_at
                    )
        except BaseException:
            mine = [cid for cid, acc in wanted.items() if owners.get(cid) == acc]
            try:
                for account in {wanted[cid] for cid in mine}:
                    self.ctx.release_claims(
                        [c for c in mine if wanted[c] == account],
                        account=account,
                        claimed=claimed_at,
                    )
            except Exception as e:  # the store went away: the claim stays, harmlessly
                logger.warning(
                    "dask-analytics server: could not release the claims of a refused batch: %s", e
                )
            raise
        return stored + n_dropped, received, n_dropped
