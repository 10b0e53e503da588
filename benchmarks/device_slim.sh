#!/usr/bin/env bash
# Development aid for the 64 MiB that travel to the GPU machine (the CuTe DSL pack takes
# ~62 MiB of it): `slim` moves tracked files a GPU run never reads (CPU-only tests and their
# data, docs) out of the working tree, `restore` puts them back. Never commit while slim.
#   bash benchmarks/device_slim.sh slim|restore
set -euo pipefail
cd "$(dirname "$0")/.."
stash="${CUTEGEN_SLIM_STASH:-/tmp/cutegen-slim-stash}"
paths=(tests/llm_tests tests/report_tests tests/search_tests tests/plugins_tests
       tests/data/profilers tests/data/prompts tests/data/sass tests/data/search
       docs BENCHMARKS.md)
case "${1:-}" in
  slim)
    mkdir -p "$stash"
    for p in "${paths[@]}"; do
      [ -e "$p" ] || continue
      mkdir -p "$stash/$(dirname "$p")"
      mv "$p" "$stash/$p"
    done
    git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 ;;
  restore)
    for p in "${paths[@]}"; do
      [ -e "$stash/$p" ] || continue
      mkdir -p "$(dirname "$p")"
      rm -rf "$p"
      mv "$stash/$p" "$p"
    done
    git status --short | head -5 ;;
  *) echo "usage: $0 slim|restore" >&2; exit 2 ;;
esac
