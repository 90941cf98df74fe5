//! Safe Rust bindings to liboxide: compile kernels written in the Oxide kernel
//! language and run them on NVIDIA GPUs or on the CPU.
//!
//! ```no_run
//! use oxide::{Arg, Device, LaunchConfig, Module, Tensor};
//! # fn main() -> oxide::Result<()> {
//! let dev = Device::cpu()?;
//! let module = Module::compile(dev, "#[kernel] fn k(/* ... */) {}")?;
//! let x = Tensor::from_slice(dev, &[1.0f32, 2.0, 3.0])?;
//! let out = Tensor::empty(dev, oxide::Dtype::F32, &[3])?;
//! module.kernel("saxpy")?.launch(
//!     &LaunchConfig::linear(1, 256),
//!     &[Arg::tensor(&x), Arg::tensor(&x), Arg::tensor(&out), Arg::f32(2.0)],
//! )?;
//! dev.synchronize()?; // out-of-bounds accesses are reported here
//! let v: Vec<f32> = out.to_vec()?;
//! # Ok(()) }
//! ```
//!
//! Every failing call returns an [`Error`] with the C status and Oxide's message.
//!
//! # Safety: what safe code can and cannot do
//!
//! Safe Rust using this crate cannot cause undefined behaviour in the host
//! process. What makes that hold:
//!
//! - **Kernels.** A safe Oxide kernel checks or proves every access (bounds
//!   checks report [`ErrorKind::Bounds`] instead of touching memory: on the
//!   CPU from the launch itself, on CUDA from a later launch of the same
//!   thread, a synchronization or a host read, whichever comes first) and writes each output element from one thread
//!   (`DisjointSlice`, tile partitions). A kernel that is not safe in that
//!   sense, an `unsafe fn` kernel or one that runs an `unsafe { }` block (see
//!   [`Kernel::is_unsafe`]), is refused by [`Kernel::launch`] and
//!   [`Kernel::launch_on`]: it runs only through the `unsafe`
//!   [`Kernel::launch_unchecked`], whose caller promises what the kernel's
//!   `unsafe` assumes. This matters on the CPU device, where a kernel's
//!   accesses are the host process's own memory.
//! - **Lifetimes.** An [`Arg`] borrows its [`Tensor`] for the launch call; a
//!   tensor dropped while GPU work still uses it is freed stream-ordered,
//!   after that work (foreign memory: after a synchronization). A [`Kernel`]
//!   borrows its [`Module`]; dropping a module waits for the GPU work of the
//!   whole context before its code is unloaded. Dropping a [`Stream`] waits
//!   for its work.
//! - **Handles.** liboxide refuses a handle after release (generation-checked
//!   handles), so a logic error in a binding gives an error, not a use after
//!   free.
//! - **Threads.** [`Device`], [`Tensor`], [`Stream`], [`Module`] and
//!   [`Kernel`] are `Send + Sync` (see the reasoning at their `unsafe impl`s):
//!   liboxide's handles, launches, compiles and copies are thread-safe, GPU
//!   work on shared memory is ordered across streams by ownership tracking,
//!   and on the CPU device, where work runs on the calling thread, kernels
//!   and host copies hold the memory they touch (shared to read, exclusive to
//!   write), so a kernel launched on one thread and a copy on another never
//!   touch one tensor at once (`tests/concurrency_test` shows the race under
//!   ThreadSanitizer without those holds; `tests/threads.rs` here).
//! - **Not covered:** a kernel that never ends (on the CPU it can be
//!   cancelled; a GPU kernel cannot be preempted), and the contents of
//!   memory written by a kernel with a race in its `unsafe` code.

#[path = "build_support.rs"]
pub mod build;
mod chain;
pub use chain::Chain;
mod event;
pub use event::Event;
mod tensor_ops;
pub mod kernel_macro;

use std::ffi::{c_char, c_void, CStr, CString};
use std::fmt;
use std::marker::PhantomData;
use std::path::Path;
use std::ptr;

/// Raw declarations, generated from oxide.h by bindings/gen/gen_decls.py.
#[rustfmt::skip]
pub mod ffi;

pub type Result<T> = std::result::Result<T, Error>;

// ------------------------------------------------------------------ errors

/// What went wrong, by the C API's status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    InvalidArgument,
    Compile,
    NotFound,
    NoDevice,
    Driver,
    OutOfMemory,
    Launch,
    Bounds,
    Io,
    Unsupported,
    Internal,
    /// A CPU launch was stopped (ox_stream_cancel, or SIGINT).
    Cancelled,
}

/// A failed Oxide call: the status and the message of `ox_last_error()`
/// (with file:line:col where the error has a source location).
#[derive(Clone)]
pub struct Error {
    status: ffi::ox_status,
    message: String,
}

impl Error {
    fn new(status: ffi::ox_status, message: impl Into<String>) -> Error {
        Error {
            status,
            message: message.into(),
        }
    }

    // ox_last_error() is per thread and valid until the next failing call: copy it now.
    fn last(status: ffi::ox_status) -> Error {
        Error::new(status, unsafe { string(ffi::ox_last_error()) })
    }

    pub fn status(&self) -> ffi::ox_status {
        self.status
    }

    pub fn status_name(&self) -> String {
        unsafe { string(ffi::ox_status_name(self.status)) }
    }

    pub fn message(&self) -> &str {
        &self.message
    }

    pub fn kind(&self) -> ErrorKind {
        use ErrorKind::*;
        match self.status {
            ffi::OX_ERR_INVALID_ARGUMENT => InvalidArgument,
            ffi::OX_ERR_COMPILE => Compile,
            ffi::OX_ERR_NOT_FOUND => NotFound,
            ffi::OX_ERR_NO_DEVICE => NoDevice,
            ffi::OX_ERR_DRIVER => Driver,
            ffi::OX_ERR_OUT_OF_MEMORY => OutOfMemory,
            ffi::OX_ERR_LAUNCH => Launch,
            ffi::OX_ERR_BOUNDS => Bounds,
            ffi::OX_ERR_IO => Io,
            ffi::OX_ERR_UNSUPPORTED => Unsupported,
            ffi::OX_ERR_CANCELLED => Cancelled,
            _ => Internal,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.status_name(), self.message)
    }
}

