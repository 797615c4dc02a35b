"""One Format record per metrics source: the reader, the live line parse and the sweep's tail agree on every line."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from advisor.errors import MetricsError
from advisor.metrics import FORMAT_RECORDS, FORMATS, LINE_FORMATS, load_metrics, parse_metrics_line
from sweeps._tail import parse_console_line

# verl's console logger lines as verl prints them (verl/utils/logger/aggregate_logger.py concat_dict_to_str), with
# the Ray prefix and colours the driver's captured stdout adds
CONSOLE = [
    "(TaskRunner pid=1234) step:1 - critic/score/mean:np.float64(0.4375) - actor/lr:1e-06 - training/epoch:0",
    "\x1b[36m(TaskRunner pid=1234)\x1b[0m step:2 - critic/score/mean:0.5 - actor/pg_loss:nan - x/flag:True",
    "step:3 - critic/score/mean:0.250 - actor/pg_loss:-inf - val-core/openai/gsm8k/reward/mean@1:0.125",
]


def test_every_format_has_one_record_in_the_frame_order() -> None:
    assert tuple(FORMAT_RECORDS) == FORMATS
    assert set(LINE_FORMATS) == {"jsonl", "flat-jsonl", "console"}


def test_a_console_line_reads_alike_whole_live_and_in_the_sweep_tail(tmp_path: Path) -> None:
    path = tmp_path / "run.log"
    path.write_text("\n".join(["Training started", *CONSOLE]) + "\n")
    frame = load_metrics(path)
    for line in CONSOLE:
        step, live = parse_metrics_line(line, "console")
        tail = parse_console_line(line)
        assert tail is not None and tail[0] == step
        for name, value in live.items():
            whole = float(frame[name].loc[step])
            assert whole == value or (math.isnan(whole) and math.isnan(value))
            assert tail[1][name] == (value if math.isfinite(value) else None)


@pytest.mark.parametrize("fmt", ["jsonl", "flat-jsonl", "wandb-jsonl", "console"])
def test_the_no_records_message_is_the_formats(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "empty.txt"
    path.write_text('{"other": 1}\n' if fmt != "console" else "no step lines here\n")
    with pytest.raises(MetricsError, match=re.escape(FORMAT_RECORDS[fmt].none_found)):
        load_metrics(path, fmt=fmt)


def test_a_format_that_is_not_line_based_is_refused() -> None:
    with pytest.raises(ValueError, match="not a line-based"):
        parse_metrics_line(b"x", "tensorboard")
