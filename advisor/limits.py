"""Every cap on the advisor's input, in one place: how much of a file is read, how long a line may be, how large
a model's sizes may be. Past a cap the input is refused with one line (exit 2) or the rest is skipped, as each
reader's docs say; under every cap a reader's work grows linearly with its input.

A leaf module: it imports nothing, so every package (load, metrics, memory, watch) reads its caps from here.
"""

from __future__ import annotations

# --- configs and launch scripts (advisor.load)
CONFIG_BYTES = 16 << 20  # the largest verl config (all defaults of a Megatron trainer) is under 100 KiB

# --- console logs: the printed config and the launch command (advisor.load._from_log)
LOG_HEAD_BYTES = 16 << 20  # the config is printed before step 1; a 7 GB log is not read past this for it
PRINTED_DICT_LINES = 4000  # a resolved verl config prints ~400-900 lines
PRINTED_DICT_CHARS = 1 << 20  # ... in ~30-60 KiB
LOG_SCAN_CHUNK = 16 << 20  # a relaunch's config past the head is found by a byte search of chunks this large

# --- metrics (advisor.metrics, advisor.watch)
SNIFF_LONG_LINE_BYTES = 1 << 22  # telling a file's format: read this far when its head holds no line break
METRICS_LINE_BYTES = 1 << 26  # a longer JSONL line is skipped (no verl record comes near: ~7 KB with 150 metrics)
LIVE_LINE_BYTES = 1 << 20  # one line of a followed metrics file or log; verl's longest is a few KiB
RESTARTS_NAMED = 50  # a file's restarts described one by one; past these it is counted, not run by run
CONSOLE_LINE_BYTES = 1 << 20  # one console-log line is read up to this; the rest of a longer line is skipped

# --- model configs (--model-config, a checkpoint's config.json; advisor.memory)
MODEL_CONFIG_BYTES = 4 << 20  # a Hugging Face config.json is a few KiB; a VLM's with its sub-configs under 100 KiB
# The largest value any size of a model may take. The largest published decoders stay far below: 128 layers
# (Llama-3.1-405B: 126), hidden 16,384 (405B), 256 experts (DeepSeek-V3), vocabularies of 262,144 (Gemma 3),
# 1M-token positions. Past these a number is not a model's (10**12 layers would never finish estimating).
MODEL_MAX_LAYERS = 10_000
MODEL_MAX_WIDTH = 1 << 20  # hidden, intermediate, head and LoRA widths
MODEL_MAX_HEADS = 1 << 16
MODEL_MAX_EXPERTS = 1 << 16
MODEL_MAX_VOCAB = 1 << 24
MODEL_MAX_POSITIONS = 1 << 30
