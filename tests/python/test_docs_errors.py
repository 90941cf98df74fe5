"""Every error message that docs/language.md quotes is what Oxide says.

quoted_messages() finds the quotes: inline code spans that read as English
(at least two words of prose, one of them a word messages use and code does
not: "is", "must", "found", "cannot", ...), and the diagnostic lines of the
plain fenced blocks (`file:line:col: error: ...`). TRIGGERS maps each quote to
what makes Oxide say it: a kernel source to compile (on the CPU, in process),
a source for oxide.emit, or a launch. The tests check that

- every quote has a trigger, and every trigger a quote (a new quote in the
  docs fails here until its trigger is added: add a line to TRIGGERS; a span
  that reads as prose but is no message goes into NOT_MESSAGES);
- each trigger fails with an error whose text contains the quote (spaces
  normalized; "..." in a quote stands for any text).

Triggers that need CUDA at run time are marked gpu, as other GPU tests are."""
import pathlib
import re

import pytest

import oxide

DOC = pathlib.Path(__file__).resolve().parents[2] / "docs" / "language.md"
EXAMPLES = DOC.parents[1] / "examples"

# ------------------------------------------------------------------ extraction

# Words that are code, not prose, inside a quoted span.
_CODE_WORDS = set(
    "fn let mut if else while loop for in break continue return as unsafe true false pub "
    "const struct impl match static mod self where ref move type enum some none "
    "bool i8 i16 i32 i64 u8 u16 u32 u64 usize isize f16 bf16 f32 f64 tf32 f8e4m3 f8e5m2".split())
# Words of English prose that messages use and code does not.
_PROSE_WORDS = set(
    "is are be the an of to not no must found cannot only has have with and or its than at on "
    "from into use write needs need takes take unknown unexpected unterminated invalid "
    "mismatched unsupported overflows too more most least already does do can give gives which "
    "that there here nothing twice reduces allowed available supported defined declare convert "
    "remove".split())

# Spans that read as prose but quote no message.
NOT_MESSAGES = {
}


def _code_spans(text):
    """(line, content) of each inline code span, read as CommonMark reads
    them: a run of n backticks opens a span that the next run of exactly n
    backticks closes, within a paragraph. Fenced blocks are skipped."""
    body, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            body.append("")
        else:
            body.append("" if fenced else line)
    s, i, out = "\n".join(body), 0, []
    while i < len(s):
        if s[i] != "`":
            i += 1
            continue
        j = i
        while j < len(s) and s[j] == "`":
            j += 1
        k, close = j, None
        while k < len(s) and s[k:k + 2] != "\n\n":
            if s[k] == "`":
                e = k
                while e < len(s) and s[e] == "`":
                    e += 1
                if e - k == j - i:
                    close = (k, e)
                    break
                k = e
            else:
                k += 1
        if close is None:  # an unmatched run is literal text
            i = j
            continue
        c = s[j:close[0]].replace("\n", " ")
        if len(c) > 2 and c[0] == " " and c[-1] == " ":
            c = c[1:-1]
        out.append((s.count("\n", 0, i) + 1, c))
        i = close[1]
    return out


def _reads_as_prose(span):
    words = {m.group(1) for m in re.finditer(r"(?<![\w.:'])([a-z]{2,})(?![\w(!]|::|\.\w)", span)
             if m.group(1) not in _CODE_WORDS}
    return len(words) >= 2 and bool(words & _PROSE_WORDS)


def _norm(s):
    return " ".join(s.split())


def quoted_messages(text):
    """{message: line of its first quote} for each message quoted in text."""
    found = {}
    for line, span in _code_spans(text):
        span = _norm(span)
        if _reads_as_prose(span) and span not in NOT_MESSAGES:
            found.setdefault(span, line)
    lang = None  # the fenced block's language ("" for a plain block), None outside
    for n, line in enumerate(text.split("\n"), 1):
        if line.startswith("```"):
            lang = line[3:].strip() if lang is None else None
        elif lang == "" and re.match(r"[\w./<>-]+:(\d+:\d+:)? ", line) and ": note: " not in line:
            found.setdefault(_norm(line), n)  # a diagnostic as printed
    return found


def says(actual, quote):
    """Whether the error text `actual` contains `quote`, "..." matching any text.
    The docs quote the C library's words; Python's exceptions name the Python
    API where the C message names a C function (oxide._errors.python_names)."""
    from oxide._errors import python_names
    quote = python_names(quote)
    pos, actual = 0, _norm(actual)
    for part in (p.strip() for p in _norm(quote).split("...")):
        at = actual.find(part, pos)
        if at < 0:
            return False
        pos = at + len(part)
    return True


# ------------------------------------------------------------------ triggers


class Compile:
    """The source fails to compile (oxide.compile, CPU device)."""

    def __init__(self, src, filename="k.oxk"):
        self.src, self.filename = src, filename

    def __call__(self, dev):
        oxide.compile(self.src, device=dev, filename=self.filename)


class Emit:
    """oxide.emit fails on the source (lowering for a target, no device)."""

    def __init__(self, src, **kw):
        self.src, self.kw = src, kw

    def __call__(self, dev):
        oxide.emit(self.src, **self.kw)


class Launch:
    """fn(dev) fails: a compile and a launch, on the CPU."""

    gpu = False

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, dev):
        self.fn(dev)
        dev.synchronize()


class GpuLaunch(Launch):
    """As Launch, on CUDA device 0 (marked gpu)."""

    gpu = True


def simt(body, params="a: &[f32], o: DisjointSlice<f32>", pre=""):
    return f"{pre}#[kernel]\nfn k({params}) {{\n    let i = thread::index_1d();\n{body}\n}}\n"


def tile(body, params="z: &mut Tensor<f32, [16]>, x: &Tensor<f32, [-1]>", generics="", pre=""):
    g = f"<{generics}>" if generics else ""
    return f"{pre}#[tile]\nfn k{g}({params}) {{\n{body}\n}}\n"


TILE2 = "z: &mut Tensor<f32, [4, 8]>, m: &Tensor<f32, [-1, -1]>, x: &Tensor<f32, [-1]>"

# section 10's count.oxk (the docs label it with a comment line, not part of the file)
COUNT = """\
#[kernel]
fn count(a: &[u32], out: DisjointSlice<u32>) {
    let i = thread::index_1d();
    let n = 0u32;
    n = a.len();
    if let Some(o) = out.get_mut(i) {
        *o = n + 1.5;
    }
}
"""

GENERIC_SAXPY = """\
fn twice<T: Float>(v: T) -> T { v * (2.0 as T) }

#[kernel]
fn saxpy<T: Float>(x: &[T], y: &[T], out: DisjointSlice<T>, a: T) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) { *o = twice(a) * x[i] + y[i]; }
}
"""

ADD = """\
#[tile]
fn add<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, y: &Tensor<f32, [-1]>) {
    z.store(load_tile_like(x, z) + load_tile_like(y, z));
}
"""


def _saxpy(dev, xdt, ydt, a=2.0):
    k = oxide.compile(GENERIC_SAXPY, device=dev).saxpy
    x, y = oxide.zeros(4, dtype=xdt, device=dev), oxide.zeros(4, dtype=ydt, device=dev)
    k(x, y, oxide.zeros(4, dtype=xdt, device=dev), a, grid=1, block=4)


