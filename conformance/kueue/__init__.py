"""The Kueue oracle: accelsched's queue admission against the real Kueue controller (docs/queues.md)."""
