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
        ("A100", 81920),
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
