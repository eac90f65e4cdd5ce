"""logbus's benchmark harness: throughput and latency side by side with peers in one run.

The entry point is `bench.cli.main` (`python -m bench` / `make bench`). Scenarios live one
per module in `bench/scenarios/` and are registered in `bench.scenarios.SCENARIOS`.
"""
