#!/usr/bin/env bash
# Development aid: the wheels an LLM-path run needs on the GPU machine (no registry there,
# Python 3.12, x86_64), which do not fit beside the CuTe DSL pack in one call (~6 MB):
#
#   bash tools/device_wheels.sh            # here: downloads openai, pydantic and their
#                                          # dependencies into .whl/ (git-ignored)
#
# Then two device calls back to back (a warm machine keeps /tmp for ~30 s):
#   1. carry [".whl"]:  python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/*.whl
#   2. carry [".dsl", ".device_tree.tgz"]:  tar xzf .device_tree.tgz && source .dsl/activate.sh
#      && python3 -m pip install -q --no-deps --no-build-isolation -e .
#      && bash tools/gpu_checks.sh $OUT llm-uncovered llm-demo
# The versions are those installed here (the ones the CPU tests ran against).
set -euo pipefail
cd "$(dirname "$0")/.."
pins=()
for p in openai pydantic; do
  v=$(python3 -c "import importlib.metadata as m; print(m.version('$p'))" 2>/dev/null || true)
  pins+=("$p${v:+==$v}")
done
rm -rf .whl
python3 -m pip download -q --only-binary=:all: --python-version 3.12 --implementation cp \
  --abi cp312 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform any \
  -d .whl "${pins[@]}"
echo "$(ls .whl | wc -l) wheels, $(du -sh .whl | cut -f1) in .whl/ (${pins[*]})"
