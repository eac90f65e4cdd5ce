"""The v3 cluster and broker resources: `GET /v3/clusters`, `/v3/clusters/{cluster_id}`,
`.../brokers` and `.../brokers/{broker_id}`. The proxy knows one cluster, the one
`bootstrap.servers` names, as Confluent's proxy does."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from logbus.client.admin import BrokerInfo
from logbus.restproxy.v3.resources import Links, admin, cluster_id, int_param, links, not_found


def cluster_json(site: Links, controller: int | None) -> dict[str, Any]:
    body = site.resource("KafkaCluster", (), ())
    if controller is not None:
        body["controller"] = site.related("brokers", controller)
    body.update(
        acls=site.related("acls"),
        brokers=site.related("brokers"),
        broker_configs=site.related("broker-configs"),
        consumer_groups=site.related("consumer-groups"),
        topics=site.related("topics"),
        partition_reassignments=site.related("topics", "-", "partitions", "-", "reassignment"),
    )
    return body


def broker_json(site: Links, broker: BrokerInfo) -> dict[str, Any]:
    return site.resource(
        "KafkaBroker", ("brokers", broker.node_id), (("broker", broker.node_id),),
        broker_id=broker.node_id, host=broker.host, port=broker.port, rack=broker.rack,
        configs=site.related("brokers", broker.node_id, "configs"),
        partition_replicas=site.related("brokers", broker.node_id, "partition-replicas"),
    )


async def _controller(request: Request) -> int | None:
    described = await admin(request).describe_cluster()
    return None if described.controller is None else described.controller.node_id


async def list_clusters(request: Request) -> Any:
    site = Links(request, await cluster_id(request))
    body = cluster_json(site, await _controller(request))
    return {
        "kind": "KafkaClusterList",
        "metadata": {"self": f"{site.base}/v3/clusters", "next": None},
        "data": [body],
    }


async def get_cluster(request: Request) -> Any:
    site = await links(request)
    return cluster_json(site, await _controller(request))


async def list_brokers(request: Request) -> Any:
    site = await links(request)
    described = await admin(request).describe_cluster()
    return site.collection(
        "KafkaBrokerList", ("brokers",), [broker_json(site, b) for b in described.nodes]
    )


async def broker_of(request: Request) -> BrokerInfo:
    """The broker `{broker_id}` names (404 if the cluster has none of that id)."""
    wanted = int_param(request, "broker_id")
    described = await admin(request).describe_cluster()
    for broker in described.nodes:
        if broker.node_id == wanted:
            return broker
    raise not_found(f"Broker {wanted} cannot be found.")


async def get_broker(request: Request) -> Any:
    site = await links(request)
    return broker_json(site, await broker_of(request))


_CLUSTER = "/v3/clusters/{cluster_id}"
ROUTES: list[tuple[str, Any, list[str]]] = [
    ("/v3/clusters", list_clusters, ["GET"]),
    (_CLUSTER, get_cluster, ["GET"]),
    (f"{_CLUSTER}/brokers", list_brokers, ["GET"]),
    (f"{_CLUSTER}/brokers/{{broker_id}}", get_broker, ["GET"]),
]