impl fmt::Debug for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Error")
            .field("status", &self.status_name())
            .field("message", &self.message)
            .finish()
    }
}

impl std::error::Error for Error {}

fn check(status: ffi::ox_status) -> Result<()> {
    if status == ffi::OX_OK {
        Ok(())
    } else {
        Err(Error::last(status))
    }
}

/// Copies a borrowed C string ("" for NULL).
unsafe fn string(p: *const c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        CStr::from_ptr(p).to_string_lossy().into_owned()
    }
}

/// Copies a string that Oxide handed over, and frees it.
unsafe fn take(p: *mut c_char) -> String {
    let s = string(p);
    ffi::ox_free(p as *mut c_void);
    s
}

fn cstring(s: &str, what: &str) -> Result<CString> {
    CString::new(s).map_err(|_| {
        Error::new(
            ffi::OX_ERR_INVALID_ARGUMENT,
            format!("{what} contains a NUL byte"),
        )
    })
}

/// Version of the loaded liboxide, e.g. "0.1.0 (LLVM 19.1.7)".
pub fn version() -> String {
    unsafe { string(ffi::ox_version()) }
}

/// A report of the environment: driver, GPUs, LLVM, cache, ptxas.
pub fn doctor() -> Result<String> {
    let mut out = ptr::null_mut();
    check(unsafe { ffi::ox_doctor(&mut out) })?;
    Ok(unsafe { take(out) })
}

// ------------------------------------------------------------------ dtypes

/// Element and scalar types, numbered as in oxide.h.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Dtype {
    Bool = ffi::OX_BOOL,
    I8 = ffi::OX_I8,
    I16 = ffi::OX_I16,
    I32 = ffi::OX_I32,
    I64 = ffi::OX_I64,
    U8 = ffi::OX_U8,
    U16 = ffi::OX_U16,
    U32 = ffi::OX_U32,
    U64 = ffi::OX_U64,
    F16 = ffi::OX_F16,
    BF16 = ffi::OX_BF16,
    F32 = ffi::OX_F32,
    F64 = ffi::OX_F64,
    /// TensorFloat-32, in kernels only (casts, dot operands): tensors hold
    /// f32, and Oxide refuses tensors of tf32.
    TF32 = ffi::OX_TF32,
}

impl Dtype {
    const ALL: [Dtype; 14] = [
        Dtype::Bool,
        Dtype::I8,
        Dtype::I16,
        Dtype::I32,
        Dtype::I64,
        Dtype::U8,
        Dtype::U16,
        Dtype::U32,
        Dtype::U64,
        Dtype::F16,
        Dtype::BF16,
        Dtype::F32,
        Dtype::F64,
        Dtype::TF32,
    ];

    fn from_raw(raw: ffi::ox_dtype) -> Option<Dtype> {
        Dtype::ALL.into_iter().find(|d| *d as ffi::ox_dtype == raw)
    }

    /// Size of one element in bytes.
    pub fn size(self) -> usize {
        unsafe { ffi::ox_dtype_size(self as ffi::ox_dtype) }
    }

    /// The kernel language's name ("f32", "u8", ...).
    pub fn name(self) -> String {
        unsafe { string(ffi::ox_dtype_name(self as ffi::ox_dtype)) }
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that is an Oxide element type. (No `bool`: a tensor byte other
/// than 0 or 1 would be undefined behaviour as a Rust bool; use `u8`.)
pub trait Element: Copy + sealed::Sealed {
    const DTYPE: Dtype;
}

macro_rules! element {
    ($($t:ty => $d:ident),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t { const DTYPE: Dtype = Dtype::$d; }
    )*};
}
element!(i8 => I8, i16 => I16, i32 => I32, i64 => I64, u8 => U8, u16 => U16, u32 => U32,
         u64 => U64, f32 => F32, f64 => F64);

// ------------------------------------------------------------------ devices

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DeviceType {
    Cpu,
    Cuda,
}

impl DeviceType {
    fn raw(self) -> ffi::ox_device_type {
        match self {
            DeviceType::Cpu => ffi::OX_DEVICE_CPU,
            DeviceType::Cuda => ffi::OX_DEVICE_CUDA,
        }
    }
}

/// A CPU or CUDA device. Devices live as long as the process, so this is a
/// plain copyable handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Device(ffi::ox_device);

// Device handles are immutable and never freed; liboxide guards their state.
unsafe impl Send for Device {}
unsafe impl Sync for Device {}

// Tensors, streams, modules and kernels may move to and be shared with other
// threads, because everything the C core does with them is thread-safe:
// - handles are generation-checked entries of a locked table; a tensor's
//   reference count is atomic, so clones may drop on any thread;
// - the memory's contents: GPU work on it (launches, copies, fills) is
//   ordered across streams by ownership tracking (a write waits, on the
//   device, for other streams' pending reads and writes; a host read waits
//   for the last writer), and host copies synchronize before they return;
//   CPU work runs on the calling thread, so CPU kernels, host copies, fills
//   and DMAs of CPU memory take a per-storage reader-writer hold for as long
//   as they touch it (oxr_cpu_hold in core/runtime): two threads never touch
//   one storage at once, whichever views or clones they use;
// - a stream's launches may come from several threads (CUDA streams are
//   thread-safe; CPU launches on one stream run one at a time);
// - compiling and launching a kernel from several threads is supported (the
//   compile cache and a tile kernel's specializations are locked);
//   `Kernel::set_generic` takes the kernel's lock.
// What stays the caller's: `unsafe` kernels and `launch_unchecked`, whose
// accesses Oxide does not check, and foreign memory (DLPack imports) that
// another library writes behind Oxide's back.
unsafe impl Send for Tensor {}
unsafe impl Sync for Tensor {}
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}
unsafe impl Send for Module {}
unsafe impl Sync for Module {}
unsafe impl Send for Kernel<'_> {}
unsafe impl Sync for Kernel<'_> {}

/// Refuses a liboxide built from another oxide.h than this crate's ffi.rs:
/// its structs and enums would not be what the crate declares. Checked once,
/// when the first device is taken (every other handle comes from a device).
fn check_abi() -> Result<()> {
    static ABI: std::sync::OnceLock<i32> = std::sync::OnceLock::new();
    let abi = *ABI.get_or_init(|| unsafe { ffi::ox_abi_version() });
    if abi == ffi::OX_ABI_VERSION {
        Ok(())
    } else {
        Err(Error::new(
            ffi::OX_ERR_UNSUPPORTED,
            format!(
                "the loaded liboxide has ABI {abi}, this crate needs ABI {}: link the liboxide of the same build",
                ffi::OX_ABI_VERSION
            ),
        ))
    }
}

impl Device {
    pub fn get(ty: DeviceType, ordinal: i32) -> Result<Device> {
        check_abi()?;
        let mut d = ptr::null_mut();
        check(unsafe { ffi::ox_device_get(ty.raw(), ordinal, &mut d) })?;
        Ok(Device(d))
    }

