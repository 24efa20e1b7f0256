#!/usr/bin/env bash
# Regenerates docs/config.md from the one declaration of config keys (detseg/config/config.cpp).
set -euo pipefail
cd "$(dirname "$0")/.."
{
  cat <<'HEAD'
# Pipeline config reference

A config is YAML with six sections. Keys left out take the default. Paths in `*_input`,
`train.fine_tune.checkpoint` and `model.pretrained` (unless it is a URL) are relative to the config
file (a `--set` path is relative to the working directory). Unknown keys, wrong types and
out-of-range values are errors naming the file, line and key. `--set a.b.c=value` overrides any
key (value in YAML syntax: `--set model.aspect_ratios=[1.0,2.0]`). This table is generated:
`detseg info --config-keys`.
A key given with no value (`batch_size:`), a repeated key and an empty or over-long list are errors
too; remove a key to keep its default. An error a `--set` value causes names that `--set`
(`--set train.batch_size=four: train.batch_size: expected an integer ...`), also when it breaks a
rule between keys. Every YAML detseg reads (a config, its `_base_` files, a `--set` value, a YOLO
data.yaml) is refused in one line when it is over 1 MiB (checked before reading) or when its aliases
expand to more than 1,000,000 nodes (an alias bomb); a config is a few kB.

## Inheriting: `_base_`

`_base_: path` (or a list of paths, relative to the file that names them) makes a config start from
other configs, as mmdetection's `_base_` does: the bases are merged in order, each over the one
before, then the file itself over them, key by key (sections merge, any other value, lists
included, replaces). A base may have its own `_base_`; a cycle is an error. Errors name the file and
line a key came from, and a relative path is anchored at the folder of the file that wrote it.
`detseg info --config C --resolved [--set ...]` prints the merged result with every default filled in.

```yaml
# configs/my_retinanet.yaml
_base_: demo/retinanet_r18_bccd.yaml
model: {image_size: 320}      # everything else as in the base
train: {num_steps: 500}
```

HEAD
  ./build/detseg info --config-keys
} > docs/config.md
echo "wrote docs/config.md"
