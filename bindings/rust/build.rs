//! Links liboxide: from $OXIDE_LIB_DIR, else the repository's build/ folder.
//! An rpath to that folder lets tests and binaries run without LD_LIBRARY_PATH.
use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=OXIDE_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let dir = match env::var_os("OXIDE_LIB_DIR") {
        Some(d) => PathBuf::from(d),
        None => manifest.join("../../build"),
    };
    if !dir.join("liboxide.so").exists() {
        // Leave it to the linker's default paths (an installed liboxide), but say why.
        println!(
            "cargo:warning=no liboxide.so in {}; set OXIDE_LIB_DIR to the folder of a build",
            dir.display()
        );
        println!("cargo:rustc-link-lib=dylib=oxide");
        return;
    }
    let dir = dir.canonicalize().unwrap_or(dir);
    println!(
        "cargo:rerun-if-changed={}",
        dir.join("liboxide.so").display()
    );
    println!("cargo:rustc-link-search=native={}", dir.display());
    println!("cargo:rustc-link-lib=dylib=oxide");
    println!("cargo:rustc-link-arg=-Wl,-rpath,{}", dir.display());
}