    pub fn cpu() -> Result<Device> {
        Device::get(DeviceType::Cpu, 0)
    }

    /// CUDA device `ordinal`; an [`ErrorKind::NoDevice`] error without one.
    pub fn cuda(ordinal: i32) -> Result<Device> {
        Device::get(DeviceType::Cuda, ordinal)
    }

    /// `$OXIDE_DEVICE` if set, else CUDA device 0 when a GPU is usable, else the CPU.
    pub fn default_device() -> Result<Device> {
        check_abi()?;
        let mut d = ptr::null_mut();
        check(unsafe { ffi::ox_device_default(&mut d) })?;
        Ok(Device(d))
    }

    /// Number of devices of a type (CPU: 1; CUDA: 0 without a driver).
    pub fn count(ty: DeviceType) -> Result<usize> {
        let mut n = 0;
        check(unsafe { ffi::ox_device_count(ty.raw(), &mut n) })?;
        Ok(n as usize)
    }

    pub fn device_type(self) -> DeviceType {
        if unsafe { ffi::ox_device_get_type(self.0) } == ffi::OX_DEVICE_CUDA {
            DeviceType::Cuda
        } else {
            DeviceType::Cpu
        }
    }

    pub fn ordinal(self) -> i32 {
        unsafe { ffi::ox_device_ordinal(self.0) }
    }

    /// Human-readable name ("NVIDIA H200", "CPU (x86_64, 16 threads)").
    pub fn name(self) -> String {
        unsafe { string(ffi::ox_device_name(self.0)) }
    }

    /// Streaming multiprocessors of a CUDA device (132 on an H200), or the
    /// CPU's worker threads: how many blocks run at once, for choosing a grid.
    pub fn multiprocessors(self) -> i32 {
        unsafe { ffi::ox_device_multiprocessors(self.0) }
    }

    /// (major, minor) of a CUDA device, e.g. (9, 0); None for the CPU.
    pub fn compute_capability(self) -> Option<(u32, u32)> {
        let cc = unsafe { ffi::ox_device_compute_capability(self.0) };
        (cc > 0).then_some((cc as u32 / 10, cc as u32 % 10))
    }

    /// A new stream on this device, destroyed when dropped.
    pub fn stream(self) -> Result<Stream> {
        let mut s = ptr::null_mut();
        check(unsafe { ffi::ox_stream_create(self.0, &mut s) })?;
        Ok(Stream {
            raw: s,
            owned: true,
        })
    }

    /// The device's default stream (borrowed: dropping it does nothing).
    pub fn default_stream(self) -> Result<Stream> {
        let mut s = ptr::null_mut();
        check(unsafe { ffi::ox_device_stream(self.0, &mut s) })?;
        Ok(Stream {
            raw: s,
            owned: false,
        })
    }

    /// The calling thread's per-thread default stream (CUDA's
    /// `CU_STREAM_PER_THREAD`; on the CPU the default stream), borrowed:
    /// dropping it does nothing.
    pub fn per_thread_stream(self) -> Result<Stream> {
        let mut s = ptr::null_mut();
        check(unsafe { ffi::ox_device_per_thread_stream(self.0, &mut s) })?;
        Ok(Stream {
            raw: s,
            owned: false,
        })
    }

    /// Waits for the default stream; see [`Stream::synchronize`].
    pub fn synchronize(self) -> Result<()> {
        self.default_stream()?.synchronize()
    }

    pub fn as_raw(self) -> ffi::ox_device {
        self.0
    }
}

// ------------------------------------------------------------------ streams

/// An ordered queue of work on one device.
#[derive(Debug)]
pub struct Stream {
    raw: ffi::ox_stream,
    owned: bool,
}

impl Stream {
    /// Waits for the queued work. Returns an [`ErrorKind::Bounds`] error if a
    /// kernel on this stream made an out-of-bounds access since the last one.
    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { ffi::ox_stream_synchronize(self.raw) })
    }

    pub fn device(&self) -> Device {
        Device(unsafe { ffi::ox_stream_device(self.raw) })
    }

    pub fn as_raw(&self) -> ffi::ox_stream {
        self.raw
    }

    /// Wraps a CUDA stream that another library owns (a `CUstream`: PyTorch's
    /// `torch.cuda.current_stream().cuda_stream`, CuPy's `ptr`, a C++
    /// library's). Oxide borrows it: dropping the wrapper never waits and
    /// never destroys the CUDA stream; wrapping one stream again gives the
    /// same Oxide stream. The CUDA stream must outlive the work and the
    /// tensors Oxide uses on it (docs/c-api.md, "Foreign streams"); an
    /// invalid handle is undefined behaviour in the driver, hence `unsafe`.
    ///
    /// # Safety
    /// `cu_stream` is a live `CUstream` of `dev`'s primary context (or null
    /// for the legacy default stream), and outlives every use Oxide makes of it.
    pub unsafe fn wrap(dev: Device, cu_stream: *mut c_void) -> Result<Stream> {
        let mut s = ptr::null_mut();
        check(ffi::ox_stream_wrap(dev.0, cu_stream, &mut s))?;
        Ok(Stream {
            raw: s,
            owned: true,
        })
    }

    /// Takes over a stream handle made by the C API (`ox_stream_create` or
    /// `ox_stream_wrap`): dropping the result destroys it. Pairs with
    /// [`Stream::into_raw`].
    ///
    /// # Safety
    /// `raw` is a live stream handle of this process's liboxide that nobody
    /// else will destroy.
    pub unsafe fn from_raw(raw: ffi::ox_stream) -> Stream {
        Stream { raw, owned: true }
    }

    /// The handle, no longer destroyed by Rust (for C code that takes it over).
    pub fn into_raw(self) -> ffi::ox_stream {
        let s = std::mem::ManuallyDrop::new(self);
        s.raw
    }

    /// The `CUstream` behind the stream (null for the legacy default stream
    /// and on the CPU), to hand to other libraries.
    pub fn cuda_handle(&self) -> *mut c_void {
        unsafe { ffi::ox_stream_handle(self.raw) }
    }

    /// Later work here waits, on the device, for the work queued on `other` so far.
    pub fn wait_stream(&self, other: &Stream) -> Result<()> {
        check(unsafe { ffi::ox_stream_wait_stream(self.raw, other.raw) })
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.owned {
            unsafe { ffi::ox_stream_destroy(self.raw) } // waits for the stream's work
        }
    }
}

