"""The security code the client and the broker both run: SCRAM (`scram.py`), JAAS
configuration text (`jaas.py`) and TLS contexts from `ssl.*` settings (`ssl_factory.py`,
Kafka's `SslFactory`)."""
