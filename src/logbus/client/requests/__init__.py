"""Every request the client sends, built in one place: one module per API family, named
as in `logbus.server.api` (`produce`, `fetch`, `list_offsets`, `metadata`, `topics`,
`configs`, `alter_configs`, `delete_records`, `cluster`, `find_coordinator`,
`group_membership`, `group_offsets`, `producer_id`, `transactions`, `api_versions`), plus
`consumer_protocol` (the subscription and assignment payloads JoinGroup and SyncGroup
carry) and `common` (version floors, per-partition and per-name results).

Each API has three parts:
- `build_<api>(version, ...)`: the request body for a version, typed as the request's
  generated TypedDict (`logbus.protocol.messages`), which the generic codec encodes (no
  I/O, so tests pin it to the broker's decoder at every version);
- `read_<api>(response, ...)`: the decoded response, typed as the response's TypedDict,
  turned into values, error codes kept (where their meaning depends on the caller's
  state) or turned into `KafkaError` (named by its ErrorCode, with the broker's message);
  nothing asked for is left out;
- an async function sending it on one given `Connection` at the newest version both
  sides support (`Connection.choose_version`, from ApiVersions), through `common.send`
  with the API's constant from `logbus.protocol.messages.apis`, which pairs its key
  with its request's and its response's TypedDicts.

Routing (which broker leads a partition, which one coordinates a group) and retries are
the callers' job: `Cluster`, the producer's sender, the consumer's fetcher and group
member, the admin client, the Spark source, the CLI. This package depends only on
`protocol/`, `records/`, the connection and the client's error and metadata value types,
never on the producer, consumer or admin, so broker-to-broker traffic can use it.
"""
