/* front_test.c - the front end (lexer, parser, sema) through the public API:
 * ox_emit(..., OX_EMIT_IR, ...) on kernel text, checking the status, each
 * diagnostic's "t.oxk:LINE:COL" and message, the number of errors, and for
 * good inputs lines of the printed IR.
 *
 * Each case's expectations are strings "LINE:COL text": some diagnostic line
 * must start with "t.oxk:LINE:COL: " and contain `text` ("error: ..." or
 * "note: ..."). For a good input they are IR patterns instead: "a|b" needs an
 * IR line containing both a and b; a leading '!' needs no such line. */
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include "match.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oxide/oxide.h"

#define MAXX 12

typedef struct fcase {
  const char *name;
  const char *src;
  ox_status status;
  int nerrors;            /* exact count of "error:" lines (compile errors) */
  const char *expect[MAXX];
} fcase;

/* Kernel bodies: the body's first line is line 4, so "4:9" is column 9 of
 * the body's first line. */
#define K(body)                                                                \
  "#[kernel]\n"                                                                \
  "fn k(a: &[f32], b: &[i32], n: u32, h: &[Atomic<u32>], c: DisjointSlice<f32>) {\n" \
  "let i = thread::index_1d();\n" body "\n}\n"

#define OK(name, src, ...) {name, src, OX_OK, 0, {__VA_ARGS__}}
#define BAD(name, n, src, ...) {name, src, OX_ERR_COMPILE, n, {__VA_ARGS__}}

static const char vecadd_contract[] =
    "// vecadd\n"
    "#[kernel]\n"
    "#[launch_contract(block = (256, 1, 1), requires = (a.len() >= c.len(), b.len() >= c.len()))]\n"
    "fn vecadd(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {\n"
    "    let i = thread::index_1d();\n"
    "    if let Some(out) = c.get_mut(i) {\n"
    "        *out = a[i] + b[i];\n"
    "    }\n"
    "}\n";

static const char vecadd_plain[] =
    "// vecadd\n"
    "#[kernel]\n"
    "#[launch_contract(block = (256, 1, 1), requires = (b.len() >= c.len()))]\n"
    "fn vecadd(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {\n"
    "    let i = thread::index_1d();\n"
    "    if let Some(out) = c.get_mut(i) {\n"
    "        *out = a[i] + b[i];\n"
    "    }\n"
    "}\n";

/* Every construct of the language in one source. */
static const char all_constructs[] =
    "use oxide::*;\n"
    "fn sq(x: f32) -> f32 { x * x }\n"
    "fn sum3(s: &[f32], base: usize) -> f32 {\n"
    "    let mut acc = 0.0f32;\n"
    "    for j in 0..3usize {\n"
    "        if base + j < s.len() { acc += s[base + j]; }\n"
    "    }\n"
    "    acc\n"
    "}\n"
    "fn early(x: i32) -> i32 {\n"
    "    if x < 0 { return -x; }\n"
    "    x\n"
    "}\n"
    "fn pair(t: SharedArray<f32, 64>) -> f32 { t[0] + t[1] }\n"
    "fn nothing(x: u32) { let y = x; }\n"
    "#[kernel]\n"
    "#[launch_contract(block = (64, 1, 1), requires = (a.len() >= c.len(), n >= 1))]\n"
    "fn all(a: &[f32], b: &[i32], n: u32, hist: &[Atomic<u32>], fl: &[Atomic<f32>],\n"
    "       c: DisjointSlice<f32>) {\n"
    "    let i = thread::index_1d();\n"
    "    let x: f32 = 1.5;\n"
    "    let mut y = 2.0f32;\n"
    "    y += x; y -= 1.0; y *= 2.0; y /= 3.0; y %= 5.0;\n"
    "    let mut k = 7i32;\n"
    "    k &= 3; k |= 8; k ^= 1; k <<= 2; k >>= 1u32;\n"
    "    let v = if k > 3 { 1i32 } else if k == 0 { 2 } else { 3 };\n"
    "    let ops = (k + v - 1) * 2 / 3 % 4;\n"
    "    let bits = (ops & 1) | (ops ^ 2) << 1 >> 1;\n"
    "    let cmp = k != v && (k <= v || k >= v) && !(k < v) || k > v;\n"
    "    let neg = -k + -1 + -0x10 + 0b101 + 0o17 + 1_000;\n"
    "    let notb = !bits;\n"
    "    let mut w = 0u32;\n"
    "    while w < 10 { w += 1; if w == 5 { continue; } if w == 8 { break; } }\n"
    "    loop { w -= 1; if w < 3 { break; } }\n"
    "    for t in (0..16u32).step_by(4) { w += t; }\n"
    "    for t in 0..n { w += t; }\n"
    "    let e = 1e-3f64 + 2.5E2 + 0.5;\n"
    "    let tx = thread::thread_idx_x(); let ty = thread::thread_idx_y();\n"
    "    let tz = thread::thread_idx_z(); let bx = thread::block_idx_x();\n"
    "    let by = thread::block_idx_y(); let bz = thread::block_idx_z();\n"
    "    let bd = thread::block_dim_x() + thread::block_dim_y() + thread::block_dim_z();\n"
    "    let gd = thread::grid_dim_x() + thread::grid_dim_y() + thread::grid_dim_z();\n"
    "    let lane = warp::lane_id(); let ws = warp::size();\n"
    "    let tile = SharedArray::<f32, 64>::new();\n"
    "    let cnt = SharedArray::<u32, 4>::new();\n"
    "    tile[tx as usize] = a[i];\n"
    "    tile[0] += 1.0;\n"
    "    sync_threads();\n"
    "    thread::sync_threads();\n"
    "    let s1 = warp::shuffle(y, 0u32); let s2 = warp::shuffle_down(y, 1u32);\n"
    "    let s3 = warp::shuffle_up(k, 1u32); let s4 = warp::shuffle_xor(e, 1u32);\n"
    "    let all = warp::all(cmp); let any = warp::any(cmp); let bal = warp::ballot(cmp);\n"
    "    let old = hist.atomic_add(i.get() % hist.len(), 1u32);\n"
    "    hist.atomic_max(0, 3); hist.atomic_min(0, 3); hist.atomic_and(0, 3);\n"
    "    hist.atomic_or(0, 3); hist.atomic_xor(0, 3); hist.atomic_sub(0, 1);\n"
    "    hist.atomic_exchange(0, 9); hist.atomic_cas(0, 9, 10);\n"
    "    fl.atomic_add(0, 1.0f32); fl.atomic_max(0, 1.0);\n"
    "    cnt.atomic_add(0, 1); cnt[1] = cnt[0];\n"
    "    let m1 = sqrt(y) + exp(y) + y.sqrt() + y.exp2() + y.ln() + log2(y) + y.log()\n"
    "        + y.sin() + cos(y) + tanh(y);\n"
    "    let m2 = y.powf(2.0) + pow(y, 2.0) + fma(y, y, y) + y.mul_add(2.0, 1.0) + y.abs()\n"
    "        + y.min(1.0) + max(y, 1.0);\n"
    "    let m3 = y.floor() + y.ceil() + rsqrt(y) + math::sqrt(y) + math::max(y, 0.0);\n"
    "    let m4 = k.abs() + k.min(3) + max(k, 2) + abs(-3i64) as i32 + w.abs() as i32;\n"
    "    let d1 = sq(y) + sum3(a, i.get()) + pair(tile);\n"
    "    let d2 = early(-3);\n"
    "    nothing(w);\n"
    "    let blockv = { let q = 2u64; q * 3 };\n"
    "    unsafe { let z = a[i.get() + 1]; }\n"
    "    let u = unsafe { a[0] };\n"
    "    if let Some(out) = c.get_mut(i) {\n"
    "        *out = a[i] + m1 + m2 + m3 + d1;\n"
    "        *out += 1.0;\n"
    "    } else {\n"
    "        return;\n"
    "    }\n"
    "}\n"
    "#[kernel]\n"
    "fn twod(a: &[f32], width: usize, c: DisjointSlice<f32>) {\n"
    "    let i = thread::index_2d(width);\n"
    "    let r = i.row();\n"
    "    let q = i.col();\n"
    "    if let Some(o) = c.get_mut(i) { *o = a[r * width + q]; }\n"
    "}\n"
    "#[kernel]\n"
    "unsafe fn raw(a: &mut [f32], b: &[f32]) {\n"
    "    let i = thread::index_1d();\n"
    "    unsafe { a[i] = b[i]; }\n"
    "    a[i] += b[i];\n"
    "}\n";

/* A tile kernel with an f8e4m3 tile `a` and an f8e4m3 output z, then `body` (line 4). */
#define FP8_KERNEL(body)                                                                           \
  "#[tile]\n"                                                                                      \
  "fn t(z: &mut Tensor<f8e4m3, [16, 16]>, x: &Tensor<f8e4m3, [16, 16]>) {\n"                       \
  "    let a = x.partition([16, 16]).load([0, 0]);\n"                                               \
  "    " body "\n"                                                                                 \
  "}\n"

