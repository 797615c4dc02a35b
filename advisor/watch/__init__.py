"""``advisor watch``: follow a running verl job and alert at the step a diagnosis tree fires.

Public API (the private modules may change)::

    watch(cfg, source, WatchOptions(...)) -> WatchResult    follow until the source ends, idles or an alert stops it
    open_source(spec, address=None) -> Source               a file being written, a TensorBoard dir, ray://JOB_ID
    config_of_log(path, overrides) -> VerlConfig            ``watch LOG``: the config the log prints, waited for
    Watcher(cfg, name, options)                             feed records, evaluate: the alert payloads
    LiveFrame, AlertState, FileTail                         the bounded frame, the hysteresis, the file follower
    EXIT_ALERT                                              the exit code of --exit-on (4)

Modules: ``_tail`` follows a file, ``_sources``/``_tensorboard``/``_ray`` turn what is followed into step
records, ``_frame`` keeps them in bounded memory, ``_alerts`` is the hysteresis, ``_actions`` prints and runs
``--on-alert`` commands, ``_watch`` is the loop. Ray and tensorboard are imported only for their sources.
"""

from __future__ import annotations

from ._alerts import AlertState, Event, uses_nonfinite
from ._frame import LiveFrame
from ._open import config_of_log, open_source
from ._sources import Source
from ._tail import FileTail
from ._watch import DEFAULT_CONFIRM, EXIT_ALERT, WARM_UP_STEPS, Watcher, WatchOptions, WatchResult, watch

__all__ = [
    "DEFAULT_CONFIRM",
    "EXIT_ALERT",
    "WARM_UP_STEPS",
    "AlertState",
    "Event",
    "FileTail",
    "LiveFrame",
    "Source",
    "WatchOptions",
    "WatchResult",
    "Watcher",
    "config_of_log",
    "open_source",
    "uses_nonfinite",
    "watch",
]
