#!/usr/bin/env python3
"""Generates api_null_test.c: every function of oxide.h called with NULL for
each of its pointer parameters (handles included), the other arguments valid.

    python3 tests/gen_api_null_test.py OUT.c

The build runs this (tests/CMakeLists.txt), so a function added to oxide.h is
tested without anyone writing the test; a parameter type the table below does
not know stops the build. The fixtures and the checks live in
tests/api_null_fixture.c:
  - a call returning ox_status must return OX_ERR_INVALID_ARGUMENT with a
    message, unless NULL is documented as meaning something (NULLABLE below);
  - a call returning a value must set the last error to
    OX_ERR_INVALID_ARGUMENT (its return is a documented sentinel);
  - void destroy/release/free calls ignore NULL;
  - and, under ASan/UBSan/LSan (CI), no call crashes, reads a wild pointer or
    leaks.
"""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bindings", "gen"))
import gen_decls  # noqa: E402  (the header parser the bindings use)

# (function, parameter) where NULL is a documented value, not an error.
NULLABLE = {
    ("ox_free", "p"),
    ("ox_stream_wrap", "cu_stream"),  # the legacy default stream on CUDA
    ("ox_tensor_partition_grid", "grid"),
    ("ox_tensor_to_dlpack", "consumer"),
    ("ox_module_compile", "opts"),
    ("ox_module_compile_file", "opts"),
    ("ox_emit", "opts"),
    ("ox_tensor_set_release_stream", "s"),  # back to the default (a host wait)
}
for f in ("ox_tensor_empty", "ox_tensor_from_host", "ox_tensor_to_host", "ox_tensor_copy_from_host",
          "ox_tensor_zeros", "ox_tensor_full", "ox_tensor_arange", "ox_tensor_copy", "ox_tensor_to",
          "ox_launch", "ox_launch_check", "ox_chain_run", "ox_chain_capture"):
    NULLABLE.add((f, "s"))  # NULL: the device's default stream

# Functions that set no message (async-signal-safe: formatting one allocates).
NO_MESSAGE = {"ox_stream_cancel"}

# Functions whose only effect on NULL is to ignore it (documented).
IGNORES_NULL = {"ox_free", "ox_stream_destroy", "ox_event_destroy", "ox_tensor_release",
                "ox_module_destroy", "ox_chain_destroy"}

HANDLE_VALUES = {"ox_device": "F.dev", "ox_stream": "F.stream", "ox_event": "F.event",
                 "ox_module": "F.mod", "ox_kernel": "F.kernel", "ox_chain": "F.chain"}
ENUM_VALUES = {"ox_dtype": "OX_F32", "ox_device_type": "OX_DEVICE_CPU", "ox_status": "OX_OK",
               "ox_target": "OX_TARGET_CPU", "ox_emit_kind": "OX_EMIT_IR"}
BY_NAME = {  # scalar parameters, by name
    ("int", "ndim"): "1", ("int", "ordinal"): "0", ("int", "dim"): "0", ("int", "dim0"): "0",
    ("int", "dim1"): "0", ("int", "versioned"): "1", ("int", "nargs"): "2", ("int", "index"): "0", ("int", "n"): "1",
    ("int64_t", "start"): "0", ("int64_t", "stop"): "1", ("int64_t", "step"): "1",
    ("int64_t", "n"): "4", ("int64_t", "value"): "4",
    ("double", "value"): "1.0", ("double", "start"): "0.0", ("double", "step"): "1.0",
    ("size_t", "bytes"): "sizeof F.buf",
}
POINTER_VALUES = {  # (base, const, name) of pointer parameters
    ("int64_t", True, "shape"): "F.shape", ("int64_t", True, "tile"): "F.shape",
    ("int64_t", False, "grid"): "F.grid", ("int", True, "perm"): "F.perm",
    ("void", True, "host"): "F.buf", ("void", True, "src"): "F.buf", ("void", False, "dst"): "F.buf",
    ("void", False, "p"): "NULL", ("void", False, "cu_stream"): "NULL",
    ("void", False, "managed"): "fx_dlpack()",
    ("char", True, "source"): "F.source", ("char", True, "path"): "F.path",
    ("ox_compile_options", True, "opts"): "&F.opts", ("ox_launch_config", True, "cfg"): "&F.cfg",
    ("ox_arg", True, "args"): "F.args", ("ox_tile_candidate", True, "candidates"): "F.cands",
    ("int", False, "index"): "&O.count",
    ("int", False, "count"): "&O.count", ("float", False, "ms"): "&O.ms",
    ("ox_param_info", False, "out"): "&O.param",
}
OUT_VALUES = {"ox_device": "&O.device", "ox_stream": "&O.stream", "ox_event": "&O.event",
              "ox_tensor": "&O.tensor", "ox_module": "&O.module", "ox_kernel": "&O.kernel",
              "ox_chain": "&O.chain", "void": "&O.managed", "char": "&O.text"}


def is_pointer(ty, handles):
    return ty["ptr"] > 0 or ty["base"] in handles


def value(fn, ty, name, handles):
    base, ptr = ty["base"], ty["ptr"]
    if ptr == 0 and base in handles:
        if base == "ox_tensor":
            return "F.t2" if name == "src" else "F.t"
        return HANDLE_VALUES[base]
    if ptr == 0 and base in ENUM_VALUES:
        return ENUM_VALUES[base]
    if ptr == 0:
        v = BY_NAME.get((base, name))
    elif base == "char" and ty["const"] and name == "name":
        v = '"k"' if fn == "ox_module_get_kernel" else '"G"'
    elif (ptr == 1 and base in handles) or ptr == 2:
        v = OUT_VALUES.get(base)
    else:
        v = POINTER_VALUES.get((base, ty["const"], name))
    if v is None:
        raise SystemExit(f"gen_api_null_test: no test value for parameter '{name}' of {fn} "
                         f"({'const ' if ty['const'] else ''}{base}{'*' * ptr}); add one")
    return v


def main():
    out = sys.argv[1]
    h = gen_decls.parse_header(gen_decls.HEADER)
    handles = {x[0] for x in h["handles"]}
    lines = ["/* api_null_test.c - GENERATED by tests/gen_api_null_test.py from oxide.h. */",
             '#include "api_null_fixture.h"', "", "void fx_run_all(void) {", "  ox_status st;",
             "  (void)st;"]
    calls = 0
    for fn, ret, params in h["functions"]:
        for i, (ty, name) in enumerate(params):
            if not is_pointer(ty, handles):
                continue
            args = ", ".join("NULL" if j == i else value(fn, t, n, handles)
                             for j, (t, n) in enumerate(params))
            lines.append(f'  fx_begin("{fn}", "{name}");')
            if ret["base"] == "ox_status" and ret["ptr"] == 0:
                lines.append(f"  st = {fn}({args});")
                lines.append(f"  fx_status(st, {int((fn, name) in NULLABLE)}, {int(fn not in NO_MESSAGE)});")
            elif ret["base"] == "void" and ret["ptr"] == 0:
                lines.append(f"  {fn}({args});")
                lines.append(f"  fx_void({int(fn in IGNORES_NULL or (fn, name) in NULLABLE)});")
            else:
                lines.append(f"  (void){fn}({args});")
                lines.append(f"  fx_value({int((fn, name) in NULLABLE)});")
            calls += 1
    lines += [f"  fx_done({calls});", "}", ""]
    with open(out, "w", encoding="utf-8") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
