//! Safe code cannot run a kernel whose accesses are unchecked: the issue's
//! reproduction (an `unsafe { out[i] = ... }` writing past a 16-element
//! tensor, which on the CPU device overwrote the process's heap) is refused
//! by the safe launch, and runs only through `unsafe { launch_unchecked }`.
use oxide::{Arg, Device, Dtype, ErrorKind, LaunchConfig, Module, Tensor};

// Every thread writes out[i * 1000]: far outside a 16-element tensor.
const WILD: &str = r#"#[kernel]
unsafe fn wild(out: &mut [u64]) {
    let i = thread::index_1d().get();
    unsafe { out[i * 1000] = 0xdeadbeef; }
}
"#;

// A safe kernel that reaches an unchecked access through a device function.
const VIA_DEVICE_FN: &str = r#"fn peek(a: &[f32], i: usize) -> f32 {
    unsafe { a[i] }
}

#[kernel]
fn copy(a: &[f32], out: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) {
        *o = peek(a, i.get());
    }
}

#[kernel]
fn safe_copy(a: &[f32], out: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) {
        *o = a[i];
    }
}
"#;

// An unsafe fn whose only writes are checked `&mut` writes: still unsafe
// (threads may race on `out`), so still refused.
const RACY: &str = r#"#[kernel]
unsafe fn racy(out: &mut [f32]) {
    out[0] = 1.0;
}
"#;

#[test]
fn unchecked_kernels_need_unsafe() {
    let dev = Device::cpu().unwrap();
    let out = Tensor::from_slice(dev, &[7u64; 16]).unwrap();
    let canary = vec![0x5au64; 4096];
    let m = Module::compile(dev, WILD).unwrap();
    let k = m.kernel("wild").unwrap();
    assert!(k.is_unsafe());
    let err = k
        .launch(&LaunchConfig::linear(1, 16), &[Arg::tensor(&out)])
        .unwrap_err();
    assert_eq!(err.kind(), ErrorKind::InvalidArgument);
    assert!(err.message().contains("launch_unchecked"), "{err}");
    assert!(
        k.launch_on(None, &LaunchConfig::linear(1, 16), &[Arg::tensor(&out)])
            .is_err()
    );
    dev.synchronize().unwrap();
    assert_eq!(out.to_vec::<u64>().unwrap(), vec![7u64; 16], "the kernel did not run");
    assert!(canary.iter().all(|&x| x == 0x5a));
    // checking a launch runs nothing, so it stays safe
    k.check(None, &LaunchConfig::linear(1, 16), &[Arg::tensor(&out)])
        .unwrap();

    let r = Module::compile(dev, RACY).unwrap();
    let rk = r.kernel("racy").unwrap();
    assert!(rk.is_unsafe());
    let racy_out = Tensor::from_slice(dev, &[0f32; 4]).unwrap();
    assert!(rk
        .launch(&LaunchConfig::linear(1, 1), &[Arg::tensor(&racy_out)])
        .is_err());
    // the caller vouches for it: one thread, one in-bounds write
    unsafe {
        rk.launch_unchecked(None, &LaunchConfig::linear(1, 1), &[Arg::tensor(&racy_out)])
            .unwrap();
    }
    dev.synchronize().unwrap();
    assert_eq!(racy_out.to_vec::<f32>().unwrap(), vec![1.0, 0.0, 0.0, 0.0]);
}

#[test]
fn unsafe_blocks_in_device_functions_count() {
    let dev = Device::cpu().unwrap();
    let a = Tensor::from_slice(dev, &[1f32, 2., 3., 4.]).unwrap();
    let out = Tensor::empty(dev, Dtype::F32, &[4]).unwrap();
    let m = Module::compile(dev, VIA_DEVICE_FN).unwrap();
    let copy = m.kernel("copy").unwrap();
    let safe = m.kernel("safe_copy").unwrap();
    assert!(copy.is_unsafe(), "an unsafe block in a called device function");
    assert!(!safe.is_unsafe(), "the module's other kernel is safe");
    let cfg = LaunchConfig::linear(1, 4);
    let args = [Arg::tensor(&a), Arg::tensor(&out)];
    assert_eq!(copy.launch(&cfg, &args).unwrap_err().kind(), ErrorKind::InvalidArgument);
    safe.launch(&cfg, &args).unwrap();
    dev.synchronize().unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![1., 2., 3., 4.]);
    // in bounds: the caller's promise holds
    unsafe { copy.launch_unchecked(None, &cfg, &args).unwrap() };
    dev.synchronize().unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![1., 2., 3., 4.]);
}

#[test]
fn errors_debug_print_the_status_name() {
    let dev = Device::cpu().unwrap();
    let err = Module::compile(dev, "fn (").unwrap_err();
    let dbg = format!("{err:?}");
    assert!(dbg.contains("OX_ERR_COMPILE"), "{dbg}");
}
