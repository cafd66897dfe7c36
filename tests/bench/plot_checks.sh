#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
# Renders the charts of dtrain-plot, dtrain-bench --plot or tests/trainer/scaling_figures.sh
# --plot with rsvg-convert and checks the pictures (check_png.py): the size the SVG declares,
# not blank, the first curve's colour present.
#
#   plot_checks.sh {dtrain-plot|dtrain-bench|scaling}
#
# Environment: DTRAIN_PLOT, DTRAIN_BENCH, DTRAIN_TRAINER (paths, set by CTest). dtrain-bench
# runs on two loopback ranks under mpirun; scaling_figures.sh runs with an srun stand-in that
# starts the same ranks under mpirun (no Slurm).
set -euo pipefail

usage() { sed -n '3,11s/^# \{0,1\}//p' "$0"; }
[[ ${1:-} == -h || ${1:-} == --help ]] && { usage; exit 0; }
(($# == 1)) || { usage >&2; exit 2; }
case_name=$1
plot=${DTRAIN_PLOT:?DTRAIN_PLOT must name dtrain-plot}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)
nccl_tests=$here/fixtures/nccl_tests_all_reduce.txt
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrain-plot-checks.XXXXXX")
trap 'rm -rf -- "$work"' EXIT

fail() {
  echo "FAIL ($case_name): $*" >&2
  exit 1
}
command -v rsvg-convert >/dev/null ||
  fail "rsvg-convert is not installed; apt-get install librsvg2-bin"

# render SVG: rasterises it and checks the picture against the size the SVG declares.
render() {
  local svg=$1 width height
  width=$(grep -o -m1 '<svg [^>]*' "$svg" | sed -n 's/.* width="\([0-9]*\)\(\.0\)\{0,1\}".*/\1/p')
  height=$(grep -o -m1 '<svg [^>]*' "$svg" | sed -n 's/.* height="\([0-9]*\)\(\.0\)\{0,1\}".*/\1/p')
  [[ -n $width && -n $height ]] || fail "$svg declares no width and height"
  rsvg-convert "$svg" -o "${svg%.svg}.png" || fail "rsvg-convert could not render $svg"
  python3 "$here/check_png.py" "${svg%.svg}.png" "$width" "$height" 1f77b4 ||
    fail "the picture of $svg is wrong"
}

contains() {  # contains FILE TEXT
  grep -qF -- "$2" "$1" || fail "$1 does not contain: $2"
}

case $case_name in
  dtrain-plot)
    "$plot" --help | grep -q -- "--output" || fail "dtrain-plot --help says nothing of --output"
    # Characters XML must escape, in the title and a label: rsvg-convert refuses a malformed SVG.
    cat >"$work/scaling.json" <<'EOF'
{"tool": "dtrain-plot", "title": "samples/s <8 ranks> & \"naive\"", "x_label": "ranks",
 "y_label": "samples/s", "x_ticks": "number",
 "series": [{"label": "ddp", "points": [[1, 800], [2, 1500], [4, 2700], [8, 4100]]},
            {"label": "ideal (ddp-1 × ranks) <&>", "group": "ddp", "dashed": true,
             "points": [[1, 800], [2, 1600], [4, 3200], [8, 6400]]},
            {"label": "naive", "points": [[8, 2900]]}]}
