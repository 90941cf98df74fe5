#!/usr/bin/env bash
# The command-line tool (tools/oxide.c) as users run it: stages, --generic,
# and its errors (message and exit status).
#   tests/cli_test.sh OXIDE_BINARY EXAMPLES_DIR
set -u
oxide=$1 ex=$2
fail=0
check() { # what, condition (a command)
  if ! eval "$2"; then echo "FAIL: $1"; fail=1; fi
}
out=$("$oxide" compile "$ex/tile_matmul.oxk" --contiguous --generic BM=128 --generic BN=256 --generic BK=64 2>&1)
check "generics bound: the wgmma pipeline" '[[ $out == *"wgmma.mma_async.sync.aligned.m64n256k16"* && $out == *"cp.async.bulk.tensor"* ]]'
out=$("$oxide" compile "$ex/tile_matmul.oxk" --contiguous 2>&1)
check "placeholder generics: no wgmma" '[[ $out != *"wgmma"* && $out == *".entry matmul"* ]]'
out=$("$oxide" compile "$ex/tile_matmul.oxk" --generic BQ=1 2>&1); rc=$?
check "unknown generic" '[[ $rc != 0 && $out == *"no kernel of this source has a generic '"'"'BQ'"'"'"* ]]'
out=$("$oxide" compile "$ex/tile_matmul.oxk" --generic BM=100 2>&1); rc=$?
check "a generic that is not a power of two" '[[ $rc != 0 && $out == *"tile_matmul.oxk:10:"*"BM = 100"* ]]'
for bad in BM BM= =4 BM=0 BM=-3 BM=4x; do
  out=$("$oxide" compile "$ex/tile_matmul.oxk" --generic "$bad" 2>&1); rc=$?
  check "malformed --generic $bad" '[[ $rc == 2 && $out == *"--generic takes NAME=VALUE with a positive VALUE or a dtype"* ]]'
done
gen=$(mktemp --suffix=.oxk)
printf '#[kernel]\nfn k<T: Float>(x: &[T], y: DisjointSlice<T>) {\n    let i = thread::index_1d();\n    if let Some(o) = y.get_mut(i) { *o = x[i] + x[i]; }\n}\n' >"$gen"
out=$("$oxide" compile "$gen" --emit ir --generic T=bf16 2>&1)
check "a type generic bound by --generic T=bf16" '[[ $out == *"kernel k(%x: &[] bf16, %y: DisjointSlice bf16)"* ]]'
out=$("$oxide" compile "$gen" --emit ir 2>&1)
check "a type generic at its placeholder, f32" '[[ $out == *"kernel k(%x: &[] f32"* ]]'
out=$("$oxide" compile "$gen" --emit ir --generic T=i32 2>&1); rc=$?
check "a type generic outside its bound" '[[ $rc != 0 && $out == *"type generic '"'"'T: Float'"'"' cannot be i32"* ]]'
rm -f "$gen"
out=$("$oxide" compile "$ex/vecadd.oxk" --emit ir 2>&1)
check "IR of a SIMT kernel" '[[ $out == *"kernel vecadd("* ]]'
out=$("$oxide" compile "$ex/vecadd.oxk" --emit sass 2>&1); rc=$?
check "unknown stage" '[[ $rc != 0 && $out == *"--emit takes ast, ir, llvm, ptx or asm"* ]]'
[ $fail = 0 ] && echo "cli_test: PASSED"
exit $fail
