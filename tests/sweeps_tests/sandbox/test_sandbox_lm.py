"""The sandbox's language-model policy: sampling rules, the shipped weights' calibrated start, and short GRPO/PPO
runs that log the same metrics as the log-linear policy.

Expected figures come from the sampling rules themselves (EOS ends a response, the cap truncates it, top-k 1 and
greedy decoding agree, T -> 0 samples the argmax), from the published start-of-run bands docs/sandbox.md cites
(step-0 entropy 0.31-0.49 nats/token: bench/published_runs, knowledge/published_runs.yaml), and from the
log-linear policy's own metric names, never from the code under test.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sweeps import sandbox as sb  # noqa: E402
from sweeps.sandbox import lm_policy as lp  # noqa: E402
from sweeps.sandbox import lm_task as task  # noqa: E402

TINY = ["data.train_batch_size=8", "actor_rollout_ref.rollout.n=4", "actor_rollout_ref.actor.ppo_mini_batch_size=4",
        "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=4", "trainer.n_gpus_per_node=2",
        "data.max_response_length=24", "trainer.logger=[]", "+sandbox.train_size=64", "+sandbox.val_size=16",
        "trainer.total_training_steps=3", "+sandbox.deterministic_timing=true"]
GRPO = ["algorithm.adv_estimator=grpo", "actor_rollout_ref.actor.use_kl_loss=true"]
PPO = ["algorithm.adv_estimator=gae", "critic.ppo_mini_batch_size=4", "critic.ppo_micro_batch_size_per_gpu=4"]


@pytest.fixture(scope="module")
def model() -> lp.TinyLM:
    torch.set_num_threads(1)
    return lp.load_policy()


def _prompts(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    return _problems(n, seed)[:2]


def _problems(n: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[int]]:
    rng = np.random.default_rng(seed)
    problems = [task.draw_problem(rng, task.TaskMix()) for _ in range(n)]
    tokens, valid = lp.pad_left([task.prompt_tokens(p, rng) for p in problems])
    return tokens, valid, [p.answer for p in problems]


def test_responses_stop_at_eos_or_are_cut_at_the_cap(model: lp.TinyLM) -> None:
    tokens, valid, answers = _problems(64)
    out = lp.generate(model, tokens, valid, 24, lp.Sampling(), torch.Generator().manual_seed(0))
    assert out.shape[1] <= 24
    for row in out.tolist():
        if task.EOS in row:  # nothing but padding after the first EOS
            assert set(row[row.index(task.EOS) + 1:]) <= {task.PAD}
        else:  # no EOS: the response runs to the cap
            assert len(row) == 24 and task.PAD not in row
    capped = lp.generate(model, tokens, valid, 3, lp.Sampling(), torch.Generator().manual_seed(0))
    lengths = lp.response_mask(capped).sum(dim=1).long().tolist()
    cut = [i for i, row in enumerate(capped.tolist()) if task.EOS not in row]
    assert cut  # a written working does not fit in 3 tokens
    for i in cut:  # cut at the cap without EOS: truncated, and a truncated response scores 0
        assert lengths[i] == 3
        assert task.score(capped[i].tolist(), lengths[i], answers[i]) == 0.0


def test_the_score_needs_the_last_answer_and_eos() -> None:
    # gsm8k's strict extraction takes the last '#### <number>'; the sandbox also requires EOS
    def ids(text: str) -> list[int]:
        return [task.VOCAB.index(t) for t in text.split()]

    right = ids("1 2 + 3 5 = 4 7 #### 4 7 <eos>")
    assert task.score(right, len(right), 47) == 1.0
    assert task.score(right[:-1], len(right) - 1, 47) == 0.0  # no EOS: truncated
    assert task.score(right, len(right), 46) == 0.0
    twice = ids("#### 4 6 so #### 4 7 <eos>")
    assert task.score(twice, len(twice), 47) == 1.0


def test_top_k_1_and_low_temperature_sample_the_greedy_response(model: lp.TinyLM) -> None:
    tokens, valid = _prompts(32)
    greedy = lp.generate(model, tokens, valid, 24, lp.Sampling(do_sample=False), torch.Generator())
    top1 = lp.generate(model, tokens, valid, 24, lp.Sampling(top_k=1), torch.Generator().manual_seed(1))
    cold = lp.generate(model, tokens, valid, 24, lp.Sampling(temperature=1e-4), torch.Generator().manual_seed(2))
    assert torch.equal(greedy, top1)
    assert torch.equal(greedy, cold)


def test_top_k_and_top_p_filter_the_distribution() -> None:
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    kept_k = torch.isfinite(lp.filter_logits(logits, lp.Sampling(top_k=2)))
    assert kept_k.tolist() == [[True, True, False, False]]
    # top_p 0.7: the smallest set whose mass reaches 0.7 is {0.5, 0.3}
    kept_p = torch.isfinite(lp.filter_logits(logits, lp.Sampling(top_p=0.7)))
    assert kept_p.tolist() == [[True, True, False, False]]
    # top_p 0.85: {0.5, 0.3} holds 0.8 < 0.85, so 0.15 joins
    assert torch.isfinite(lp.filter_logits(logits, lp.Sampling(top_p=0.85))).sum().item() == 3


def test_log_probs_are_taken_at_the_rollout_temperature(model: lp.TinyLM) -> None:
    tokens, valid = _prompts(8)
    resp = lp.generate(model, tokens, valid, 16, lp.Sampling(), torch.Generator().manual_seed(0))
    mask = lp.response_mask(resp)
    h = lp.response_logits_hidden(model, tokens, valid, resp, mask)
    logits = model.logits(h)
    for temperature in (0.5, 1.0, 2.0):
        logp, _ = lp.logprobs_entropy(model, tokens, valid, resp, mask, temperature)
        expected = torch.log_softmax(logits / temperature, dim=-1).gather(-1, resp[..., None]).squeeze(-1)
        torch.testing.assert_close(logp, expected)


def test_the_shipped_weights_start_in_the_published_entropy_band() -> None:
    torch.set_num_threads(1)
    first = lp.start_figures(lp.load_policy(), n_prompts=128, samples=2, seed=0)
    again = lp.start_figures(lp.load_policy(), n_prompts=128, samples=2, seed=0)
    assert first == again  # deterministic
    # published instruct/SFT starts: 0.31-0.49 nats/token (docs/sandbox.md); a smaller sample, a wider margin
    assert 0.25 < first.entropy < 0.55
    assert 0.0 < first.sampled_score < first.greedy_score < 1.0


def _names(records: list[tuple[int, dict[str, float]]]) -> set[str]:
    return {k for _, data in records for k in data if not k.startswith(("timing", "perf"))}


@pytest.mark.parametrize("algo", [GRPO, PPO], ids=["grpo", "ppo"])
def test_three_steps_give_finite_metrics_named_as_the_log_linear_ones(algo: list[str]) -> None:
    lm = sb.run([*TINY, *algo, "+sandbox.policy=lm"])
    loglinear = sb.run([*TINY, *algo, "+sandbox.policy=loglinear"])
    assert [step for step, _ in lm] == [step for step, _ in loglinear]
    assert _names(lm) == _names(loglinear)
    for _, data in lm:
        for key, value in data.items():
            assert math.isfinite(float(value)), key


def test_the_same_seed_gives_the_same_lm_run() -> None:
    first = sb.run([*TINY, *GRPO, "+sandbox.policy=lm", "+sandbox.seed=5"])
    second = sb.run([*TINY, *GRPO, "+sandbox.policy=lm", "+sandbox.seed=5"])
    assert first == second


def test_an_unknown_policy_fails_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert sb.main([*TINY, "+sandbox.policy=bogus"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["sweeps.sandbox: sandbox.policy='bogus': use lm (the language model) or loglinear"]
