"""JupyterLab with a team server, in Chromium (issue 36, items 3 and 5).

- A real `dask-analytics server` (tokens on) holds a cluster that a real LocalCluster
  recorded into it; `jupyter lab` runs with analytics.store pointing at that server and
  analytics.token set.  The Lab's sidebar lists the team server's cluster and its
  computations, and a computation opens in a panel: read through the Jupyter server
  extension, which forwards the Lab's reads with the token (lab/team.py).  The panel's
  Share uploads the report to the team server and links to it there.
- The team server goes away: the sidebar says so in words (not reachable, and where),
  and its poll and the panel's back off (Lumino's Poll: each wait longer, at most a
  minute).  It comes back on the same address: the sidebar lists the cluster again and
  polls at its own rate.
- A JupyterLab whose server extension is disabled: the sidebar says the extension is
  not running and how to enable it, not "404".
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import playwright  # noqa: F401  (a test extra: a missing one fails the run)
import pytest

from dask_analytics_lab import config
from tests.browser_helpers import CHROMIUM, free_port, jupyter_lab, save
from tests.cluster_helpers import recorded_cluster
from tests.server_helpers import ServerProcess, add_token

if not Path(CHROMIUM).exists():  # pragma: no cover
    pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium", pytrace=False)

pytestmark = pytest.mark.timeout(480)

SIDEBAR = "#dask-analytics-sidebar"
# The sidebar's Poll (js/lab/sidebar.ts), or a panel's (js/lab/model.ts): its state and
# its base frequency, as Lumino keeps them.
POLL = """(which) => {
  const app = window.jupyterapp;
  let poll = null;
  if (which === "sidebar") {
    for (const w of app.shell.widgets("left")) if (w.id === "dask-analytics-sidebar") poll = w.poll;
  } else {
    for (const w of app.shell.widgets("main")) if (w.content && w.content.model
        && w.content.model.poll) poll = w.content.model.poll;
  }
  if (!poll) return null;
  return { phase: poll.state.phase, interval: poll.state.interval,
           base: poll.frequency.interval, max: poll.frequency.max };
}"""


def _open_lab(browser, lab):
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(lab.url("lab"))
    page.wait_for_function(
        "() => window.jupyterapp && [...window.jupyterapp.shell.widgets('left')]"
        ".some(w => w.id === 'dask-analytics-sidebar')",
        timeout=90_000,
    )
    # Once the layout is restored, which would otherwise hide it again.
    page.evaluate(
        "async () => { await window.jupyterapp.restored;"
        " window.jupyterapp.shell.activateById('dask-analytics-sidebar'); }"
    )
    page.wait_for_selector(SIDEBAR, state="visible", timeout=30_000)
    return context, page, errors


def _poll(page, which: str) -> dict | None:
    return page.evaluate(POLL, which)


def _wait_poll(page, which: str, condition: str, timeout: float) -> dict:
    """Wait until the poll's state {phase, interval, base, max} meets `condition` (JS)."""
    page.wait_for_function(
        f"() => {{ const s = ({POLL})({json.dumps(which)}); return s && ({condition}); }}",
        timeout=timeout,
    )
    state = _poll(page, which)
    assert state is not None
    return state


