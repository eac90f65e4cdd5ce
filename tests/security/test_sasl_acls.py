"""Authentication feeds authorization: the SASL user is the principal the ACL authorizer
judges. alice (PLAIN) may not write a topic until the super user admin grants it; a
client that does not authenticate gets nothing past the SASL listener at all."""

from __future__ import annotations

import uuid
from typing import Any

from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from security_support import ADMIN_JAAS, plain

pytest_plugins = ["secure_fixtures"]

TIMEOUT = 30


def produce_one(config: dict[str, Any], topic: str) -> KafkaError | None:
    errors: list[KafkaError | None] = []
    producer = Producer({**config, "message.timeout.ms": 10000})
    producer.produce(topic, b"v", on_delivery=lambda err, _msg: errors.append(err))
    producer.flush(TIMEOUT)
    assert len(errors) == 1
    return errors[0]


def test_the_sasl_user_is_the_principal_acls_judge(secure_broker: Any) -> None:
    running = secure_broker(
        {
            "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
            "sasl.enabled.mechanisms": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": ADMIN_JAAS,
            "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
            "super.users": "User:admin",
        }
    )
    admin_config = plain(running, "admin", "admin-secret")
    admin = AdminClient(admin_config)
    topic = f"acl-{uuid.uuid4().hex[:6]}"
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(TIMEOUT)
    alice = plain(running, "alice", "alice-secret")
    error = produce_one(alice, topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grants = [
        AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*",
                   operation, AclPermissionType.ALLOW)
        for operation in (AclOperation.WRITE, AclOperation.DESCRIBE)
    ]  # fmt: skip
    for future in admin.create_acls(grants).values():
        future.result(TIMEOUT)
    assert produce_one(alice, topic) is None
    # the admin's ACL calls are refused to alice (not a super user)
    alice_admin = AdminClient(alice)
    try:
        alice_admin.create_acls(grants)[grants[0]].result(TIMEOUT)
        raise AssertionError("alice could create ACLs")
    except KafkaException as exc:
        assert exc.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
