#!/usr/bin/env bash
# Regenerates docs/config.md from the one declaration of config keys (detseg/config/config.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
{
  cat <<'HEAD'
# Pipeline config reference

A config is YAML with six sections. Keys left out take the default. Paths in `*_input` and
`train.fine_tune.checkpoint` are relative to the config file (a `--set` path is relative to the
working directory). Unknown keys, wrong types and out-of-range values are errors naming the file,
line and key. `--set a.b.c=value` overrides any key (value in YAML syntax: `--set
model.aspect_ratios=[1.0,2.0]`). This table is generated: `detseg info --config-keys`.

HEAD
  ./build/detseg info --config-keys
} > docs/config.md
echo "wrote docs/config.md"
