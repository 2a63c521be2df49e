#!/usr/bin/env bash
# Lower layers never include higher ones. Layers, lowest first; a file may include its own layer
# and any layer listed before it. `run` (run directories, checkpoints, the recorded training
# settings) sits below both `train` and `eval`, so evaluation, probes and export load runs
# without depending on the trainer; `export` may include run/ and lower, never train/. `dist`
# (process groups, the --nproc launcher) sits below the layers that train and evaluate in parallel.
# `cuda` (the GPU building blocks: tensor-core products, asynchronous copies, the kernels' view of a
# tensor) is the lowest: the kernels of model/ build on it, and it knows nothing of any layer.
set -euo pipefail
cd "$(dirname "$0")/.."
layers=(cuda util data model run dist eval probes export train scenario cli)
status=0
for ((rank = 0; rank < ${#layers[@]}; ++rank)); do
  layer=${layers[rank]}
  dir=src/$layer
  [ "$layer" = probes ] && dir=probes
  allowed=" ${layers[*]:0:rank+1} "
  while IFS=: read -r file line include; do
    target=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$include")
    if [[ "$allowed" != *" $target "* ]]; then
      echo "layering: $file:$line ($layer) includes a higher layer: $include"
      status=1
    fi
  done < <(grep -rnE '^#include "[a-z_]+/' "$dir" || true)
done
exit $status
