#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# dtrain-bench over the NCCL backend: every collective, type and op, one rank per visible GPU
# (up to 8), with the correctness check. Exits 77 (skipped) where no GPU is visible.
set -uo pipefail
bench=${1:?path to dtrain-bench}
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ' || true)
if [[ ${gpus:-0} -eq 0 ]]; then
  echo "SKIP: no GPU visible (nvidia-smi lists none)"
  exit 77
fi
ranks=$((gpus < 8 ? gpus : 8))
# Open MPI 5 (the PyPI wheel tests/gpu/device_check.sh carries) moved out-of-band messaging to
# PRRTE, which finds no usable interface when told to use loopback alone.
oob=(--mca oob_tcp_if_include lo)
[[ $(mpirun --version 2>/dev/null | head -1) =~ \(Open\ MPI\)\ [5-9] ]] && oob=()
exec mpirun --allow-run-as-root --oversubscribe -np "$ranks" --mca btl self,vader,tcp \
  --mca btl_tcp_if_include lo "${oob[@]}" \
  "$bench" --backend nccl --op all -d all -o all -b 8 -e 16M -f 16 -n 5 -w 2 -c 1
