#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Regenerates tests/fuzz/corpus/fuzz_checkpoint from real dtrain-trainer runs (one rank,
# tiny models, so the seeds stay under 1 KiB). Rerun only when the checkpoint format changes.
#   tests/fuzz/make_checkpoint_seeds.sh BUILD_DIR/src/trainer/dtrain-trainer
set -eu
trainer=${1:?usage: make_checkpoint_seeds.sh PATH/TO/dtrain-trainer}
out=$(cd "$(dirname "$0")" && pwd)/corpus/fuzz_checkpoint
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
# A singleton MPI run needs no launcher; Open MPI refuses root without these.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl=self

run() {
  name=$1
  shift
  "$trainer" --samples 64 --eval-samples 16 --batch-size 8 "$@" --save-params "$work/$name.dtc" \
    >"$work/$name.log" 2>&1 || { cat "$work/$name.log" >&2; exit 1; }
  cp "$work/$name.dtc" "$out/$name.dtc"
}
run adam_mlp --input-dim 4 --hidden 6 --classes 3 --max-steps 3 --optimizer adam
run sgd_momentum --input-dim 2 --hidden 3 --classes 2 --max-steps 1 --optimizer sgd
run sgd_softmax_regression --input-dim 3 --hidden "" --classes 2 --max-steps 2 --optimizer sgd \
  --momentum 0
# A checkpoint written mid-run by the store (ckpt-<step>.dtc), not only the final state.
"$trainer" --samples 64 --eval-samples 16 --batch-size 8 --input-dim 2 --hidden 2 --classes 2 \
  --max-steps 4 --checkpoint-every 2 --checkpoint-dir "$work/store" >"$work/store.log" 2>&1 ||
  { cat "$work/store.log" >&2; exit 1; }
cp "$work/store/ckpt-2.dtc" "$out/store_step2.dtc"
ls -l "$out"
