"""The client side of a run: client adapters over real Kafka clients
(`workloads.clients`), the queue workload and the final reads, each
operation recorded into the history (docs/history.md)."""