static const fcase cases[] = {
    /* ------------------------------------------------------------ lexer */
    BAD("bad character", 2, K("let x = 1 $ 2;"), "4:11 error: unexpected character '$'"),
    BAD("bad byte", 2, K("let x = 1 \x01 2;"), "4:11 error: unexpected byte 0x01"),
    BAD("non-ASCII character", 2, K("let x = 1 \xc3\xa9 2; // caf\xc3\xa9"),
        "4:11 error: unexpected character '\xc3\xa9': only comments may use non-ASCII text"),
    BAD("bad suffix", 1, K("let x = 1u7;"), "4:10 error: invalid suffix 'u7' on a number"),
    BAD("bad float suffix", 1, K("let x = 1.5e;"), "4:12 error: invalid suffix 'e' on a number"),
    BAD("int suffix on float", 1, K("let x = 1.0u32;"),
        "4:12 error: integer suffix on a floating-point number"),
    BAD("bad digit", 1, K("let x = 0b102;"), "4:9 error: digit '2' is not valid in base 2"),
    BAD("malformed number", 1, K("let x = 0x;"), "4:9 error: malformed number"),
    BAD("unterminated comment", 2, K("let x = 1;\n  /* open /* nested */\n still open"),
        "5:3 error: unterminated block comment", "8:1 error: expected '}', found end of input"),
    BAD("huge integer", 1, K("let x = 99999999999999999999999;"),
        "4:9 error: integer literal is too large for 64 bits"),
    BAD("literal out of range", 3, K("let x: u8 = 256;\nlet y: i32 = 2147483648;\nlet z = -129i8;"),
        "4:13 error: literal 256 does not fit in u8",
        "5:14 error: literal 2147483648 does not fit in i32",
        "6:10 error: literal -129 does not fit in i8"),
    OK("literal extremes", K("let x = -128i8; let y: i32 = -2147483648; let z = 255u8;\n"
                             "let w = -9223372036854775808i64; let v = 18446744073709551615u64;"),
       "const -128", "const -2147483648", "const -9223372036854775808",
       "const 18446744073709551615"),

    /* ----------------------------------------------------------- parser */
    BAD("missing ';'", 1, K("let x = 1\nlet y = 2;"), "5:1 error: expected ';', found 'let'"),
    BAD("missing ')'", 1, K("let x = (1 + 2;"), "4:15 error: expected ')', found ';'"),
    BAD("missing ']'", 1, K("let x = a[0;"), "4:12 error: expected ']', found ';'"),
    BAD("unknown attribute", 1, "#[kernel]\n#[foo]\nfn k(a: &[f32]) { }\n",
        "2:3 error: unknown attribute 'foo'; expected 'kernel', 'launch_contract' or 'inline'"),
    BAD("bad launch_contract entry", 1,
        "#[kernel]\n#[launch_contract(grid = (1, 1, 1))]\nfn k(a: &[f32]) { }\n",
        "2:19 error: unknown launch_contract entry; expected 'block' or 'requires'"),
    BAD("launch_contract block not an integer", 1,
        "#[kernel]\n#[launch_contract(block = (x, 1, 1))]\nfn k(a: &[f32]) { }\n",
        "2:28 error: expected an integer"),
    BAD("chained comparison", 1, K("let x = 1 < 2 < 3;"),
        "4:15 error: comparison operators cannot be chained; use parentheses"),
    BAD("expected an expression", 1, K("let x = ;"), "4:9 error: expected an expression, found ';'"),
    BAD("expression at end of input", 2, K("let x = 1 +"),
        "5:1 error: expected an expression, found '}'"),
    BAD("several syntax errors", 3, K("let x = ;\nlet y = (1;\nlet z = 1 < 2 < 3;"),
        "4:9 error: expected an expression, found ';'", "5:11 error: expected ')', found ';'",
        "6:15 error: comparison operators cannot be chained"),
    BAD("let without value", 2, K("let x;"), "4:6 error: expected '=', found ';'",
        "4:5 error: a 'let' needs an initial value"),
    BAD("field access", 1, K("let x = a.len;"),
        "4:10 error: fields are not supported; expected a method call 'len()'"),
    BAD("for over a non-range", 1, K("for t in n { }"),
        "4:10 error: a for loop iterates over a range 'a..b'"),
    BAD("mut parameter", 1, "#[kernel]\nfn k(mut n: u32) { }\n",
        "2:6 error: parameters are immutable; copy into a 'let mut' variable"),
    BAD("generic function without a bound", 1, "#[kernel]\nfn k<T>(n: u32) { }\n",
        "2:6 error: give type generic 'T' a bound: 'T: Float', 'T: Int' or 'T: Num'"),
    BAD("if let other pattern", 1, K("if let Ok(x) = c.get_mut(i) { }"),
        "4:8 error: only 'if let Some(name) = ...' patterns are supported"),
    BAD("bad type", 1, "#[kernel]\nfn k(a: &[String]) { }\n", "2:11 error: expected a type, found 'String'"),
    BAD("non-scalar elements", 1, "#[kernel]\nfn k(a: &[&[f32]]) { }\n",
        "2:9 error: elements must be scalar types (bool, integers, floats)"),
    BAD("expression nested too deeply", 1,
        K("let x = ((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
          "((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
          "(((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((((("
          "1;"),
        "error: expression nested too deeply"),

    /* ---------------------------------------------------- several errors */
    BAD("two sema errors", 2, K("let x = y;\nlet z = n + 1.0f32;"), "4:9 error: unknown name 'y'",
        "5:11 error: mismatched types: u32 + f32"),
    BAD("errors in two kernels", 2,
        "#[kernel]\nfn k1(a: &[f32]) { let x = y; }\n#[kernel]\nfn k2(a: &[f32]) { let x = z; }\n",
        "2:28 error: unknown name 'y'", "4:28 error: unknown name 'z'"),

    BAD("errors of a device function reported once", 1,
        "fn f(x: u32) -> u32 { y }\n" K("let p = f(1);\nlet q = f(2);") "#[kernel]\nfn k2() { f(3); }\n",
        "1:23 error: unknown name 'y'"),
    BAD("errors of a grid-stride body reported once", 2,
        K("for j in thread::grid_stride(c.len()) { let x = y; let z = 1; z = 2; }"),
        "4:49 error: unknown name 'y'", "4:63 error: cannot assign twice to immutable variable 'z'",
        "4:56 note: 'z' is declared here"),

    /* ------------------------------------------------------------ types */
    BAD("mismatched types", 1, K("let x = n + 1.0f32;"),
        "4:11 error: mismatched types: u32 + f32; convert one side with 'as'"),
    BAD("no follow-on errors from a bad let", 6,
        K("let j = i;\nlet k = j.get() + 1.0f32;\nlet d = a;\nlet e = d[0];\n"
          "let q = y;\nlet r = q + 1.0f32;\nlet o = c.get_mut(i);\nlet p = o;\nlet mut m = z;\nm = 1;\n"
          "let u: &[f32] = a;\nlet v = u[0];"),
        "4:9 error: a thread-index witness cannot be copied", "6:9 error: 'a' cannot be copied",
        "8:9 error: unknown name 'y'", "10:10 error: an Option (from get_mut) cannot be stored",
        "12:13 error: unknown name 'z'", "14:8 error: local variables hold scalars"),
    BAD("SharedArray annotations", 4,
        K("let s: SharedArray<f32, 4> = 1.0;\n"
          "let t: SharedArray<f32, 4> = SharedArray::<f32, 8>::new();\n"
          "let u: f32 = SharedArray::<f32, 8>::new();\n"
          "let w: SharedArray<u32, 8> = SharedArray::<u32, 8>::new(); w[0] = 1;\n"
          "let x: &[f32] = a;"),
        "4:30 error: expected a SharedArray, found f32",
        "5:30 error: expected SharedArray<f32, 4>, found SharedArray<f32, 8>",
        "6:14 error: expected f32, found a shared array",
        "8:8 error: local variables hold scalars, arrays [T; N] (or a SharedArray)"),
    BAD("SharedArray generic arguments", 2,
        K("let s = SharedArray::<u32, bf16>::new();\nlet t = SharedArray::<8, u32>::new();"),
        "4:9 error: write a shared array as 'SharedArray::<T, N>::new()' with a scalar T and an integer N",
        "5:9 error: write a shared array as"),
    BAD("let type mismatch", 1, K("let x: i32 = 1.0;"),
        "4:14 error: expected i32, found f64; convert with 'as i32'"),
    BAD("non-bool if condition", 1, K("if n { }"),
        "4:4 error: a condition must be bool, found u32 (Rust has no truthiness: compare with zero)"),
    BAD("non-bool while condition", 1, K("while n { }"), "4:7 error: a condition must be bool, found u32"),
    BAD("non-bool &&", 1, K("let x = n && true;"), "4:9 error: '&&' needs bool operands, found u32"),
    BAD("unknown name", 1, K("let x = y + 1;"), "4:9 error: unknown name 'y'"),
    BAD("unknown function", 1, K("let x = foo(1);"), "4:9 error: unknown function 'foo'"),
    BAD("unknown path", 1, K("let x = thread::index_3d();"),
        "4:9 error: unknown function 'thread::index_3d'"),
    BAD("wrong argument count", 1, "fn f(x: u32) -> u32 { x }\n" K("let x = f(1, 2);"),
        "5:9 error: 'f' takes 1 argument, found 2"),
    BAD("wrong builtin argument count", 1, K("let x = warp::shuffle(1.0f32);"),
        "4:9 error: 'warp::shuffle' takes 2 arguments, found 1"),
    BAD("wrong argument type", 1, "fn f(x: u32) -> u32 { x }\n" K("let x = f(1.0f32);"),
        "5:11 error: argument 'x' of 'f' is u32, found f32"),
    BAD("assign to immutable", 1, K("let x = 1;\nx = 2;"),
        "5:1 error: cannot assign twice to immutable variable 'x'; declare it 'let mut x'",
        "4:5 note: 'x' is declared here"),
    BAD("assign to a for variable", 1, K("for t in 0..n { t = 5; }"),
        "4:17 error: cannot assign twice to immutable variable 't'"),
    BAD("bad index type", 1, K("let x = a[n];"),
        "4:11 error: an index must be usize, found u32; convert it with 'as usize'"),
    BAD("float index", 1, K("let x = a[1.5];"), "4:11 error: an index must be usize, found f64"),
    BAD("cast to bool", 1, K("let x = n as bool;"),
        "4:11 error: cannot cast u32 as bool; compare with zero instead"),
    BAD("negate unsigned", 1, K("let x = -n;"), "4:9 error: cannot negate a value of type u32"),
    BAD("bool ordering", 1, K("let x = true < false;"),
        "4:14 error: bool values can only be compared with == and !="),
    BAD("if branches differ", 1, K("let x = if n > 1 { 1i32 } else { 2.0f32 };"),
        "4:32 error: the branches of 'if' have different types: i32 and f32"),
    BAD("if without else gives a value", 1, K("let x = if n > 1 { 1i32 };"),
        "4:20 error: an 'if' without 'else' cannot give a value"),
    BAD("break outside a loop", 1, K("break;"), "4:1 error: 'break' outside of a loop"),
    BAD("device function result type", 1, "fn f() -> u32 { 1.0f32 }\n" K("let x = f();"),
        "1:17 error: 'f' returns u32, found f32"),
    BAD("calling a kernel", 1, K("k();"),
        "4:1 error: 'k' is a kernel; kernels are launched from the host, not called"),
    BAD("defined twice", 1, K("") "fn k() { }\n", "6:4 error: function 'k' is defined twice"),
    BAD("parameter twice", 1, "#[kernel]\nfn k(a: &[f32], a: u32) { }\n",
        "2:17 error: parameter 'a' appears twice"),
    BAD("no kernel", 1, "fn f() { }\n", "t.oxk: error: no #[kernel] function in this source"),
    BAD("shuffle of a bool", 1, K("let x = warp::shuffle(true, 0u32);"),
        "4:9 error: warp shuffles move 32- or 64-bit values, found bool"),
    BAD("atomic on a float op", 1, "#[kernel]\nfn k(f: &[Atomic<f32>]) { f.atomic_and(0, 1.0); }\n",
        "2:28 error: 'atomic_and' is not available for f32 elements"),
    BAD("math on integers", 1, K("let x = sqrt(n);"), "4:9 error: 'sqrt' needs floating-point arguments, found u32"),
    BAD("shared array too big", 1, K("let s = SharedArray::<f32, 2000000>::new();"),
        "4:28 error: a shared array needs 1 to 1048576 elements, found 2000000"),
    BAD("contract on non-integer", 1,
        "#[kernel]\n#[launch_contract(requires = (x >= 1))]\nfn k(x: f32) { }\n",
        "2:31 error: 'x' is not an integer parameter"),
    BAD("contract: '!' of a number", 1,
        "#[kernel]\n#[launch_contract(requires = (!n))]\nfn k(n: u32) { }\n",
        "2:31 error: '!' negates a relation, not a number"),
    BAD("contract: not a relation", 1,
        "#[kernel]\n#[launch_contract(requires = (n + 1))]\nfn k(n: u32) { }\n",
        "2:33 error: a 'requires' entry must be a relation"),
    OK("contract: '!' of a relation",
       "#[kernel]\n#[launch_contract(requires = (!(n > 1) || a.len() == 3))]\n"
       "fn k(n: u32, a: &[f32]) { }\n",
       "requires (!(%n gt 1) or (len(%a) eq 3))"),
    OK("code after return and break", K("return;\nlet l = a.len();\nloop { break; a.len(); }"),
       "ret"),
    BAD("compound assignment not defined for the element type", 5,
        "#[kernel]\nfn k(c: DisjointSlice<bool>, d: DisjointSlice<f32>) {\n"
        "let i = thread::index_1d();\n"
        "if let Some(o) = c.get_mut(i) { *o += true; *o |= false; }\n"
        "if let Some(o) = d.get_mut(i) { *o <<= 1; *o &= 2.0; *o %= 2.0; }\n"
        "let s = SharedArray::<f32, 4>::new(); s[0] ^= 1.0;\n"
        "let t = SharedArray::<bool, 4>::new(); t[0] -= true; t[1] |= true;\n}\n",
        "4:36 error: '+=' is not defined for bool", "5:36 error: '<<=' is not defined for f32",
        "5:46 error: '&=' is not defined for f32", "6:44 error: '^=' is not defined for f32",
        "7:45 error: '-=' is not defined for bool"),
    BAD("contract block dimensions", 3,
        "#[kernel]\n#[launch_contract(block = (0, 1, 1))]\nfn k(x: u32) { }\n"
        "#[kernel]\n#[launch_contract(block = (32, 0))]\nfn k2(x: u32) { }\n"
        "#[kernel]\n#[launch_contract(block = (5000000000, 1, 1))]\nfn k3(x: u32) { }\n",
        "2:28 error: block dimensions must be 1..1024, found 0",
        "5:32 error: block dimensions must be 1..1024, found 0",
        "8:28 error: block dimensions must be 1..1024, found 5000000000"),
    BAD("contract block too big", 1,
        "#[kernel]\n#[launch_contract(block = (64, 64, 1))]\nfn k(x: u32) { }\n",
        "2:3 error: a block holds at most 1024 threads; (64, 64, 1) has 4096"),

    /* -------------------------------------------------------- ownership */
    BAD("write a &[T] slice", 1, K("a[i] = 1.0;"),
        "4:2 error: 'a' is a shared read-only slice (&[f32]) and cannot be written; outputs are "
        "DisjointSlice<f32>"),
    BAD("write a &[T] slice in a device function", 1,
        "fn f(s: &[f32]) { s[0] = 1.0; }\n" K("f(a);"),
        "1:20 error: 's' is a shared read-only slice (&[f32]) and cannot be written"),
    BAD("index a DisjointSlice", 1, K("let x = c[i];"),
        "4:10 error: a DisjointSlice cannot be indexed; write through 'c.get_mut(i)' with a "
        "thread-index witness"),
    BAD("write a DisjointSlice by index", 1, K("c[i] = 1.0;"),
        "4:2 error: a DisjointSlice is written only through 'c.get_mut(i)' with a thread-index "
        "witness"),
    BAD("get_mut with a computed index", 1, K("if let Some(o) = c.get_mut(i.get()) { *o = 1.0; }"),
        "4:29 error: get_mut takes a thread-index witness from thread::index_1d() or "
        "thread::index_2d(), found u64: a computed index could let two threads write one element"),
    BAD("CUDA names get Oxide's", 4,
        K("let a = thread_idx_x();\n__syncthreads();\nlet b = shfl_down(1.0f32, 1u32);\nlet c = atomicAdd(h, 1u32);"),
        "4:9 error: unknown function 'thread_idx_x'; Oxide writes it thread::thread_idx_x()",
        "5:1 error: unknown function '__syncthreads'; Oxide writes it sync_threads()",
        "6:9 error: unknown function 'shfl_down'; Oxide writes it warp::shuffle_down(v, delta)",
        "7:9 error: unknown function 'atomicAdd'; Oxide writes it a.atomic_add(i, v) on an &[Atomic<T>] parameter"),
    BAD("threadIdx.x", 1, K("let a = threadIdx.x;"),
        "4:18 error: fields are not supported; CUDA's threadIdx.x is thread::thread_idx_x() in Oxide"),
    OK("cdiv", K("let q = cdiv(n, 3u32) + cdiv(4294967295u32, 4294967295u32);")),
    BAD("cdiv of two types", 1, K("let q = cdiv(n, 3u64);"),
        "4:9 error: cdiv takes two integers of one type, found u32 and u64"),
    BAD("two witness kinds on one output", 1,
        K("if let Some(o) = c.get_mut(i) { *o = 1.0; }\nlet j = thread::index_block();\n"
          "if let Some(o) = c.get_mut(j) { *o = 2.0; }"),
        "6:28 error: 'c' is written through a thread::index_block() witness here and through a "
        "thread::index_1d() witness on line 4: the two kinds give one element to different "
        "threads, so two threads could write it; write each DisjointSlice through one kind of witness",
        "4:28 note: 'c' is first written here"),
    BAD("grid_stride and index_1d on one output", 1,
        K("for j in thread::grid_stride(c.len()) { if let Some(o) = c.get_mut(j) { *o = 1.0; } }\n"
          "if let Some(o) = c.get_mut(i) { *o = 2.0; }"),
        "5:28 error: 'c' is written through a thread::index_1d() witness here and through a "
        "thread::grid_stride() witness on line 4"),
    BAD("index_1d and index_2d on one output", 1,
        K("if let Some(o) = c.get_mut(i) { *o = 1.0; }\nlet j = thread::index_2d(4);\n"
          "if let Some(o) = c.get_mut(j) { *o = 2.0; }"),
        "6:28 error: 'c' is written through a thread::index_2d() witness here and through a "
        "thread::index_1d() witness on line 4"),
    BAD("index_2d with two widths", 1,
        K("let j = thread::index_2d(n as usize);\nif let Some(o) = c.get_mut(j) { *o = 1.0; }\n"
          "let q = thread::index_2d(n as usize + 1);\nif let Some(o) = c.get_mut(q) { *o = 2.0; }"),
        "7:28 error: 'c' is written through thread::index_2d() witnesses of two row widths, here "
        "and on line 5"),
    BAD("index_2d with a per-thread width", 1,
        K("let j = thread::index_2d(thread::thread_idx_x() as usize + 1);"),
        "4:58 error: the row width of thread::index_2d must be the same in every thread and "
        "everywhere in the kernel, or two threads could write one element; it depends on the "
        "thread's or block's index"),
    BAD("index_2d with a loop variable in the width", 1,
        K("for q in 0..4u64 { let j = thread::index_2d(q + 2); }"),
        "4:47 error: the row width of thread::index_2d must be the same in every thread and "
        "everywhere in the kernel, or two threads could write one element; it depends on a variable"),
    BAD("index_2d with a width read from memory", 1,
        K("let j = thread::index_2d(b[i] as usize);"),
        "4:31 error: the row width of thread::index_2d must be the same in every thread and "
        "everywhere in the kernel, or two threads could write one element; it depends on a value "
        "read from memory"),
    OK("one witness kind per output, index_2d with one uniform width",
       K("let w = (thread::block_dim_x() * thread::grid_dim_x()) as usize + n as usize;\n"
         "let j = thread::index_2d(w);\nif let Some(o) = c.get_mut(j) { *o = 1.0; }\n"
         "if thread::thread_idx_x() == 0u32 { let q = thread::index_2d(w);\n"
         "if let Some(o) = c.get_mut(q) { *o = 2.0; } }\nif let Some(o) = c.get_mut(j) { *o = 3.0; }")),
    OK("grid_stride loops with per-thread limits on one output",
       K("for j in thread::grid_stride(n as usize + thread::thread_idx_x() as usize) {\n"
         "if let Some(o) = c.get_mut(j) { *o = 1.0; } }\n"
         "for j in thread::grid_stride(c.len()) { if let Some(o) = c.get_mut(j) { *o = 2.0; } }")),
    OK("unsafe fn may mix witness kinds",
       "#[kernel]\nunsafe fn k(c: DisjointSlice<f32>) {\n    let i = thread::index_1d();\n"
       "    if let Some(o) = c.get_mut(i) { *o = 1.0; }\n    let j = thread::index_block();\n"
       "    if let Some(o) = c.get_mut(j) { *o = 2.0; }\n}\n"),
    BAD("get_mut with a number", 1, K("if let Some(o) = c.get_mut(3) { *o = 1.0; }"),
        "4:28 error: get_mut takes a thread-index witness"),
    BAD("get_mut on a read-only slice", 1, K("if let Some(o) = a.get_mut(i) { *o = 1.0; }"),
        "4:19 error: get_mut exists on DisjointSlice outputs only; 'a' is a read-only slice"),
    BAD("get_mut on a fresh shared array", 1,
        K("if let Some(o) = SharedArray::<f32, 4>::new().get_mut(i) { }"),
        "4:46 error: get_mut exists on DisjointSlice outputs only, not on a shared array"),
    BAD("copy a witness", 1, K("let j = i;"),
        "4:9 error: a thread-index witness cannot be copied: 'i' already holds it; use 'i' "
        "itself, or 'i.get()' for a plain number"),
    BAD("mutable witness", 1,
        "#[kernel]\nfn k(c: DisjointSlice<f32>) {\n    let mut i = thread::index_1d();\n}\n",
        "3:13 error: a thread-index witness cannot be mutable: remove 'mut'"),
    BAD("annotated witness", 1, K("let j: usize = thread::index_1d();"),
        "4:8 error: a thread-index witness has no type to annotate; remove ': u64'"),
    BAD("reassign a witness", 1, K("i = thread::index_1d();"),
        "4:1 error: a thread-index witness cannot be reassigned"),
    BAD("arithmetic on a witness", 1, K("let j = i + 1;"),
        "4:9 error: a thread-index witness cannot be used as an operand; use 'i.get()' for its "
        "value as usize"),
    BAD("compare a witness", 1, K("if i < 4 { }"),
        "4:4 error: a thread-index witness cannot be used as an operand"),
    BAD("cast a witness", 1, K("let j = i as u32;"),
        "4:9 error: a thread-index witness cannot be used as the operand of 'as'"),
    BAD("store a witness in shared memory", 1,
        K("let s = SharedArray::<u64, 32>::new();\ns[0] = i;"),
        "5:8 error: a thread-index witness cannot be stored; store 'i.get()' (a plain number) "
        "instead"),
    BAD("pass a witness to a function", 1, "fn f(x: u64) -> u64 { x }\n" K("let j = f(i);"),
        "5:11 error: a thread-index witness cannot be used as an argument; use 'i.get()'"),
    BAD("pass a witness as a slice", 1, "fn f(s: &[f32]) { }\n" K("f(i);"),
        "5:3 error: argument 's' of 'f' must be a slice of f32, found a thread-index witness"),
    BAD("witness as a block value", 1, K("let j = { i };"),
        "4:11 error: a block cannot give a thread-index witness"),
    BAD("witness methods", 1, K("let j = i.len();"),
        "4:10 error: a thread-index witness has methods get(), row() and col() (and at(j) from thread::index_chunk), not 'len'"),
    BAD("row() of a 1-d witness", 1, K("let r = i.row();"),
        "4:10 error: 'row()' exists only on witnesses from thread::index_2d"),
    BAD("&mut [T] in a safe kernel", 1, "#[kernel]\nfn k(a: &mut [f32]) { }\n",
        "2:6 error: '&mut [f32]' parameters are allowed only in 'unsafe fn' kernels: threads "
        "could race on it; use DisjointSlice<f32> for per-thread outputs"),
    OK("&mut [T] in an unsafe kernel",
       "#[kernel]\nunsafe fn k(a: &mut [f32], b: &[f32]) {\n    let i = thread::index_1d();\n"
       "    a[i] = b[i];\n    unsafe { a[i] += 1.0; }\n}\n",
       "kernel unsafe k(%a: &mut [] f32, %b: &[] f32)", "load %b|[checked 4:12]",
       "store %a|[checked 4:5]", "load %a|[unchecked]", "store %a|[unchecked]"),
    BAD("&mut [Atomic]", 1, "#[kernel]\nfn k(a: &mut [Atomic<u32>]) { }\n",
        "2:9 error: atomic slices are shared: write '&[Atomic<T>]', not '&mut'"),
    BAD("unused Option from get_mut", 1, K("c.get_mut(i);"),
        "4:2 error: the Option from get_mut is unused; write 'if let Some(x) = s.get_mut(i) { *x "
        "= ...; }'"),
    BAD("Option from get_mut in a variable", 1, K("let o = c.get_mut(i);"),
        "4:10 error: an Option (from get_mut) cannot be stored in a variable"),
    BAD("if let on a non-Option", 1, K("if let Some(o) = n { }"),
        "4:18 error: 'if let Some(o) = ...' needs an Option from get_mut, found u32"),
    BAD("deref a non-reference", 1, K("let x = *n;"),
        "4:9 error: only the reference bound by 'if let Some(x) = s.get_mut(i)' can be "
        "dereferenced, found u32"),
    BAD("assign a reference", 1, K("if let Some(o) = c.get_mut(i) { o = 1.0; }"),
        "4:33 error: 'o' is a reference: write through it with '*o = ...'"),
    BAD("write an atomic slice plainly", 1, K("h[i] = 1;"),
        "4:2 error: an atomic slice is written with atomic operations only (h.atomic_add(i, v), "
        "h.atomic_exchange(i, v), ...)"),
    BAD("read an atomic slice plainly", 1, K("let x = h[i];"),
        "4:10 error: an atomic slice is accessed with atomic operations only"),
    BAD("atomics on a plain slice", 1, K("a.atomic_add(0, 1.0);"),
        "4:2 error: atomics work on &[Atomic<T>] parameters and shared arrays; 'a' is a "
        "read-only slice"),
    BAD("copy a slice", 1, K("let d = a;"), "4:9 error: 'a' cannot be copied into another variable"),
    BAD("kernel returns a value", 1, "#[kernel]\nfn k(a: &[f32]) -> f32 { 1.0 }\n",
        "2:20 error: kernels return nothing; results go to their DisjointSlice outputs"),
    BAD("kernel returns with return", 1, K("return 1;"),
        "4:8 error: kernels return nothing; results go to their DisjointSlice outputs"),
    BAD("kernel trailing value", 1, K("n"), "4:1 error: kernels return nothing; end the expression with ';'"),
    BAD("recursion", 1, "fn f(x: u32) -> u32 { f(x) }\n" K("let y = f(1);"),
        "1:23 error: recursive call of 'f': device functions are inlined and cannot recurse"),
    BAD("mutual recursion", 1,
        "fn f(x: u32) -> u32 { g(x) }\nfn g(x: u32) -> u32 { f(x) }\n" K("let y = f(1);"),
        "2:23 error: recursive call of 'f': device functions are inlined and cannot recurse"),
    BAD("DisjointSlice parameter of a device function", 1,
        "fn f(o: DisjointSlice<f32>) { }\n" K("f(c);"),
        "1:6 error: device function parameters must be scalars, &[T] or SharedArray"),

    /* ----------------------------------------------------- good inputs */
    OK("vecadd with its contract", vecadd_contract, "requires (len(%a) ge len(%c))",
       "load %a|[unchecked]", "load %b|[unchecked]", "store %c|[unchecked]", "![checked"),
    OK("vecadd without a contract for a", vecadd_plain, "load %a|[checked 7:16]",
       "load %b|[unchecked]", "store %c|[unchecked]"),
    OK("every construct", all_constructs, "kernel all(", "block(64, 1, 1) sync",
       "requires (len(%a) ge len(%c))", "shared0: [f32; 64] at 0", "barrier", "shfl.down",
       "vote.ballot", "atomic.cas %hist", "atomic.add shared1", "math.fma", "kernel twod(",
       "kernel unsafe raw("),
    OK("type constants",
       K("if let Some(o) = c.get_mut(i) {\n"
         "    if n < u32::MAX && a[i] > f32::EPSILON { *o = max(a[i], f32::NEG_INFINITY) + (i8::MIN as f32) + f64::NAN as f32; }\n"
         "}"),
       "u32 = const 4294967295", "f32 = const 1.1920929e-07", "f32 = const -inf", "i8 = const -128",
       "f64 = const nan"),
    BAD("type constants that are not", 4, K("let x = f32::FOO + tf32::MAX;\nlet y = bool::MAX;\nlet z = i64::NAN;"),
        "4:9 error: f32 has no constant 'FOO'; it has f32::MAX, f32::MIN, f32::INFINITY, "
        "f32::NEG_INFINITY, f32::NAN and f32::EPSILON",
        "4:20 error: tf32 has no named constants", "5:9 error: bool has no named constants",
        "6:9 error: i64 has no constant 'NAN'; it has i64::MAX and i64::MIN"),
    OK("index_2d", "#[kernel]\nfn t(a: &[f32], w: usize, c: DisjointSlice<f32>) {\n"
                   "    let i = thread::index_2d(w);\n"
                   "    if let Some(o) = c.get_mut(i) { *o = a[i.row() * w + i.col()]; }\n}\n",
       "select", "load %a|[checked 4:42]", "store %c|[unchecked]"),
    OK("atomics", "#[kernel]\nfn t(h: &[Atomic<u32>], g: &[Atomic<i64>]) {\n"
                  "    let i = thread::index_1d();\n"
                  "    let s = SharedArray::<u32, 8>::new();\n"
                  "    let o = h.atomic_add(i, 1) + s.atomic_cas(0, 1, 2);\n"
                  "    g.atomic_min(i, -1);\n}\n",
       "atomic.add %h|[checked 5:14]", "atomic.cas shared0|[checked 5:35]", "atomic.min %g"),

    /* ------------------------------------------------------------- tf32 */
    OK("tf32 arithmetic", K("let t = a[i] as tf32;\nlet u = t * t + 1.0;\n"
                            "let v = (u as f32) + (b[i] as tf32 as f32) + (u.sqrt() as f32);\n"
                            "let s = SharedArray::<tf32, 4>::new();\ns[0] = u;"),
       "tf32 = cast", "tf32 = bin.mul", "tf32 = const 1", "tf32 = math.sqrt",
       "store shared0", "shared0: [tf32; 4]"),
    BAD("tf32 kernel parameters", 4,
        "#[kernel]\n"
        "fn k(a: &[tf32], s: tf32,\n"
        "     h: &[Atomic<tf32>], c: DisjointSlice<tf32>) {\n}\n",
        "2:6 error: parameter 'a': slices hold f32, not tf32 (a compute type); take f32 elements "
        "and cast the loaded values with `as tf32`",
        "2:18 error: parameter 's': tf32 is a compute type, not a launch argument; take an f32 and "
        "cast it with `as tf32`",
        "3:6 error: parameter 'h': slices hold f32", "3:26 error: parameter 'c': slices hold f32"),
    BAD("tf32 tensor parameter", 1,
        "#[tile]\n"
        "fn t<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<tf32, [-1]>) {\n"
        "    z.store(x.partition([B]).load([tile_id(0)]) as f32);\n"
        "}\n",
        "2:46 error: parameter 'x': tensors hold f32, not tf32 (a compute type); take "
        "&Tensor<f32, ..> and cast the loaded tile with `as tf32`"),
    BAD("tf32 output and atomic tensors", 3,
        "#[tile]\n"
        "fn t<const B: i32>(z: &mut Tensor<tf32, [B]>, h: &Tensor<Atomic<tf32>, [-1]>, s: tf32) {\n"
        "    z.store(full([B], s));\n"
        "}\n",
        "2:20 error: parameter 'z': tensors hold f32, not tf32 (a compute type); take "
        "&mut Tensor<f32, ..> and store the tile `as f32`",
        "2:47 error: parameter 'h': tensors hold f32, not tf32",
        "2:79 error: parameter 's': tf32 is a compute type, not a launch argument"),
    BAD("tf32 atomics", 1, K("let s = SharedArray::<tf32, 4>::new();\ns.atomic_add(0, 1.0);"),
        "5:2 error: 'atomic_add' is not available for tf32 elements"),
    BAD("tf32 const generic", 1,
        "#[tile]\n"
        "fn t<const B: tf32>(z: &mut Tensor<f32, [16]>) { z.store(full([16], 0.0f32)); }\n",
        "2:15 error: a const generic is an integer"),
    BAD("dot of tf32 and f32 tiles", 1,
        "#[tile]\n"
        "fn t(z: &mut Tensor<f32, [16, 16]>, x: &Tensor<f32, [16, 16]>) {\n"
        "    let a = x.partition([16, 16]).load([0, 0]);\n"
        "    z.store(dot(a as tf32, a) + dot(a as tf32, a as tf32));\n"
        "}\n",
        "4:13 error: 'dot' multiplies two tiles of one dtype, bf16, f16, tf32 or f32, two fp8 "
        "tiles (f8e4m3, f8e5m2), or two integer tiles of one dtype (i8, u8, i16, i32); found tf32 and f32"),
    /* fp8 is a storage type: loads, stores, casts and dot, no arithmetic */
    BAD("fp8 reduction", 1, FP8_KERNEL("let s = reduce_sum(a, 1);"),
        "4:24 error: 'reduce_sum' needs a numeric tile, found a f8e4m3 tile (a storage type: convert "
        "with 'as f32' first)"),
    BAD("fp8 comparison", 1, FP8_KERNEL("let c = select(a < a, a, a);"),
        "4:22 error: '<' is not defined for f8e4m3, a storage type (loads, stores, 'as', dot): convert "
        "with 'as f32' first"),
    BAD("fp8 arithmetic", 1, FP8_KERNEL("z.store(a + a);"), "4:15 error: '+' is not defined for f8e4m3"),
    BAD("fp8 dot with bf16", 1, FP8_KERNEL("let d = dot(a, a as bf16);"),
        "4:13 error: 'dot' multiplies two tiles of one dtype"),
    OK("fp8 casts and dot",
       "#[tile]\n"
       "fn t(z: &mut Tensor<f8e5m2, [16, 16]>, x: &Tensor<f8e4m3, [-1, -1]>) {\n"
       "    let a = x.partition([16, 32]).load([0, 0]);\n"
       "    z.store((dot(a, transpose(a)) as f8e5m2 as f32 * 2.0) as f8e5m2);\n"
       "}\n",
       "t.dot", "cast"),
    /* the printer once read past its table of parameter kinds here (UBSan) */
    OK("tile IR of an atomic tensor",
       "#[tile]\n"
       "fn hist<const B: i32>(g: &Tensor<Atomic<f32>, [-1]>, x: &Tensor<i32, [-1]>) {\n"
       "    g.atomic_add_at(x.partition([B]).load([tile_id(0)]), 1.0);\n"
       "}\n",
       "kernel hist(%g: &Tensor Atomic f32, %x: &Tensor i32) {", "t.atomic_add %g"),
};

