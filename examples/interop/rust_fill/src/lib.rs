//! `rust_affine(managed, a, b)`: x = a * x + b on a DLPack f32 tensor, by an
//! Oxide kernel launched from Rust, on the tensor's own device (CPU or CUDA).
//! Oxide owns `managed` from the call on (DLPack's rule): its deleter runs
//! exactly once, here, when the imported tensor is dropped. The work is
//! synchronized before returning, so the caller may read at once.
//! Returns 0, or an Oxide status with the message in `rust_last_error()`.
use std::ffi::{c_char, c_void, CString};
use std::sync::Mutex;

use oxide::{Arg, Device, DeviceType, LaunchConfig, Module, Tensor};

const AFFINE: &str = r#"#[kernel]
fn affine(x: DisjointSlice<f32>, a: f32, b: f32) {
    let i = thread::index_1d();
    if let Some(o) = x.get_mut(i) { *o = a * *o + b; }
}
"#;

static LAST_ERROR: Mutex<Option<CString>> = Mutex::new(None);

fn run(managed: *mut c_void, a: f32, b: f32) -> oxide::Result<()> {
    // Safety: the caller hands over a valid DLPack 1.x managed tensor.
    let t = unsafe { Tensor::from_dlpack(managed) }?;
    let dev: Device = t.device();
    let m = Module::compile(dev, AFFINE)?;
    let k = m.kernel("affine")?;
    let n = t.numel() as usize;
    k.launch(&LaunchConfig::for_elements(n, 256), &[Arg::tensor(&t), Arg::f32(a), Arg::f32(b)])?;
    if dev.device_type() == DeviceType::Cuda {
        dev.synchronize()?;
    }
    Ok(()) // t drops here: the producer's deleter runs
}

/// # Safety
/// `managed` is a `DLManagedTensorVersioned*` that the caller gives up.
#[no_mangle]
pub unsafe extern "C" fn rust_affine(managed: *mut c_void, a: f32, b: f32) -> i32 {
    match run(managed, a, b) {
        Ok(()) => 0,
        Err(e) => {
            *LAST_ERROR.lock().unwrap() = CString::new(e.message()).ok();
            e.status()
        }
    }
}

/// The message of the last failed call ("" if none); valid until the next call.
#[no_mangle]
pub extern "C" fn rust_last_error() -> *const c_char {
    let g = LAST_ERROR.lock().unwrap();
    g.as_ref().map_or(b"\0".as_ptr() as *const c_char, |s| s.as_ptr())
}
