"""Input size limits shared by the loaders (a module of its own so reading a launch script needs no YAML parser)."""

MAX_BYTES = 16 * 1024 * 1024  # the largest verl config (all defaults of a Megatron trainer) is under 100 KiB