/* ------------------------------------------------------------- checking */

static int failures;



static int count(const char *text, const char *what) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, what)) != NULL; p += strlen(what))
    n++;
  return n;
}

static void fail(const fcase *c, const char *why, const char *text) {
  failures++;
  fprintf(stderr, "FAIL %s: %s\n---- source:\n%s---- output:\n%s\n----\n", c->name, why, c->src,
          text);
}

static void run_case(const fcase *c) {
  ox_compile_options o = {0};
  o.filename = "t.oxk";
  char *out = NULL;
  ox_clear_error();
  ox_status s = ox_emit(c->src, &o, OX_TARGET_CPU, OX_EMIT_IR, &out);
  const char *text = s == OX_OK ? (out ? out : "") : ox_last_error();
  char why[256];
  if (s != c->status) {
    snprintf(why, sizeof why, "status %s, expected %s", ox_status_name(s),
             ox_status_name(c->status));
    fail(c, why, text);
    ox_free(out);
    return;
  }
  if (s == OX_ERR_COMPILE) {
    int n = count(text, ": error: ");
    if (n != c->nerrors) {
      snprintf(why, sizeof why, "%d errors, expected %d", n, c->nerrors);
      fail(c, why, text);
    }
  }
  for (int i = 0; i < MAXX && c->expect[i]; i++) {
    const char *want = c->expect[i];
    int neg = s == OX_OK && want[0] == '!';
    int found = s == OX_OK ? has_line(text, want + neg) : has_diag(text, want);
    if (found == neg) {
      snprintf(why, sizeof why, "%s '%s'", neg ? "unexpected" : "missing", want + neg);
      fail(c, why, text);
    }
  }
  ox_free(out);
}