fn stream_raw(s: Option<&Stream>) -> ffi::ox_stream {
    s.map_or(ptr::null_mut(), |s| s.raw)
}

// ------------------------------------------------------------------ tensors

/// One reference to a reference-counted, typed, contiguous array in a
/// device's memory. `clone` shares the array; the last drop frees it
/// (stream-ordered, so a queued kernel may still use it).
#[derive(Debug)]
pub struct Tensor {
    raw: ffi::ox_tensor,
}

impl Tensor {
    /// An uninitialized tensor.
    pub fn empty(dev: Device, dtype: Dtype, shape: &[i64]) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(unsafe {
            ffi::ox_tensor_empty(
                dev.0,
                ptr::null_mut(),
                dtype as ffi::ox_dtype,
                shape.len() as i32,
                shape.as_ptr(),
                &mut t,
            )
        })?;
        Ok(Tensor { raw: t })
    }

    /// A 1-D copy of `data`.
    pub fn from_slice<T: Element>(dev: Device, data: &[T]) -> Result<Tensor> {
        Tensor::with_shape(dev, data, &[data.len() as i64])
    }

    /// A copy of `data` with the given shape (whose size must match).
    pub fn with_shape<T: Element>(dev: Device, data: &[T], shape: &[i64]) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(unsafe {
            ffi::ox_tensor_from_host(
                dev.0,
                ptr::null_mut(),
                T::DTYPE as ffi::ox_dtype,
                shape.len() as i32,
                shape.as_ptr(),
                data.as_ptr() as *const c_void,
                std::mem::size_of_val(data),
                &mut t,
            )
        })?;
        Ok(Tensor { raw: t })
    }

    /// The elements, copied after the work on the device's default stream.
    /// A pending kernel error of that stream is returned here
    /// (`ErrorKind::Bounds` with its location), and consumed: the values
    /// would be partial.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        self.to_vec_on(None)
    }

    /// The elements, copied after the work on `stream` (None: the default stream).
    pub fn to_vec_on<T: Element>(&self, stream: Option<&Stream>) -> Result<Vec<T>> {
        self.expect_dtype(T::DTYPE)?;
        let n = self.numel() as usize;
        let mut v: Vec<T> = Vec::with_capacity(n);
        check(unsafe {
            ffi::ox_tensor_to_host(
                self.raw,
                stream_raw(stream),
                v.as_mut_ptr() as *mut c_void,
                self.nbytes(),
            )
        })?;
        unsafe { v.set_len(n) } // every byte was written by the copy
        Ok(v)
    }

    /// Overwrites the elements from `data` (which must be exactly the tensor's size).
    pub fn copy_from_slice<T: Element>(&self, data: &[T]) -> Result<()> {
        self.expect_dtype(T::DTYPE)?;
        check(unsafe {
            ffi::ox_tensor_copy_from_host(
                self.raw,
                ptr::null_mut(),
                data.as_ptr() as *const c_void,
                std::mem::size_of_val(data),
            )
        })
    }

    fn expect_dtype(&self, want: Dtype) -> Result<()> {
        match self.dtype() {
            Some(d) if d == want => Ok(()),
            d => Err(Error::new(
                ffi::OX_ERR_INVALID_ARGUMENT,
                format!(
                    "the tensor holds {}, not {}",
                    d.map_or("?".into(), Dtype::name),
                    want.name()
                ),
            )),
        }
    }

    pub fn dtype(&self) -> Option<Dtype> {
        Dtype::from_raw(unsafe { ffi::ox_tensor_dtype(self.raw) })
    }

    pub fn shape(&self) -> Vec<i64> {
        let n = unsafe { ffi::ox_tensor_ndim(self.raw) } as usize;
        let p = unsafe { ffi::ox_tensor_shape(self.raw) };
        if n == 0 || p.is_null() {
            Vec::new()
        } else {
            unsafe { std::slice::from_raw_parts(p, n) }.to_vec()
        }
    }

    pub fn numel(&self) -> i64 {
        unsafe { ffi::ox_tensor_numel(self.raw) }
    }

    pub fn nbytes(&self) -> usize {
        unsafe { ffi::ox_tensor_nbytes(self.raw) }
    }

    pub fn device(&self) -> Device {
        Device(unsafe { ffi::ox_tensor_device(self.raw) })
    }

    pub fn as_raw(&self) -> ffi::ox_tensor {
        self.raw
    }

    /// This tensor cut into exclusive tiles of shape `tile` (one size per
    /// dimension): the argument of a `#[tile]` kernel's `&mut Tensor<T,
    /// [tile]>` output, whose const generics are bound from the tile and
    /// whose launch grid is [`Tensor::partition_grid`]. A view: it shares the
    /// memory, which lives while any view of it does (dropping `self` first
    /// is fine). Tile kernels take tiles of powers of two; another size is
    /// refused by the launch.
    pub fn partition(&self, tile: &[i64]) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(unsafe {
            ffi::ox_tensor_partition(self.raw, tile.len() as i32, tile.as_ptr(), &mut t)
        })?;
        Ok(Tensor { raw: t })
    }

    /// A tensor of zeros.
    pub fn zeros(dev: Device, dtype: Dtype, shape: &[i64]) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(unsafe {
            ffi::ox_tensor_zeros(dev.0, ptr::null_mut(), dtype as ffi::ox_dtype, shape.len() as i32, shape.as_ptr(), &mut t)
        })?;
        Ok(Tensor { raw: t })
    }

    /// A view of `start..stop` (step `step`, at least 1) along `dim`, as
    /// Python's `t[start:stop:step]`: negative bounds count from the end, and
    /// bounds past the ends are clamped. Views share the memory, which lives
    /// while any of them does.
    pub fn slice(&self, dim: i32, start: i64, stop: i64, step: i64) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(unsafe { ffi::ox_tensor_slice(self.raw, dim, start, stop, step, &mut t) })?;
        Ok(Tensor { raw: t })
    }

    /// A view with another shape of the same elements (one size may be -1),
    /// where the strides allow one (a contiguous tensor always does).
    pub fn reshape(&self, shape: &[i64]) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(unsafe { ffi::ox_tensor_reshape(self.raw, shape.len() as i32, shape.as_ptr(), &mut t) })?;
        Ok(Tensor { raw: t })
    }

    /// A view with the dimensions in the order `perm` gives (`perm[i]` is the
    /// source dimension of dimension `i`); its length must be the rank.
    pub fn permute(&self, perm: &[i32]) -> Result<Tensor> {
        if perm.len() != self.shape().len() {
            return Err(Error::new(
                ffi::OX_ERR_INVALID_ARGUMENT,
                format!("permute: {} dims for a tensor of rank {}", perm.len(), self.shape().len()),
            ));
        }
        let mut t = ptr::null_mut();
        check(unsafe { ffi::ox_tensor_permute(self.raw, perm.as_ptr(), &mut t) })?;
        Ok(Tensor { raw: t })
    }

    /// A view with dimensions `d0` and `d1` swapped (`t.transpose(0, 1)` of a
    /// matrix is its transpose, read in place).
    pub fn transpose(&self, d0: i32, d1: i32) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(unsafe { ffi::ox_tensor_transpose(self.raw, d0, d1, &mut t) })?;
        Ok(Tensor { raw: t })
    }

    /// The tile grid of a partition, `ceil(shape / tile)` per dimension;
    /// None for a tensor that is not a partition.
    pub fn partition_grid(&self) -> Option<Vec<i64>> {
        let mut g = [0i64; ffi::OX_MAX_DIMS as usize];
        let n = unsafe { ffi::ox_tensor_partition_grid(self.raw, g.as_mut_ptr()) };
        (n > 0).then(|| g[..n as usize].to_vec())
    }
}

