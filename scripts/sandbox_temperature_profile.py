"""How the sandbox's starting policy behaves at each sampling temperature: the figures docs/sandbox.md cites.

    python scripts/sandbox_temperature_profile.py [--seed 42] [--samples 200] [--temperatures 0.1 0.3 0.6 1 1.2]

For the starting weights of ``+sandbox.seed=SEED`` (``sweeps.sandbox.pretrained_weights``), every one of the 100
problems is sampled SAMPLES times at each temperature. Printed per temperature: the mean sampled score, its ratio
to greedy decoding's, the mean entropy per response token (nats, at that temperature, as verl's actor/entropy),
and the share of GRPO groups of 5 that would be flat (every response scoring the same), p^5 + (1 - p)^5 averaged
over the problems' own pass rates p.

To compare: verl's published gemma-2-2b-it PPO run on gsm8k (github.com/eric-haibin-lin/verl-data, branch
experiments, gsm8k/gemma-2-2b-it-ppo-bsz512_4-prompt1024-resp-512-0.640.log, step 0) validates greedily at 0.521
and samples at temperature 1 at a score of 0.416 (ratio 0.80) with actor/entropy 0.419; Qwen2.5-0.5B-Instruct
(gsm8k/Qwen2.5-0.5B-bsz256_2-prompt1024-resp512-0.567.log, step 0) has actor/entropy 0.526.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sweeps.sandbox.model import pretrained_weights, token_logprobs
from sweeps.sandbox.rollout import generate
from sweeps.sandbox.task import DIGIT0, EQ, PLUS, Prompts, compute_score, repeat_prompts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--temperatures", type=float, nargs="+", default=[0.1, 0.3, 0.6, 1.0, 1.2])
    parser.add_argument("--max-response-length", type=int, default=64)
    args = parser.parse_args(argv)

    # the seeding of sweeps.sandbox.train: the second stream initialises the weights
    init_rng = np.random.default_rng(np.random.SeedSequence(args.seed).spawn(5)[1])
    weights = pretrained_weights(init_rng)
    rng = np.random.default_rng(0)
    a, b = np.repeat(np.arange(10), 10), np.tile(np.arange(10), 10)
    tokens = np.stack([DIGIT0 + a, np.full(100, PLUS), DIGIT0 + b, np.full(100, EQ)], axis=1)
    problems = Prompts(tokens, np.full(100, 4), 10 * a + b, a + b)
    greedy = generate(weights, problems, np.arange(100), args.max_response_length, 1.0, False, -1, 1.0, rng)
    greedy_score = compute_score(greedy.responses, greedy.response_len, greedy.answer).mean()
    print(f"seed {args.seed}: greedy score {greedy_score:.3f} over the 100 problems")
    k = args.samples
    many = repeat_prompts(problems, k)
    for t in args.temperatures:
        out = generate(weights, many, np.repeat(np.arange(100), k), args.max_response_length, t, True, -1, 1.0,
                       rng)
        p = compute_score(out.responses, out.response_len, out.answer).reshape(100, k).mean(axis=1)
        _, entropy = token_logprobs(weights, out.rows, out.responses, out.mask, t)
        print(f"temperature {t:g}: sampled score {p.mean():.3f} (x{p.mean() / greedy_score:.2f} greedy), entropy "
              f"{entropy.sum() / out.mask.sum():.2f} nats/token, flat groups of 5 {np.mean(p ** 5 + (1 - p) ** 5):.0%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
