"""Train the language-model sandbox's policy (supervised, deterministic) and write sweeps/sandbox/assets/sandbox_lm.pt.

    python scripts/train_sandbox_lm.py [--steps 4000] [--out sweeps/sandbox/assets/sandbox_lm.pt]

One CPU thread and fixed seeds, so the same command writes the same weights. The data are fresh draws of
sweeps/sandbox/lm_task.py's SFT responses (its TaskMix: difficulty mix, opener words, label noise); the loss is the
cross-entropy of the response tokens, as an SFT trainer computes it (prompt tokens are not trained on).
At the end it prints the start-of-run figures the SFT is calibrated to (docs/sandbox.md, "The language-model
policy"): the token entropy of temperature-1 samples, their score, and the greedy score.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main(argv: list[str] | None = None) -> int:
    import torch

    from sweeps.sandbox import lm

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=lm.WEIGHTS)
    args = parser.parse_args(argv)

    torch.set_num_threads(1)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    mix = lm.TaskMix()
    model = lm.TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    start = time.perf_counter()
    for step in range(args.steps):
        problems = [lm.draw_problem(rng, mix) for _ in range(args.batch)]
        prompts = [lm.prompt_tokens(p, rng) for p in problems]
        responses = [lm.sft_response(p, q, rng, mix) for p, q in zip(problems, prompts, strict=True)]
        tokens, valid = lm.pad_left(prompts)
        width = max(len(r) for r in responses)
        resp = torch.full((args.batch, width), lm.PAD, dtype=torch.long)
        for i, r in enumerate(responses):
            resp[i, :len(r)] = torch.tensor(r)
        mask = (resp != lm.PAD).float()
        logp, _ = lm.logprobs_entropy(model, tokens, valid, resp, mask, 1.0)
        loss = -(logp * mask).sum() / mask.sum()
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        for group in opt.param_groups:  # linear warmup over 100 steps, then cosine to 0
            warm = min(1.0, (step + 1) / 100)
            group["lr"] = args.lr * warm * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        opt.step()
        if step % 250 == 0 or step == args.steps - 1:
            print(f"step {step}: loss {loss.item():.4f} ({time.perf_counter() - start:.0f} s)", flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    torch.save(lm.state_for_disk(model), args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size // 1024} KiB)")
    figures = lm.start_figures(lm.load_policy(args.out))
    print(f"step-0 entropy at T=1: {figures.entropy:.3f} nats/token (published instruct starts: 0.31-0.49)")
    print(f"sampled (T=1) score: {figures.sampled_score:.3f}; greedy score: {figures.greedy_score:.3f}; "
          f"sampled/greedy: {figures.ratio:.2f} (published: about 0.8)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
