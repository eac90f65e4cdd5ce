"""DescribeCluster v0-1 (KIP-700): brokers, controller and cluster id, falling back to a
Metadata request for no topics on a broker without it."""

from __future__ import annotations

from logbus.client.connection import Connection
from logbus.client.errors import KafkaError, check
from logbus.client.metadata import BrokerInfo, ClusterMetadata
from logbus.client.requests.common import send
from logbus.client.requests.metadata import metadata
from logbus.protocol import ApiKey, ErrorCode
from logbus.protocol.messages import apis
from logbus.protocol.messages.describe_cluster_request import DescribeClusterRequest
from logbus.protocol.messages.describe_cluster_response import DescribeClusterResponse

BROKER_ENDPOINTS = 1  # endpoint type (v1, KIP-919)


def build_describe_cluster(version: int) -> DescribeClusterRequest:
    return {"include_cluster_authorized_operations": False, "endpoint_type": BROKER_ENDPOINTS}


def read_describe_cluster(response: DescribeClusterResponse) -> ClusterMetadata:
    """The cluster as a ClusterMetadata without topics; raises the response's error."""
    check(response["error_code"], response["error_message"])
    brokers = {
        b["broker_id"]: BrokerInfo(b["broker_id"], b["host"], b["port"], b["rack"])
        for b in response["brokers"]
    }
    return ClusterMetadata(response["cluster_id"], response["controller_id"], brokers, {})


async def describe_cluster(conn: Connection) -> ClusterMetadata:
    """Brokers, controller and cluster id (no topics)."""
    try:
        version = conn.choose_version(ApiKey.DESCRIBE_CLUSTER)
    except KafkaError as exc:
        if exc.code != ErrorCode.UNSUPPORTED_VERSION:
            raise
        return await metadata(conn, [])
    body = build_describe_cluster(version)
    response = await send(conn, apis.DESCRIBE_CLUSTER, body, version)
    return read_describe_cluster(response)
