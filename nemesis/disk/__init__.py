"""The disk gate: a FUSE filesystem of our own under each node's data
directory that can stall, fail with EIO, and lose what was not synced
(gate.py, switches.py, page_cache.py), its command line
(`python -m nemesis.disk`), and the disk faults that drive it through
`Node.run` (fault.py)."""