def _int_scale(dev):
    src = simt("    if let Some(r) = o.get_mut(i) { *r = x[i] * s; }",
               params="x: &[T], o: DisjointSlice<T>, s: T").replace("fn k(", "fn k<T: Int>(")
    k = oxide.compile(src, device=dev).k
    # an f64 scalar: a plain 2.5 the binding itself refuses for an Int parameter
    k(oxide.zeros(4, dtype="i16", device=dev), oxide.zeros(4, dtype="i16", device=dev), oxide.f64(2.5),
      grid=1, block=4)


def _shared_cpu(dev):
    src = simt("    let s = SharedArray::<u8, 120000>::new();\n"
               "    s[0] = 1u8;\n"
               "    if let Some(r) = o.get_mut(i) { *r = s[0] as f32; }")
    k = oxide.compile(src, device=dev).k
    k(oxide.zeros(4, device=dev), oxide.zeros(4, device=dev), grid=1, block=4)


def _vecadd_block(dev):
    src = (EXAMPLES / "vecadd.oxk").read_text()
    k = oxide.compile(src, device=dev, filename="vecadd.oxk").vecadd
    x = oxide.zeros(256, device=dev)
    k(x, x, oxide.zeros(256, device=dev), grid=1, block=128)


def _saxpy_short(dev):
    src = (EXAMPLES / "saxpy.oxk").read_text()
    k = oxide.compile(src, device=dev, filename="saxpy.oxk").saxpy
    k(2.0, oxide.zeros(100, device=dev), oxide.zeros(50, device=dev), oxide.zeros(100, device=dev),
      grid=1, block=128)
    dev.synchronize()  # while the module lives: the report names the kernel's access


def _contract_violated(dev):
    src = (EXAMPLES / "vecadd.oxk").read_text()
    k = oxide.compile(src, device=dev, filename="vecadd.oxk").vecadd
    k(oxide.zeros(50, device=dev), oxide.zeros(100, device=dev), oxide.zeros(100, device=dev),
      grid=1, block=256)


def _atomic_no_grid(dev):
    src = tile("    h.atomic_add([0], x.partition([16]).load([0]));",
               params="h: &Tensor<Atomic<f32>, [-1]>, x: &Tensor<f32, [-1]>")
    k = oxide.compile(src, device=dev).k
    k(oxide.zeros(16, device=dev), oxide.zeros(16, device=dev))


def _two(dev):
    src = """\
#[tile]
fn two<const B: i32>(a: &mut Tensor<i32, [B]>, b: &mut Tensor<i32, [B]>, x: &Tensor<i32, [-1]>) {
    let t = load_tile_like(x, a);
    a.store(t + 1);
    b.store(t * 2);
}
"""
    k = oxide.compile(src, device=dev).two
    a, b = oxide.zeros(64, dtype="i32", device=dev), oxide.zeros(64, dtype="i32", device=dev)
    k(a.partition(8), b.partition(16), oxide.zeros(64, dtype="i32", device=dev))


def _set_generic_disagrees(dev):
    k = oxide.compile(ADD.replace("fn add", "fn k"), device=dev).k
    k.set_generic("B", 64)
    z = oxide.zeros(64, device=dev)
    k(z.partition(32), z, z)


def _unbound(dev):
    src = tile("    z.store(x.partition([C]).load([0]));", params="z: &mut Tensor<f32, [16]>, x: &Tensor<f32, [-1]>",
               generics="const C: i32")
    k = oxide.compile(src, device=dev).k
    k(oxide.zeros(16, device=dev).partition(16), oxide.zeros(16, device=dev))


MM = """\
#[tile]
fn mm<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>, a: &Tensor<f32, [-1, -1]>, b: &Tensor<f32, [-1, -1]>) {
    let mut acc = full([BM, BN], 0.0f32);
    for k in 0..(a.dim(1) + (BK as usize) - 1) / (BK as usize) {
        acc = mma(a.partition([BM, BK]).load([tile_id(0), k]), b.partition([BK, BN]).load([k, tile_id(1)]), acc);
    }
    c.store(acc);
}
"""


def _candidates_differ(dev):
    k = oxide.compile(MM, device=dev).mm
    k.set_candidates([{"BM": 16, "BN": 16, "BK": 16}, {"BM": 16, "BN": 16}])


def _no_candidate_runs(dev):
    k = oxide.compile(MM, device=dev).mm
    k.set_candidates([{"BM": 512, "BN": 512, "BK": 16}, {"BM": 1024, "BN": 512, "BK": 16}])
    a = oxide.zeros((64, 64), device=dev)
    k(oxide.zeros((64, 64), device=dev), a, a)


def _capturing(dev):
    k = oxide.compile(MM, device=dev).mm
    k.set_candidates([{"BM": 16, "BN": 16, "BK": 16}, {"BM": 32, "BN": 32, "BK": 16}])
    a = oxide.zeros((64, 64), device=dev)
    chain = oxide.Chain(dev)
    chain.launch(k, oxide.zeros((64, 64), device=dev), a, a)
    chain.capture()


def _tile_add(dev, tile_size, filename="tile.oxk"):
    k = oxide.compile(ADD, device=dev, filename=filename).add
    x = oxide.zeros(300000, device=dev)
    k(oxide.zeros(300000, device=dev).partition(tile_size), x, x)


def _partition_generic(dev):
    src = tile("    z.store(reshape(x.partition([C]).load([0]).slice([0], [16]), [16]));",
               generics="const C: i32")
    k = oxide.compile(src, device=dev).k
    k.set_generic("C", 24)
    k(oxide.zeros(16, device=dev).partition(16), oxide.zeros(64, device=dev))


def _u8_generic(dev):
    src = tile("    z.store(load_tile_like(x, z));", params="z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>",
               generics="const B: u8")
    k = oxide.compile(src, device=dev).k
    k(oxide.zeros(512, device=dev).partition(256), oxide.zeros(512, device=dev))


def _lowering_tile(dev):
    src = tile("    let t = m.partition([256, 1]).load([0, 0]) + m.partition([1, 512]).load([0, 0]);\n"
               "    z.store(t.slice([0, 0], [256, 256]));",
               params="z: &mut Tensor<f32, [256, 256]>, m: &Tensor<f32, [-1, -1]>")
    k = oxide.compile(src, device=dev).k
    k(oxide.zeros((256, 256), device=dev).partition((256, 256)), oxide.zeros((256, 512), device=dev))


def _nested(depth):
    return simt("    let v = " + "(" * depth + "1.0f32" + ")" * depth + ";")


def _functions(n):
    return "".join(f"fn f{j}(x: u32) -> u32 {{ x }}\n" for j in range(n)) + simt("")


# section 14's t.oxk: f1 .. f14 each call the one before three times (3^14 calls)
INLINE_CHAIN = ("fn f0(x: u32) -> u32 { x + 1 }\n"
                + "".join(f"fn f{j}(x: u32) -> u32 {{ f{j - 1}(x) + f{j - 1}(x) + f{j - 1}(x) }}\n" for j in range(1, 15))
                + "#[kernel]\nfn k(x: u32) { f14(x); }\n")


