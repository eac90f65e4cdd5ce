"""Network partitions for a `ProcessCluster`: each broker reaches ZooKeeper through a
`TcpProxy` of its own, and the other brokers reach it (its inter-broker listener,
REPLICATION: follower fetches, the controller's requests) through another; clients reach
its CLIENT listener directly, so a broker cut off from the cluster still serves them.
What a broker itself opens to the others (its own follower fetches, its AlterPartition
requests) goes through their proxies, so `isolate` leaves that direction open: one
proxy per listener cannot tell the brokers apart.

    cluster = ProcessCluster(zk_connect, 3, tmp_path, start=False, ...)
    with NetworkFaults(cluster, zookeeper.connect) as faults:
        cluster.start()
        faults.isolate(leader)       # from ZooKeeper and from the other brokers
        faults.cut_zookeeper(0, 1, 2)
        faults.heal()                # every path flows again
"""

from __future__ import annotations

from types import TracebackType

from cluster_processes import ProcessCluster, free_port
from tcp_proxy import TcpProxy


class NetworkFaults:
    """Sets up the listeners and proxies of every broker of `cluster` (built with
    `start=False`) around the ZooKeeper at `zookeeper` ("host:port"); `close()` stops the
    proxies (after the cluster's brokers, as leaving both `with` blocks does)."""

    def __init__(self, cluster: ProcessCluster, zookeeper: str) -> None:
        host, _, port = zookeeper.partition(":")
        self.zookeeper: dict[int, TcpProxy] = {}
        self.replication: dict[int, TcpProxy] = {}
        try:
            for broker_id, node in cluster.nodes.items():
                assert not node.running, "set the proxies up before the brokers start"
                chroot = node.properties["zookeeper.connect"].partition("/")[2]
                zk = self.zookeeper[broker_id] = TcpProxy(int(port), host)
                internal = free_port()
                repl = self.replication[broker_id] = TcpProxy(internal)
                node.properties.update(
                    {
                        "zookeeper.connect": f"{zk.address}/{chroot}",
                        "listeners": f"CLIENT://{node.address},REPLICATION://127.0.0.1:{internal}",
                        "advertised.listeners": (
                            f"CLIENT://{node.address},REPLICATION://{repl.address}"
                        ),
                        "listener.security.protocol.map": "CLIENT:PLAINTEXT,REPLICATION:PLAINTEXT",
                        "inter.broker.listener.name": "REPLICATION",
                    }
                )
        except BaseException:
            self.close()
            raise

    def cut_zookeeper(self, *broker_ids: int) -> None:
        for broker_id in broker_ids:
            self.zookeeper[broker_id].cut()

    def cut_replication(self, *broker_ids: int) -> None:
        """The other brokers' connections to these brokers drop every byte."""
        for broker_id in broker_ids:
            self.replication[broker_id].cut()

    def isolate(self, broker_id: int) -> None:
        """Cut the broker off from ZooKeeper and from the other brokers (its followers
        fetch from it, the controller reaches it, through its REPLICATION proxy); its
        clients still reach it."""
        self.cut_zookeeper(broker_id)
        self.cut_replication(broker_id)

    def heal(self) -> None:
        for proxy in (*self.zookeeper.values(), *self.replication.values()):
            if proxy.is_cut:
                proxy.heal()

    def close(self) -> None:
        for proxy in (*self.zookeeper.values(), *self.replication.values()):
            proxy.close()

    def __enter__(self) -> NetworkFaults:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
