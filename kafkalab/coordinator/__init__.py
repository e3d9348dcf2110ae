"""Coordinators: the transaction coordinator (and, later, the group coordinator)."""
