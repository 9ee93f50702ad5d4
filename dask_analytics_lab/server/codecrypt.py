"""Code snippets encrypted at rest: Fernet (AES-128-CBC + HMAC-SHA256) with the server's key.

Only the snippet text is encrypted; its hash stays plain, because the store keys
snippets by it (each distinct snippet once).  The hash is SHA-256 of the text, so it
tells nothing to someone who does not already know the text.

Encrypted text is stored as `fernet:<token>`; text without that prefix (written by a
scheduler straight into an embedded store, where there is no server) is returned as is.
Several keys may be given, newest first: new snippets use the first, reads try them all
(key rotation).
"""
from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Sequence

MARK = "fernet:"


class CodeKeyError(ValueError):
    """The code key is missing or malformed; the text says how to make one."""


def generate_key() -> str:
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def parse_keys(value: str | Sequence[str] | None) -> list[str]:
    """Keys from a setting: one key, a comma-separated list, or a list."""
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    keys = [k.strip() for k in value if k and k.strip()]
    from cryptography.fernet import Fernet

    for k in keys:
        try:
            Fernet(k.encode())
        except (ValueError, TypeError):
            raise CodeKeyError(
                "the code key must be 32 url-safe base64-encoded bytes (a Fernet key); make one "
                "with `python -c \"from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())\"`"
            ) from None
    return keys


def load_or_create_key_file(path: Path) -> str:
    """The key in `path`, made (mode 0600) on first use so restarts can read old snippets."""
    path = Path(path)
    if path.exists():
        return path.read_text().strip()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = generate_key()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    return key


class CodeCipher:
    """Encrypts snippet text for the store and decrypts it for the account's readers."""

    def __init__(self, keys: str | Sequence[str] | None):
        self.keys = parse_keys(keys)
        self._fernet = None
        if self.keys:
            from cryptography.fernet import Fernet, MultiFernet

            self._fernet = MultiFernet([Fernet(k.encode()) for k in self.keys])

    @property
    def enabled(self) -> bool:
        return self._fernet is not None

    def encrypt(self, text: str) -> str:
        if self._fernet is None:
            return text
        return MARK + self._fernet.encrypt(text.encode()).decode()

    def decrypt(self, text: str | None) -> str | None:
        if not isinstance(text, str) or not text.startswith(MARK):
            return text
        if self._fernet is None:
            return "<encrypted snippet: this server was started without the code key>"
        from cryptography.fernet import InvalidToken

        try:
            return self._fernet.decrypt(text[len(MARK):].encode()).decode()
        except InvalidToken:
            return "<encrypted snippet: none of this server's code keys opens it>"
