//! The Rust binding end to end: vecadd and saxpy on the CPU (and on CUDA
//! device 0 when one is usable), then errors.
use oxide::{
    Arg, CompileOptions, Device, DeviceType, Dtype, EmitKind, ErrorKind, LaunchConfig, Module,
    Tensor,
};

const VECADD: &str = r#"#[kernel]
#[launch_contract(block = (256, 1, 1), requires = (a.len() >= c.len(), b.len() >= c.len()))]
fn vecadd(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(out) = c.get_mut(i) {
        *out = a[i] + b[i];
    }
}
"#;

const SAXPY: &str = r#"#[kernel]
fn saxpy(x: &[f32], y: &[f32], out: DisjointSlice<f32>, alpha: f32) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) {
        *o = alpha * x[i] + y[i];
    }
}
"#;

// Reads one past its own index: the last thread reads out of bounds.
const OOB: &str = r#"#[kernel]
fn oob(a: &[f32], c: DisjointSlice<f32>) {
    let i = thread::index_1d();
    if let Some(o) = c.get_mut(i) {
        *o = a[i.get() + 1];
    }
}
"#;

fn named(name: &str) -> CompileOptions {
    CompileOptions {
        filename: Some(name.into()),
        ..Default::default()
    }
}

/// The CPU, and CUDA device 0 when one is usable.
fn devices() -> Vec<Device> {
    let mut d = vec![Device::cpu().unwrap()];
    if Device::count(DeviceType::Cuda).unwrap() > 0 {
        d.push(Device::cuda(0).unwrap());
    } else {
        eprintln!("no GPU: CUDA runs skipped");
    }
    d
}

#[test]
fn vecadd() {
    for dev in devices() {
        let n = 1000usize; // not a multiple of the block: the tail threads write nothing
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..n).map(|i| 0.5 * i as f32).collect();
        let (ta, tb) = (
            Tensor::from_slice(dev, &a).unwrap(),
            Tensor::from_slice(dev, &b).unwrap(),
        );
        let tc = Tensor::empty(dev, Dtype::F32, &[n as i64]).unwrap();
        let m = Module::compile_with(dev, VECADD, &named("vecadd.oxk")).unwrap();
        let k = m.kernel("vecadd").unwrap();
        assert_eq!((k.name().as_str(), k.num_params()), ("vecadd", 3));
        k.launch(
            &LaunchConfig::for_elements(n, 256),
            &[Arg::tensor(&ta), Arg::tensor(&tb), Arg::tensor(&tc)],
        )
        .unwrap();
        dev.synchronize().unwrap();
        let c: Vec<f32> = tc.to_vec().unwrap();
        assert!(c.iter().enumerate().all(|(i, &x)| x == 1.5 * i as f32));
        assert_eq!(
            (tc.shape(), tc.nbytes(), tc.device()),
            (vec![n as i64], 4 * n, dev)
        );
    }
}

#[test]
fn saxpy_on_a_stream() {
    for dev in devices() {
        let n = 300usize;
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let tx = Tensor::from_slice(dev, &x).unwrap();
        let ty = Tensor::from_slice(dev, &vec![1.0f32; n]).unwrap();
        let out = Tensor::empty(dev, Dtype::F32, &[n as i64]).unwrap();
        let s = dev.stream().unwrap();
        let m = Module::compile(dev, SAXPY).unwrap();
        let args = [
            Arg::tensor(&tx),
            Arg::tensor(&ty),
            Arg::tensor(&out),
            Arg::f32(2.0),
        ];
        m.kernel("saxpy")
            .unwrap()
            .launch_on(Some(&s), &LaunchConfig::linear(2, 256), &args)
            .unwrap();
        s.synchronize().unwrap();
        let r: Vec<f32> = out.to_vec_on(Some(&s)).unwrap();
        assert_eq!(r, x.iter().map(|v| 2.0 * v + 1.0).collect::<Vec<_>>());
    }
}

