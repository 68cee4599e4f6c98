"""Faults on a cluster's nodes, their seeded schedules, and heal-all."""
