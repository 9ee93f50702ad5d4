"""The team analytics server: HTTP ingest, the JSON query API, performance reports and
the team web view, as tornado handlers (routes.routes) that `dask-analytics server`
serves and the Jupyter server extension mounts."""
