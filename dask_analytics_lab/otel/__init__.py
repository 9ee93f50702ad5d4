"""OpenTelemetry traces of finished computations (`analytics.otel`): exporter.py.

A package of its own, beside collect/: the exporter reads each computation's findings
(findings/), which collect/ may not import (tests/unit/test_layout.py).  The scheduler loads
it only when `analytics.otel.enabled` is true, through written_readers.py."""
