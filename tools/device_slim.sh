#!/usr/bin/env bash
# Development aid for the 64 MiB that travel to the GPU machine (the CuTe DSL pack takes
# ~62 MiB of them, and every file counts at least one 4 KiB block):
#   slim [PATH...]  moves every tracked file a GPU run does not read out of the working tree,
#                   keeping the package, the bundled benchmarks, the development tools
#                   (tools/), the evaluator's GPU tests and any PATH given;
#   pack [PATH...]  puts the same files into one archive, .device_tree.tgz (git-ignored),
#                   and moves every other tracked file but .gitignore and this script out:
#                   name the archive in
#                   `carry` beside .dsl and start the device command with
#                   `tar xzf .device_tree.tgz &&` (hundreds of small files cost a block each;
#                   the archive costs a few hundred KiB);
#   restore         puts everything back (and removes the archive).
# Never commit while slim or packed.
#   bash tools/device_slim.sh slim [tests/families_tests ...] | pack [...] | restore
set -euo pipefail
cd "$(dirname "$0")/.."
stash="${CUTEGEN_SLIM_STASH:-/tmp/cutegen-slim-stash}"
keep=(pyproject.toml README.md .gitignore cutegen codegen search profilers plugins/__init__.py
      plugins/_manager.py plugins/hookspecs.py plugins/testing.py benchmarks tools tools
      tests/conftest.py tests/codegen_tests tests/data/tasks)
case "${1:-}" in
  slim)
    shift
    keep+=("$@")
    [ ! -e "$stash/.slim" ] || { echo "already slim: restore first" >&2; exit 1; }
    mkdir -p "$stash"
    touch "$stash/.slim"
    git ls-files | while read -r f; do
      k=0
      for p in "${keep[@]}"; do
        case "$f" in "$p"|"$p"/*) k=1; break ;; esac
      done
      if [ $k = 0 ] && [ -e "$f" ]; then
        mkdir -p "$stash/$(dirname "$f")"
        mv "$f" "$stash/$f"
      fi
    done
    echo "travels: $(git ls-files -co --exclude-standard -z | du -c --files0-from=- 2>/dev/null | tail -1 | cut -f1) KiB (blocks) besides what is carried" ;;
  pack)
    shift
    keep+=("$@")
    [ ! -e "$stash/.slim" ] || { echo "already slim: restore first" >&2; exit 1; }
    git ls-files -z -- "${keep[@]}" | tar --null -T - -czf .device_tree.tgz
    mkdir -p "$stash"
    touch "$stash/.slim"
    git ls-files | while read -r f; do
      # .gitignore keeps runs/ and the like from travelling; this script restores
      if [ "$f" != .gitignore ] && [ "$f" != tools/device_slim.sh ] && [ -e "$f" ]; then
        mkdir -p "$stash/$(dirname "$f")"
        mv "$f" "$stash/$f"
      fi
    done
    echo "travels: .device_tree.tgz, $(du -k .device_tree.tgz | cut -f1) KiB (carry it with .dsl;"
    echo "the command starts with: tar xzf .device_tree.tgz &&)" ;;
  restore)
    [ -e "$stash/.slim" ] || { echo "not slim" >&2; exit 0; }
    (cd "$stash" && find . -type f ! -name .slim) | while read -r f; do
      mkdir -p "$(dirname "$f")"
      mv "$stash/$f" "$f"
    done
    rm -rf "$stash" .device_tree.tgz
    git status --short | head -5 ;;
  *) echo "usage: $0 slim [PATH...] | pack [PATH...] | restore" >&2; exit 2 ;;
esac
