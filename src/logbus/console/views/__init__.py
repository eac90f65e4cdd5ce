"""The console's views, one module per page family: overview, topics, messages, groups,
produce. Each exposes `routes`."""
