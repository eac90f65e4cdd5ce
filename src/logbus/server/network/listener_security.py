"""What each listener's security protocol needs, built from the broker config: its TLS
context (SSL, SASL_SSL), its SASL settings (SASL_PLAINTEXT, SASL_SSL) and the mapping of
client certificates to principals. Listener-prefixed settings win
(`listener.name.<l>.ssl.keystore.location`, `listener.name.<l>.plain.sasl.jaas.config`).
Problems are `ConfigError`s, raised before the listener opens."""

from __future__ import annotations

import os
import ssl
from functools import partial
from typing import cast

from logbus.client.security import ClientSecurity
from logbus.common.config_def import ConfigError, Password
from logbus.common.security.jaas import JaasConfig, parse_jaas
from logbus.common.security.scram import MECHANISMS
from logbus.common.security.ssl_factory import client_context, server_context, settings_from
from logbus.server.config.broker_config import BrokerConfig, Listener
from logbus.server.network.sasl_authenticator import SaslSettings
from logbus.server.security.credential_cache import CredentialCache
from logbus.server.security.sasl_plain import PlainServer
from logbus.server.security.sasl_server import SaslServer
from logbus.server.security.scram_server import ScramServer
from logbus.server.security.ssl_principal import PrincipalMapper


def uses_tls(listener: Listener) -> bool:
    return listener.security_protocol in ("SSL", "SASL_SSL")


def uses_sasl(listener: Listener) -> bool:
    return listener.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def ssl_settings(config: BrokerConfig, listener: str) -> dict[str, object]:
    return settings_from(partial(config.listener_setting, listener))


def ssl_fingerprint(config: BrokerConfig, listener: str) -> tuple[object, ...]:
    """What a listener's TLS context is built from: its settings and the modification
    times of the files they name, so that setting the same keystore path again after
    replacing the file reloads it, as Kafka does."""
    settings = ssl_settings(config, listener)
    times = []
    for name in ("ssl.keystore.location", "ssl.truststore.location"):
        path = settings.get(name)
        try:
            times.append(os.stat(str(path)).st_mtime_ns if path else None)
        except OSError:
            times.append(None)
    return (tuple(sorted((k, str(v)) for k, v in settings.items())), *times)


def listener_ssl_context(config: BrokerConfig, listener: Listener) -> ssl.SSLContext | None:
    if not uses_tls(listener):
        return None
    return server_context(ssl_settings(config, listener.name))


def check_listener_tls(config: BrokerConfig) -> None:
    """Build every TLS listener's context (ConfigError when a keystore or truststore does
    not load): a dynamic change of TLS settings is refused unless it would work."""
    for listener in config.listeners:
        listener_ssl_context(config, listener)


def principal_mapper(config: BrokerConfig) -> PrincipalMapper:
    rules = cast(str, config.get("ssl.principal.mapping.rules"))
    try:
        return PrincipalMapper(rules)
    except ValueError as exc:
        raise ConfigError("ssl.principal.mapping.rules", str(exc), rules) from None


def jaas_config(config: BrokerConfig, listener: str, mechanism: str) -> JaasConfig | None:
    """The JAAS config of one listener and mechanism, if set."""
    value = config.listener_setting(listener, "sasl.jaas.config", mechanism)
    if value is None:
        return None
    text = value.value if isinstance(value, Password) else str(value)
    setting = f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"
    try:
        return parse_jaas(text)
    except ValueError as exc:
        raise ConfigError(setting, str(exc)) from None


def listener_sasl(
    config: BrokerConfig, listener: Listener, credentials: CredentialCache
) -> SaslSettings | None:
    if not uses_sasl(listener):
        return None
    name = listener.name
    mechanisms = [
        m.upper() for m in cast(list[str], config.listener_setting(name, "sasl.enabled.mechanisms"))
    ]
    plain_users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        jaas = jaas_config(config, name, "PLAIN")
        if jaas is None:
            raise ConfigError(
                f"listener.name.{name.lower()}.plain.sasl.jaas.config",
                f"Listener {name} offers PLAIN and needs its users in a JAAS config "
                '(PlainLoginModule required user_alice="alice-secret";)',
            )
        plain_users = jaas.plain_users

    def new_server(mechanism: str) -> SaslServer:
        if mechanism == "PLAIN":
            return PlainServer(plain_users)
        assert mechanism in MECHANISMS
        return ScramServer(mechanism, credentials.get)

    return SaslSettings(
        mechanisms=mechanisms,
        new_server=new_server,
        max_receive_size=cast(int, config.listener_setting(name, "sasl.server.max.receive.size")),
        reauth_ms=cast(int, config.listener_setting(name, "connections.max.reauth.ms")),
        failed_authentication_delay_ms=cast(
            int, config.get("connection.failed.authentication.delay.ms")
        ),
    )


def inter_broker_security(config: BrokerConfig) -> ClientSecurity:
    """How this broker connects to the others (replica fetchers, the controller channel,
    AlterPartition, transaction markers): the inter-broker listener's security protocol,
    its TLS settings (truststore; keystore for client authentication), and for SASL
    `sasl.mechanism.inter.broker.protocol` with the username and password of that
    listener's JAAS config for the mechanism, as Kafka's brokers log in."""
    listener = config.inter_broker_listener
    name, protocol = listener.name, listener.security_protocol
    context = client_context(ssl_settings(config, name)) if uses_tls(listener) else None
    if not uses_sasl(listener):
        return ClientSecurity(protocol, context)
    mechanism = cast(str, config.get("sasl.mechanism.inter.broker.protocol")).upper()
    jaas = jaas_config(config, name, mechanism)
    options = jaas.options if jaas is not None else {}
    username, password = options.get("username"), options.get("password")
    if not username or password is None:
        raise ConfigError(
            f"listener.name.{name.lower()}.{mechanism.lower()}.sasl.jaas.config",
            f"The inter-broker listener {name} uses {protocol} with {mechanism}: its JAAS "
            'config needs the broker\'s own username="..." password="..."',
        )
    return ClientSecurity(protocol, context, mechanism, username, password)
