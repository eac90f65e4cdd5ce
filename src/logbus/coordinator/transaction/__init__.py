"""The transaction coordinator (KIP-98): the pure state machine of one transactional id
(`state.py`), its records in `__transaction_state` (`records.py`), and the runtime
(`runtime.py`, `coordinator.py`) that loads the partitions this broker leads, writes
transitions through the `PartitionWriter` and sends transaction markers through a
`MarkerSender` (`markers.py`). Never imports `server/` or `storage/`."""
