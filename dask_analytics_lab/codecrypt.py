"""Code encrypted at rest: Fernet (AES-128-CBC + HMAC-SHA256) with a code key.

What is encrypted: the text of code snippets, and of every stored performance report
its HTML, its JSON twin and the code in its summary.  What is not: everything else
(a snippet's hash, file name and line numbers, computations, task groups, exceptions
with their tracebacks, profiles outside reports, report titles and file names).

Two places hold a key:
- a team server (`dask-analytics server`): `$DASK_ANALYTICS_CODE_KEY` or a key file
  (`--code-key-file`, else `analytics.code-key-file`, else `default_key_file()`, made
  with mode 0600 on first start).  It encrypts what clients send it.
- any process writing or reading an embedded store (a scheduler's plugin, `dal.*`
  readers, the Jupyter extension): only when `$DASK_ANALYTICS_CODE_KEY` or
  `analytics.code-key-file` is set (`local_cipher()`); without one, an embedded store
  keeps code as plain text.

Encrypted text is stored as `fernet:<token>`, encrypted blobs as b"fernet:<token>";
anything without the prefix (written with no key) is read as is.  Several keys may be
given, comma-separated, newest first: new data uses the first, reads try them all
(rotation).  Text that none of the keys opens reads as None with a `code_error`
saying so, and the process logs that once: a lost key never crashes a reader.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, overload

logger = logging.getLogger("dask_analytics_lab")

MARK = "fernet:"
MARK_BYTES = MARK.encode()
CODE_KEY_ENV = "DASK_ANALYTICS_CODE_KEY"
KEY_FILE_SETTING = "analytics.code-key-file"
MAKE_KEY = (
    'python -c "from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
)


def is_sealed(text: Any) -> bool:
    """Text encrypted here before: the mark and a Fernet token (version byte 0x80)."""
    return isinstance(text, str) and text.startswith(MARK + "gAAAAA")


class CodeKeyError(ValueError):
    """The code key is missing, unreadable or malformed; the text says how to fix it."""


class CodeDecryptError(ValueError):
    """Stored code that none of the keys at hand opens (the message says so)."""


def fernet() -> Any:
    """cryptography's fernet module; a scheduler image without it records code unencrypted
    unless a key is given, and a key needs it."""
    try:
        from cryptography import fernet as module
    except ImportError:
        raise ImportError(
            "encrypting code at rest needs the cryptography package: "
            "pip install 'dask-analytics-lab[server]' (or pip install cryptography)"
        ) from None
    return module


def generate_key() -> str:
    return fernet().Fernet.generate_key().decode()


def parse_keys(value: str | Sequence[str] | None, *, where: str = "the code key") -> list[str]:
    """Keys from a setting: one key, a comma-separated list, or a list."""
    if value is None:
        return []
    if isinstance(value, str):
        value = value.split(",")
    keys = [k.strip() for k in value if k and k.strip()]
    if not keys:
        return keys
    Fernet = fernet().Fernet
    for k in keys:
        try:
            Fernet(k.encode())
        except (ValueError, TypeError):
            raise CodeKeyError(
                f"{where} must be 32 url-safe base64-encoded bytes (a Fernet key; several comma-separated, "
                f"newest first); make one with `{MAKE_KEY}`"
            ) from None
    return keys


def default_key_file() -> Path:
    """Where `dask-analytics server` keeps its code key unless told otherwise: the user's
    config directory (~/.config/dask-analytics/code.key on Linux), apart from the default
    database (under the user's data directory), so a copy of one is not a copy of both."""
    import platformdirs

    return Path(platformdirs.user_config_dir("dask-analytics")) / "code.key"


def read_key_file(path: str | os.PathLike) -> list[str]:
    """The key(s) in a key file; CodeKeyError saying what is wrong otherwise."""
    path = Path(path).expanduser()
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise CodeKeyError(
            f"the code key file {path} does not exist; put the key the code was stored with in it "
            f"(or make a new key with `{MAKE_KEY}`)"
        ) from None
    except OSError as e:
        raise CodeKeyError(f"cannot read the code key file {path}: {e}") from None
    if os.name == "posix" and path.stat().st_mode & 0o077:
        logger.warning(
            "dask-analytics: the code key file %s is readable by other users: anyone who reads it "
            "reads the stored code (chmod 600 it)",
            path,
        )
    keys = parse_keys(text.replace("\n", ","), where=f"the code key file {path}")
    if not keys:
        raise CodeKeyError(
            f"the code key file {path} is empty; put the key the code was stored with in it"
        )
    return keys


def write_new_secret(path: str | os.PathLike, text: str) -> bool:
    """Make `path` (mode 0600, its folder 0700) holding `text`, unless it exists: True
    when this call made it.  The file appears whole or not at all (written aside, then
    linked into place), so processes starting together (server replicas sharing the file)
    never read it half written; whoever links first wins and the others read its text."""
    path = Path(path).expanduser()
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    aside = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        try:
            os.link(aside, path)
        except FileExistsError:  # another process made it first
            return False
        except OSError:  # a file system without hard links: made in place, as before
            try:
                fd = os.open(
                    path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, stat.S_IRUSR | stat.S_IWUSR
                )
            except FileExistsError:
                return False
            with os.fdopen(fd, "w") as f:
                f.write(text)
        return True
    finally:
        os.unlink(aside)


def load_or_create_key_file(path: str | os.PathLike) -> list[str]:
    """The key(s) in `path`; on first use a new key, written with mode 0600 (its folder
    0700), so that restarts can read what was stored before."""
    path = Path(path).expanduser()
    if not path.exists() and write_new_secret(path, generate_key() + "\n"):
        logger.warning(
            "dask-analytics: made a new code key in %s; keep it (and a copy apart from the "
            "database): code stored with it cannot be read without it",
            path,
        )
    return read_key_file(path)


class CodeCipher:
    """Encrypts code for the store and opens it for readers.

    `source` names where the keys came from, for the messages when they do not fit.
    """

    def __init__(
        self,
        keys: str | Sequence[str] | None,
        *,
        source: str = "this server's code key",
        problem: str | None = None,
    ):
        self.keys = parse_keys(keys)
        self.source = source
        self.problem = problem  # why there is no key (an unreadable key file), for the messages
        self._fernet = None
        if self.keys:
            f = fernet()
            self._fernet = f.MultiFernet([f.Fernet(k.encode()) for k in self.keys])

    @property
    def enabled(self) -> bool:
        return self._fernet is not None

    # --- text -------------------------------------------------------------------
    @overload
    def encrypt(self, text: str) -> str: ...
    @overload
    def encrypt(self, text: None) -> None: ...
    def encrypt(self, text: str | None) -> str | None:
        """The text sealed with the newest key (as is without a key, or when already sealed)."""
        if self._fernet is None or not isinstance(text, str) or is_sealed(text):
            return text
        return MARK + self._fernet.encrypt(text.encode()).decode()

    def open(self, text: Any) -> tuple[Any, str | None]:
        """(text, None) for readable text; (None, why) for sealed text no key here opens."""
        if not is_sealed(text):
            return text, None
        try:
            return self._open(text[len(MARK) :].encode()).decode(), None
        except CodeDecryptError as e:
            return None, str(e)

    def decrypt(self, text: Any) -> Any:
        """The text readable again; None (logged once) when no key here opens it."""
        return self.open(text)[0]

    def open_rows(self, rows: Any) -> Any:
        """Snippet rows (dicts with "text") opened in place: a row that cannot be opened
        gets text None and `code_error`; a readable one loses any earlier `code_error`."""
        for row in rows or ():
            if isinstance(row, dict) and is_sealed(row.get("text")):
                row["text"], error = self.open(row["text"])
                if error:
                    row["code_error"] = error
                else:
                    row.pop("code_error", None)
        return rows

    # --- blobs (stored reports) ------------------------------------------------------
    def seal_bytes(self, data: bytes) -> bytes:
        if self._fernet is None:
            return data
        return MARK_BYTES + self._fernet.encrypt(data)

    def open_bytes(self, blob: bytes) -> bytes:
        """A blob readable again; CodeDecryptError (logged once) when no key here opens it."""
        blob = bytes(blob)
        if not blob.startswith(MARK_BYTES):
            return blob
        return self._open(blob[len(MARK_BYTES) :])

    def _open(self, token: bytes) -> bytes:
        if self._fernet is not None:
            try:
                return self._fernet.decrypt(token)
            except fernet().InvalidToken:
                why = (
                    f"stored encrypted cannot be read: the key it was stored with does not match "
                    f"{self.source} (that key is lost or was not given; give it, the newest key first and "
                    "older ones after it, comma-separated)"
                )
        elif self.problem:
            why = f"stored encrypted cannot be read: {self.problem}"
        else:
            why = (
                f"stored encrypted cannot be read: {self.source} is not set; give the key it was "
                f"stored with (${CODE_KEY_ENV} or a key file)"
            )
        with _lock:
            first = why not in _said
            _said.add(why)
        if first:
            logger.error(
                "dask-analytics: code %s. Such code reads as None, with code_error saying why "
                "(logged once).",
                why,
            )
        raise CodeDecryptError(f"code {why}")


# --- the keys of this process, for an embedded store --------------------------------
_process_keys: list[str] | None = None
_ciphers: dict[tuple, CodeCipher] = {}
_said: set[str] = set()  # reasons already logged: each once per process
_lock = threading.Lock()


def set_process_keys(keys: Sequence[str] | None) -> None:
    """Make `keys` this process's code keys (`dask-analytics server` gives its own, so its
    store reads and writes with them); None: back to the environment and config."""
    global _process_keys
    _process_keys = None if keys is None else parse_keys(list(keys))


def local_cipher(*, create: bool = False) -> CodeCipher:
    """This process's cipher for an embedded store: the server's keys in a
    `dask-analytics server`, else `$DASK_ANALYTICS_CODE_KEY`, else the key file named by
    `analytics.code-key-file` (made on first use when `create`), else none (disabled:
    code stays plain).  CodeKeyError when a configured key cannot be used: a process told
    to encrypt never falls back to plain text."""
    if _process_keys is not None:
        return _cached(("process", tuple(_process_keys)), _process_keys, "this server's code key")
    env = os.environ.get(CODE_KEY_ENV, "").strip()
    if env:
        return _cached(("env", env), parse_keys(env, where=f"${CODE_KEY_ENV}"), f"${CODE_KEY_ENV}")
    from . import config

    path = config.get(KEY_FILE_SETTING)
    if not path:
        return _cached(("none",), [], f"a code key ({KEY_FILE_SETTING} or ${CODE_KEY_ENV})")
    path = Path(str(path)).expanduser()
    if create and not path.exists():
        load_or_create_key_file(path)
    try:
        st = path.stat()
        stamp: tuple = (st.st_mtime_ns, st.st_size)
    except OSError:
        stamp = ()
    key = ("file", str(path), stamp)
    with _lock:
        found = _ciphers.get(key)
    return (
        found
        if found is not None
        else _cached(key, read_key_file(path), f"the code key file {path}")
    )


def reading_cipher() -> CodeCipher:
    """local_cipher() for a reader: a key that cannot be used (a configured key file
    that is missing) makes encrypted code unreadable, with that reason, never an error."""
    try:
        return local_cipher()
    except CodeKeyError as e:
        return _cached(("broken", str(e)), [], "", problem=str(e))


def _cached(key: tuple, keys: list[str], source: str, problem: str | None = None) -> CodeCipher:
    with _lock:
        cipher = _ciphers.get(key)
        if cipher is None:
            if len(_ciphers) > 32:
                _ciphers.clear()
            cipher = _ciphers[key] = CodeCipher(keys, source=source, problem=problem)
        return cipher