/// DLPack and raw handles: how tensors cross into C, C++, Python and other
/// libraries.
impl Tensor {
    /// Takes over one reference to a tensor handle made by the C API (or
    /// another binding of the same liboxide): dropping the result releases it.
    ///
    /// # Safety
    /// `raw` is a live tensor handle of this process's liboxide, and the
    /// caller owns the reference it hands over.
    pub unsafe fn from_raw(raw: ffi::ox_tensor) -> Tensor {
        Tensor { raw }
    }

    /// The handle with this reference, no longer released by Rust (C code
    /// that takes it over calls `ox_tensor_release`).
    pub fn into_raw(self) -> ffi::ox_tensor {
        let t = std::mem::ManuallyDrop::new(self);
        t.raw
    }

    /// Imports a `DLManagedTensorVersioned*` without a copy. Oxide owns it
    /// from the call on, even when it refuses it: the producer's deleter runs
    /// once, when the last Oxide reference goes (or at once on an error).
    ///
    /// # Safety
    /// `managed` points to a valid DLPack 1.x managed tensor whose memory stays
    /// valid until its deleter runs, and nobody else deletes it.
    pub unsafe fn from_dlpack(managed: *mut c_void) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(ffi::ox_tensor_from_dlpack(managed, 1, &mut t))?;
        Ok(Tensor { raw: t })
    }

    /// Exports the tensor as a new `DLManagedTensorVersioned*` holding one
    /// reference, released by its deleter (the consumer must call it once).
    /// `consumer`: the stream the consumer will use the memory on, made to
    /// wait for Oxide's pending writes; `None`: the consumer synchronizes.
    pub fn to_dlpack(&self, consumer: Option<&Stream>) -> Result<*mut c_void> {
        let mut out = ptr::null_mut();
        check(unsafe { ffi::ox_tensor_to_dlpack(self.raw, stream_raw(consumer), 1, &mut out) })?;
        Ok(out)
    }

    /// For a tensor imported through DLPack: its memory goes back to the
    /// producer on `stream` (ordered after Oxide's work on it) instead of
    /// after a host wait (`ox_tensor_set_release_stream`).
    pub fn set_release_stream(&self, stream: Option<&Stream>) -> Result<()> {
        check(unsafe { ffi::ox_tensor_set_release_stream(self.raw, stream_raw(stream)) })
    }
}

impl Clone for Tensor {
    fn clone(&self) -> Tensor {
        unsafe { ffi::ox_tensor_retain(self.raw) };
        Tensor { raw: self.raw }
    }
}

impl Drop for Tensor {
    fn drop(&mut self) {
        unsafe { ffi::ox_tensor_release(self.raw) }
    }
}

// ------------------------------------------------------------------ modules

/// Options for compiling; `Default` gives Oxide's defaults.
#[derive(Debug, Clone, Default)]
pub struct CompileOptions {
    /// Name used in diagnostics (default "<input>", or the path for files).
    pub filename: Option<String>,
    /// CUDA architecture as 80, 86, 90...; 0 = the device's.
    pub sm: i32,
    /// LLVM optimization level 1..3; 0 = the default (3).
    pub opt_level: i32,
    /// Neither read nor write the compiled-kernel cache.
    pub no_cache: bool,
    /// For `emit` of tile kernels: the code for contiguous16 tensors (16-byte
    /// aligned, unit last stride), as most launches get.
    pub emit_contiguous: bool,
    /// For `emit` of tile kernels: values of const generics by name, e.g.
    /// `("BM", 128)`, so that the code is what a launch with those tiles runs
    /// (others are 16). Compiling a module refuses them: a launch binds its
    /// generics from its partitions (or `Kernel::set_generic`).
    pub generics: Vec<(String, i64)>,
}

