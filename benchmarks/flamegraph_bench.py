"""Flamegraph render time in real Chromium: a 10,000-node profile (target: under 200 ms).

    python benchmarks/flamegraph_bench.py [--nodes 10000]

Needs the built widgets (pip install -e . runs npm) and /usr/bin/chromium.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser_helpers import chromium, static_server  # noqa: E402

PAGE = """<!doctype html><html><body><script type="module">
import { run } from "/benchmarks/flamegraph_bench.js";
window.bench = run;
window.ready = true;
</script></body></html>"""


def measure(nodes: int = 10_000, repeats: int = 10, browser: object = None) -> dict:
    """Render times in ms; `browser`: a Playwright browser to reuse (else one is started)."""
    page_path = ROOT / "test-artifacts" / "flamegraph_bench.html"
    page_path.parent.mkdir(exist_ok=True)
    page_path.write_text(PAGE)
    with static_server(ROOT) as base:
        if browser is None:
            with chromium() as own:
                return _measure(own, base, nodes, repeats)
        return _measure(browser, base, nodes, repeats)


def _measure(browser: object, base: str, nodes: int, repeats: int) -> dict:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base}/test-artifacts/flamegraph_bench.html")
    page.wait_for_function("() => window.ready === true", timeout=30_000)
    result = page.evaluate("([n, r]) => window.bench(n, r)", [nodes, repeats])
    page.screenshot(path=str(ROOT / "test-artifacts" / "flamegraph-10k.png"))
    page.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=10)
    args = parser.parse_args()
    r = measure(args.nodes, args.repeats)
    print(
        f"flamegraph render, {r['nodes']:,} nodes (flatten + layout + canvas draw, Chromium headless):"
    )
    print(f"  first render   {r['first_ms']:8.1f} ms")
    print(f"  median of {args.repeats:<3}  {r['median_ms']:8.1f} ms   (target < 200 ms)")
    print(f"  slowest        {r['max_ms']:8.1f} ms")


if __name__ == "__main__":
    main()
