//! `rust_affine(managed, a, b)`: x = a * x + b on a DLPack f32 tensor, by an
//! Oxide kernel launched from Rust, on the tensor's own device (CPU or CUDA);
//! `rust_affine_on(managed, a, b, cu_stream)` queues it on the caller's CUDA
//! stream instead, without waiting.
//! Oxide owns `managed` from the call on (DLPack's rule): its deleter runs
//! exactly once, here, when the imported tensor is dropped. The work is
//! synchronized before returning, so the caller may read at once.
//! Returns 0, or an Oxide status with the message in `rust_last_error()`.
use std::ffi::{c_char, c_void, CString};
use std::sync::Mutex;

use oxide::{Arg, Device, DeviceType, LaunchConfig, Module, Stream, Tensor};

const AFFINE: &str = r#"#[kernel]
fn affine(x: DisjointSlice<f32>, a: f32, b: f32) {
    let i = thread::index_1d();
    if let Some(o) = x.get_mut(i) { *o = a * *o + b; }
}
"#;

static LAST_ERROR: Mutex<Option<CString>> = Mutex::new(None);

fn run(managed: *mut c_void, a: f32, b: f32, cu_stream: usize) -> oxide::Result<()> {
    // Safety: the caller hands over a valid DLPack 1.x managed tensor.
    let t = unsafe { Tensor::from_dlpack(managed) }?;
    let dev: Device = t.device();
    let m = Module::compile(dev, AFFINE)?;
    let k = m.kernel("affine")?;
    let n = t.numel() as usize;
    let args = [Arg::tensor(&t), Arg::f32(a), Arg::f32(b)];
    let cfg = LaunchConfig::for_elements(n, 256);
    if cu_stream != 0 && dev.device_type() == DeviceType::Cuda {
        // the caller's stream (torch's current one): queued there, no wait;
        // the memory goes back to the producer ordered on that stream
        // Safety: the caller passes a live CUstream of the tensor's device.
        let s = unsafe { Stream::wrap(dev, cu_stream as *mut c_void) }?;
        t.set_release_stream(Some(&s))?;
        k.launch_on(Some(&s), &cfg, &args)?;
    } else {
        k.launch(&cfg, &args)?;
        if dev.device_type() == DeviceType::Cuda {
            dev.synchronize()?;
        }
    }
    Ok(()) // t drops here: the producer's deleter runs
}

/// # Safety
/// `managed` is a `DLManagedTensorVersioned*` that the caller gives up.
#[no_mangle]
pub unsafe extern "C" fn rust_affine(managed: *mut c_void, a: f32, b: f32) -> i32 {
    rust_affine_on(managed, a, b, 0)
}

/// As `rust_affine`, queued on CUDA stream `cu_stream` (a `CUstream`; 0: the
/// device's default stream, synchronized before returning) without waiting.
///
/// # Safety
/// `managed` as for `rust_affine`; `cu_stream` is 0 or a live `CUstream` of
/// the tensor's device.
#[no_mangle]
pub unsafe extern "C" fn rust_affine_on(managed: *mut c_void, a: f32, b: f32, cu_stream: usize) -> i32 {
    match run(managed, a, b, cu_stream) {
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
