#!/usr/bin/env python3
"""Generates the low-level declarations of the language bindings from oxide.h.

    python3 bindings/gen/gen_decls.py [--header H] [--python OUT.py] [--rust OUT.rs]

writes bindings/python/oxide/_decls.py (ctypes structs, enum constants and an
argtypes/restype table) and bindings/rust/src/ffi.rs (#[repr(C)] structs, enum
constants and extern "C" declarations). Both are committed; tests/python/
test_generated.py fails when they are stale, so the bindings cannot drift from
the header.

The parser understands exactly the header's regular style: `#define OX_NAME
number`, `typedef enum x { ... } x;`, `typedef struct x { fields } x;` (fields
may be arrays or one anonymous-typed union), `typedef struct x_s *x;` handles
and `OX_API ret name(params);` prototypes. Anything else (static inline
helpers, comments) is skipped; an unknown C type is an error, not a guess.
"""
import argparse
import os
import re
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
HEADER = os.path.join(ROOT, "core", "include", "oxide", "oxide.h")
PY_OUT = os.path.join(ROOT, "bindings", "python", "oxide", "_decls.py")
RS_OUT = os.path.join(ROOT, "bindings", "rust", "src", "ffi.rs")

# Scalar C types: (ctypes name, Rust name).
BASE = {
    "void": (None, "()"),
    "char": ("c_char", "c_char"),
    "int": ("c_int", "c_int"),
    "size_t": ("c_size_t", "usize"),
    "int64_t": ("c_int64", "i64"),
    "uint64_t": ("c_uint64", "u64"),
    "int32_t": ("c_int32", "i32"),
    "uint32_t": ("c_uint32", "u32"),
    "double": ("c_double", "f64"),
    "float": ("c_float", "f32"),
}


# ------------------------------------------------------------------ parsing

def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def drop_inline_functions(text):
    """Removes `static inline ... { ... }` bodies (brace-matched)."""
    out, i = [], 0
    for m in re.finditer(r"static\s+inline\b", text):
        if m.start() < i:
            continue
        out.append(text[i:m.start()])
        j = text.index("{", m.end())
        depth = 0
        while True:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        i = j
    out.append(text[i:])
    return "".join(out)


def parse_type(decl):
    """'const char *name' -> ({'base','const','ptr'}, name). name may be ''."""
    decl = decl.strip()
    m = re.fullmatch(r"((?:const\s+)?[A-Za-z_]\w*)\s*((?:\*\s*(?:const\s*)?)*)\s*([A-Za-z_]\w*)?", decl)
    if not m:
        raise SystemExit(f"gen_decls: cannot parse declaration '{decl}'")
    base = m.group(1)
    const = base.startswith("const ")
    base = base[len("const "):].strip() if const else base
    return {"base": base, "const": const, "ptr": m.group(2).count("*")}, m.group(3) or ""


def parse_fields(body):
    fields = []
    # An anonymous-typed union member: union { ... } name;
    for m in re.finditer(r"union\s*\{(.*?)\}\s*(\w+)\s*;", body, re.S):
        fields.append(("union", m.group(2), parse_fields(m.group(1)), m.start()))
    rest = re.sub(r"union\s*\{.*?\}\s*\w+\s*;", lambda m: "\0" * len(m.group(0)), body, flags=re.S)
    for m in re.finditer(r"([^;\0{}]+);", rest):
        decl = m.group(1).strip()
        arr = re.search(r"\[\s*(\w+)\s*\]\s*$", decl)
        if arr:
            decl = decl[:arr.start()]
        ty, name = parse_type(decl)
        fields.append(("field", name, (ty, arr.group(1) if arr else None), m.start()))
    fields.sort(key=lambda f: f[3])
    return [f[:3] for f in fields]


