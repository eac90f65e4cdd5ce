"""Sockets as the broker and the client both drive them (Kafka's `common.network`): the
entry point is `frame_stream.FrameStream`, an asyncio protocol that reads size-prefixed
frames with `logbus.protocol.frame`'s I/O-free `FrameAssembler`."""
