//! Chains: launches and copies recorded now and run later, on a stream, in
//! order; on CUDA captured once as a CUDA graph, so that each run costs one
//! driver call however many launches it holds (a model's decode step).

use std::marker::PhantomData;
use std::ptr;

use crate::{check, ffi, stream_raw, unsafe_kernel_error, Arg, Device, Kernel, LaunchConfig, Module, Result, Stream, Tensor};

/// A recorded sequence of launches and copies:
///
/// ```no_run
/// # fn main() -> oxide::Result<()> {
/// # let dev = oxide::Device::cuda(0)?;
/// # let m = oxide::Module::compile(dev, "#[kernel] fn k(y: DisjointSlice<f32>) { let i = thread::index_1d(); if let Some(v) = y.get_mut(i) { *v += 1.0; } }")?;
/// # let y = oxide::Tensor::zeros(dev, oxide::Dtype::F32, &[1024])?;
/// let k = m.kernel("k")?;
/// let mut chain = oxide::Chain::new(dev)?;
/// chain.launch(&k, &oxide::LaunchConfig::for_elements(1024, 256), &[oxide::Arg::tensor(&y)])?;
/// chain.capture(&dev.stream()?)?; // CUDA: one graph from here on
/// for _ in 0..100 {
///     chain.run(None)?;            // queues it all, in order
/// }
/// # Ok(()) }
/// ```
///
/// Arguments are checked and tensors retained when recorded, so each run
/// works on the same memory: write new inputs into the chain's tensors
/// between runs. The chain borrows the modules of its kernels (`'m`), which
/// outlive it.
pub struct Chain<'m> {
    raw: ffi::ox_chain,
    _modules: PhantomData<&'m Module>,
}

impl<'m> Chain<'m> {
    /// An empty chain on `dev`.
    pub fn new(dev: Device) -> Result<Chain<'m>> {
        let mut c = ptr::null_mut();
        check(unsafe { ffi::ox_chain_create(dev.as_raw(), &mut c) })?;
        Ok(Chain { raw: c, _modules: PhantomData })
    }

    /// Records a launch of `kernel`, checked now as [`Kernel::launch`]
    /// checks one. An unsafe kernel is refused, as by [`Kernel::launch`].
    pub fn launch(&mut self, kernel: &Kernel<'m>, cfg: &LaunchConfig, args: &[Arg<'_>]) -> Result<()> {
        if kernel.is_unsafe() {
            return Err(unsafe_kernel_error(kernel, "chain.launch_unchecked"));
        }
        // SAFETY: the kernel is safe: every access is checked or proven.
        unsafe { self.launch_unchecked(kernel, cfg, args) }
    }

    /// Records a launch of any kernel.
    ///
    /// # Safety
    ///
    /// As [`Kernel::launch_unchecked`]: every run of the chain must satisfy
    /// what the kernel's unsafe code assumes of these arguments.
    pub unsafe fn launch_unchecked(&mut self, kernel: &Kernel<'m>, cfg: &LaunchConfig, args: &[Arg<'_>]) -> Result<()> {
        let c = cfg.raw();
        check(unsafe {
            ffi::ox_chain_launch(self.raw, kernel.as_raw(), &c, args.as_ptr() as *const ffi::ox_arg, args.len() as i32)
        })
    }

    /// Records a copy of `src` into `dst` (same shape and dtype, any devices and strides).
    pub fn copy(&mut self, dst: &Tensor, src: &Tensor) -> Result<()> {
        check(unsafe { ffi::ox_chain_copy(self.raw, dst.as_raw(), src.as_raw()) })
    }

    /// CUDA: captures the recorded steps as one CUDA graph on `stream` (one
    /// of [`Device::stream`]; the legacy default stream cannot capture),
    /// running nothing; later runs replay it. The CPU has nothing to capture.
    pub fn capture(&mut self, stream: &Stream) -> Result<()> {
        check(unsafe { ffi::ox_chain_capture(self.raw, stream.as_raw()) })
    }

    /// Queues the chain on `stream` (None: the device's default stream): its
    /// graph if captured, else each step in order.
    pub fn run(&self, stream: Option<&Stream>) -> Result<()> {
        check(unsafe { ffi::ox_chain_run(self.raw, stream_raw(stream)) })
    }

    /// The chain handle (for C code).
    pub fn as_raw(&self) -> ffi::ox_chain {
        self.raw
    }
}

impl Drop for Chain<'_> {
    fn drop(&mut self) {
        unsafe { ffi::ox_chain_destroy(self.raw) }
    }
}
