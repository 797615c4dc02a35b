#!/usr/bin/env bash
# Installs verl releases WITHOUT their GPU dependencies, for the differential tests and bench of
# `advisor check` against verl's own config validation (tests/oracle_tests, bench/bench_verl_oracle.py).
# Each release goes into its own directory, DIR/verl-<version>, with `pip install --no-deps --target`: the
# release wheel plus the few pure-Python packages verl's import chain of its config path needs, pinned as
# that release's METADATA pins them. torch (CPU), ray, omegaconf, hydra, numpy, pydantic come from the
# project's test environment. Nothing of vLLM, SGLang, flash-attn, megatron is installed: the config path
# does not import them. Usage: scripts/install_verl_oracle.sh [DIR] [VERSION...]  (DIR default: .oracle)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR="${1:-.oracle}"; shift || true
VERSIONS=("$@"); [ ${#VERSIONS[@]} -gt 0 ] || VERSIONS=(0.4.1 0.7.1 0.9.1)
PY="${PYTHON:-python}"
COMMON=(cloudpickle pyvers regex safetensors codetiming dill orjson httpx httpcore h11 anyio
        sniffio idna certifi typer-slim hf-xet filelock fsspec pyyaml tqdm torchdata datasets multiprocess xxhash
        requests urllib3 charset-normalizer)
pins() {
    case "$1" in
        0.9.*) echo "tensordict>=0.8.0,<=0.10.0,!=0.9.0 transformers>=5.5.3,<5.11,!=5.6.0 tokenizers>=0.22.0,<=0.23.0 huggingface_hub>=1.5.0,<2.0" ;;
        0.7.*|0.8.*) echo "tensordict>=0.8.0,<=0.10.0,!=0.9.0 transformers>=4.56,<5 tokenizers>=0.22.0,<=0.23.0 huggingface_hub>=0.34.0,<1.0" ;;
        0.4.*|0.5.*|0.6.*) echo "tensordict<=0.6.2 transformers>=4.51,<4.54 tokenizers>=0.21,<0.22 huggingface_hub>=0.30.0,<1.0 setuptools<80" ;;
        *) echo "unsupported verl version $1" >&2; return 2 ;;
    esac
}
for v in "${VERSIONS[@]}"; do
    target="$DIR/verl-$v"
    if [ -f "$target/.complete" ]; then continue; fi
    rm -rf "$target"
    # shellcheck disable=SC2046
    "$PY" -m pip install -q --disable-pip-version-check --no-deps --target "$target" "verl==$v" $(pins "$v") "${COMMON[@]}"
    touch "$target/.complete"
done
