"""Moved to dask_analytics_lab/codecrypt.py (the embedded store encrypts code too, and
store/ must not import server/); kept so `from .codecrypt import CodeCipher` still works."""
from ..codecrypt import (  # noqa: F401
    CODE_KEY_ENV, MARK, CodeCipher, CodeDecryptError, CodeKeyError, default_key_file, generate_key,
    load_or_create_key_file, parse_keys, read_key_file,
)
