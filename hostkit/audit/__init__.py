"""Audit hosts with testinfra: drift, pending reboots, cross-layer consistency, reports."""