/* The rendering of one diagnostic, exactly. */
static void test_rendering(void) {
  static const fcase c = {"rendering", "#[kernel]\nfn k(n: u32) {\n\tlet x = y;\n}\n",
                          OX_ERR_COMPILE, 1, {0}};
  ox_compile_options o = {0};
  o.filename = "t.oxk";
  char *out = NULL;
  ox_status s = ox_emit(c.src, &o, OX_TARGET_CPU, OX_EMIT_IR, &out);
  const char *want = "t.oxk:3:10: error: unknown name 'y'\n"
                     "    3 | \tlet x = y;\n"
                     "      | \t        ^\n";
  if (s != OX_ERR_COMPILE || strcmp(ox_last_error(), want))
    fail(&c, "rendering differs", ox_last_error());
  /* the default file name */
  s = ox_emit(c.src, NULL, OX_TARGET_CPU, OX_EMIT_IR, &out);
  if (s != OX_ERR_COMPILE || strncmp(ox_last_error(), "<input>:3:10: error: ", 21))
    fail(&c, "default file name", ox_last_error());
  ox_free(out);
}

/* Every scalar type converts to every other with 'as' (bool only from bool);
 * tf32, which no parameter holds, from a local. */
static void test_casts(void) {
  static const char *const types[] = {"i8",  "i16", "i32", "i64",  "u8",  "u16",  "u32",
                                      "u64", "f16", "bf16", "f32", "f64", "usize", "isize"};
  char src[16384];
  int n = snprintf(src, sizeof src, "#[kernel]\nfn casts(b: bool");
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    n += snprintf(src + n, sizeof src - (size_t)n, ", p%zu: %s", i, types[i]);
  n += snprintf(src + n, sizeof src - (size_t)n, ") {\n    let bb = b as bool;\n");
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
    n += snprintf(src + n, sizeof src - (size_t)n, "    let f%zu = b as %s;\n", i, types[i]);
    for (size_t j = 0; j < sizeof types / sizeof types[0]; j++)
      n += snprintf(src + n, sizeof src - (size_t)n, "    let c%zu_%zu: %s = p%zu as %s;\n", i, j,
                    types[j], i, types[j]);
  }
  n += snprintf(src + n, sizeof src - (size_t)n, "    let tf = b as tf32;\n");
  for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
    n += snprintf(src + n, sizeof src - (size_t)n, "    let t%zu = p%zu as tf32;\n"
                  "    let u%zu = t%zu as %s;\n", i, i, i, i, types[i]);
  snprintf(src + n, sizeof src - (size_t)n, "}\n");
  fcase c = {"all casts", src, OX_OK, 0, {"cast", "!error", "tf32 = cast", "bf16 = cast"}};
  run_case(&c);
  /* and the backend takes them */
  ox_compile_options o = {0};
  o.filename = "t.oxk";
  char *out = NULL;
  ox_status s = ox_emit(src, &o, OX_TARGET_CPU, OX_EMIT_LLVM, &out);
  if (s != OX_OK)
    fail(&c, "LLVM for casts", ox_last_error());
  ox_free(out);
}