EOF
    "$plot" -o "$work/scaling.svg" "$work/scaling.json" || fail "dtrain-plot exited with $?"
    contains "$work/scaling.svg" "ideal (ddp-1 × ranks) &lt;&amp;&gt;"
    render "$work/scaling.svg"
    "$plot" -o "$work/nccl.svg" --title "nccl-tests" "$nccl_tests" || fail "dtrain-plot exited with $?"
    contains "$work/nccl.svg" "nccl_tests_all_reduce.txt: in-place"
    render "$work/nccl.svg"
    # Different axes on one chart are refused, and nothing is written.
    rc=0
    "$plot" -o "$work/mixed.svg" "$nccl_tests" "$work/scaling.json" 2>"$work/err" || rc=$?
    ((rc == 2)) || fail "mixed axes: exit $rc, expected 2"
    contains "$work/err" "dtrain: dtrain-plot: $work/scaling.json plots 'samples/s' against 'ranks'"
    [[ ! -e $work/mixed.svg ]] || fail "a refused chart was written"
    ;;
  dtrain-bench)
    export OMPI_MCA_mpi_yield_when_idle=1
    bench=${DTRAIN_BENCH:?DTRAIN_BENCH must name dtrain-bench}
    # shellcheck disable=SC2054 # self,vader,tcp is one argument, Open MPI's list of transports
    mpi=(mpirun --allow-run-as-root --oversubscribe --mca btl self,vader,tcp
      --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -np 2)
    timeout 120 "${mpi[@]}" "$bench" -b 1K -e 1M -f 4 -n 2 -w 1 --json "$work/run.json" \
      --plot "$work/run.svg" --compare "$nccl_tests" >"$work/out" 2>&1 ||
      { cat "$work/out" >&2; fail "dtrain-bench exited with $?"; }
    for label in "all_reduce out-of-place" "all_reduce in-place" \
      "nccl_tests_all_reduce.txt: out-of-place" "dtrain-bench busbw, 2 ranks, mpi backend"; do
      contains "$work/run.svg" ">$label<"
    done
    render "$work/run.svg"
    # The same run's JSON read back by dtrain-plot: the curves of the bench's own chart.
    "$plot" -o "$work/again.svg" "$work/run.json" || fail "dtrain-plot exited with $?"
    contains "$work/again.svg" ">run.json: all_reduce in-place<"
    render "$work/again.svg"
    # A --compare file that is no result: one line naming it, before MPI starts, no chart.
    printf 'hello\n' >"$work/notes.txt"
    rc=0
    "$bench" --plot "$work/bad.svg" --compare "$work/notes.txt" >"$work/out" 2>"$work/err" || rc=$?
    ((rc == 2)) || fail "a bad --compare file: exit $rc, expected 2"
    [[ $(wc -l <"$work/err") == 1 ]] || fail "expected one error line, got: $(cat "$work/err")"
    contains "$work/err" "dtrain: dtrain-bench: $work/notes.txt is neither JSON nor nccl-tests"
    [[ ! -e $work/bad.svg ]] || fail "a chart was written after a bad --compare file"
    rc=0
    "$bench" --compare "$nccl_tests" >"$work/out" 2>"$work/err" || rc=$?
    ((rc == 2)) || fail "--compare without --plot: exit $rc, expected 2"
    contains "$work/err" "--compare requires --plot"
    ;;
  scaling)
    trainer=${DTRAIN_TRAINER:?DTRAIN_TRAINER must name dtrain-trainer}
    mkdir "$work/bin"
    # srun's options dropped, -n kept: the script's runs on loopback ranks.
    cat >"$work/bin/srun" <<'EOF'
#!/usr/bin/env bash
set -euo pipefail
ranks=1
while [[ $1 == -* ]]; do
  [[ $1 == -n* ]] && ranks=${1#-n}
  shift
done
exec mpirun --allow-run-as-root --oversubscribe --mca btl self,vader,tcp \
  --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo -np "$ranks" "$@"
EOF
    chmod +x "$work/bin/srun"
    PATH="$work/bin:$PATH" DTRAIN_CLUSTER_DIR="$work" timeout 170 \
      "$here/../trainer/scaling_figures.sh" --trainer "$trainer" --repeats 1 --steps 2 \
      --plot "$work/scaling.svg" >"$work/out" 2>&1 ||
      { cat "$work/out" >&2; fail "scaling_figures.sh exited with $?"; }
    contains "$work/out" "# chart: $work/scaling.svg"
    contains "$work/out" "DDP/dp throughput at 8 ranks:"
    for label in ddp naive dp "ddp ideal (1-rank median x ranks)"; do
      contains "$work/scaling.svg" ">$label<"
    done
    render "$work/scaling.svg"
    rc=0
    "$here/../trainer/scaling_figures.sh" --trainer "$trainer" --plot /nonexistent/s.svg \
      >"$work/out" 2>&1 || rc=$?
    ((rc == 1)) || fail "an unwritable --plot directory: exit $rc, expected 1"
    contains "$work/out" "dtrain: --plot /nonexistent/s.svg: cannot write to the directory /nonexistent"
    ;;
  *) fail "unknown case '$case_name'; use dtrain-plot, dtrain-bench or scaling" ;;
esac
echo "ok ($case_name)"
