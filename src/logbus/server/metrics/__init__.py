"""The broker's metrics: what it records (`broker_metrics.py`, `histogram.py`), how a
request's times are taken (`request_timing.py`), the Prometheus view of it all
(`collector.py`), the HTTP endpoint of `metrics.listener` (`endpoint.py`) and the request
log (`request_log.py`). See docs/metrics.md."""