/// The C options and the storage they point into (the generics' names and
/// array), which lives as long as this.
struct RawOptions {
    raw: ffi::ox_compile_options,
    _names: Vec<CString>,
    _values: Vec<ffi::ox_generic_value>,
}

impl CompileOptions {
    /// The C struct, pointing into `name` (which must outlive its use).
    fn raw(&self, name: &Option<CString>) -> Result<RawOptions> {
        let names = self
            .generics
            .iter()
            .map(|(n, _)| cstring(n, "a generic's name"))
            .collect::<Result<Vec<_>>>()?;
        let values: Vec<ffi::ox_generic_value> = names
            .iter()
            .zip(&self.generics)
            .map(|(n, (_, v))| ffi::ox_generic_value {
                name: n.as_ptr(),
                value: *v,
            })
            .collect();
        let num_generics = i32::try_from(values.len())
            .map_err(|_| Error::new(ffi::OX_ERR_INVALID_ARGUMENT, "too many generics"))?;
        Ok(RawOptions {
            raw: ffi::ox_compile_options {
                size: std::mem::size_of::<ffi::ox_compile_options>(),
                filename: name.as_ref().map_or(ptr::null(), |n| n.as_ptr()),
                sm: self.sm,
                opt_level: self.opt_level,
                no_cache: self.no_cache as i32,
                emit_contiguous: self.emit_contiguous as i32,
                generics: if values.is_empty() {
                    ptr::null()
                } else {
                    values.as_ptr()
                },
                num_generics,
            },
            _names: names,
            _values: values,
        })
    }
}

/// Compiled kernels of one source text, loaded on one device.
#[derive(Debug)]
pub struct Module {
    raw: ffi::ox_module,
    device: Device,
    // liboxide keeps the filename pointer for later messages (bounds errors,
    // launch contracts) without copying it, so it lives as long as the module.
    _filename: Option<CString>,
}

impl Module {
    /// Compiles `source` for `dev` and loads it. A compile error's message has
    /// every diagnostic with file:line:col, the source line and a caret.
    pub fn compile(dev: Device, source: &str) -> Result<Module> {
        Module::compile_with(dev, source, &CompileOptions::default())
    }

    pub fn compile_with(dev: Device, source: &str, opts: &CompileOptions) -> Result<Module> {
        let src = cstring(source, "the kernel source")?;
        let name = opts
            .filename
            .as_deref()
            .map(|f| cstring(f, "the filename"))
            .transpose()?;
        let raw_opts = opts.raw(&name)?;
        let mut m = ptr::null_mut();
        check(unsafe { ffi::ox_module_compile(dev.0, src.as_ptr(), &raw_opts.raw, &mut m) })?;
        Ok(Module {
            raw: m,
            device: dev,
            _filename: name,
        })
    }

    /// Reads and compiles the file at `path` (an [`ErrorKind::Io`] error if unreadable).
    pub fn compile_file(
        dev: Device,
        path: impl AsRef<Path>,
        opts: &CompileOptions,
    ) -> Result<Module> {
        let p = path
            .as_ref()
            .to_str()
            .ok_or_else(|| Error::new(ffi::OX_ERR_INVALID_ARGUMENT, "the path is not UTF-8"))?;
        let path_c = cstring(p, "the path")?;
        // the filename defaults to the path: pass our own copy so that it lives on
        let name = Some(cstring(
            opts.filename.as_deref().unwrap_or(p),
            "the filename",
        )?);
        let raw_opts = opts.raw(&name)?;
        let mut m = ptr::null_mut();
        check(unsafe {
            ffi::ox_module_compile_file(dev.0, path_c.as_ptr(), &raw_opts.raw, &mut m)
        })?;
        Ok(Module {
            raw: m,
            device: dev,
            _filename: name,
        })
    }

    /// The kernel `name` (a `#[kernel]` function); it borrows the module.
    pub fn kernel(&self, name: &str) -> Result<Kernel<'_>> {
        let n = cstring(name, "the kernel name")?;
        let mut k = ptr::null_mut();
        check(unsafe { ffi::ox_module_get_kernel(self.raw, n.as_ptr(), &mut k) })?;
        Ok(Kernel {
            raw: k,
            _module: PhantomData,
        })
    }

    pub fn device(&self) -> Device {
        self.device
    }

    /// True if loaded from the compiled-kernel cache without code generation.
    pub fn from_cache(&self) -> bool {
        unsafe { ffi::ox_module_from_cache(self.raw) != 0 }
    }

    /// The module handle (for C code; the module stays Rust's).
    pub fn as_raw(&self) -> ffi::ox_module {
        self.raw
    }

    /// Takes over a module handle made by the C API: dropping the result
    /// destroys the module.
    ///
    /// # Safety
    /// `raw` is a live module handle of this process's liboxide, loaded on
    /// `dev`, that nobody else will destroy.
    pub unsafe fn from_raw(raw: ffi::ox_module, dev: Device) -> Module {
        Module {
            raw,
            device: dev,
            _filename: None,
        }
    }

    /// The handle, no longer destroyed by Rust (the filename it may point to
    /// is kept for the life of the process).
    pub fn into_raw(self) -> ffi::ox_module {
        let m = std::mem::ManuallyDrop::new(self);
        m.raw
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        unsafe { ffi::ox_module_destroy(self.raw) }
    }
}

// ------------------------------------------------------------------ launches

/// Grid and block shape of a launch (zero dimensions count as 1).
/// `LaunchConfig::default()` (all zero) is the config of a `#[tile]` kernel:
/// its grid is its output partition's tile grid and its block the
/// compiler's (a tile kernel with only atomic tensors takes `grid` from the
/// config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
}

impl LaunchConfig {
    pub fn new(grid: [u32; 3], block: [u32; 3]) -> LaunchConfig {
        LaunchConfig { grid, block }
    }

    /// A 1-D launch of `grid` blocks of `block` threads.
    pub fn linear(grid: u32, block: u32) -> LaunchConfig {
        LaunchConfig {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
        }
    }

