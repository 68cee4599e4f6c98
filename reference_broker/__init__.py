"""The kchaos reference broker: a Kafka-protocol broker small enough to read
and exact enough to test clients and the harness against (docs/broker.md).

Layers, each testable without a socket: `protocol/` (bytes ⇄ kio entities,
one adapter per API), `broker` and `partition` (semantic operations),
`log/` (segments, index, recovery), `producer_state` (idempotence),
`group/` (the classic group coordinator) over `offsets_topic`, `txn/` (the
transaction coordinator over `__transaction_state`, and each partition's
open and aborted transactions).
Imports only kio and the standard library: it ships alone in the node image.
"""
