"""Example pipelines on the `logbus` Spark data source; see docs/spark.md."""
