"""The message contract itself (messages.py), apart from any store."""

from __future__ import annotations

import subprocess
import sys
import textwrap

FIRST_CHECKS_AT_ONCE = textwrap.dedent("""
    import threading
    from dask_analytics_lab import messages
    from tests.factories import Cluster, group, tree

    c = Cluster()
    batch = [c.cluster(), c.sample(), c.stop(), c.computation("comp", code=["h"], groups=[group("ones")]),
             c.code("h"), c.exception("comp", "ones"), c.event(msg={"k": [1]}), c.profile(None, tree("f")),
             c.gpu(n=1)]
    start = threading.Barrier(20)

    def check():
        start.wait()
        for _ in range(20):
            messages.check_batch(batch)

    threads = [threading.Thread(target=check) for _ in range(20)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
""")


def test_first_checks_on_many_threads_at_once():
    """A fresh server's body threads all check their first batches at once: msgspec
    must not be left to build the contract's types on several threads (it crashed)."""
    for _ in range(3):  # without the fix most runs crash, not all
        run = subprocess.run(
            [sys.executable, "-c", FIRST_CHECKS_AT_ONCE],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert run.returncode == 0, run.stderr[-2000:]
