#!/usr/bin/env bash
# Profile a few steps of a training script under torchrun (gloo DDP, torch.profiler), then turn
# the traces into plans: profiler summary (HTA-style analyses) → profiler model (the timing
# model) → fuser plan (Cupcake's tensor fusion) and compressor plan (Espresso's per-tensor
# compression options).
#
# Usage: pipelines/profile-plan.sh OUTDIR SCRIPT [ARGS...]
#        e.g. pipelines/profile-plan.sh out/plan examples/deepfm.py --rows 200000
#        SCRIPT must take --sync ddp, --steps N and --profile DIR (as examples/*.py do).
# Env:   STEPS (8)             steps of the profiled run (a few are recorded; see examples/common.py)
#        CLUSTER               compressor plan's cluster JSON (default: OUTDIR/cluster.json written for
#                              NPROC CPU ranks at LINK_GBIT Gbit/s each)
#        LINK_GBIT (1)         that default cluster's per-rank bandwidth
#        ALGO (topk), RATIO (0.01)   the codec compressor plan plans for
#        NPROC, MASTER_PORT, BIN     as pipelines/train.sh
# Writes OUTDIR/traces/ (rank-<r>.json and .meta.json), summary.txt, model.tw, codec-bench.tw,
# fusion.tw + fusion.txt, compression.tw + compression.txt. Exit: the first failing step's code.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
[ $# -ge 2 ] || { sed -n '2,20p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
out=$1; shift
BIN=${BIN:-$here/bin}
STEPS=${STEPS:-8}
NPROC=${NPROC:-4}
LINK_GBIT=${LINK_GBIT:-1}
ALGO=${ALGO:-topk}
RATIO=${RATIO:-0.01}
mkdir -p "$out"
rm -rf "$out/traces"
say() { echo "profile-plan: $*" >&2; }

say "profiling $STEPS steps of $1 (gloo DDP, $NPROC ranks)"
"$here/pipelines/train.sh" "$@" --sync ddp --steps "$STEPS" --profile "$out/traces" >&2

say "summary → $out/summary.txt"
"$BIN/profiler" summary --format table --report "$out/summary.txt" "$out/traces" > /dev/null
say "timing model → $out/model.tw"
"$BIN/profiler" model --skip-first 1 "$out/traces" -o "$out/model.tw"

say "codec and copy timings on this machine → $out/codec-bench.tw"
"$BIN/compressor" bench --algos "$ALGO" --ratio "$RATIO" --sizes 64KiB,1MiB,4MiB,16MiB --iters 3 \
  --format frames > "$out/codec-bench.tw"

# DDP fuses by copying gradients into buckets: the fusion's per-group cost is a memory copy.
say "tensor fusion plan (Cupcake) → $out/fusion.tw"
fuse=("$BIN/fuser" plan --model "$out/model.tw" --comp-samples "$out/codec-bench.tw" --comp-algo memcpy)
"${fuse[@]}" --format frames > "$out/fusion.tw"
"${fuse[@]}" --format table > "$out/fusion.txt"

# The ranks train on CPUs: the codec runs on the training device (--cpu-job).
cluster=${CLUSTER:-$out/cluster.json}
if [ -z "${CLUSTER:-}" ]; then
  printf '{"nodes": %d, "gpus_per_node": 1, "inter_gbit_s": %s, "inter_alpha_us": 50, "comment": "%d CPU ranks, %s Gbit/s each (pipelines/profile-plan.sh)"}\n' \
    "$NPROC" "$LINK_GBIT" "$NPROC" "$LINK_GBIT" > "$cluster"
fi
say "compression plan (Espresso, $ALGO) → $out/compression.tw"
plan=("$BIN/compressor" plan --cpu-job --algo "$ALGO" --ratio "$RATIO" --model "$out/model.tw" --cluster "$cluster"
  --samples "$out/codec-bench.tw")
"${plan[@]}" --format frames > "$out/compression.tw"
"${plan[@]}" --format table > "$out/compression.txt"