def test_the_lab_reads_a_team_server_and_says_when_it_is_gone(tmp_path, browser):
    import dask.array as da

    import dask_analytics_lab as dal

    url = config.validate_store(f"sqlite:///{tmp_path / 'team.db'}")
    token = add_token(url, "team", "ann")
    team = ServerProcess(url, free_port()).start()
    try:
        with recorded_cluster(team.url, config={"analytics.token": token}) as (client, info):
            assert (da.ones((400, 400), chunks=100) + 1).sum().compute() == 2 * 400 * 400
            dal.flush(client)
            cluster_id = info["cluster_id"]
        with jupyter_lab(tmp_path / "lab", team.url, {"DASK_ANALYTICS__TOKEN": token}) as lab:
            assert "dask-analytics: serving the team server" in lab.log.read_text()
            context, page, errors = _open_lab(browser, lab)
            sidebar = page.locator(SIDEBAR)
            # The team server's cluster, and its computations, through the extension.
            head = sidebar.locator(f".dal-cl-head[data-cluster='{cluster_id}']")
            head.wait_for(timeout=60_000)
            sidebar.locator(".dal-comp").first.wait_for(timeout=60_000)
            foot = sidebar.locator(".dal-sidebar-foot")
            said = foot.inner_text()
            assert "team server" in said and team.url.split("://")[1] in said, said
            assert foot.locator("a").get_attribute("href") == team.url
            sidebar.locator(".dal-comp").first.click()
            page.wait_for_selector(".dal-lab-panel tr.dal-row", timeout=60_000)
            page.screenshot(path=save("lab-team-server.png"))
            # Share: the report is uploaded to the team server; its link is the server's.
            panel = page.locator(".dal-lab-panel")
            panel.locator(".dal-share-toggle").click()
            panel.locator(".dal-share-create").click()
            link = panel.locator(".dal-share-url")
            link.wait_for(timeout=60_000)
            assert link.get_attribute("href").startswith(team.url + "/reports/")
            # Each Poll's normal rate is its frequency's interval (the panel's changes with
            # what it shows, only after a good read); a failed read waits longer.
            for which in ("sidebar", "panel"):
                state = _poll(page, which)
                assert state is not None and state["max"] == 60_000, (which, state)

            # The team server goes away.
            team.kill()
            trouble = sidebar.locator(".dal-sidebar-trouble [data-problem='unreachable']")
            trouble.wait_for(timeout=60_000)
            said = trouble.inner_text()
            assert "not reachable" in said and team.url in said, said
            assert "dask-analytics server" in said  # what to check
            # Each failed read waits longer than the normal rate (Lumino's backoff).
            for which in ("sidebar", "panel"):
                _wait_poll(
                    page,
                    which,
                    "s.phase === 'rejected' && s.interval > s.base",
                    timeout=120_000,
                )
            # The panel's header says it cannot read, the words in its title.
            panel_error = page.locator(".dal-lab-panel .dal-header .dal-share-msg.bad")
            assert "not reachable" in (panel_error.get_attribute("title") or "")
            sidebar.screenshot(path=save("lab-team-server-gone.png"))

            # It comes back on the same address: the lists again, at the normal rate.
            team.start()
            page.wait_for_function(
                "() => !document.querySelector('.dal-sidebar-trouble [data-problem]')",
                timeout=150_000,
            )
            head.wait_for(timeout=30_000)
            for which in ("sidebar", "panel"):
                _wait_poll(
                    page,
                    which,
                    "(s.phase === 'reconnected' || s.phase === 'resolved') "
                    "&& s.interval === s.base",
                    timeout=150_000,
                )
            context.close()
            assert not errors, errors
    finally:
        team.kill()


def test_the_lab_says_when_the_server_extension_is_not_running(tmp_path, browser):
    config_dir = tmp_path / "lab" / "config"
    config_dir.mkdir(parents=True)
    (config_dir / "jupyter_server_config.json").write_text(
        json.dumps({"ServerApp": {"jpserver_extensions": {"dask_analytics_lab.lab": False}}})
    )
    store = f"sqlite:///{tmp_path / 'analytics.db'}"
    with jupyter_lab(tmp_path / "lab", store) as lab:
        assert "dask-analytics: serving" not in lab.log.read_text()
        context, page, errors = _open_lab(browser, lab)
        trouble = page.locator(f"{SIDEBAR} .dal-sidebar-trouble [data-problem='no-extension']")
        trouble.wait_for(timeout=60_000)
        said = trouble.inner_text()
        assert "server extension is not running" in said, said
        assert "jupyter server extension enable dask_analytics_lab.lab" in said, said
        # The bare status code is what it used to say; the URL's port may hold "404" by chance.
        assert "404" not in re.sub(r"https?://\S+", "", said), said
        # It backs off too: a missing extension does not come back by itself.
        _wait_poll(page, "sidebar", "s.phase === 'rejected' && s.interval > s.base", 120_000)
        context.close()
        assert not errors, errors
