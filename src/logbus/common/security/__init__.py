"""The security code the client and the broker both run: SCRAM's credentials and the
client's side of an exchange (`scram.py`; the broker's side is
`logbus.server.security.scram_server`), JAAS configuration text (`jaas.py`) and TLS
contexts from `ssl.*` settings (`ssl_factory.py`, Kafka's `SslFactory`)."""
