#!/usr/bin/env bash
# Record real ncu / nsys / torch.profiler / NVML / compute-sanitizer outputs on the H200, for
# replacing the *_synthetic.* samples here. Run from the repository root on the GPU machine,
# after `source .dsl/activate.sh && python3 -m pip install -q --no-deps --no-build-isolation -e .`:
#     bash tests/data/profilers/record_h200.sh "$OUT/rec"
# Everything goes to the folder given; nsys's raw .qdstrm (GBs) stays in /tmp and is deleted.
set -u
rec=${1:?usage: record_h200.sh OUTDIR}
mkdir -p "$rec"
py=python3
launcher=tests/profilers_tests/gpu_launcher.py
metrics=$($py -c "from cutegen.profilers._ncu_metrics import metrics_for; print(','.join(metrics_for(None)))")
{ date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader; ncu --version | tail -1;
  nvdisasm --version | tail -1; compute-sanitizer --version | tail -1; $py -c "import torch; print(torch.__version__)"; } \
  > "$rec/versions.txt" 2>&1
ncu --query-metrics --chip gh100 > "$rec/ncu_query_metrics_gh100.txt" 2>&1
ncu --clock-control none --target-processes all --kernel-name regex:kernel_cutlass --launch-count 1 \
  --metrics "$metrics" --export "$rec/ncu_add" --force-overwrite $py $launcher > "$rec/ncu_profile.log" 2>&1
ncu --import "$rec/ncu_add.ncu-rep" --csv --page raw --print-units base > "$rec/ncu_raw_h200.csv" 2>&1
ncu --import "$rec/ncu_add.ncu-rep" --csv --page details --print-units base > "$rec/ncu_details_h200.csv" 2>&1
ncu --clock-control none --kernel-name regex:kernel_cutlass --launch-count 1 --metrics "$metrics" --csv \
  $py $launcher > "$rec/ncu_direct_csv_h200.txt" 2>&1
CUTEGEN_LAUNCH_REPEAT=5 CUTEGEN_LAUNCH_WARMUP=1 CUTEGEN_LAUNCH_TORCH_PROFILE="$rec/torch_trace_h200.json" \
  $py $launcher > "$rec/torch_launch.log" 2>&1
CUTEGEN_LAUNCH_REPEAT=20000 CUTEGEN_LAUNCH_WARMUP=5 CUTEGEN_LAUNCH_ENERGY=1 \
  $py $launcher > "$rec/energy_launch.log" 2>&1
if [ -z "${SKIP_NSYS:-}" ]; then  # SKIP_NSYS=1: nsys's raw capture can fill the disk
NSYS=$(command -v nsys || echo /opt/nvidia/nsight-compute/2025.3.1/host/target-linux-x64/nsys)
tmp=$(mktemp -d)
CUTEGEN_LAUNCH_REPEAT=5 CUTEGEN_LAUNCH_WARMUP=1 timeout 300 "$NSYS" profile --trace=cuda --sample=none \
  --cpuctxsw=none --force-overwrite=true --output="$tmp/nsys_add" $py $launcher > "$rec/nsys_profile.log" 2>&1
ls -la "$tmp" >> "$rec/nsys_profile.log"
if [ -f "$tmp/nsys_add.nsys-rep" ]; then
  "$NSYS" stats --report cuda_gpu_trace,cuda_api_sum --format csv --force-export=true \
    --output="$rec/nsys_add" "$tmp/nsys_add.nsys-rep" >> "$rec/nsys_profile.log" 2>&1
fi
rm -rf "$tmp"
fi
compute-sanitizer --tool memcheck $py $launcher --n 1048576 > "$rec/sanitizer_memcheck.log" 2>&1
compute-sanitizer --tool racecheck $py $launcher --n 1048576 > "$rec/sanitizer_racecheck.log" 2>&1
ls -la "$rec"
