//! Checks the metadata the oxide crate gives dependents (its `links` key),
//! and checks the crate's kernels at build time (a kernel error fails
//! `cargo build` with file:line:col).
fn main() {
    let inc = std::env::var("DEP_OXIDE_INCLUDE").expect("DEP_OXIDE_INCLUDE is not set");
    let header = std::path::Path::new(&inc).join("oxide/oxide.h");
    assert!(header.exists(), "no oxide.h under DEP_OXIDE_INCLUDE={inc}");
    std::env::var("DEP_OXIDE_LIB_DIR").expect("DEP_OXIDE_LIB_DIR is not set");
    oxide::build::compile_kernels(&["kernels/saxpy.oxk"]);
}
