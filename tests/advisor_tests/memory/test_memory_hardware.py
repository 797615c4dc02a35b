"""Hardware catalog lookups."""

from __future__ import annotations

import pytest

from advisor import ConfigError
from advisor.memory import gpu_catalog, resolve_gpu


@pytest.mark.parametrize(
    ("name", "mib"),
    [
        ("H100", 81559),
        ("h100-80gb", 81559),
        ("NVIDIA H100 80GB HBM3", 81559),
        ("H800", 81559),
        ("H200", 143771),
        ("H20", 97871),
        ("A100-40GB", 40960),
        ("MI300X", 196608),  # rocm-smi "VRAM Total Memory (B): 206158430208" / 2**20
        ("AMD Instinct MI300X", 196608),
        ("B200", 183359),
        ("A800", 81920),
        ("L40S", 46068),
        ("RTX 4090", 24564),
        ("rtx_3090", 24576),
        ("A6000", 49140),
        ("910B", 65536),
        ("Ascend 910B", 65536),
    ],
)
def test_names_resolve_to_the_reported_total_in_gib(name, mib):
    assert resolve_gpu(name).memory_gib == pytest.approx(mib / 1024)


def test_memory_override_keeps_the_name():
    gpu = resolve_gpu("H100", memory_gib=70)
    assert (gpu.name, gpu.memory_gib) == ("H100-80GB", 70)


def test_memory_alone_is_enough():
    assert resolve_gpu(memory_gib=48).memory_gib == 48


def test_no_gpu_is_a_config_error():
    with pytest.raises(ConfigError, match="no GPU given; pass --gpu NAME"):
        resolve_gpu()


def test_unknown_gpu_suggests_the_closest_name():
    with pytest.raises(ConfigError, match="did you mean 'H100-80GB'"):
        resolve_gpu("H100-80G-SXM9")


def test_non_positive_memory_is_rejected():
    with pytest.raises(ConfigError, match="must be greater than 0 but got -1"):
        resolve_gpu("H100", memory_gib=-1)


def test_every_gpu_names_a_source():
    for gpu in gpu_catalog():
        assert gpu.source.startswith("https://"), gpu.name


@pytest.mark.parametrize(("name", "candidates"), [("A100", "A100-80GB or A100-40GB"), ("nvidia a100", "A100-80GB"),
                                                  ("MI300", "MI300X")])
def test_a_name_of_more_than_one_card_is_refused_with_the_candidates(name, candidates):
    with pytest.raises(ConfigError, match="names more than one card") as err:
        resolve_gpu(name)
    assert candidates in err.value.message and "--gpu-memory-gib" in (err.value.suggestion or "")


def test_an_unknown_gpu_points_to_gpu_memory_gib_and_the_list():
    with pytest.raises(ConfigError) as err:
        resolve_gpu("MI999")
    assert "--gpu-memory-gib N" in err.value.suggestion and "--gpu list" in err.value.suggestion


def test_amd_instinct_gpus_verl_documents_are_known():
    # verl README.md:194 and docs/amd_tutorial/amd_quick_start.rst:22-23 name MI300X, MI325X, MI350X, MI355X
    assert {resolve_gpu(n).vendor for n in ("MI250X", "MI300X", "MI325X", "MI350X", "MI355X")} == {"amd"}


def _cli(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "advisor", "check", *args], capture_output=True, text=True)


def test_check_gpu_list_prints_the_catalog_without_a_config():
    run = _cli("--gpu", "list")
    assert run.returncode == 0, run.stderr
    for gpu in gpu_catalog():
        assert gpu.name in run.stdout


def test_check_with_mi300x_estimates_memory_on_its_192_gib():
    script = "tests/fixtures/verl_main/examples/ppo_trainer/run_qwen3_8b_fsdp.sh"
    run = _cli(script, "--gpu", "MI300X")
    assert run.returncode == 0, run.stderr
    assert "on MI300X (192 GiB)" in run.stdout


def test_check_with_an_ambiguous_gpu_is_one_line_and_exit_2():
    run = _cli("tests/fixtures/verl_main/examples/ppo_trainer/run_qwen3_8b_fsdp.sh", "--gpu", "A100")
    assert run.returncode == 2 and run.stderr.count("\n") == 1
    assert "A100-80GB or A100-40GB" in run.stderr and not run.stdout
