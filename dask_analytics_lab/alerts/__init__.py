"""Alerts: rules over what is recorded (a failed computation, a finding, an idle cluster,
a slower run, a cluster over budget), sent once per subject to webhooks.

settings.py  `analytics.alerts.*`, checked
rules.py     which stored messages fire which alerts (Evaluator)
deliver.py   the webhooks' bodies, posting and retries
recorder.py  the scheduler side, for a SQLite/PostgreSQL store
cli.py       `dask analytics alerts test|list`
"""
