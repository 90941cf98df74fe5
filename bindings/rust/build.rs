//! Links liboxide into the crate, so that anything built on it (tests, a
//! binary in another workspace, a `cdylib` loaded by Python) runs with no
//! environment variable and no library path.
//!
//! Where: $OXIDE_LIB_DIR (a build folder or an install's lib/), else the
//! repository's build/ folder. What, in order:
//!   - the self-contained static bundle (bundle/liboxide.a in a build,
//!     liboxide.a next to liboxide.so in an install: LLVM and the C++ runtime
//!     inside, only ox_* exported), linked statically: the result needs just
//!     libc, libm, libdl and libpthread;
//!   - else liboxide.so, with an rpath to its folder in this crate's own
//!     binaries (an rpath does not reach dependents: their binaries need the
//!     library on the loader's path);
//!   - else the linker's default paths.
//! OXIDE_LINK=dylib picks the shared library even where a bundle exists.
//!
//! `links = "oxide"` (Cargo.toml): dependents' build scripts get
//! DEP_OXIDE_INCLUDE (oxide.h's folder) and DEP_OXIDE_LIB_DIR.
use std::env;
use std::path::{Path, PathBuf};

fn main() {
    println!("cargo:rerun-if-env-changed=OXIDE_LIB_DIR");
    println!("cargo:rerun-if-env-changed=OXIDE_LINK");
    println!("cargo:rerun-if-changed=build.rs");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let dir = match env::var_os("OXIDE_LIB_DIR") {
        Some(d) => PathBuf::from(d),
        None => manifest.join("../../build"),
    };
    let dir = dir.canonicalize().unwrap_or(dir);
    let include = manifest.join("../../core/include");
    println!("cargo:include={}", include.canonicalize().unwrap_or(include).display());
    println!("cargo:lib_dir={}", dir.display());

    let dylib_only = env::var("OXIDE_LINK").map(|v| v == "dylib").unwrap_or(false);
    let bundle = [dir.join("bundle/liboxide.a"), dir.join("liboxide.a")]
        .into_iter()
        .find(|p| is_bundle(p));
    match bundle {
        Some(a) if !dylib_only => {
            println!("cargo:rerun-if-changed={}", a.display());
            println!("cargo:rustc-link-search=native={}", a.parent().unwrap().display());
            println!("cargo:rustc-link-lib=static=oxide");
            for lib in ["dl", "pthread", "m"] {
                println!("cargo:rustc-link-lib=dylib={lib}");
            }
        }
        _ if dir.join("liboxide.so").exists() => {
            println!("cargo:rerun-if-changed={}", dir.join("liboxide.so").display());
            println!("cargo:rustc-link-search=native={}", dir.display());
            println!("cargo:rustc-link-lib=dylib=oxide");
            println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
        }
        _ => {
            // an installed liboxide on the linker's default paths, but say why
            println!(
                "cargo:warning=no liboxide in {}; set OXIDE_LIB_DIR to a build folder or an \
                 install's lib/",
                dir.display()
            );
            println!("cargo:rustc-link-lib=dylib=oxide");
        }
    }
}

/// The bundle, not the build's plain archive of Oxide's own objects (also
/// named liboxide.a, next to liboxide.so in a build folder): the bundle is
/// one large object with LLVM inside.
fn is_bundle(p: &Path) -> bool {
    std::fs::metadata(p).map(|m| m.len() > 16 << 20).unwrap_or(false)
}