/* ------------------------------------------------------------------ limits */

/* A source being generated (up to a little over the 1 MiB source limit), and
 * its line count so far. */
#define GEN_CAP ((size_t)3 << 20)
static char *gen;
static size_t ngen;
static int gen_lines;

static void gen_reset(void) {
  if (!gen && !(gen = malloc(GEN_CAP))) {
    fprintf(stderr, "front_test: out of memory\n");
    exit(1);
  }
  ngen = 0;
  gen[0] = 0;
  gen_lines = 1;
}

static void put(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void put(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int k = vsnprintf(gen + ngen, GEN_CAP - ngen, fmt, ap);
  va_end(ap);
  size_t at = ngen;
  ngen += k > 0 && (size_t)k < GEN_CAP - ngen ? (size_t)k : 0;
  for (size_t i = at; i < ngen; i++)
    gen_lines += gen[i] == '\n';
}

/* Fails with the start of the generated source (they are long). */
static void gen_fail(const char *name, const char *why, const char *text) {
  failures++;
  fprintf(stderr, "FAIL %s: %s\n---- source (%zu bytes, first 600):\n%.600s\n---- output:\n%.3000s\n----\n",
          name, why, ngen, gen, text);
}

static ox_status gen_emit(void) {
  ox_compile_options o = {0};
  o.filename = "t.oxk";
  char *out = NULL;
  ox_clear_error();
  ox_status s = ox_emit(gen, &o, OX_TARGET_CPU, OX_EMIT_IR, &out);
  ox_free(out);
  return s;
}

static void run_gen(const char *name, ox_status status, const char *expect) {
  fcase c = {name, gen, status, status ? 1 : 0, {expect}};
  run_case(&c);
  gen_reset();
}

/* One limit of core/front/limits.h: make(n) generates a source with n units
 * (statements, functions, bytes...) and returns the line where unit n is.
 * make(lo) compiles and make(hi) does not; the test finds the largest n that
 * compiles (equal to `exact` when that is given), and checks that n + 1 gives
 * exactly one error, at unit n + 1's line, whose text contains `msg`. */
typedef struct limit_case {
  const char *name;
  int (*make)(int n);
  int lo, hi, exact;
  const char *msg;
  bool tail; /* an instruction count: the code after unit n + 1 (the kernel's end, whose
                `ret` has the kernel's location) may be what crosses the limit */
} limit_case;

static int gen_fn_line; /* the line of the last kernel header made */

static int largest_accepted(const limit_case *l) {
  int lo = l->lo, hi = l->hi;
  gen_reset();
  l->make(lo);
  if (gen_emit() != OX_OK) {
    gen_fail(l->name, "the smallest size is refused", ox_last_error());
    return -1;
  }
  gen_reset();
  l->make(hi);
  if (gen_emit() == OX_OK) {
    gen_fail(l->name, "the largest size is accepted", "");
    return -1;
  }
  while (hi - lo > 1) {
    int mid = lo + (hi - lo) / 2;
    gen_reset();
    l->make(mid);
    if (gen_emit() == OX_OK)
      lo = mid;
    else
      hi = mid;
  }
  return lo;
}

static void test_limit(const limit_case *l) {
  int n = largest_accepted(l);
  if (n < 0)
    return;
  char why[256];
  if (l->exact && n != l->exact) {
    snprintf(why, sizeof why, "the largest accepted size is %d, expected %d", n, l->exact);
    gen_fail(l->name, why, "");
  }
  gen_reset();
  int line = l->make(n + 1);
  ox_status s = gen_emit();
  const char *msg = ox_last_error();
  bool located = false;
  for (const char *p = msg; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
    const char *e = strchr(p, '\n');
    size_t len = e ? (size_t)(e - p) : strlen(p);
    const char *hit = strstr(p, l->msg);
    int at = 0;
    if (sscanf(p, "t.oxk:%d:", &at) == 1 && hit && hit < p + len)
      located |= at == line || (l->tail && (at > line || at == gen_fn_line));
  }
  if (s != OX_ERR_COMPILE || count(msg, ": error: ") != 1 || !located) {
    snprintf(why, sizeof why, "size %d: expected one error at line %d with '%s'", n + 1, line, l->msg);
    gen_fail(l->name, why, msg);
  }
  if (getenv("OXIDE_TEST_VERBOSE"))
    printf("  limit %-28s largest accepted %d\n", l->name, n);
  gen_reset();
}

/* The generators. Kernel bodies start on line 4 (or 5), a unit per line. */
static void simt_head(void) {
  put("#[kernel]\n");
  gen_fn_line = gen_lines;
  put("fn k(a: &[f32], n: u32, c: DisjointSlice<f32>) {\n"
      "  let i = thread::index_1d();\n  let g = i.get();\n  let mut s = n as f32;\n");
}
static void simt_tail(void) { put("  if let Some(o) = c.get_mut(i) { *o = s; }\n}\n"); }

static int make_instrs(int n) {
  simt_head();
  int line = 0;
  for (int j = 1; j <= n; j++) {
    line = gen_lines;
    put("  s = s * 1.5 + 2.5;\n");
  }
  simt_tail();
  return line;
}

static int make_checks(int n) {
  simt_head();
  int line = 0;
  for (int j = 1; j <= n; j++) {
    line = gen_lines;
    put("  s += a[g + %d];\n", j);
  }
  simt_tail();
  return line;
}

static int make_loops(int n) {
  simt_head();
  int line = 0;
  for (int j = 1; j <= n; j++) {
    line = gen_lines;
    put("  loop { break; }\n");
  }
  simt_tail();
  return line;
}

static int make_loop_work(int n) { /* 300 statements, then loops of one statement */
  simt_head();
  for (int j = 0; j < 300; j++)
    put("  s = s * 1.5 + 2.5;\n");
  int line = 0;
  for (int j = 1; j <= n; j++) {
    line = gen_lines;
    put("  for t in 0..n { s = s * 1.5 + 2.5; }\n");
  }
  simt_tail();
  return line;
}

static int make_calls(int n) {
  put("fn f(x: f32) -> f32 { x * 2.0 }\n");
  simt_head();
  int line = 0;
  for (int j = 1; j <= n; j++) {
    line = gen_lines;
    put("  s = f(s);\n");
  }
  simt_tail();
  return line;
}

static int make_inline_depth(int n) { /* f0, f1 calls f0, ...; the kernel calls fn */
  put("fn f0(x: f32) -> f32 { x * 2.0 }\n");
  for (int j = 1; j <= n; j++)
    put("fn f%d(x: f32) -> f32 { f%d(x) + 1.0 }\n", j, j - 1);
  simt_head();
  put("  s = f%d(s);\n", n);
  simt_tail();
  return 2; /* the call that goes one deeper than the limit: f0's, in f1 */
}

static int make_functions(int n) { /* the kernel, then n device functions */
  simt_head();
  simt_tail();
  int line = 0;
  for (int j = 1; j <= n; j++) {
    line = gen_lines;
    put("fn f%d(x: u32) -> u32 { x + %du32 }\n", j, j);
  }
  return line;
}

static int make_source_bytes(int n) { /* a kernel, then a comment: n bytes in all */
  put("#[kernel]\nfn k(n: u32) { let x = n; }\n// ");
  size_t want = (size_t)n;
  while (ngen + 1 < want)
    gen[ngen++] = 'x';
  gen[ngen++] = '\n';
  gen[ngen] = 0;
  return 3;
}

static int make_source_instrs(int n) { /* two kernels of 1,300 statements, a third of n */
  for (int k = 0; k < 3; k++) {
    put("#[kernel]\n");
    gen_fn_line = gen_lines;
    put("fn k%d(a: &[f32], c: DisjointSlice<f32>) {\n"
        "  let i = thread::index_1d();\n  let mut s = a[0];\n", k);
    int line = 0;
    for (int j = 1; j <= (k < 2 ? 1300 : n); j++) {
      line = gen_lines;
      put("  s = s * 1.5 + 2.5;\n");
    }
    simt_tail();
    if (k == 2)
      return line;
  }
  return 0;
}

static int make_tile_instrs(int n) {
  put("#[tile]\n");
  gen_fn_line = gen_lines;
  put("fn k<const B: i32>(y: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>) {\n"
      "  let mut t = x.partition([B]).load([tile_id(0)]);\n");
  int line = 0;
  for (int j = 1; j <= n; j++) {
    line = gen_lines;
    put("  t = t * 1.5 + 2.5;\n");
  }
  put("  y.store(t);\n}\n");
  return line;
}

/* Nesting: n levels of one construct. */
static int make_chain(int n) {
  put("#[kernel]\nfn k(n: u32) {\n  let x = n");
  for (int r = 0; r < n; r++)
    put(" + n");
  put(";\n}\n");
  return 3;
}
static int make_method_chain(int n) {
  put("#[kernel]\nfn k(n: u32) {\n  let x = n");
  for (int r = 0; r < n; r++)
    put(".min(n)");
  put(";\n}\n");
  return 3;
}
static int make_parens(int n) {
  put("#[kernel]\nfn k(n: u32) {\n  let x = ");
  for (int r = 0; r < n; r++)
    put("(");
  put("n");
  for (int r = 0; r < n; r++)
    put(")");
  put(";\n}\n");
  return 3;
}
static int make_blocks(int n) {
  put("#[kernel]\nfn k(n: u32) {\n");
  for (int r = 0; r < n; r++)
    put("{");
  for (int r = 0; r < n; r++)
    put("}");
  put("\n}\n");
  return 3;
}
static int make_else_ifs(int n) {
  put("#[kernel]\nfn k(n: u32) {\n  let x = ");
  for (int r = 0; r < n; r++)
    put("if n > %d { %d } else ", r, r);
  put("{ 0 };\n}\n");
  return 3;
}
static int make_nested_loops(int n) {
  put("#[kernel]\nfn k(n: u32) {\n  let mut x = 0u32;\n");
  int line = 0;
  for (int r = 1; r <= n; r++) {
    line = gen_lines;
    put("  while x < n {\n");
  }
  put("x += 1;");
  for (int r = 0; r < n; r++)
    put("}");
  put("\n}\n");
  return line;
}

/* The deepest nesting the parser accepts compiles with little stack: callers
 * may compile from threads with small stacks. */
static void *compile_gen(void *arg) {
  ox_status *st = arg;
  ox_compile_options o = {0};
  o.filename = "t.oxk";
  for (int kind = 0; kind < 2; kind++) {
    char *out = NULL;
    st[kind] = ox_emit(gen, &o, OX_TARGET_CPU, kind ? OX_EMIT_IR : OX_EMIT_AST, &out);
    ox_free(out);
  }
  return NULL;
}

static void test_small_stack(const limit_case *l) {
  int n = largest_accepted(l);
  if (n < 0)
    return;
  gen_reset();
  l->make(n);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, (size_t)1 << 20);
  pthread_t th;
  ox_status st[2] = {OX_ERR_INTERNAL, OX_ERR_INTERNAL};
  if (pthread_create(&th, &attr, compile_gen, st) || pthread_join(th, NULL))
    gen_fail(l->name, "no thread", "");
  else if (st[0] != OX_OK || st[1] != OX_OK)
    gen_fail(l->name, "the deepest accepted nesting fails in a thread with a 1 MiB stack", ox_last_error());
  pthread_attr_destroy(&attr);
  gen_reset();
}

