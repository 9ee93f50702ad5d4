"""`dask-analytics` prints readable tables and exports everything."""
from __future__ import annotations

import csv
import json
import subprocess
import sys

import pytest

import dask_analytics_lab as dal
from dask_analytics_lab.api import close_readers

from .cluster_helpers import recorded_cluster


def fails(x):
    raise KeyError("missing-thing")


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    url = "sqlite:///" + str(tmp_path_factory.mktemp("cli") / "cli.db")
    with recorded_cluster(url) as (client, info):
        client.submit(sum, [1, 2]).result()
        f = client.submit(fails, 1)
        with pytest.raises(KeyError):
            f.result()
        dal.flush(client)
    close_readers()
    return url, info["cluster_id"]


def run(*args):
    out = subprocess.run([sys.executable, "-m", "dask_analytics_lab.cli", *args], capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout, out.stderr


def test_tables(recorded):
    url, cluster_id = recorded
    code, out, _ = run("--store", url, "clusters")
    assert code == 0 and cluster_id in out and "worker time" in out
    code, out, _ = run("--store", url, "computations", "--cluster", cluster_id)
    assert code == 0 and "finished" in out and "erred" in out
    code, out, _ = run("--store", url, "exceptions", "--traceback")
    assert code == 0 and "missing-thing" in out and "fails" in out


def test_unknown_cluster_is_a_clear_error(recorded):
    url, _ = recorded
    code, _, err = run("--store", url, "computations", "--cluster", "no-such-cluster")
    assert code == 2 and "no-such-cluster" in err


def test_export_json_and_csv(recorded, tmp_path):
    url, cluster_id = recorded
    code, _, _ = run("--store", url, "export", "--format", "json", "-o", str(tmp_path / "all.json"))
    assert code == 0
    data = json.loads((tmp_path / "all.json").read_text())
    assert any(r["cluster_id"] == cluster_id for r in data["clusters"])
    assert len(data["computations"]) == 2
    code, out, _ = run("--store", url, "export", "--format", "csv", "-o", str(tmp_path / "csv"))
    assert code == 0
    with (tmp_path / "csv" / "computations.csv").open() as f:
        assert len(list(csv.DictReader(f))) == 2
