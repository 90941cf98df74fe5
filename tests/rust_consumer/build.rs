//! Checks the metadata the oxide crate gives dependents (its `links` key):
//! the folder of oxide.h, for a crate that compiles C against it.
fn main() {
    let inc = std::env::var("DEP_OXIDE_INCLUDE").expect("DEP_OXIDE_INCLUDE is not set");
    let header = std::path::Path::new(&inc).join("oxide/oxide.h");
    assert!(header.exists(), "no oxide.h under DEP_OXIDE_INCLUDE={inc}");
    std::env::var("DEP_OXIDE_LIB_DIR").expect("DEP_OXIDE_LIB_DIR is not set");
}