/* Bounds that keep hostile input from overflowing the stack or taking a long
 * time (core/front/limits.h; docs/language.md, "Limits"): each one's largest
 * accepted input compiles (to IR here: the time it takes in LLVM is measured
 * in the docs) and the next size is refused at the construct that crossed it. */
static void test_limits(void) {
  static const limit_case sizes[] = {
      {"kernel instructions", make_instrs, 1000, 4000, 0,
       "error: kernel 'k' is too large: more than 16384 IR instructions, the compiler's limit", true},
      {"bounds checks", make_checks, 1, 400, 256,
       "error: kernel 'k' has more than 256 bounds-checked accesses, the compiler's limit"},
      {"loops", make_loops, 1, 400, 256, "error: kernel 'k' has more than 256 loops, the compiler's limit"},
      {"loops times instructions", make_loop_work, 1, 256, 0,
       "error: kernel 'k' has too many loops for its size: ", true},
      {"inlined calls", make_calls, 1, 1500, 1000,
       "error: kernel 'k' inlines more than 1000 device-function calls, the compiler's limit"},
      {"inline depth", make_inline_depth, 1, 30, 15,
       "error: device functions nested too deeply: calls inside calls are inlined at most 16 deep"},
      {"functions", make_functions, 1, 1500, 999, "error: too many functions: a source has at most 1000"},
      {"source bytes", make_source_bytes, 1000, (1 << 20) + 1000, 1 << 20,
       "error: the source is larger than 1048576 bytes, the compiler's limit"},
      {"source instructions", make_source_instrs, 1, 3000, 0,
       "error: the kernels of this source are too large together: more than 20480 IR instructions", true},
      {"tile kernel instructions", make_tile_instrs, 1000, 4000, 0,
       "error: kernel 'k' is too large: more than 16384 IR instructions, the compiler's limit", true},
  };
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    test_limit(&sizes[i]);
  static const limit_case nesting[] = {
      {"operator chain", make_chain, 10, 1100, 0,
       "error: expression nested too deeply: the limit is 200 levels, 1000 counting chained operators"},
      {"method chain", make_method_chain, 10, 1100, 0, "error: expression nested too deeply: the limit is 200"},
      {"parentheses", make_parens, 10, 300, 0, "error: expression nested too deeply: the limit is 200"},
      {"blocks", make_blocks, 10, 300, 0, "error: blocks nested too deeply: the limit is 200"},
      {"else-if chain", make_else_ifs, 10, 300, 0, "nested too deeply: the limit is 200 levels"},
      {"nested loops", make_nested_loops, 10, 100, 64, "error: loops nested too deeply: the limit is 64"},
  };
  for (size_t i = 0; i < sizeof nesting / sizeof nesting[0]; i++) {
    test_limit(&nesting[i]);
    test_small_stack(&nesting[i]);
  }
  /* f14 calls f13 three times, ...: 3^14 inlined copies of f0; the error has a
   * note at each call it is inlined through, the kernel's own call last */
  gen_reset();
  put("fn f0(x: u32) -> u32 { x }\n");
  for (int r = 1; r <= 14; r++)
    put("fn f%d(x: u32) -> u32 { f%d(x) + f%d(x) + f%d(x) }\n", r, r - 1, r - 1, r - 1);
  put("#[kernel]\nfn k(n: u32) { f14(n); }\n");
  {
    fcase c = {"exponential inlining", gen, OX_ERR_COMPILE, 1,
               {"3:32 error: kernel 'k' inlines more than 1000 device-function calls",
                "4:32 note: in 'f2', inlined at this call", "15:25 note: in 'f13', inlined at this call",
                "17:16 note: in 'f14', inlined at this call"}};
    run_case(&c);
  }
  /* the same, checked on its own: nothing calls f14 */
  gen_reset();
  put("fn f0(x: u32) -> u32 { x }\n");
  for (int r = 1; r <= 14; r++)
    put("fn f%d(x: u32) -> u32 { f%d(x) + f%d(x) + f%d(x) }\n", r, r - 1, r - 1, r - 1);
  put("#[kernel]\nfn k(n: u32) { }\n");
  run_gen("exponential inlining, uncalled", OX_ERR_COMPILE,
          "3:24 error: function 'f6' inlines more than 1000 device-function calls");
  gen_reset();
  put("#[kernel]\nfn k(n: usize) {\n");
  for (int r = 0; r < 8; r++)
    put("for i%d in thread::grid_stride(n) {\n", r);
  for (int r = 0; r < 8; r++)
    put("}\n");
  put("}\n");
  run_gen("nested grid_stride loops", OX_ERR_COMPILE,
          "10:1 error: kernel 'k' has too many loops for its size: ");
}

