"""Coordinators: the group coordinator (`group/`) and the transaction coordinator (`transaction/`)."""