    /// A 1-D launch with enough blocks of `block` threads for `n` threads.
    ///
    /// # Panics
    ///
    /// If `block` is 0, or if `n` needs more than 2^31 - 1 blocks (a grid's
    /// most along x on CUDA), which a `u32` grid size would silently cut
    /// short: such sizes need a grid-stride loop in the kernel.
    ///
    /// ```should_panic
    /// oxide::LaunchConfig::for_elements(1 << 40, 256); // 2^32 blocks
    /// ```
    pub fn for_elements(n: usize, block: u32) -> LaunchConfig {
        assert!(block > 0, "LaunchConfig::for_elements: a block of 0 threads");
        let blocks = n.div_ceil(block as usize);
        assert!(
            blocks <= i32::MAX as usize,
            "LaunchConfig::for_elements: {n} elements need {blocks} blocks of {block} threads, more than \
             a grid holds along x (2^31 - 1); loop over the elements in the kernel (a grid-stride loop)"
        );
        LaunchConfig::linear(blocks as u32, block)
    }

    fn raw(&self) -> ffi::ox_launch_config {
        ffi::ox_launch_config {
            grid: self.grid,
            block: self.block,
        }
    }
}

/// One launch argument: a tensor (for a slice parameter) or a scalar of an
/// exact dtype (Oxide converts nothing implicitly: `Arg::f64` for an `f32`
/// parameter is an error). Laid out as `ox_arg`, so a slice passes as is.
#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Arg<'a> {
    raw: ffi::ox_arg,
    _tensor: PhantomData<&'a Tensor>,
}

macro_rules! scalar_args {
    ($($name:ident($t:ty) => $dtype:ident . $field:ident as $as:ty),* $(,)?) => {$(
        #[doc = concat!("A `", stringify!($name), "` scalar.")]
        pub fn $name(x: $t) -> Arg<'static> {
            Arg::scalar(ffi::$dtype, ffi::ox_arg_v { $field: x as $as })
        }
    )*};
}

impl<'a> Arg<'a> {
    pub fn tensor(t: &'a Tensor) -> Arg<'a> {
        Arg {
            raw: ffi::ox_arg {
                kind: ffi::OX_ARG_TENSOR,
                dtype: ffi::OX_F32,
                v: ffi::ox_arg_v { tensor: t.raw },
            },
            _tensor: PhantomData,
        }
    }

    fn scalar(dtype: ffi::ox_dtype, v: ffi::ox_arg_v) -> Arg<'static> {
        Arg {
            raw: ffi::ox_arg {
                kind: ffi::OX_ARG_SCALAR,
                dtype,
                v,
            },
            _tensor: PhantomData,
        }
    }

    scalar_args! {
        bool(bool) => OX_BOOL.i as i64,
        i8(i8) => OX_I8.i as i64, i16(i16) => OX_I16.i as i64,
        i32(i32) => OX_I32.i as i64, i64(i64) => OX_I64.i as i64,
        u8(u8) => OX_U8.u as u64, u16(u16) => OX_U16.u as u64,
        u32(u32) => OX_U32.u as u64, u64(u64) => OX_U64.u as u64,
        f16(f32) => OX_F16.f as f64, bf16(f32) => OX_BF16.f as f64,
        f32(f32) => OX_F32.f as f64, f64(f64) => OX_F64.f as f64,
    }
}

/// One kernel of a module; it cannot outlive the module.
#[derive(Debug, Clone, Copy)]
pub struct Kernel<'m> {
    raw: ffi::ox_kernel,
    _module: PhantomData<&'m Module>,
}