/* The good sources also make it through code generation. */
static void test_backend(void) {
  const char *srcs[] = {all_constructs, vecadd_contract};
  for (size_t i = 0; i < sizeof srcs / sizeof srcs[0]; i++) {
    ox_compile_options o = {0};
    o.filename = "t.oxk";
    char *out = NULL;
    ox_status s = ox_emit(srcs[i], &o, OX_TARGET_CPU, OX_EMIT_LLVM, &out);
    if (s != OX_OK) {
      fcase c = {"backend", srcs[i], OX_OK, 0, {0}};
      fail(&c, "LLVM IR for a good source", ox_last_error());
    }
    ox_free(out);
  }
}

/* The AST dump and argument checks of ox_emit. */
static void test_emit_api(void) {
  char *out = NULL;
  fcase c = {"ox_emit", vecadd_contract, OX_OK, 0, {0}};
  if (ox_emit(vecadd_contract, NULL, OX_TARGET_CPU, OX_EMIT_AST, &out) != OX_OK ||
      !strstr(out, "Fn #[kernel] vecadd(a: &[f32], b: &[f32], c: DisjointSlice<f32>) -> ()") ||
      !strstr(out, "contract block=(256, 1, 1)") || !strstr(out, "IfLet out"))
    fail(&c, "AST dump", out ? out : ox_last_error());
  ox_free(out);
  if (ox_emit(NULL, NULL, OX_TARGET_CPU, OX_EMIT_IR, &out) != OX_ERR_INVALID_ARGUMENT)
    fail(&c, "NULL source", ox_last_error());
  if (ox_emit(vecadd_contract, NULL, OX_TARGET_CPU, OX_EMIT_IR, NULL) != OX_ERR_INVALID_ARGUMENT)
    fail(&c, "NULL out", ox_last_error());
  /* the options grow at their end: a newer caller's struct (larger `size`)
   * works while its extra fields are 0, and is refused when one is set; a
   * size of 0 is the ABI-3 layout; a size too small to hold a field is refused */
  struct {
    ox_compile_options o;
    int newer_field;
  } grown = {{.size = sizeof grown, .filename = "grown.oxk"}, 0};
  if (ox_emit(vecadd_contract, &grown.o, OX_TARGET_CPU, OX_EMIT_IR, &out) != OX_OK)
    fail(&c, "a larger options struct with its extra fields 0", ox_last_error());
  ox_free(out);
  out = NULL;
  grown.newer_field = 7;
  if (ox_emit(vecadd_contract, &grown.o, OX_TARGET_CPU, OX_EMIT_IR, &out) != OX_ERR_UNSUPPORTED ||
      !strstr(ox_last_error(), "a field this liboxide does not know"))
    fail(&c, "a larger options struct with an extra field set", ox_last_error());
  /* a caller built against a header before ABI version 3, whose options began with `filename`:
   * the pointer is read as `size`, and refused before anything else is read */
  struct {
    const char *filename;
    int sm, opt_level, no_cache;
  } old_abi = {"old.oxk", 0, 0, 0};
  if (ox_emit(vecadd_contract, (const ox_compile_options *)(const void *)&old_abi, OX_TARGET_CPU, OX_EMIT_IR, &out) !=
          OX_ERR_INVALID_ARGUMENT ||
      !strstr(ox_last_error(), "the caller was built against another ABI"))
    fail(&c, "options of an older ABI", ox_last_error());
  ox_compile_options odd = {.size = sizeof odd + 4}; /* not a size a header makes */
  if (ox_emit(vecadd_contract, &odd, OX_TARGET_CPU, OX_EMIT_IR, &out) != OX_ERR_INVALID_ARGUMENT)
    fail(&c, "an options size not a multiple of a pointer's", ox_last_error());
  ox_compile_options tiny = {.size = 4};
  if (ox_emit(vecadd_contract, &tiny, OX_TARGET_CPU, OX_EMIT_IR, &out) != OX_ERR_INVALID_ARGUMENT ||
      !strstr(ox_last_error(), "options size 4 is too small"))
    fail(&c, "an options size too small", ox_last_error());
  /* generics (with `size` set): a tile kernel's code at the given sizes */
  static const char *tile_mm =
      "#[tile]\nfn mm<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>, "
      "a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {\n"
      "    c.store(mma(a.partition([BM, BK]).load([tile_id(0), 0]), b.partition([BK, BN]).load([0, tile_id(1)]),"
      " full([BM, BN], 0.0f32)));\n}\n";
  ox_generic_value gv[3] = {{"BM", 64}, {"BN", 128}, {"BK", 32}};
  ox_compile_options go = {.size = sizeof go, .sm = 90, .generics = gv, .num_generics = 3};
  out = NULL;
  if (ox_emit(tile_mm, &go, OX_TARGET_CUDA, OX_EMIT_PTX, &out) != OX_OK || !strstr(out, "wgmma.mma_async"))
    fail(&c, "generics: wgmma at 64 x 128 x 32", out ? out : ox_last_error());
  ox_free(out);
  out = NULL;
  go.num_generics = 0; /* all 16: too small for wgmma */
  if (ox_emit(tile_mm, &go, OX_TARGET_CUDA, OX_EMIT_PTX, &out) != OX_OK || strstr(out, "wgmma"))
    fail(&c, "generics at the placeholder", out ? out : ox_last_error());
  ox_free(out);
  out = NULL;
  gv[0].name = "BQ";
  go.num_generics = 1;
  if (ox_emit(tile_mm, &go, OX_TARGET_CUDA, OX_EMIT_PTX, &out) != OX_ERR_INVALID_ARGUMENT ||
      strcmp(ox_last_error(), "ox_emit: no kernel of this source has a generic 'BQ'"))
    fail(&c, "an unknown generic", ox_last_error());
  gv[0] = (ox_generic_value){"BM", 48};
  if (ox_emit(tile_mm, &go, OX_TARGET_CUDA, OX_EMIT_PTX, &out) != OX_ERR_COMPILE ||
      !strstr(ox_last_error(), "<input>:2:") || !strstr(ox_last_error(), "BM = 48"))
    fail(&c, "a generic that is not a power of two", ox_last_error());
  go.generics = NULL;
  if (ox_emit(tile_mm, &go, OX_TARGET_CUDA, OX_EMIT_PTX, &out) != OX_ERR_INVALID_ARGUMENT)
    fail(&c, "generics NULL with a count", ox_last_error());
  /* opt_level outside 0..3 is refused, by ox_emit and ox_module_compile alike (0: the default) */
  for (int lvl = -1; lvl <= 4; lvl++) {
    ox_compile_options o = {0};
    o.opt_level = lvl;
    out = NULL;
    ox_status s = ox_emit(vecadd_contract, &o, OX_TARGET_CPU, OX_EMIT_LLVM, &out);
    bool bad = lvl < 0 || lvl > 3;
    char want[128];
    snprintf(want, sizeof want, "ox_emit: opt_level must be 0 to 3 (0 means the default, 3), found %d", lvl);
    if (bad ? s != OX_ERR_INVALID_ARGUMENT || strcmp(ox_last_error(), want) || out : s != OX_OK)
      fail(&c, "ox_emit opt_level", s ? ox_last_error() : "accepted");
    ox_free(out);
  }
  ox_device dev = NULL;
  if (ox_device_default(&dev) != OX_OK) {
    fail(&c, "no default device", ox_last_error());
  } else {
    ox_compile_options o = {0};
    o.opt_level = 7;
    o.no_cache = 1;
    ox_module m = (ox_module)&o; /* must be cleared */
    if (ox_module_compile(dev, vecadd_contract, &o, &m) != OX_ERR_INVALID_ARGUMENT || m ||
        strcmp(ox_last_error(), "ox_module_compile: opt_level must be 0 to 3 (0 means the default, 3), found 7"))
      fail(&c, "ox_module_compile opt_level 7", ox_last_error());
    o.opt_level = 1;
    if (ox_module_compile(dev, vecadd_contract, &o, &m) != OX_OK || !m)
      fail(&c, "ox_module_compile opt_level 1", ox_last_error());
    ox_module_destroy(m);
    m = NULL;
    ox_generic_value one = {"BM", 64};
    ox_compile_options with = {.size = sizeof with, .generics = &one, .num_generics = 1};
    if (ox_module_compile(dev, tile_mm, &with, &m) != OX_ERR_INVALID_ARGUMENT || m ||
        !strstr(ox_last_error(), "the generics option is for ox_emit"))
      fail(&c, "ox_module_compile with generics", ox_last_error());
  }
  /* many errors stop at 20 */
  char src[4096];
  int n = snprintf(src, sizeof src, "#[kernel]\nfn k(n: u32) {\n");
  for (int i = 0; i < 30; i++)
    n += snprintf(src + n, sizeof src - (size_t)n, "  let x%d = y%d;\n", i, i);
  snprintf(src + n, sizeof src - (size_t)n, "}\n");
  if (ox_emit(src, NULL, OX_TARGET_CPU, OX_EMIT_IR, &out) != OX_ERR_COMPILE ||
      count(ox_last_error(), ": error: ") != 20 ||
      !strstr(ox_last_error(), "too many errors; stopping\n"))
    fail(&c, "error limit", ox_last_error());
}

int main(int argc, char **argv) {
  if (argc == 3 && !strcmp(argv[1], "--write-corpus")) { /* seeds for tests/fuzz */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
      char path[4096];
      snprintf(path, sizeof path, "%s/case_%03zu.oxk", argv[2], i);
      FILE *f = fopen(path, "w");
      if (!f || fputs(cases[i].src, f) < 0 || fclose(f)) {
        perror(path);
        return 1;
      }
    }
    return 0;
  }
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    run_case(&cases[i]);
  test_rendering();
  test_casts();
  test_limits();
  test_backend();
  test_emit_api();
  if (failures) {
    fprintf(stderr, "front_test: %d failure(s)\n", failures);
    return 1;
  }
  printf("front_test: %zu cases passed\n", sizeof cases / sizeof cases[0]);
  return 0;
}
