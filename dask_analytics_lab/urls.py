"""Store URLs as logs, status and error messages show them: the password hidden.

A base module: the collector, the API, the reports and the Jupyter extension all mask
URLs, and none of them should load the others to do it."""

from __future__ import annotations


def mask_url(url: str) -> str:
    """A store URL fit for logs: the password replaced by ***."""
    if "://" in url and "@" in url.split("://", 1)[1]:
        scheme, rest = url.split("://", 1)
        creds, host = rest.rsplit("@", 1)
        if ":" in creds:
            creds = creds.split(":", 1)[0] + ":***"
        return f"{scheme}://{creds}@{host}"
    return url
