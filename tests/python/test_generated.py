"""The generated declarations (_decls.py, ffi.rs) must match oxide.h: re-run
the generator and compare. If this fails, run python3 bindings/gen/gen_decls.py
and commit the result."""
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_generated_files_are_up_to_date(tmp_path):
    py, rs = tmp_path / "_decls.py", tmp_path / "ffi.rs"
    subprocess.run([sys.executable, str(ROOT / "bindings/gen/gen_decls.py"), "--python", str(py),
                    "--rust", str(rs)], check=True)
    for fresh, committed in ((py, "bindings/python/oxide/_decls.py"),
                             (rs, "bindings/rust/src/ffi.rs")):
        assert fresh.read_text() == (ROOT / committed).read_text(), (
            f"{committed} is stale: run python3 bindings/gen/gen_decls.py")


def test_every_prototype_is_declared():
    import oxide._decls as D

    header = (ROOT / "core/include/oxide/oxide.h").read_text()
    names = {line.split("(")[0].split()[-1].lstrip("*")
             for line in header.replace("\n", " ").split("OX_API")[1:] if "(" in line}
    names.discard("__declspec")
    names = {n for n in names if n.startswith("ox_")}
    assert names == set(D.FUNCTIONS)
