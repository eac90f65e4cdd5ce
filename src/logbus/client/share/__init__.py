"""The share consumer (KIP-932: share groups, a topic read as a queue): `ShareConsumer`
(asyncio) acquires records, possibly from partitions other members read too, and
acknowledges them; `logbus.client.share.sync.ShareConsumer` is the blocking wrapper.

Inside: `member` (ShareGroupHeartbeat, the assignment), `share_fetcher` (share sessions,
ShareFetch and ShareAcknowledge with each leader), `acknowledgements` (what the
application still has to acknowledge, and what is on its way), `records`.
"""

from logbus.client.consumer.records import IllegalStateError
from logbus.client.share.consumer import ShareConsumer
from logbus.client.share.records import AcknowledgeType, ShareConsumerRecord

__all__ = ["AcknowledgeType", "IllegalStateError", "ShareConsumer", "ShareConsumerRecord"]
