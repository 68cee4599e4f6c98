"""kchaos: Jepsen-style correctness and chaos testing for Kafka-compatible systems."""

__version__ = "0.1.0"
