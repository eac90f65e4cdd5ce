"""The logbus web console: a cluster's brokers, topics, messages and consumer groups in a
browser (`logbus console`). Starlette serves server-rendered Jinja2 pages; htmx (vendored
in `static/`) refreshes the live parts: the message tail and the lag chart."""

from logbus.console.access import AccessSettings
from logbus.console.app import create_app

__all__ = ["AccessSettings", "create_app"]
