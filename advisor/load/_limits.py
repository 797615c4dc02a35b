"""Input size limits shared by the loaders (a module of its own so reading a launch script needs no YAML parser)."""

from advisor.limits import CONFIG_BYTES as MAX_BYTES  # every cap is stated in advisor/limits.py

__all__ = ["MAX_BYTES"]