def _tile_chain(n, name="k", op="{p} * 1.5"):
    """A tile kernel of n - 1 elementwise operations on a tile of 65536 f32."""
    lines = ["    let t0 = load_tile_like(x, z);"]
    lines += [f"    let t{j} = {op.format(p=f't{j - 1}')};" for j in range(1, n)]
    return tile("\n".join(lines) + f"\n    z.store(t{n - 1});",
                params="z: &mut Tensor<f32, [65536]>, x: &Tensor<f32, [-1]>").replace("fn k", f"fn {name}")


def _straight(n, name="k"):
    return simt("    let mut s = 0.0f32;\n" + "    s = s * 1.5 + 2.5;\n" * n).replace("fn k(", f"fn {name}(")


# message -> trigger. Keys are the quotes as the docs write them (spaces normalized).
TRIGGERS = {
    # tile operations (section 12.5, 12.6)
    "an output tile (&mut Tensor) has methods store(t), dim(k) and stride(k), not 'load'; read this block's tile of it with load_tile_like(z, z)":
        Compile(tile("    let t = z.load([0]);\n    z.store(0.0);")),
    "'cumsum' takes a tile of numbers, found a tile of bool, shape [16]":
        Compile(tile("    let c = cumsum(load_tile_like(x, z) > 0.0, 0);\n    z.store(0.0);")),
    "the third argument of sort says whether it is descending: true or false":
        Compile(tile("    z.store(sort(load_tile_like(x, z), 0, 1));")),
    "'topk' takes k, a power of two up to the size 16 of axis 0 (the result is a tile), found 3":
        Compile(tile("    let v = topk(load_tile_like(x, z), 3, 0);\n    z.store(0.0);")),
    "'cat' joins tiles of one shape: the first is [16], this one [8]":
        Compile(tile("    let t = load_tile_like(x, z);\n    let c = cat([t, t.slice([0], [8])], 0);\n    z.store(0.0);")),
    "write zeros::<T>([..]) with T a number or bool type, such as zeros::<f16>([B])":
        Compile(tile("    let a = zeros::<f8e4m3>([16]);\n    z.store(0.0);")),
    # 1. Lexical structure; 2. Grammar
    "unexpected character 'é': only comments may use non-ASCII text": Compile(simt("    let é = 1;")),
    "unexpected byte 0x07": Compile(simt("    let x = 1;\x07")),
    "unterminated block comment": Compile(simt("    /* a /* b */")),
    "digit '2' is not valid in base 2": Compile(simt("    let x = 0b102;")),
    "integer literal is too large for 64 bits": Compile(simt("    let x = 99999999999999999999;")),
    "invalid suffix 'f16' on a number": Compile(simt("    let x = 1.5f16;")),
    "a range 'a..b' can only be iterated by a for loop": Compile(simt("    let r = (0..4);")),
    "expression nested too deeply: the limit is 200 levels, 1000 counting chained operators and method calls":
        Compile(_nested(150)),
    "an 'if' without 'else' cannot give a value; add ';' or an 'else' branch":
        Compile(simt("    let x = if a.len() > 2 { 1 };")),
    # 3. Types
    "parameter 'a': slices hold f32, not tf32 (a compute type); take f32 elements and cast the loaded values with `as tf32`":
        Compile(simt("", params="a: &[tf32], o: DisjointSlice<f32>")),
    "'+' is not defined for f8e4m3, a storage type (loads, stores, 'as', dot): convert with 'as f32' first":
        Compile(simt("    let x = 1.0f32 as f8e4m3;\n    let y = x + x;")),
    "parameter 's': f8e4m3 scalars are not launch arguments; take an f32 and convert it with `as f8e4m3`":
        Compile(simt("", params="a: &[f32], s: f8e4m3")),
    "f32 has no constant 'FOO'; it has f32::MAX, f32::MIN, f32::INFINITY, f32::NEG_INFINITY, f32::NAN and f32::EPSILON":
        Compile(simt("    let x = f32::FOO;")),
    "i64 has no constant 'NAN'; it has i64::MAX and i64::MIN": Compile(simt("    let x = i64::NAN;")),
    "bool has no named constants": Compile(simt("    let x = bool::MAX;")),
    "'a' cannot be copied into another variable; use it directly": Compile(simt("    let b = a;")),
    "kernel parameters are scalars, &[T], &mut [T], &[Atomic<T>] or DisjointSlice<T>":
        Compile(simt("", params="a: SharedArray<f32, 4>")),
    "'a' is not mutable; declare it 'let mut a = [..]'":
        Compile(simt("    let a = [0.0f32; 4];\n    a[0] = 1.0;", params="o: DisjointSlice<f32>")),
    "kernel 'k' keeps more than 16384 bytes in its threads' own arrays (this one: 16384); use a SharedArray, or smaller arrays":
        Compile(simt("    let mut s = [0u8; 1];\n    let mut b = [0.0f32; 4096];\n    s[0] = 1u8;\n    b[0] = 1.0;\n"
                     "    if let Some(r) = o.get_mut(i) { *r = b[(s[0] as usize)] + a[0]; }")),
    "kernel 'k' needs 120000 bytes of shared memory; CPU (...) allows 101376": Launch(_shared_cpu),
    # 3.1 Type generics
    "type generic 'T' must be the element type of a slice parameter: the launch takes it from that argument's dtype":
        Compile(simt("", params="s: T, o: DisjointSlice<f32>").replace("fn k(", "fn k<T: Float>(")),
    "kernel 'saxpy': type generic 'T' is f32 from argument 1 ('x') and f16 from argument 2 ('y')":
        Launch(lambda dev: _saxpy(dev, "f32", "f16")),
    "kernel 'saxpy', argument 1 ('x'): a tensor of i32, which 'T: Float' does not admit":
        Launch(lambda dev: _saxpy(dev, "i32", "i32")),
    "kernel 'saxpy', argument 4 ('a'): 70000 is out of range for f16 (type generic 'T')":
        Launch(lambda dev: _saxpy(dev, "f16", "f16", 70000.0)),
    "2.5 is not an integer, which type generic 'T' (here i16) needs": Launch(_int_scale),
    "type generic 'T' must be the type of a parameter: each call takes it from that argument":
        Compile(simt("    let v = f(1.0f32);", pre="fn f<T: Float>(x: f32) -> f32 { x }\n")),
    "argument 'a' of 'f' is i32, which 'T: Float' does not admit":
        Compile(simt("    let v = f(1i32);", pre="fn f<T: Float>(a: T) -> T { a }\n")),
    # 4. Typing rules
    "mismatched types: i32 + i64; convert one side with 'as'": Compile(simt("    let x = 1i32 + 2i64;")),
    "expected i64, found i32; convert with 'as i64'": Compile(simt("    let x: i64 = 1i32;")),
    "literal 300 does not fit in u8": Compile(simt("    let x: u8 = 300;")),
    "cannot negate an unsigned u32": Compile(simt("    let x = -1 as u32;")),
    "cannot cast i32 as bool; compare with zero instead": Compile(simt("    let b = 1i32 as bool;")),
    "a tuple cannot be mutable; take its values apart: 'let (mut a, b) = ...'":
        Compile(simt("    let mut t = (1, 2);")),
    "the pattern names 2 values, and the tuple has 3": Compile(simt("    let (x, y) = (1, 2, 3);")),
    "cannot assign twice to immutable variable 'x'; declare it 'let mut x'":
        Compile(simt("    let x = 1;\n    x = 2;")),
    # 5. Built-ins
    "'atomic_add' is not available for u8 elements":
        Compile(simt("    let v = h.atomic_add(0, 1u8);", params="h: &[Atomic<u8>]")),
    "warp shuffles move 32- or 64-bit values, found u8": Compile(simt("    let v = warp::shuffle(1u8, 0u32);")),
    "f64 erf is not supported on the CUDA target yet (f32 is)":
        Emit(simt("    if let Some(r) = o.get_mut(i) { *r = erf(a[i] as f64) as f32; }"), kind="ptx"),
    # 6. Ownership rules
    "a thread-index witness cannot be copied: 'i' already holds it; use 'i' itself, or 'i.get()' for a plain number":
        Compile(simt("    let j = i;")),
    "a thread-index witness cannot be mutable: remove 'mut'":
        Compile(simt("    let mut j = thread::index_1d();")),
    "a thread-index witness has no type to annotate; remove ': u64'":
        Compile(simt("    let j: usize = thread::index_1d();")),
    "a thread-index witness cannot be reassigned": Compile(simt("    i = thread::index_1d();")),
    "a thread-index witness cannot be used as an operand; use 'i.get()' for its value as usize (a plain number, which cannot index a DisjointSlice)":
        Compile(simt("    let j = i + 1;")),
    "as an argument": Compile(simt("    let v = f(i);", pre="fn f(x: usize) -> usize { x }\n")),
    "a thread-index witness cannot be stored; store 'i.get()' (a plain number) instead":
        Compile(simt("    let s = SharedArray::<u64, 4>::new();\n    s[0] = i;")),
    "a thread-index witness has methods get(), row() and col() (and at(j) from thread::index_chunk), not 'foo'":
        Compile(simt("    let v = i.foo();")),
    "'o' is written through a thread::index_block() witness here and through a thread::index_1d() witness on line 4: the two kinds give one element to different threads, so two threads could write it; write each DisjointSlice through one kind of witness":
        Compile(simt("    if let Some(r) = o.get_mut(i) { *r = 1.0; }\n    let b = thread::index_block();\n"
                     "    if let Some(r) = o.get_mut(b) { *r = 2.0; }")),
    "'o' is written through thread::index_2d() witnesses of two row widths, here and on line 4: with different widths two threads could write one element; compute the width once ('let w = ...;') and use it for every index_2d of 'o'":
        Compile("#[kernel]\nfn k(o: DisjointSlice<f32>, w: usize, v: usize) {\n    let p = thread::index_2d(w);\n"
                "    if let Some(r) = o.get_mut(p) { *r = 1.0; }\n    let q = thread::index_2d(v);\n"
                "    if let Some(r) = o.get_mut(q) { *r = 2.0; }\n}\n"),
    "the row width of thread::index_2d must be the same in every thread and everywhere in the kernel, or two threads could write one element; it depends on the thread's or block's index: build it from constants, scalar parameters, .len() and block_dim/grid_dim":
        Compile(simt("    let p = thread::index_2d(thread::thread_idx_x() as usize + 1);\n"
                     "    if let Some(r) = o.get_mut(p) { *r = 1.0; }")),
    "get_mut takes a thread-index witness from thread::index_1d() or thread::index_2d(), found u64: a computed index could let two threads write one element":
        Compile(simt("    if let Some(r) = o.get_mut(i.get() + 1) { *r = 1.0; }")),
    "get_mut exists on DisjointSlice outputs only; 'a' is a read-only slice":
        Compile(simt("    if let Some(r) = a.get_mut(i) { *r = 1.0; }")),
    "a DisjointSlice is written only through 'o.get_mut(i)' with a thread-index witness: 'if let Some(x) = o.get_mut(i) { *x = ...; }'":
        Compile(simt("    o[i] = 1.0;")),
    "a DisjointSlice cannot be indexed; write through 'o.get_mut(i)' with a thread-index witness":
        Compile(simt("    let v = o[i];")),
    "an Option (from get_mut) cannot be stored in a variable; write 'if let Some(x) = s.get_mut(i) { *x = ...; }'":
        Compile(simt("    let x = o.get_mut(i);")),
    "the Option from get_mut is unused; write 'if let Some(x) = s.get_mut(i) { *x = ...; }'":
        Compile(simt("    o.get_mut(i);")),
    "'x' is a reference: write through it with '*x = ...'":
        Compile(simt("    if let Some(x) = o.get_mut(i) { x = 1.0; }")),
    "only the reference bound by 'if let Some(x) = s.get_mut(i)' can be dereferenced, found a read-only slice":
        Compile(simt("    let v = *a;")),
    "'a' is a shared read-only slice (&[f32]) and cannot be written; outputs are DisjointSlice<f32>":
        Compile(simt("    a[0] = 1.0;")),
    "an atomic slice is written with atomic operations only (h.atomic_add(i, v), h.atomic_exchange(i, v), ...)":
        Compile(simt("    h[0] = 1u32;", params="h: &[Atomic<u32>]")),
    "an atomic slice is accessed with atomic operations only (h.atomic_add(i, v), ...)":
        Compile(simt("    let v = h[0];", params="h: &[Atomic<u32>]")),
    "'&mut [f32]' parameters are allowed only in 'unsafe fn' kernels: threads could race on it; use DisjointSlice<f32> for per-thread outputs":
        Compile(simt("", params="a: &mut [f32]")),
    "atomic slices are shared: write '&[Atomic<T>]', not '&mut'":
        Compile(simt("", params="h: &mut [Atomic<u32>]")),
    "a thread-index witness cannot be used as an argument; ...":
        Compile(simt("    let v = f(i);", pre="fn f(x: usize) -> usize { x }\n")),
    "device function parameters must be scalars, &[T] or SharedArray; outputs are written in the kernel itself":
        Compile(simt("    f(o);", pre="fn f(x: DisjointSlice<f32>) { }\n")),
    # 7. Launch contracts
    "launch_contract applies to #[kernel] functions only":
        Compile(simt("", pre="#[launch_contract(block = (32, 1, 1))]\nfn f(x: u32) -> u32 { x }\n")),
    "block dimensions must be 1..1024, found 2048":
        Compile("#[kernel]\n#[launch_contract(block = (2048, 1, 1))]\nfn k(a: &[f32]) {\n}\n"),
    "a block holds at most 1024 threads; (64, 64, 1) has 4096":
        Compile("#[kernel]\n#[launch_contract(block = (64, 64, 1))]\nfn k(a: &[f32]) {\n}\n"),
    "vecadd.oxk:4:4: kernel 'vecadd' has launch_contract block = (256, 1, 1), but is launched with block (128, 1, 1)":
        Launch(_vecadd_block),
    "unsupported expression in a launch contract; use x.len(), integer parameters, integers, + - * / %, comparisons, && || !":
        Compile("#[kernel]\n#[launch_contract(requires = (a.len() >= -1))]\nfn k(a: &[f32]) {\n}\n"),
    "'x' is not an integer parameter; contracts relate slice lengths (x.len()) and integer parameters":
        Compile("#[kernel]\n#[launch_contract(requires = (x >= 1))]\nfn k(a: &[f32], x: f32) {\n}\n"),
    "a 'requires' entry must be a relation such as 'a.len() >= c.len()'":
        Compile("#[kernel]\n#[launch_contract(requires = (a.len()))]\nfn k(a: &[f32]) {\n}\n"),
    "vecadd.oxk:3:52: launch contract of kernel 'vecadd' violated: a.len() >= c.len() is false (a.len() = 50, c.len() = 100)":
        Launch(_contract_violated),
    "... overflows 64-bit arithmetic (...)":
        Launch(lambda dev: oxide.compile(
            "#[kernel]\n#[launch_contract(requires = (n * n > 1))]\nfn k(a: &[f32], n: i64) {\n}\n",
            device=dev).k(oxide.zeros(1, device=dev), 2**62, grid=1, block=1)),
    # 8. Bounds checking
    "saxpy.oxk:9:36: out-of-bounds read in kernel 'saxpy': y_in[i] with index 50, but the length is 50":
        Launch(_saxpy_short),
    # 9. Device functions
    "recursive call of 'f': device functions are inlined and cannot recurse":
        Compile(simt("    let v = f(1u32);", pre="fn f(x: u32) -> u32 { f(x) }\n")),
    "'f' must return a f32 on every path":
        Compile(simt("    let v = f(1.0f32);", pre="fn f(x: f32) -> f32 { if x > 0.0 { return x; } }\n")),
    "'k' is a kernel; kernels are launched from the host, not called":
        Compile(simt("") + "#[kernel]\nfn j(a: &[f32]) {\n    k(a);\n}\n"),
    # 10. Diagnostics
    "count.oxk:5:5: error: cannot assign twice to immutable variable 'n'; declare it 'let mut n'":
        Compile(COUNT, filename="count.oxk"),
    "count.oxk:7:16: error: mismatched types: u32 + f64; convert one side with 'as'":
        Compile(COUNT, filename="count.oxk"),
    "k.oxk: error: no #[kernel] function in this source": Compile("fn f(x: u32) -> u32 { x }\n"),
    "too many errors; stopping": Compile(simt("\n".join(f"    let x{j}: u8 = 1.5;" for j in range(25)))),
    "unknown function '__syncthreads'; Oxide writes it sync_threads()": Compile(simt("    __syncthreads();")),
    "fields are not supported; CUDA's threadIdx.x is thread::thread_idx_x() in Oxide":
        Compile(simt("    let t = threadIdx.x;")),
    "unknown function 'atomicAdd'; Oxide writes it a.atomic_add(i, v) on an &[Atomic<T>] parameter":
        Compile(simt("    atomicAdd(a, 1.0);")),
    "unknown function 'program_id'; Oxide writes it tile_id(axis)":
        Compile(tile("    let p = program_id(0);\n    z.store(load_tile_like(x, z));")),
    "unknown function 'arange'; Oxide writes it iota([n], 0)":
        Compile(tile("    let p = arange(16);\n    z.store(load_tile_like(x, z));")),
    "unknown function 'sum'; Oxide writes it reduce_sum(t, axis)":
        Compile(tile("    let p = sum(load_tile_like(x, z));\n    z.store(load_tile_like(x, z));")),
    "no #[kernel] function in this source": Compile("fn f(x: u32) -> u32 { x }\n"),
    # 12.1 Syntax
    "const generics are for #[tile] kernels; a SIMT function takes type generics only, written '<T: Float>'":
        Compile(simt("").replace("fn k(", "fn k<const B: i32>(")),
    "give type generic 'T' a bound: 'T: Float', 'T: Int' or 'T: Num'":
        Compile(simt("", params="a: &[T]").replace("fn k(", "fn k<T>(")),
    "a const generic is an integer (i32, i64, u32, usize, ...)":
        Compile(tile("    z.store(load_tile_like(x, z));", generics="const B: f32")),
    "generic 'B' appears twice":
        Compile(tile("    z.store(load_tile_like(x, z));", generics="const B: i32, const B: i32")),
    "unknown const generic 'C' in a tensor shape; declare it: '<const C: i32>'":
        Compile(tile("    z.store(load_tile_like(x, z));", params="z: &mut Tensor<f32, [C]>, x: &Tensor<f32, [-1]>")),
    "a tensor dim is 1..2^40, -1 (dynamic) or a const generic, found 0":
        Compile(tile("    z.store(load_tile_like(x, z));", params="z: &mut Tensor<f32, [0]>, x: &Tensor<f32, [-1]>")),
    "a dynamic dim is written -1":
        Compile(tile("    z.store(load_tile_like(x, z));", params="z: &mut Tensor<f32, [16]>, x: &Tensor<f32, [-2]>")),
    "a tensor needs 1 to 4 dims":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [16]>, x: &Tensor<f32, []>")),
    "a tensor has at most 4 dims":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [16]>, x: &Tensor<f32, [1, 1, 1, 1, 1]>")),
    "an array '[..]' is written only as the sizes of x.partition([..]) and the indices of .load([..])":
        Compile(tile("    let a = [1, 2];\n    z.store(0.0);")),
    # 12.2 Parameters and const generics
    "tile kernel 'k' has more than 8 generics":
        Compile(tile("    z.store(0.0);", generics=", ".join(f"const G{j}: i32" for j in range(9)))),
    "'B' is a const generic and cannot be assigned":
        Compile(tile("    B = 2;\n    z.store(0.0);", generics="const B: i32")),
    "'B' is both a const generic and a parameter":
        Compile(tile("    z.store(0.0);", generics="const B: i32", params="z: &mut Tensor<f32, [16]>, B: i32")),
    "the tile shape of output 'z' must be static: dim 0 is -1 (dynamic); use a const generic":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [-1]>")),
    "tile shapes are static powers of two: dim 1 of output 'z' is 12":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [4, 12]>")),
    "a tile holds at most 65536 elements; output 'z' has the tile shape [1024, 2048]":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [1024, 2048]>")),
    "a tile kernel writes a partitioned output (`&mut Tensor<T, [tile]>`) or adds into an atomic tensor (`&Tensor<Atomic<T>, [dims]>`): add one":
        Compile(tile("    let t = x.partition([16]).load([0]);", params="x: &Tensor<f32, [-1]>")),
    "kernel 'k' has no partitioned output to give its grid: pass the grid in the launch config ...":
        Launch(_atomic_no_grid),
    "'h' is an atomic tensor: blocks add into it (atomic_add), none reads it":
        Compile(tile("    h.atomic_add([0], h.partition([16]).load([0]));", params="h: &Tensor<Atomic<f32>, [-1]>")),
    "tile kernel parameters are scalars, &Tensor<T, [dims]> inputs, &mut Tensor<T, [tile]> outputs and &Tensor<Atomic<T>, [dims]> atomic tensors; slices, DisjointSlice and atomic slices belong to #[kernel] (SIMT) functions":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [16]>, a: &[f32]")),
    "Tensor parameters belong to #[tile] kernels; a #[kernel] takes scalars, &[T], &mut [T], &[Atomic<T>] or DisjointSlice<T>":
        Compile(simt("", params="x: &Tensor<f32, [-1]>")),
    "parameter 'x': tensors hold f32, not tf32 (a compute type); take &Tensor<f32, ..> and cast the loaded tile with `as tf32`":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [16]>, x: &Tensor<tf32, [-1]>")),
    "... take &mut Tensor<f32, ..> and store the tile `as f32`":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<tf32, [16]>")),
    "parameter 's': tf32 is a compute type, not a launch argument; take an f32 and cast it with `as tf32`":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [16]>, s: tf32")),
    "tile kernels return nothing; results go to their &mut Tensor outputs":
        Compile(tile("    z.store(0.0);\n    return 1.0;", params="z: &mut Tensor<f32, [16]>").replace(") {", ") -> f32 {", 1)),
    "tile kernels cannot be unsafe: their loads and stores are always checked":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [16]>").replace("fn k", "unsafe fn k")),
    "launch_contract applies to #[kernel] functions only (a tile kernel's grid is its output's partition)":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [16]>")
                .replace("#[tile]", "#[tile]\n#[launch_contract(block = (32, 1, 1))]")),
    "'k' is marked both #[kernel] and #[tile]; a kernel is one or the other":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [16]>").replace("#[tile]", "#[kernel]\n#[tile]")),
    "'t' is a kernel; kernels are launched from the host, not called":
        Compile(tile("    z.store(0.0);", params="z: &mut Tensor<f32, [16]>").replace("fn k", "fn t")
                + simt("    t(a);")),
    # 12.3 Binding the generics
    "kernel 'two': generic 'B' is 8 from one output's tiles and 16 from argument 2 ('b')": Launch(_two),
    "kernel 'k': generic 'B' is 32 from the output partitions but was set to 64 (ox_kernel_set_generic)":
        Launch(_set_generic_disagrees),
    "kernel 'k': generic 'C' is not bound: it must size a dim of a `&mut Tensor` output, whose partition gives its value, or of an input, or be set with ox_kernel_set_generic":
        Launch(_unbound),
    "kernel 'mm': every candidate sets the same generics; candidate 1 does not set 'BK' and candidate 0 does":
        Launch(_candidates_differ),
    "kernel 'mm': no candidate configuration runs; the first one failed with: ...": Launch(_no_candidate_runs),
    "... the stream is capturing a CUDA graph, where they cannot be measured: launch it once before capturing":
        GpuLaunch(_capturing),
    "'z' stores tiles of shape [32], found shape [16]":
        Compile(tile("    z.store(x.partition([B]).load([0]));", generics="const B: i32",
                     params="z: &mut Tensor<f32, [32]>, x: &Tensor<f32, [-1]>")),
    "tile.oxk:2:22: error: tile shapes are static powers of two: dim 0 of output 'z' is B = 12":
        Launch(lambda dev: _tile_add(dev, 12)),
    "... of the partition of 'x' is C = 24": Launch(_partition_generic),
    "const generic 'B' = 256 does not fit in u8": Launch(_u8_generic),
    "a tile holds at most 65536 elements; output 'z' has the tile shape [131072]":
        Launch(lambda dev: _tile_add(dev, 131072)),
    "kernel 'k' has a tile of 131072 elements; this version of the tile lowering handles at most 65536":
        Launch(_lowering_tile),
    "ox_emit: no kernel of this source has a generic 'BQ'":
        Emit(ADD, kind="ir", generics={"BQ": 16}),
    # 12.4 Tiles
    "a tile of f32, shape [64, 32]":
        Compile(tile("    let t = m.partition([64, 32]).load([0, 0]);\n    if t { }\n    z.store(0.0);", params=TILE2)),
    "expected f32, found a tile of f32, shape [16]":
        Compile(tile("    let t: f32 = load_tile_like(x, z);\n    z.store(0.0);")),
    "local variables hold scalars and tiles (a tile's type is not written: remove the annotation)":
        Compile(tile("    let t: [f32; 4] = [0.0; 4];\n    z.store(0.0);")),
    "'a' is a tile of shape [16], found shape [32]":
        Compile(tile("    let mut a = load_tile_like(x, z);\n    a = x.partition([32]).load([0]);\n    z.store(a);")),
    "'a' is a tile of f32, found a tile of i32; convert with 'as f32'":
        Compile(tile("    let mut a = load_tile_like(x, z);\n    a = iota([16], 0) + 1i32;\n    z.store(a);")),
    "mismatched types: f32 += i32":
        Compile(tile("    let mut a = load_tile_like(x, z);\n    a += 1i32;\n    z.store(a);")),
    "tiles of shapes [4, 1] and [4, 8] do not broadcast (dims must be equal or 1)":
        Compile(tile("    let mut a = full([4, 1], 0.0f32);\n    a += m.partition([4, 8]).load([0, 0]);\n"
                     "    z.store(broadcast_to(a, [4, 8]));", params=TILE2)),
    "'<<=' on a tile: only += -= *= /= %= are defined":
        Compile(tile("    let mut a = iota([16], 0);\n    a <<= 1;\n    z.store(a as f32);")),
    "the branches of 'if' give tiles of shapes [16] and [32] (an 'if' does not broadcast: broadcast_to one shape first)":
        Compile(tile("    let u = if tile_id(0) == 0 { load_tile_like(x, z) } else { x.partition([32]).load([0]) };\n"
                     "    z.store(0.0);")),
    "expected a number or bool for a condition, found a tile of bool, shape [16]":
        Compile(tile("    if load_tile_like(x, z) > 0.0 { }\n    z.store(0.0);")),
    "... for an argument, ...":
        Compile(tile("    let v = f(load_tile_like(x, z));\n    z.store(0.0);", pre="fn f(v: f32) -> f32 { v }\n")),
    "... for the assigned value, ...":
        Compile(tile("    let mut s = 0.0f32;\n    s = load_tile_like(x, z);\n    z.store(0.0);")),
    "a tile of 2 dims is not indexed with [i]: read an element with 't.at([i, j])'":
        Compile(tile("    let t = m.partition([4, 8]).load([0, 0]);\n    let v = t[0];\n    z.store(0.0);", params=TILE2)),
    "item() takes the element of a tile of one element, found shape [16]: read one with 't.at([..])', or reduce it first":
        Compile(tile("    let v = load_tile_like(x, z).item();\n    z.store(0.0);")),
    "'z' is an output tile (&mut Tensor): its other elements belong to other blocks, so it is not read element by element; read this block's tile with load_tile_like(z, z), and write it with 'z.store(t)'":
        Compile(tile("    let v = z[0];\n    z.store(0.0);")),
    "'m' has 2 dims: read an element with 'm.at([i, j])', ...":
        Compile(tile("    let v = m[0];\n    z.store(0.0);", params=TILE2)),
    "a tensor is not written element by element; store a whole tile into an output with 'z.store(t)'":
        Compile(tile("    z[0] = 1.0;\n    z.store(0.0);")),
    # 12.5 Built-ins and methods
    "the axis of tile_id must be an integer literal":
        Compile(tile("    let a = 0;\n    let v = tile_id(a);\n    z.store(0.0);")),
    "axis 1 is out of range for tile_id: 'z' has rank 1 (axes 0..0)":
        Compile(tile("    let v = tile_id(1);\n    z.store(0.0);")),
    "a tile index must be usize, found u32; convert it with 'as usize'":
        Compile(tile("    z.store(x.partition([16]).load([1u32]));")),
    "load_tile_like(x, z) needs tensors of one rank: 'x' has rank 1, 'z' rank 2":
        Compile(tile("    z.store(load_tile_like(x, z));", params=TILE2)),
    "an element index must be usize, found u32; convert it with 'as usize'":
        Compile(tile("    z.store(x[1u32]);")),
    "'m' has rank 2, but at gives 1 index":
        Compile(tile("    z.store(m.at([0]));", params=TILE2)),
    "at takes element indices as an array, one usize per dim: 'x.at([i])'":
        Compile(tile("    z.store(x.at(0));")),
    "'m' has rank 2, but the tile of load_at has 1 dims":
        Compile(tile("    let t = m.load_at([0, 0], [16]);\n    z.store(0.0);", params=TILE2)),
    "gather needs at least one index tile; for one element write 'x.at([..])'":
        Compile(tile("    let t = x.gather([0]);\n    z.store(0.0);")),
    "a gather index is an integer tile or scalar, found a tile of f32":
        Compile(tile("    z.store(x.gather([load_tile_like(x, z)]));")),
    "'m' has rank 2: gather takes 2 indexes as an array, 'm.gather([rows, cols])'":
        Compile(tile("    let t = m.gather([iota([4, 8], 0)]);\n    z.store(0.0);", params=TILE2)),
    "'z' is an output tile (&mut Tensor), which cannot be partitioned again: read this block's tile of it with load_tile_like(z, z)":
        Compile(tile("    z.store(z.partition([16]).load([0]));")),
    "'x' has rank 1, but the partition gives 2 sizes":
        Compile(tile("    let t = x.partition([4, 4]).load([0, 0]);\n    z.store(0.0);")),
    "tile shapes are static powers of two: dim 0 of the partition of 'x' is 12":
        Compile(tile("    let t = x.partition([12]).load([0]);\n    z.store(0.0);")),
    "the partition has rank 1, but load gives 2 indexes":
        Compile(tile("    z.store(x.partition([16]).load([0, 0]));")),
    "load takes the tile's index as an array, one usize per dim: '.load([i])'":
        Compile(tile("    z.store(x.partition([16]).load(0));")),
    "the padding value must be a constant of the tensor's dtype f32: a literal, f32::INFINITY, f32::NEG_INFINITY, f32::MAX or f32::MIN":
        Compile(tile("    z.store(x.partition([16]).load_padded([0], s));",
                     params="z: &mut Tensor<f32, [16]>, x: &Tensor<f32, [-1]>, s: f32")),
    "'x' is a read-only tensor (&Tensor); tiles are stored into &mut Tensor outputs":
        Compile(tile("    x.store(load_tile_like(x, z));\n    z.store(0.0);")),
    "'z' stores tiles of shape [16], found shape [32] (a store does not broadcast: broadcast_to the tile's shape first)":
        Compile(tile("    z.store(x.partition([32]).load([0]));")),
    "'z' holds f32, found a tile of i32, shape [16]; convert with 'as f32'":
        Compile(tile("    z.store(iota([16], 0) + 1i32);")),
    "'reduce_sum' reduces a tile, found u32":
        Compile(tile("    let v = reduce_sum(1u32, 0);\n    z.store(0.0);")),
    "'reduce_min' needs a numeric tile, found a bool tile":
        Compile(tile("    let v = reduce_min(load_tile_like(x, z) > 0.0, 0);\n    z.store(0.0);")),
    "'dot' takes 2-D tiles, found [16]":
        Compile(tile("    let v = dot(load_tile_like(x, z), load_tile_like(x, z));\n    z.store(0.0);")),
    "'dot' multiplies two tiles of one dtype, bf16, f16, tf32 or f32, two fp8 tiles (f8e4m3, f8e5m2), or two integer tiles of one dtype (i8, u8, i16, i32); found f32 and i32":
        Compile(tile("    let t = m.partition([4, 4]).load([0, 0]);\n    let v = dot(t, iota([4, 8], 0));\n    z.store(0.0);",
                     params=TILE2)),
    "'dot': the inner dims differ: [4, 4] x [2, 8]":
        Compile(tile("    z.store(dot(m.partition([4, 4]).load([0, 0]), m.partition([2, 8]).load([0, 0])));",
                     params=TILE2)),
    "'mma' accumulates into an f32 tile of shape [4, 4], found f32 of [2, 8]":
        Compile(tile("    let t = m.partition([4, 4]).load([0, 0]);\n    let v = mma(t, t, m.partition([2, 8]).load([0, 0]));\n"
                     "    z.store(0.0);", params=TILE2)),
    "a tensor (&Tensor) has methods partition([..]), at([..]), load_at([..], [..]), gather([..]), dim(k) and stride(k), not 'len'":
        Compile(tile("    let n = x.len();\n    z.store(0.0);")),
    "an output tile (&mut Tensor) has methods store(t), dim(k) and stride(k), not 'foo'":
        Compile(tile("    z.foo();\n    z.store(0.0);")),
    "a partition has methods load([..]), load_padded([..], value), prefetch([..]) and num_tiles(axis), not 'store'":
        Compile(tile("    x.partition([16]).store(load_tile_like(x, z));\n    z.store(0.0);")),
    "unknown function": Compile(simt("    let t = tile_id(0);")),
    # 12.6 Operations on tiles
    "mismatched types: f32 + i32; convert one side with 'as'":
        Compile(tile("    z.store(load_tile_like(x, z) + 1i32);")),
    "tiles of shapes [4, 8] and [8, 4] do not broadcast (dims must be equal or 1)":
        Compile(tile("    z.store(m.partition([4, 8]).load([0, 0]) + m.partition([8, 4]).load([0, 0]));", params=TILE2)),
    "tiles of shapes [4, 8] and [1, 16] do not broadcast (dims must be equal or 1)":
        Compile(tile("    z.store(m.partition([4, 8]).load([0, 0]) + m.partition([1, 16]).load([0, 0]));", params=TILE2)),
    "select needs two values of one type, found f32 and i32":
        Compile(tile("    z.store(select(load_tile_like(x, z) > 0.0, 1.0f32, 2i32));")),
    "the condition of select must be bool (or a tile of bool), found u32":
        Compile(tile("    z.store(select(iota([16], 0) + 1u32, 1.0f32, 2.0f32));")),
    "this tile size does not evaluate: B = 16 / 0":
        Compile(tile("    z.store(full([B / 0], 0.0f32));", generics="const B: i32")),
    "a tile size is an integer literal, a const generic, or an expression of them ([D / 2, BM * 2])":
        Compile(tile("    let n = 16;\n    z.store(full([n], 0.0f32));")),
    "the slice's dim 0, 2 elements from 3, passes the tile's 4":
        Compile(tile("    let t = x.partition([4]).load([0]).slice([3], [2]);\n    z.store(0.0);")),
    # 12.7 Scalar code
    "'thread::index_1d' is a SIMT builtin, not available in tile kernels: a tile kernel says what one block's tile does (tile_id(axis) is this block's tile), and the compiler shares the work among threads":
        Compile(tile("    let i = thread::index_1d();\n    z.store(0.0);")),
    "'thread::grid_stride' is a SIMT builtin, not available in tile kernels: each block handles its own tile (tile_id(axis))":
        Compile(tile("    for i in thread::grid_stride(16) { }\n    z.store(0.0);")),
    "'unsafe' is not available in tile kernels: tile loads and stores are always in bounds (edges are masked)":
        Compile(tile("    unsafe { z.store(0.0); }")),
    "tile kernels return nothing; end the expression with ';' (results go to 'z.store(t)')":
        Compile(tile("    z.store(0.0);\n    1.0f32")),
    # 12.9 Not yet, and known limitations
    "kernel 'k' needs 553216 bytes of shared memory for its reductions, layout changes and dot operands; a block has 232448 here (use smaller tiles)":
        Emit(tile("    let t = dot(a.partition([256, 16]).load([0, 0]), b.partition([16, 512]).load([0, 0]));\n"
                  "    z.store(t.slice([0, 0], [256, 256]));",
                  params="z: &mut Tensor<f32, [256, 256]>, a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>"),
             kind="ptx", arch="sm_90"),
    "load_tile_like(a, b) reads output 'a' at the tiles of output 'b', whose tile shape differs: those elements belong to other blocks":
        Compile(tile("    b.store(load_tile_like(a, b));\n    a.store(0.0);",
                     params="a: &mut Tensor<f32, [16]>, b: &mut Tensor<f32, [32]>")),
    # 13. Not yet (and section 2, 9)
    "step_by(0) would never advance the loop": Compile(simt("    for j in (0..4).step_by(0) { }")),
    "argument 's' of 'f' must be a shared array of f32 with the declared length, found a shared array":
        Compile(simt("    let s = SharedArray::<f32, 8>::new();\n    s[0] = 1.0;\n    let v = f(s);",
                     pre="fn f(s: SharedArray<f32, 4>) -> f32 { s[0] }\n")),
    # 14. Limits
    "t.oxk:3:32: error: kernel 'k' inlines more than 1000 device-function calls, the compiler's limit (each call is a copy of the function's body)":
        Compile(INLINE_CHAIN, filename="t.oxk"),
    "the source is larger than 1048576 bytes, the compiler's limit": Compile(simt("") + "//" + "x" * (1 << 20)),
    "too many functions: a source has at most 1000": Compile(_functions(1001)),
    "device functions nested too deeply: calls inside calls are inlined at most 16 deep":
        Compile(simt("    let v = f17(1u32);", pre="fn f0(x: u32) -> u32 { x }\n" + "".join(
            f"fn f{j}(x: u32) -> u32 {{ f{j - 1}(x) }}\n" for j in range(1, 18)))),
    "loops nested too deeply: the limit is 64":
        Compile(simt("".join(f"    for j{d} in 0..2 {{\n" for d in range(65)) + "}" * 65)),
    "kernel 'k' inlines more than 1000 device-function calls, the compiler's limit (each call is a copy of the function's body)":
        Compile(INLINE_CHAIN),
    "kernel 'k' is too large: more than 16384 IR instructions, the compiler's limit (device functions are inlined at each call, and grid_stride copies its loop body)":
        Compile(_straight(3000)),
    "kernel 'k' has more than 256 loops, the compiler's limit (counting the loops of inlined functions, and three to five for each grid_stride loop)":
        Compile(simt("    loop { break; }\n" * 257)),
    "kernel 'k' has too many loops for its size: 208 loops in 4808 IR instructions, and the compiler's limit on loops times instructions is 1000000 (counting inlined functions, and three to five loops for each grid_stride loop)":
        Compile(simt("    let mut s = 0u32;\n" + "    for j in 0..4u32 { s += j; }\n" * 257)),
    "kernel 'k' has more than 256 bounds-checked accesses, the compiler's limit (counting those of inlined functions; a launch contract or a get_mut guard proves accesses in bounds, and those need no check)":
        Compile(simt("    let mut s = 0.0f32;\n" + "".join(f"    s += a[(s as usize) + {j}];\n" for j in range(257)))),
    "the kernels of this source are too large together: more than 20480 IR instructions, the compiler's limit":
        Compile(_straight(1800) + _straight(1800, "k2")),
    "kernel 'k' is too large after the tile lowering: more than 32768 IR instructions, the compiler's limit (each thread's share of a tile is unrolled: use smaller tiles or fewer tile operations)":
        Emit(_tile_chain(250, op="{p} * 1.5 + t0"), kind="ptx", arch="sm_90"),
    "kernel 'k' has more than 256 loops after the tile lowering, the compiler's limit (the lowering loops over tiles: on the CPU each tile operation is a loop; use fewer tile operations)":
        Emit(_tile_chain(258, op="-{p}"), kind="llvm", target="cpu"),
    "kernel 'k' has too many loops for its size after the tile lowering: 249 loops in 4024 IR instructions, and the compiler's limit on loops times instructions is 1000000 (...)":
        Emit(_tile_chain(258), kind="llvm", target="cpu"),
    "the kernels of this source are too large together after the tile lowering: more than 65536 IR instructions, the compiler's limit":
        Emit("".join(_tile_chain(190, f"k{j}", op="{p} * 1.5 + t0") for j in range(3)), kind="ptx", arch="sm_90"),
}


# ------------------------------------------------------------------ tests


def test_every_quote_has_a_trigger():
    quoted = quoted_messages(DOC.read_text())
    missing = [f"line {line}: {m}" for m, line in sorted(quoted.items(), key=lambda x: x[1])
               if m not in TRIGGERS]
    assert not missing, "quoted in docs/language.md with no trigger in TRIGGERS:\n" + "\n".join(missing)
    stale = [m for m in TRIGGERS if m not in quoted]
    assert not stale, "TRIGGERS has messages the docs no longer quote:\n" + "\n".join(stale)


def _params():
    out = []
    for i, (msg, trig) in enumerate(TRIGGERS.items()):
        marks = [pytest.mark.gpu] if getattr(trig, "gpu", False) else []
        out.append(pytest.param(msg, trig, id=f"{i:03d}-{msg[:40]}", marks=marks))
    return out


@pytest.mark.parametrize("msg,trigger", _params())
def test_the_compiler_says_it(msg, trigger):
    dev = oxide.device("cuda" if getattr(trigger, "gpu", False) else "cpu")
    with pytest.raises(oxide.OxideError) as e:
        trigger(dev)
    assert says(str(e.value), msg), f"docs quote:\n  {msg}\nOxide says:\n  {e.value}"