#[test]
fn tensors() {
    let dev = Device::cpu().unwrap();
    let t = Tensor::with_shape(dev, &[1i64, 2, 3, 4, 5, 6], &[2, 3]).unwrap();
    assert_eq!(
        (t.shape(), t.dtype(), t.numel()),
        (vec![2, 3], Some(Dtype::I64), 6)
    );
    let shared = t.clone(); // the same array
    shared.copy_from_slice(&[6i64, 5, 4, 3, 2, 1]).unwrap();
    assert_eq!(t.to_vec::<i64>().unwrap(), vec![6, 5, 4, 3, 2, 1]);
    assert_eq!(
        t.to_vec::<f32>().unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        Tensor::with_shape(dev, &[1u8, 2], &[3]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    assert_eq!(
        (Dtype::BF16.name(), Dtype::BF16.size()),
        ("bf16".to_string(), 2)
    );
    // tf32 is a compute type of kernels: no tensor holds it
    assert_eq!(
        (Dtype::TF32.name(), Dtype::TF32.size()),
        ("tf32".to_string(), 4)
    );
    assert_eq!(
        Tensor::empty(dev, Dtype::TF32, &[2]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
}

#[test]
fn errors() {
    let dev = Device::cpu().unwrap();
    // compile errors carry file:line:col, the line and a caret
    let e = Module::compile_with(
        dev,
        "#[kernel]\nfn bad(a: &[f32]) {\n    let x: i32 = 1.5;\n}\n",
        &named("bad.oxk"),
    )
    .unwrap_err();
    assert_eq!(
        (e.kind(), e.status_name().as_str()),
        (ErrorKind::Compile, "OX_ERR_COMPILE")
    );
    assert!(
        e.message().contains("bad.oxk:3:18") && e.message().contains('^'),
        "{e}"
    );

    let m = Module::compile_with(dev, SAXPY, &named("saxpy.oxk")).unwrap();
    let k = m.kernel("saxpy").unwrap();
    let a = Tensor::from_slice(dev, &[1.0f32]).unwrap();
    let out = Tensor::empty(dev, Dtype::F32, &[1]).unwrap();
    let cfg = LaunchConfig::linear(1, 1);
    let e = k
        .launch(&cfg, &[Arg::tensor(&a), Arg::tensor(&a), Arg::tensor(&out)])
        .unwrap_err();
    assert!(
        e.kind() == ErrorKind::InvalidArgument && e.message().contains("takes 4 arguments, got 3"),
        "{e}"
    );
    let e = k
        .launch(
            &cfg,
            &[
                Arg::tensor(&a),
                Arg::tensor(&a),
                Arg::tensor(&out),
                Arg::f64(2.0),
            ],
        )
        .unwrap_err();
    assert!(e.message().contains("expected f32, got f64"), "{e}");
    assert_eq!(m.kernel("nope").unwrap_err().kind(), ErrorKind::NotFound);
    let e =
        Module::compile_file(dev, "/nonexistent/k.oxk", &CompileOptions::default()).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io);
    if Device::count(DeviceType::Cuda).unwrap() == 0 {
        assert_eq!(Device::cuda(0).unwrap_err().kind(), ErrorKind::NoDevice);
    }

    // the launch contract is checked at launch, with its location
    let va = Module::compile_with(dev, VECADD, &named("vecadd.oxk")).unwrap();
    let e = va
        .kernel("vecadd")
        .unwrap()
        .launch(
            &LaunchConfig::linear(1, 128),
            &[Arg::tensor(&a), Arg::tensor(&a), Arg::tensor(&out)],
        )
        .unwrap_err();
    assert!(
        e.kind() == ErrorKind::Launch && e.message().contains("vecadd.oxk:"),
        "{e}"
    );
}

#[test]
fn out_of_bounds_is_reported_once() {
    for dev in devices() {
        let m = Module::compile_with(dev, OOB, &named("oob.oxk")).unwrap();
        let k = m.kernel("oob").unwrap();
        let a = Tensor::from_slice(dev, &[1.0f32, 2.0, 3.0, 4.0]).unwrap();
        let c = Tensor::empty(dev, Dtype::F32, &[4]).unwrap();
        // a stream of its own: the tests run in parallel, and another test's
        // synchronize of the default stream would take the error
        let s = dev.stream().unwrap();
        let args = [Arg::tensor(&a), Arg::tensor(&c)];
        // the launch reports it (the CPU: its kernel has run), or else the synchronize
        let e = match k.launch_on(Some(&s), &LaunchConfig::linear(1, 4), &args) {
            Err(e) => e,
            Ok(()) => s.synchronize().unwrap_err(),
        };
        assert!(
            e.kind() == ErrorKind::Bounds && e.message().contains("oob.oxk:5:"),
            "{e}"
        );
        s.synchronize().unwrap(); // reported once
        // else a host read of the output reports the pending error itself, and consumes it
        let e = match k.launch_on(Some(&s), &LaunchConfig::linear(1, 4), &args) {
            Err(e) => e,
            Ok(()) => c.to_vec_on::<f32>(Some(&s)).unwrap_err(),
        };
        assert!(e.kind() == ErrorKind::Bounds && e.message().contains("oob.oxk:5:"), "{e}");
        s.synchronize().unwrap();
        // the error is consumed: the next launch works
        let a5 = Tensor::from_slice(dev, &[1.0f32, 2.0, 3.0, 4.0, 5.0]).unwrap();
        k.launch_on(
            Some(&s),
            &LaunchConfig::linear(1, 4),
            &[Arg::tensor(&a5), Arg::tensor(&c)],
        )
        .unwrap();
        s.synchronize().unwrap();
        assert_eq!(
            c.to_vec_on::<f32>(Some(&s)).unwrap(),
            vec![2.0, 3.0, 4.0, 5.0]
        );
    }
}

#[test]
fn emit_and_info() {
    assert!(
        oxide::emit(VECADD, EmitKind::Ptx, None, &CompileOptions::default())
            .unwrap()
            .contains(".entry vecadd")
    );
    assert!(
        oxide::emit(VECADD, EmitKind::Ir, None, &CompileOptions::default())
            .unwrap()
            .contains("vecadd")
    );
    assert!(oxide::version().starts_with("0."));
    assert!(oxide::doctor().unwrap().contains("cache"));
}

const TILE_MM: &str = "#[tile]
fn mm<const BM: i32, const BN: i32, const BK: i32>(c: &mut Tensor<f32, [BM, BN]>,
        a: &Tensor<bf16, [-1, -1]>, b: &Tensor<bf16, [-1, -1]>) {
    c.store(mma(a.partition([BM, BK]).load([tile_id(0), 0]), b.partition([BK, BN]).load([0, tile_id(1)]),
                full([BM, BN], 0.0f32)));
}
";

#[test]
fn emit_with_generics() {
    let mut opts = CompileOptions {
        sm: 90,
        ..Default::default()
    };
    // every generic at 16: too small for wgmma
    let small = oxide::emit(TILE_MM, EmitKind::Ptx, Some(DeviceType::Cuda), &opts).unwrap();
    assert!(!small.contains("wgmma"));
    opts.generics = vec![("BM".into(), 64), ("BN".into(), 128), ("BK".into(), 32)];
    let big = oxide::emit(TILE_MM, EmitKind::Ptx, Some(DeviceType::Cuda), &opts).unwrap();
    assert!(big.contains("wgmma.mma_async"));
    opts.generics = vec![("BQ".into(), 16)];
    let e = oxide::emit(TILE_MM, EmitKind::Ptx, None, &opts).unwrap_err();
    assert!(e.to_string().contains("generic 'BQ'"), "{e}");
    // a module's generics come from its launches
    let e = Module::compile_with(Device::cpu().unwrap(), TILE_MM, &opts).unwrap_err();
    assert!(
        e.to_string().contains("the generics option is for ox_emit"),
        "{e}"
    );
    assert_eq!(Device::cpu().unwrap().compute_capability(), None);
}
