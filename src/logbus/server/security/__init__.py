"""Who is on the other end of a connection, and what they may do: the principal a listener
authenticates (`principal.KafkaPrincipal`), and the modules that build on it."""
