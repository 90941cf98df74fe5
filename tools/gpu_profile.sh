#!/usr/bin/env bash
# What limits the tile matmul and attention on the GPU, by Nsight Compute:
# one profiled launch each of bench/profile_matmul.py (Oxide's matmul with
# fixed tiles, then cuBLAS's on the same operands) and
# bench/profile_attention.py, from the installed wheel. The full reports go
# to $OUT/ncu_*.txt; the headline rows are printed.
#   tools/gpu_profile.sh [M N K BM BN BK]   (carry .carry/build-gpu and dist)
set -u
cd "$(dirname "$0")/.."
source tools/gpu_setup.sh
site=$(wheel_site prof) || exit 1
root=$PWD
sections="--section SpeedOfLight --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis
  --section WarpStateStats --section LaunchStats --section Occupancy"
rows='Duration|SM Frequency|Compute \(SM\) Throughput|Memory Throughput|L2 Cache Throughput|DRAM Throughput|L1/TEX Hit|L2 Hit Rate|Registers Per|Shared Memory Config|Achieved Occupancy|Warp Cycles Per Issued|Issue Slots Busy|Executed Ipc A|Stall|^  [a-z_0-9]+.*\(|^    [a-zA-Z_0-9]+ *\('
cd "$site"
export PYTHONPATH="$site"
ncu --clock-control none --kernel-name 'regex:matmul|gemm|nvjet|sm90' --launch-skip 1 --launch-count 2 $sections \
  python3 "$root/bench/profile_matmul.py" "$@" > "$OUT/ncu_matmul.txt" 2>&1
echo "ncu matmul: $?"; grep -E "$rows" "$OUT/ncu_matmul.txt" | head -80
ncu --clock-control none --kernel-name 'regex:attention' --launch-skip 1 --launch-count 1 $sections \
  python3 "$root/bench/profile_attention.py" > "$OUT/ncu_attention.txt" 2>&1
echo "ncu attention: $?"; grep -E "$rows" "$OUT/ncu_attention.txt" | head -40
