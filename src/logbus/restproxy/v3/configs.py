"""The v3 config resources: a topic's configs (`.../topics/{topic_name}/configs`, one by
`/{name}` with GET, PUT and DELETE, several at once with `:alter`), every topic's
(`.../topics/-/configs`), a broker's (`.../brokers/{broker_id}/configs`, likewise) and the
cluster-wide dynamic broker configs (`.../broker-configs`). PUT sets one config and DELETE
returns it to its default, as Kafka's IncrementalAlterConfigs does."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starlette.requests import Request

from logbus.client.admin import (
    AlterConfigOp,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)
from logbus.restproxy.v3.clusters import broker_of
from logbus.restproxy.v3.resources import (
    Links,
    admin,
    invalid_payload,
    links,
    no_content,
    not_found,
    object_body,
)
from logbus.restproxy.v3.topics import describe


class ConfigOwner:
    """Whose configs a request names: a topic, a broker or the cluster (the brokers'
    dynamic defaults), and how its configs are shown."""

    def __init__(self, site: Links, resource: ConfigResource) -> None:
        self.links = site
        self.resource = resource

    @property
    def is_cluster(self) -> bool:
        return self.resource.type == ResourceType.BROKER and not self.resource.name

    @property
    def label(self) -> str:
        if self.resource.type == ResourceType.TOPIC:
            return f"topic {self.resource.name}"
        return f"broker {self.resource.name}" if self.resource.name else "cluster"

    def segments(self) -> tuple[object, ...]:
        if self.resource.type == ResourceType.TOPIC:
            return ("topics", self.resource.name, "configs")
        if self.resource.name:
            return ("brokers", self.resource.name, "configs")
        return ("broker-configs",)

    def kind(self) -> str:
        if self.resource.type == ResourceType.TOPIC:
            return "KafkaTopicConfig"
        return "KafkaBrokerConfig" if self.resource.name else "KafkaClusterConfig"

    def config_json(self, entry: ConfigEntry) -> dict[str, Any]:
        site, r = self.links, self.resource
        if r.type == ResourceType.TOPIC:
            owner: dict[str, Any] = {"topic_name": r.name}
            crn: tuple[tuple[str, object], ...] = (("topic", r.name), ("config", entry.name))
        elif r.name:
            owner = {"broker_id": int(r.name)}
            crn = (("broker", r.name), ("config", entry.name))
        else:
            owner = {"config_type": "BROKER"}
            crn = (("broker-config", entry.name),)
        return site.resource(
            self.kind(), (*self.segments(), entry.name), crn, **owner,
            name=entry.name, value=entry.value, is_default=entry.is_default,
            is_read_only=entry.is_read_only, is_sensitive=entry.is_sensitive,
            source=entry.source.name,
            synonyms=[
                {"name": s.name, "value": s.value, "source": s.source.name}
                for s in entry.synonyms
            ],
        )

    async def entries(self, request: Request) -> dict[str, ConfigEntry]:
        found = await admin(request).describe_configs([self.resource], include_synonyms=True)
        return found[self.resource]

    async def entry(self, request: Request, name: str) -> ConfigEntry:
        found = (await self.entries(request)).get(name)
        if found is None:
            raise not_found(
                f"Config {name} cannot be found for {self.label} in cluster {self.links.cluster}."
            )
        return found

    async def alter(
        self, request: Request, ops: list[AlterConfigOp], validate_only: bool = False
    ) -> None:
        await admin(request).incremental_alter_configs(
            {self.resource: ops}, validate_only=validate_only
        )


async def _topic_owner(request: Request) -> ConfigOwner:
    site = await links(request)
    topic = request.path_params["topic_name"]
    await describe(request, topic)  # 40403 for a topic that does not exist
    return ConfigOwner(site, ConfigResource(ResourceType.TOPIC, topic))


async def _broker_owner(request: Request) -> ConfigOwner:
    site = await links(request)
    broker = await broker_of(request)
    return ConfigOwner(site, ConfigResource(ResourceType.BROKER, str(broker.node_id)))


async def _cluster_owner(request: Request) -> ConfigOwner:
    return ConfigOwner(await links(request), ConfigResource(ResourceType.BROKER, ""))


Owner = Callable[[Request], Any]


def _list_kind(owner: ConfigOwner) -> str:
    return owner.kind() + "List"


def _handlers(owner_of: Owner) -> tuple[Any, Any, Any, Any, Any]:
    """list, get, put, delete and `:alter` for one kind of config owner."""

    async def list_configs(request: Request) -> Any:
        owner: ConfigOwner = await owner_of(request)
        entries = await owner.entries(request)
        return owner.links.collection(
            _list_kind(owner), owner.segments(),
            [owner.config_json(entries[name]) for name in sorted(entries)],
        )

    async def get_config(request: Request) -> Any:
        owner: ConfigOwner = await owner_of(request)
        return owner.config_json(await owner.entry(request, request.path_params["name"]))

    async def put_config(request: Request) -> Any:
        owner: ConfigOwner = await owner_of(request)
        body = await object_body(request)
        name = request.path_params["name"]
        if not owner.is_cluster:
            # a cluster-wide config is listed once set: any name may be set (Confluent's
            # upsert); a topic's or broker's must exist
            await owner.entry(request, name)
        value = body.get("value")
        if value is None:
            await owner.alter(request, [AlterConfigOp(name, None, AlterConfigOpType.DELETE)])
        else:
            await owner.alter(request, [AlterConfigOp(name, str(value))])
        return no_content()

    async def delete_config(request: Request) -> Any:
        owner: ConfigOwner = await owner_of(request)
        name = request.path_params["name"]
        await owner.entry(request, name)
        await owner.alter(request, [AlterConfigOp(name, None, AlterConfigOpType.DELETE)])
        return no_content()

    async def alter_configs(request: Request) -> Any:
        owner: ConfigOwner = await owner_of(request)
        body = await object_body(request)
        await owner.alter(request, alter_ops(body), body.get("validate_only") is True)
        return no_content()

    return list_configs, get_config, put_config, delete_config, alter_configs


def alter_ops(body: dict[str, Any]) -> list[AlterConfigOp]:
    """The changes of an `:alter` request: `{"data": [{"name", "value", "operation":
    "SET" | "DELETE"}]}` (422 for anything else)."""
    data = body.get("data")
    if not isinstance(data, list) or not data:
        raise invalid_payload("Request body is empty. Data is required.")
    ops = []
    for item in data:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise invalid_payload("Each config needs a name.")
        operation = str(item.get("operation") or "SET").upper()
        if operation == "DELETE":
            ops.append(AlterConfigOp(item["name"], None, AlterConfigOpType.DELETE))
        elif operation == "SET" and item.get("value") is not None:
            ops.append(AlterConfigOp(item["name"], str(item["value"])))
        else:
            raise invalid_payload(f"Cannot {operation} config {item['name']}.")
    return ops


async def every_topic_config(request: Request) -> Any:
    """`GET .../topics/-/configs`: the configs of every topic."""
    site = await links(request)
    topics = await admin(request).list_topics()
    resources = [ConfigResource(ResourceType.TOPIC, t) for t in topics]
    found = await admin(request).describe_configs(resources, include_synonyms=True)
    data = [
        ConfigOwner(site, r).config_json(entries[name])
        for r, entries in sorted(found.items(), key=lambda item: item[0].name)
        for name in sorted(entries)
    ]
    return site.collection("KafkaTopicConfigList", ("topics", "-", "configs"), data)


async def every_broker_config(request: Request) -> Any:
    """`GET .../brokers/-/configs`: the configs of every broker."""
    site = await links(request)
    described = await admin(request).describe_cluster()
    resources = [ConfigResource(ResourceType.BROKER, str(b.node_id)) for b in described.nodes]
    found = await admin(request).describe_configs(resources, include_synonyms=True)
    data = [
        ConfigOwner(site, r).config_json(entries[name])
        for r, entries in sorted(found.items(), key=lambda item: int(item[0].name))
        for name in sorted(entries)
    ]
    return site.collection("KafkaBrokerConfigList", ("brokers", "-", "configs"), data)


def _routes(base: str, owner_of: Owner) -> list[tuple[str, Any, list[str]]]:
    list_configs, get_config, put_config, delete_config, alter_configs = _handlers(owner_of)
    return [
        (base, list_configs, ["GET"]),
        (base + ":alter", alter_configs, ["POST"]),
        (base + "/{name}", get_config, ["GET"]),
        (base + "/{name}", put_config, ["PUT"]),
        (base + "/{name}", delete_config, ["DELETE"]),
    ]


_CLUSTER = "/v3/clusters/{cluster_id}"
ROUTES: list[tuple[str, Any, list[str]]] = [
    (f"{_CLUSTER}/topics/-/configs", every_topic_config, ["GET"]),
    (f"{_CLUSTER}/brokers/-/configs", every_broker_config, ["GET"]),
    *_routes(f"{_CLUSTER}/topics/{{topic_name}}/configs", _topic_owner),
    *_routes(f"{_CLUSTER}/brokers/{{broker_id}}/configs", _broker_owner),
    *_routes(f"{_CLUSTER}/broker-configs", _cluster_owner),
]
