"""POST {prefix}/api/ingest: a batch of messages (messages.py) from a scheduler plugin.

What the server adds to the store's own checks, because here the sender is remote:
- the account comes from the token, never from the message (a `cluster` message's
  `account` is overwritten), and a cluster id belongs to the first account that sent
  it: another account's messages for it are refused (403);
- the user comes from the token too: a `cluster` message's `user` becomes the
  token's user, and what the client said (on a JupyterHub often `jovyan`) is kept in
  `reported_user`; without a token (`--no-token`) the client's word is all there is;
- a code snippet's hash must be the hash of its text (a forged hash could otherwise
  replace another account's snippet, which is stored once by hash), and its text is
  encrypted before it is stored.
The whole batch is refused or stored: the plugin retries it as one.
"""
from __future__ import annotations

from typing import Any

from ..collect.computations import code_hash
from ..messages import MessageError, validate
from .base import BaseHandler
from .body import read_json
from .context import Principal
from .errors import ApiError

MAX_MESSAGES = 10_000
# JSON of scheduler messages compresses ~10x; allow that much and no more.
EXPANSION = 16


def check_envelopes(batch: Any) -> list[dict]:
    if not isinstance(batch, list):
        raise ApiError(400, "the body must be a JSON list of messages")
    if len(batch) > MAX_MESSAGES:
        raise ApiError(413, f"a batch holds at most {MAX_MESSAGES} messages, got {len(batch)}")
    for i, msg in enumerate(batch):
        if isinstance(msg, dict) and not isinstance(msg.get("kind"), str):
            # messages.validate looks kind up in a set: a list or dict there is a TypeError.
            raise ApiError(422, f"message {i}: kind must be a string")
        try:
            validate(msg)
        except MessageError as e:
            raise ApiError(422, f"message {i}: {e}") from None
    return batch


def prepare(batch: list[dict], principal: Principal, cipher: Any) -> dict[str, str | None]:
    """Fix accounts and users and encrypt code in place; return {cluster_id: account claimed}."""
    claims: dict[str, str | None] = {}
    for i, msg in enumerate(batch):
        cid, kind, data = msg["cluster_id"], msg["kind"], msg["data"]
        claims.setdefault(cid, principal.account)
        if kind == "cluster":
            if principal.via == "token":
                data["reported_user"] = data.get("user")
                data["user"] = principal.user
            if principal.account is not None:
                data["account"] = principal.account
            else:
                account = data.get("account") or "default"
                if not isinstance(account, str) or len(account) > 200:
                    raise ApiError(422, f"message {i}: account must be a string of at most 200 characters")
                data["account"] = claims[cid] = account
        elif kind == "code":
            text, filename, digest = data.get("text"), data.get("filename"), data.get("hash")
            if not isinstance(text, str) or not isinstance(digest, str) \
                    or not (filename is None or isinstance(filename, str)):
                raise ApiError(422, f"message {i}: code needs string hash and text, and filename a string or null")
            if code_hash(filename, text) != digest:
                raise ApiError(422, f"message {i}: code hash does not match its filename and text")
            data["text"] = cipher.encrypt(text)
    return claims


class IngestHandler(BaseHandler):
    async def post(self) -> None:
        # A cookie never authorises a write (see base.py).
        principal = await self.principal(allow_cookie=False)
        batch = check_envelopes(read_json(
            self.request, max_bytes=self.ctx.max_body_bytes,
            max_decompressed=self.ctx.max_body_bytes * EXPANSION,
        ))
        if not batch:
            self.write_json({"stored": 0, "received": 0})
            return
        claims = prepare(batch, principal, self.ctx.cipher)
        stored = await self.call(self._store, principal, batch, claims)
        self.write_json({"stored": stored, "received": len(batch)})

    def _store(self, principal: Principal, batch: list[dict], claims: dict[str, str | None]) -> int:
        # Runs on a server thread: the ownership check and the write are blocking calls.
        owners = self.ctx.cluster_owners({cid: acc for cid, acc in claims.items() if acc is not None})
        if principal.account is not None:
            for cid in claims:
                if owners[cid] != principal.account:
                    raise ApiError(403, f"cluster {cid!r} belongs to another account; "
                                        "a token can only write its own account's clusters")
        with self.ctx.write_lock:
            return self.ctx.store.ingest(batch)
