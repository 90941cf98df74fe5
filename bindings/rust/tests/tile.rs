//! #[tile] kernels through the Rust binding: the output passed as a
//! partition (Tensor::partition), launched with a zero config; on the CPU
//! (and on CUDA device 0 when one is usable).
use oxide::{Arg, CompileOptions, Device, DeviceType, ErrorKind, LaunchConfig, Module, Tensor};

const ADD: &str = r#"#[tile]
fn add<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, y: &Tensor<f32, [-1]>) {
    z.store(load_tile_like(x, z) + load_tile_like(y, z));
}
"#;

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
fn tile_add_into_a_partition() {
    for dev in devices() {
        let n = 1000usize; // not a multiple of the tile: the last tile is cut
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let y = vec![0.5f32; n];
        let (tx, ty) = (
            Tensor::from_slice(dev, &x).unwrap(),
            Tensor::from_slice(dev, &y).unwrap(),
        );
        let opts = CompileOptions {
            filename: Some("add.oxk".into()),
            ..Default::default()
        };
        let m = Module::compile_with(dev, ADD, &opts).unwrap();
        let k = m.kernel("add").unwrap();
        for tile in [128i64, 256] {
            let z = Tensor::from_slice(dev, &vec![f32::NAN; n]).unwrap();
            assert_eq!(z.partition_grid(), None);
            let p = z.partition(&[tile]).unwrap();
            assert_eq!(p.partition_grid(), Some(vec![(n as i64 + tile - 1) / tile]));
            drop(z); // the partition keeps the memory
            let args = [Arg::tensor(&p), Arg::tensor(&tx), Arg::tensor(&ty)];
            k.check(None, &LaunchConfig::default(), &args).unwrap();
            k.launch(&LaunchConfig::default(), &args).unwrap();
            let want: Vec<f32> = (0..n).map(|i| i as f32 + 0.5).collect();
            assert_eq!(p.to_vec::<f32>().unwrap(), want);
        }
    }
}

#[test]
fn tile_errors() {
    let dev = Device::cpu().unwrap();
    let opts = CompileOptions {
        filename: Some("add.oxk".into()),
        ..Default::default()
    };
    let m = Module::compile_with(dev, ADD, &opts).unwrap();
    let k = m.kernel("add").unwrap();
    let z = Tensor::from_slice(dev, &[0f32; 100]).unwrap();
    let x = Tensor::from_slice(dev, &[1f32; 100]).unwrap();
    // one size per dimension, each > 0
    let e = z.partition(&[16, 16]).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert_eq!(
        z.partition(&[0]).unwrap_err().kind(),
        ErrorKind::InvalidArgument
    );
    // a tile that is not a power of two is refused by the launch binding B
    let p = z.partition(&[12]).unwrap();
    let e = k
        .launch(
            &LaunchConfig::default(),
            &[Arg::tensor(&p), Arg::tensor(&x), Arg::tensor(&x)],
        )
        .unwrap_err();
    assert!(
        e.kind() == ErrorKind::Compile && e.message().contains("static powers of two"),
        "{e}"
    );
    // a grid other than the partition's
    let p = z.partition(&[16]).unwrap();
    let e = k
        .launch(
            &LaunchConfig::linear(3, 0),
            &[Arg::tensor(&p), Arg::tensor(&x), Arg::tensor(&x)],
        )
        .unwrap_err();
    assert!(
        e.kind() == ErrorKind::Launch && e.message().contains("(7, 1, 1)"),
        "{e}"
    );
}

#[test]
fn tile_candidates_chosen_by_measurement() {
    for dev in devices() {
        let n = 1000usize;
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let (tx, ty) = (
            Tensor::from_slice(dev, &x).unwrap(),
            Tensor::from_slice(dev, &vec![1.0f32; n]).unwrap(),
        );
        let m = Module::compile(dev, ADD).unwrap();
        let k = m.kernel("add").unwrap();
        let cands: [&[(&str, i64)]; 3] = [&[("B", 64)], &[("B", 256)], &[("B", 1024)]];
        k.set_candidates(&cands).unwrap();
        let z = Tensor::from_slice(dev, &vec![f32::NAN; n]).unwrap(); // passed whole
        let args = [Arg::tensor(&z), Arg::tensor(&tx), Arg::tensor(&ty)];
        k.launch(&LaunchConfig::default(), &args).unwrap();
        let chosen = k.tuned(&args).unwrap();
        assert!(matches!(chosen, Some(0..=2)), "{chosen:?}");
        let want: Vec<f32> = (0..n).map(|i| i as f32 + 1.0).collect();
        assert_eq!(z.to_vec::<f32>().unwrap(), want);
        let bad: [&[(&str, i64)]; 1] = [&[("B", 48)]];
        let e = k.set_candidates(&bad).unwrap_err();
        assert!(e.to_string().contains("B = 48 is not a power of two"), "{e}");
    }
}

/// Views (slice, reshape, permute, transpose) share the memory and pass to
/// kernels as strided tensors.
#[test]
fn views() {
    let dev = oxide::Device::cpu().unwrap();
    let t = oxide::Tensor::with_shape(dev, &(0..24).map(|x| x as f32).collect::<Vec<_>>(), &[2, 3, 4]).unwrap();
    assert_eq!(t.reshape(&[6, -1]).unwrap().shape(), vec![6, 4]);
    assert_eq!(t.permute(&[2, 0, 1]).unwrap().shape(), vec![4, 2, 3]);
    let tr = t.reshape(&[6, 4]).unwrap().transpose(0, 1).unwrap();
    assert_eq!(tr.shape(), vec![4, 6]);
    let s = t.slice(2, 1, 4, 2).unwrap(); // t[:, :, 1:4:2]
    assert_eq!(s.shape(), vec![2, 3, 2]);
    assert!(t.permute(&[0, 1]).is_err());
    let z = oxide::Tensor::zeros(dev, oxide::Dtype::F32, &[3]).unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.0; 3]);
}