def parse_header(path):
    text = drop_inline_functions(strip_comments(open(path, encoding="utf-8").read()))
    h = {"defines": [], "enums": [], "handles": [], "structs": [], "functions": []}
    for m in re.finditer(r"^\s*#define\s+(OX_\w+)\s+(-?\d+)\s*$", text, re.M):
        h["defines"].append((m.group(1), int(m.group(2))))
    for m in re.finditer(r"typedef\s+enum\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        values, nxt = [], 0
        for item in filter(None, (s.strip() for s in m.group(2).split(","))):
            name, _, val = (p.strip() for p in item.partition("="))
            nxt = int(val, 0) if val else nxt
            values.append((name, nxt))
            nxt += 1
        h["enums"].append((m.group(3), values))
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\*\s*(\w+)\s*;", text):
        h["handles"].append((m.group(2), m.group(1)))
    for m in re.finditer(r"typedef\s+struct\s+(\w+)\s*\{(.*?)\}\s*(\w+)\s*;", text, re.S):
        # the body may hold a union's braces: take up to the matching close brace
        start = text.index("{", m.start())
        depth, j = 0, start
        while True:
            depth += {"{": 1, "}": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                break
        name = re.match(r"\s*(\w+)\s*;", text[j:]).group(1)
        h["structs"].append((name, parse_fields(text[start + 1:j - 1])))
    seen = set()
    h["structs"] = [s for s in h["structs"] if not (s[0] in seen or seen.add(s[0]))]
    for m in re.finditer(r"OX_API\s+([^;(]+?)\s*\b(ox_\w+)\s*\(([^)]*)\)\s*;", text, re.S):
        ret, _ = parse_type(m.group(1))
        params = [] if m.group(3).strip() in ("", "void") else [
            parse_type(p) for p in m.group(3).split(",")]
        h["functions"].append((m.group(2), ret, params))
    if not h["functions"]:
        raise SystemExit(f"gen_decls: no OX_API prototypes found in {path}")
    return h


# ------------------------------------------------------------------ python

def py_type(ty, h):
    enums = {e[0] for e in h["enums"]}
    handles = {x[0] for x in h["handles"]}
    structs = {s[0] for s in h["structs"]}
    base, ptr = ty["base"], ty["ptr"]
    if base in handles:
        base, ptr = "void", ptr + 1  # opaque handles are void pointers to ctypes
    if ptr == 0:
        if base in enums:
            return "C.c_int"
        if base in structs:
            return base
        if base == "void":
            return "None"
        return "C." + BASE[base][0]
    if ptr == 1 and base == "char":
        return "C.c_char_p"  # NUL-terminated strings; borrowed when returned
    if ptr == 1 and base == "void":
        return "C.c_void_p"
    inner = dict(ty, base=base, ptr=ptr - 1)
    if ptr == 2 and base == "char":
        return "C.POINTER(C.c_void_p)"  # char **out: keep the raw pointer for ox_free
    return f"C.POINTER({py_type(inner, h)})"


def gen_python(h, header_rel):
    o = [f'"""Generated by bindings/gen/gen_decls.py from {header_rel}. Do not edit."""',
         "import ctypes as C", ""]
    for name, value in h["defines"]:
        o.append(f"{name} = {value}")
    for ename, values in h["enums"]:
        o.append("")
        o.append(f"# enum {ename}")
        for name, value in values:
            o.append(f"{name} = {value}")
    o.append("")
    o.append("ENUMS = {")
    for ename, values in h["enums"]:
        o.append(f"    {ename!r}: {{" + ", ".join(f"{n!r}: {v}" for n, v in values) + "},")
    o.append("}")

    def fields(name, flds, kind):
        lines, pre = [], []
        for f in flds:
            if f[0] == "union":
                uname = f"{name}_{f[1]}"
                pre += fields(uname, f[2], "Union")
                lines.append(f"        ({f[1]!r}, {uname}),")
            else:
                (ty, arr), fname = f[2], f[1]
                t = py_type(ty, h)
                lines.append(f"        ({fname!r}, {t}" + (f" * {arr}" if arr else "") + "),")
        return pre + ["", "", f"class {name}(C.{kind}):", "    _fields_ = ["] + lines + ["    ]"]

    for name, flds in h["structs"]:
        o += fields(name, flds, "Structure")
    o += ["", "", "# name: (restype, [argtypes])", "FUNCTIONS = {"]
    for name, ret, params in h["functions"]:
        args = ", ".join(py_type(t, h) for t, _ in params)
        o.append(f"    {name!r}: ({py_type(ret, h)}, [{args}]),")
    o.append("}")
    return "\n".join(o) + "\n"


# ------------------------------------------------------------------ rust

def rs_type(ty, h):
    base, ptr = ty["base"], ty["ptr"]
    known = {e[0] for e in h["enums"]} | {x[0] for x in h["handles"]} | {s[0] for s in h["structs"]}
    t = base if base in known else BASE[base][1]
    if ptr and base == "void":
        t = "c_void"
    for level in range(ptr):
        # the outermost pointer's constness is the declaration's `const` only at depth 1
        t = ("*const " if ty["const"] and level == 0 else "*mut ") + t
    return t


RS_KEYWORDS = {"type", "fn", "mod", "ref", "in", "use", "match", "loop", "move", "self", "impl"}


def rs_name(name):
    return "r#" + name if name in RS_KEYWORDS else name


def gen_rust(h, header_rel):
    o = [f"// Generated by bindings/gen/gen_decls.py from {header_rel}. Do not edit.",
         "#![allow(non_camel_case_types, dead_code)]",
         "use core::ffi::{c_char, c_int, c_void};", ""]
    for name, value in h["defines"]:
        o.append(f"pub const {name}: c_int = {value};")
    for ename, values in h["enums"]:
        # C enums are plain ints here: a Rust enum would be UB for unknown values.
        o += ["", f"pub type {ename} = c_int;"]
        o += [f"pub const {n}: {ename} = {v};" for n, v in values]
    o.append("")
    for name, opaque in h["handles"]:
        o.append(f"#[repr(C)]\npub struct {opaque} {{\n    _private: [u8; 0],\n}}")
        o.append(f"pub type {name} = *mut {opaque};")

    def fields(name, flds, kind):
        pre, lines = [], []
        for f in flds:
            if f[0] == "union":
                uname = f"{name}_{f[1]}"
                pre += fields(uname, f[2], "union")
                lines.append(f"    pub {f[1]}: {uname},")
            else:
                (ty, arr), fname = f[2], f[1]
                t = rs_type(ty, h)
                n = arr if arr is None or arr.isdigit() else f"{arr} as usize"
                lines.append(f"    pub {rs_name(fname)}: " + (f"[{t}; {n}]" if arr else t) + ",")
        return pre + ["", "#[repr(C)]", "#[derive(Clone, Copy)]", f"pub {kind} {name} {{"] + lines + ["}"]

    for name, flds in h["structs"]:
        o += fields(name, flds, "struct")
    o += ["", 'extern "C" {']
    for name, ret, params in h["functions"]:
        args = ", ".join(f"{rs_name(n or f'a{i}')}: {rs_type(t, h)}" for i, (t, n) in enumerate(params))
        r = rs_type(ret, h)
        o.append(f"    pub fn {name}({args})" + ("" if r == "()" else f" -> {r}") + ";")
    o.append("}")
    return "\n".join(o) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--header", default=HEADER)
    ap.add_argument("--python", default=PY_OUT, help="where to write _decls.py")
    ap.add_argument("--rust", default=RS_OUT, help="where to write ffi.rs")
    a = ap.parse_args(argv)
    h = parse_header(a.header)
    rel = "core/include/oxide/oxide.h"
    for path, text in ((a.python, gen_python(h, rel)), (a.rust, gen_rust(h, rel))):
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.write(text)
    print(f"gen_decls: {len(h['functions'])} functions, {len(h['enums'])} enums, "
          f"{len(h['structs'])} structs -> {a.python}, {a.rust}", file=sys.stderr)


if __name__ == "__main__":
    main()
