"""Transactions (KIP-98, KIP-447, KIP-890 part 1): the partition's side
(partition_txns.py: open and aborted transactions, the last stable offset)
and the transaction coordinator over `__transaction_state` (coordinator.py).
"""
