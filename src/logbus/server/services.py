"""The services a started broker runs, all constructed: what the API handlers receive
with every request (`RequestContext.services`), so that none of them checks for a part
that is not there yet."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from logbus.controller.controller import Controller
    from logbus.controller.metadata_store import MetadataStore
    from logbus.coordinator.group.runtime import GroupCoordinatorRuntime
    from logbus.coordinator.transaction.coordinator import TransactionCoordinator
    from logbus.server.config.dynamic_config import DynamicConfigManager
    from logbus.server.producer_ids import ProducerIdManager
    from logbus.server.quotas.manager import ClientQuotas
    from logbus.server.replica.replica_manager import ReplicaManager
    from logbus.server.security.authorizer import Authorizer
    from logbus.storage.log_manager import LogManager


@dataclass(frozen=True, slots=True)
class BrokerServices:
    store: MetadataStore
    log_manager: LogManager
    replica_manager: ReplicaManager
    controller: Controller
    group_coordinator: GroupCoordinatorRuntime
    producer_ids: ProducerIdManager
    dynamic_config: DynamicConfigManager
    transaction_coordinator: TransactionCoordinator
    quotas: ClientQuotas
    # the ACL authorizer; None when authorizer.class.name is unset (everything allowed)
    authorizer: Authorizer | None = None
