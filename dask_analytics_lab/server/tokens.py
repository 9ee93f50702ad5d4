"""API tokens: how they look, and how they are kept (hashed).

A token is `dal_<id>_<secret>`: the id (public, shown by `token list`, used to revoke)
and 32 random bytes.  Only SHA-256 of the whole token is stored.  A fast hash is
enough here: a token has 256 bits of entropy, so unlike a password it cannot be
guessed from its hash, and a slow KDF would only slow every request down.
"""

from __future__ import annotations

import hashlib
import re
import secrets

PREFIX = "dal_"
_SHAPE = re.compile(r"^dal_([0-9a-f]{12})_([A-Za-z0-9_-]{43})$")


def new_token() -> tuple[str, str]:
    """A fresh (token_id, token)."""
    token_id = secrets.token_hex(6)
    return token_id, f"{PREFIX}{token_id}_{secrets.token_urlsafe(32)}"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def well_formed(token: str) -> bool:
    """Cheap shape check, so garbage never reaches the database."""
    return bool(_SHAPE.match(token))


def token_id_of(token: str) -> str:
    """The public id of a well-formed token (what logs and messages may show), else "?"."""
    m = _SHAPE.match(token)
    return m.group(1) if m else "?"
