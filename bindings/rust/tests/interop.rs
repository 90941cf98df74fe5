//! What crosses the language boundary: raw handles, DLPack, wrapped streams.
use oxide::{Device, ErrorKind, Module, Stream, Tensor};

#[test]
fn raw_handles_round_trip() {
    let dev = Device::cpu().unwrap();
    let t = Tensor::from_slice(dev, &[1.0f32, 2.0, 3.0]).unwrap();
    let raw = t.clone().into_raw(); // one reference, now C's
    let back = unsafe { Tensor::from_raw(raw) }; // and back: released on drop
    assert_eq!(back.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]);
    drop(back);
    assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0]); // t's reference stands

    let s = dev.stream().unwrap();
    let raw = s.into_raw();
    let s = unsafe { Stream::from_raw(raw) };
    s.synchronize().unwrap();
    s.wait_stream(&dev.default_stream().unwrap()).unwrap();
    assert!(s.cuda_handle().is_null()); // no CUDA stream on the CPU

    let m = Module::compile(dev, "#[kernel]\nfn k(x: DisjointSlice<f32>) {}\n").unwrap();
    let k = m.kernel("k").unwrap();
    let k2 = unsafe { oxide::Kernel::from_raw(k.as_raw(), &m) };
    assert_eq!(k2.name(), "k");
    let mraw = m.into_raw();
    let m = unsafe { Module::from_raw(mraw, dev) };
    assert_eq!(m.kernel("k").unwrap().num_params(), 1);
}

#[test]
fn dlpack_round_trip_shares_memory() {
    let dev = Device::cpu().unwrap();
    let t = Tensor::from_slice(dev, &[5i32, 6, 7, 8]).unwrap();
    let managed = t.to_dlpack(None).unwrap();
    let u = unsafe { Tensor::from_dlpack(managed) }.unwrap();
    t.copy_from_slice(&[1i32, 2, 3, 4]).unwrap();
    assert_eq!(u.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]); // one memory
    assert_eq!(u.shape(), vec![4]);
    drop(t);
    assert_eq!(u.to_vec::<i32>().unwrap(), vec![1, 2, 3, 4]); // the export keeps it alive
    // a release stream is for imported memory only
    let own = Tensor::from_slice(dev, &[0.0f32]).unwrap();
    let e = own.set_release_stream(None).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
    assert!(e.message().contains("Oxide's own"), "{}", e.message());
    u.set_release_stream(Some(&dev.default_stream().unwrap())).unwrap();
    // a null managed tensor is refused, not dereferenced
    let e = unsafe { Tensor::from_dlpack(std::ptr::null_mut()) }.unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument);
}

#[test]
fn wrapping_needs_a_cuda_device() {
    let dev = Device::cpu().unwrap();
    let e = unsafe { Stream::wrap(dev, std::ptr::null_mut()) }.unwrap_err();
    assert!(e.message().contains("only CUDA streams can be wrapped"), "{}", e.message());
}
