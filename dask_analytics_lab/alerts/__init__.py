"""Alerts: rules over what is recorded (a failed computation, a finding, an idle cluster,
a slower run, a cluster over budget), sent once per subject to webhooks.

settings.py  `analytics.alerts.*`, checked
rules.py     which stored messages fire which alerts (Evaluator)
deliver.py   the webhooks' bodies, posting and retries
cli.py       `dask analytics alerts test|list`

The scheduler side, for a SQLite/PostgreSQL store, is the readers' plugin
(written_readers.py), which hosts the trace exporter too.
"""
