"""The sandbox's language-model policy, for scripts: the model, its task and the start-of-run figures.

``scripts/train_sandbox_lm.py`` trains the shipped weights with these; ``python -m sweeps.sandbox`` runs the
model through ``+sandbox.policy=lm`` (the default). Importing this module imports torch.
"""

from .lm_policy import (
    WEIGHTS,
    StartFigures,
    TinyLM,
    load_policy,
    logprobs_entropy,
    pad_left,
    start_figures,
    state_for_disk,
)
from .lm_task import PAD, TaskMix, draw_problem, prompt_tokens, sft_response

__all__ = ["PAD", "WEIGHTS", "StartFigures", "TaskMix", "TinyLM", "draw_problem", "load_policy", "logprobs_entropy",
           "pad_left", "prompt_tokens", "sft_response", "start_figures", "state_for_disk"]