impl Kernel<'_> {
    /// The kernel handle (borrowed from its module; for C code).
    pub fn as_raw(&self) -> ffi::ox_kernel {
        self.raw
    }

    /// A kernel handle made by the C API, borrowing `module` (which owns it).
    ///
    /// # Safety
    /// `raw` is a kernel handle of `module` (from `ox_module_get_kernel`).
    pub unsafe fn from_raw(raw: ffi::ox_kernel, module: &Module) -> Kernel<'_> {
        let _ = module;
        Kernel {
            raw,
            _module: PhantomData,
        }
    }

    pub fn name(&self) -> String {
        unsafe { string(ffi::ox_kernel_name(self.raw)) }
    }

    pub fn num_params(&self) -> usize {
        unsafe { ffi::ox_kernel_num_params(self.raw) as usize }
    }

    /// Gives a tile kernel's const generic `name` an explicit value for its
    /// launches from now on (one that sizes no output dim gets its value only
    /// this way).
    pub fn set_generic(&self, name: &str, value: i64) -> Result<()> {
        let n = CString::new(name)
            .map_err(|_| Error::new(ffi::OX_ERR_INVALID_ARGUMENT, "name has a NUL"))?;
        check(unsafe { ffi::ox_kernel_set_generic(self.raw, n.as_ptr(), value) })
    }

    /// Lets the runtime choose a tile kernel's configuration among candidates,
    /// each a list of (generic, value) pairs setting the same generics to
    /// powers of two: the first launch per argument shapes measures them on
    /// scratch outputs and keeps the fastest (also in the kernel cache, for
    /// later processes); outputs may then be passed whole or partitioned in
    /// any tiles. An empty list clears them. Safe to call while other threads
    /// launch the kernel (the runtime's tuning lock orders them).
    pub fn set_candidates(&self, candidates: &[&[(&str, i64)]]) -> Result<()> {
        let mut names = Vec::new();
        for c in candidates {
            for (n, _) in c.iter() {
                names.push(
                    CString::new(*n)
                        .map_err(|_| Error::new(ffi::OX_ERR_INVALID_ARGUMENT, "name has a NUL"))?,
                );
            }
        }
        let mut values = Vec::new();
        let mut at = 0;
        for c in candidates {
            for (_, v) in c.iter() {
                values.push(ffi::ox_generic_value { name: names[at].as_ptr(), value: *v });
                at += 1;
            }
        }
        let mut raw = Vec::new();
        let mut start = 0;
        for c in candidates {
            raw.push(ffi::ox_tile_candidate {
                values: if c.is_empty() { std::ptr::null() } else { values[start..].as_ptr() },
                num_values: c.len() as i32,
            });
            start += c.len();
        }
        check(unsafe { ffi::ox_kernel_set_candidates(self.raw, raw.as_ptr(), raw.len() as i32) })
    }

    /// Which candidate (index into the list given to
    /// [`Kernel::set_candidates`]) a launch with these arguments runs, or
    /// None when none is chosen yet. Measures nothing.
    pub fn tuned(&self, args: &[Arg<'_>]) -> Result<Option<usize>> {
        let mut index: i32 = -1;
        check(unsafe {
            ffi::ox_kernel_tuned(
                self.raw,
                args.as_ptr() as *const ffi::ox_arg,
                args.len() as i32,
                &mut index,
            )
        })?;
        Ok(if index < 0 { None } else { Some(index as usize) })
    }

    /// True for a kernel whose launch can break memory safety: an `unsafe fn`
    /// kernel (its threads may race on `&mut [T]` arguments) or one that runs
    /// an `unsafe { }` block, itself or in a device function it calls (no
    /// bounds checks there). Such kernels run only through
    /// [`Kernel::launch_unchecked`].
    pub fn is_unsafe(&self) -> bool {
        unsafe { ffi::ox_kernel_is_unsafe(self.raw) != 0 }
    }

    /// Queues a launch on the device's default stream. Argument, contract and
    /// limit errors return at once; an out-of-bounds access is reported once:
    /// by this launch on the CPU, on CUDA by a later launch of this thread, a
    /// synchronization or a host read. An unsafe kernel
    /// ([`Kernel::is_unsafe`]) is refused: see [`Kernel::launch_unchecked`].
    pub fn launch(&self, cfg: &LaunchConfig, args: &[Arg<'_>]) -> Result<()> {
        self.launch_on(None, cfg, args)
    }

    /// Queues a launch on `stream` (None: the default stream). An unsafe
    /// kernel is refused, as by [`Kernel::launch`].
    pub fn launch_on(
        &self,
        stream: Option<&Stream>,
        cfg: &LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<()> {
        if self.is_unsafe() {
            return Err(unsafe_kernel_error(self, "kernel.launch_unchecked"));
        }
        // SAFETY: the kernel is safe: every access is checked or proven.
        unsafe { self.launch_unchecked(stream, cfg, args) }
    }

    /// Queues a launch on `stream` (None: the default stream), of any kernel.
    ///
    /// # Safety
    ///
    /// For a kernel that [`Kernel::is_unsafe`], the caller guarantees what its
    /// `unsafe` code assumes: the indices used inside `unsafe { }` blocks are
    /// in bounds of their slices for these arguments and this launch shape,
    /// and no two threads write the same element of a `&mut [T]` argument (or
    /// one writes while another reads it). Otherwise the kernel may write
    /// outside its tensors, which on the CPU device is the process's memory.
    /// For a safe kernel this is the same as [`Kernel::launch_on`].
    ///
    /// Safe code cannot call it:
    ///
    /// ```compile_fail,E0133
    /// # fn f(k: &oxide::Kernel<'_>, t: &oxide::Tensor) {
    /// let cfg = oxide::LaunchConfig::linear(1, 16);
    /// k.launch_unchecked(None, &cfg, &[oxide::Arg::tensor(t)]).unwrap();
    /// # }
    /// ```
    pub unsafe fn launch_unchecked(
        &self,
        stream: Option<&Stream>,
        cfg: &LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<()> {
        let c = cfg.raw();
        check(unsafe {
            ffi::ox_launch(
                self.raw,
                stream_raw(stream),
                &c,
                args.as_ptr() as *const ffi::ox_arg,
                args.len() as i32,
            )
        })?;
        // an out-of-bounds access is reported here: this launch's on the CPU (it
        // has run), on CUDA an earlier one's of this thread that its kernel has
        // recorded by now (without waiting), as Python does
        check(unsafe { ffi::ox_launch_errors() })
    }

    /// Checks a launch like [`Kernel::launch_on`] would, without running it.
    pub fn check(
        &self,
        stream: Option<&Stream>,
        cfg: &LaunchConfig,
        args: &[Arg<'_>],
    ) -> Result<()> {
        let c = cfg.raw();
        check(unsafe {
            ffi::ox_launch_check(
                self.raw,
                stream_raw(stream),
                &c,
                args.as_ptr() as *const ffi::ox_arg,
                args.len() as i32,
            )
        })
    }
}

/// The error of a safe launch of an unsafe kernel; `instead` names the call to make.
fn unsafe_kernel_error(k: &Kernel<'_>, instead: &str) -> Error {
    Error::new(
        ffi::OX_ERR_INVALID_ARGUMENT,
        format!(
            "kernel '{}' is unsafe (an `unsafe fn`, or it runs an `unsafe {{ }}` block): \
             launching it can break memory safety, so safe code cannot; \
             call `unsafe {{ {instead}(...) }}` if its arguments satisfy \
             what its unsafe code assumes",
            k.name()
        ),
    )
}

// ------------------------------------------------------------------ inspection

/// A compilation stage to print.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EmitKind {
    Ast = ffi::OX_EMIT_AST as isize,
    Ir = ffi::OX_EMIT_IR as isize,
    Llvm = ffi::OX_EMIT_LLVM as isize,
    Ptx = ffi::OX_EMIT_PTX as isize,
    Asm = ffi::OX_EMIT_ASM as isize,
}

/// Compiles `source` and returns the text of stage `kind`, for `target`
/// (None: CUDA for PTX, else the CPU). Needs no device.
pub fn emit(
    source: &str,
    kind: EmitKind,
    target: Option<DeviceType>,
    opts: &CompileOptions,
) -> Result<String> {
    let src = cstring(source, "the kernel source")?;
    let name = opts
        .filename
        .as_deref()
        .map(|f| cstring(f, "the filename"))
        .transpose()?;
    let raw_opts = opts.raw(&name)?;
    let t = match target {
        None => ffi::OX_TARGET_DEFAULT,
        Some(DeviceType::Cpu) => ffi::OX_TARGET_CPU,
        Some(DeviceType::Cuda) => ffi::OX_TARGET_CUDA,
    };
    let mut out = ptr::null_mut();
    check(unsafe {
        ffi::ox_emit(
            src.as_ptr(),
            &raw_opts.raw,
            t,
            kind as ffi::ox_emit_kind,
            &mut out,
        )
    })?;
    Ok(unsafe { take(out) })
}
