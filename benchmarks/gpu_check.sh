#!/usr/bin/env bash
# The one-call GPU check: GPU tests, kernels and one training run, each measured on the
# GPU and set against the time model's prediction on the detected card's profile.
#
#   bash benchmarks/gpu_check.sh [OUT_DIR]        (default: results/gpu_check)
#
# Budget: at most 4 minutes on one GPU of any kind (each stage has its own timeout).
# Every stage appends to OUT_DIR/gpu_check.md as it finishes, so a cut-off run still
# reports. On a machine without a GPU it stops at once (well within 60 s), saying so,
# with exit status 3. Needs the package importable (an install, or PYTHONPATH=.);
# pymetis, jsonschema and snakemake are not needed by the kernel and training stages.
# Where a folder .whl/ holds wheels (a GPU machine with no package index), they are
# installed into /tmp/gpu_check_site first. docs/results.md, 'GPU runs', holds the tables.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${1:-results/gpu_check}
py=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD"

if ! timeout 50 "$py" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" \
        2>/dev/null; then
    echo "gpu_check: no CUDA GPU here (torch.cuda.is_available() is not True); nothing to check"
    exit 3
fi
if compgen -G ".whl/*.whl" >/dev/null; then
    "$py" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gpu_check_site .whl/*.whl \
        && export PYTHONPATH="$PYTHONPATH:/tmp/gpu_check_site"
fi
mkdir -p "$out"
md="$out/gpu_check.md"
start=$(date +%s)
{
    echo "# GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
        | sed 's/^/device: /'
    echo
} >"$md"

# stage 1: the GPU tests (every case marked needs_cuda runs here)
# four workers where pytest-xdist is installed; without it, pyproject's `-n 2` is dropped
workers=(-o "addopts=")
"$py" -c "import xdist" 2>/dev/null && workers=(-n 4)
timeout 150 "$py" -m pytest -q -p no:cacheprovider "${workers[@]}" \
    tests/test_gpu_path.py tests/test_gpu_methods.py >"$out/gpu_tests.log" 2>&1
rc=$?
{
    echo "## GPU tests (exit $rc$([ $rc = 124 ] && echo ', cut off at 150 s'))"
    echo
    echo '```'
    grep -E "passed|failed|error|skipped" "$out/gpu_tests.log" | tail -n 3
    grep -E "^(FAILED|ERROR) " "$out/gpu_tests.log" | head -n 30
    echo '```'
    echo
    echo "## Kernels and training, measured against the model"
    echo
} >>"$md"
echo "gpu_check: GPU tests exit $rc ($(( $(date +%s) - start )) s)"

# stages 2-3: kernels, then one training run (appends rows as it goes)
timeout 150 "$py" benchmarks/gpu_check.py --out "$out" --stage all --models "${GPU_CHECK_MODELS:-gcn}"
rc2=$?
[ $rc2 = 124 ] && echo "| cut off at 150 s | | | | |" >>"$md"
echo "gpu_check: done in $(( $(date +%s) - start )) s; table: $md"
cat "$md"
[ $rc = 0 ] && [ $rc2 = 0 ]
