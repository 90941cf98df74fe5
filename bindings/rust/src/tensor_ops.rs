//! Tensors made on the device (filled, ranges) and copies between tensors
//! and devices.

use std::ptr;

use crate::{check, ffi, stream_raw, Device, Dtype, Result, Stream, Tensor};

impl Tensor {
    /// A contiguous tensor with every element `value` (converted to `dtype`),
    /// ordered on the default stream.
    pub fn full(dev: Device, dtype: Dtype, shape: &[i64], value: f64) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(unsafe {
            ffi::ox_tensor_full(dev.as_raw(), ptr::null_mut(), dtype as ffi::ox_dtype, shape.len() as i32,
                                shape.as_ptr(), value, &mut t)
        })?;
        Ok(Tensor { raw: t })
    }

    /// The 1-D tensor `start, start + step, ...` of `n` elements.
    pub fn arange(dev: Device, dtype: Dtype, start: f64, step: f64, n: i64) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(unsafe {
            ffi::ox_tensor_arange(dev.as_raw(), ptr::null_mut(), dtype as ffi::ox_dtype, start, step, n, &mut t)
        })?;
        Ok(Tensor { raw: t })
    }

    /// Copies `src` into this tensor (same dtype and shape; any devices, any
    /// strides), ordered on `stream` (None: the default stream of this
    /// tensor's device, or of `src`'s when this one is on the CPU).
    pub fn copy_from(&self, src: &Tensor, stream: Option<&Stream>) -> Result<()> {
        check(unsafe { ffi::ox_tensor_copy(self.raw, src.raw, stream_raw(stream)) })
    }

    /// A new contiguous copy on `dev` (another GPU, the CPU, or the same device).
    pub fn to(&self, dev: Device, stream: Option<&Stream>) -> Result<Tensor> {
        let mut t = ptr::null_mut();
        check(unsafe { ffi::ox_tensor_to(self.raw, dev.as_raw(), stream_raw(stream), &mut t) })?;
        Ok(Tensor { raw: t })
    }
}
