//! kernel!: kernels in Rust syntax with typed launchers.
use oxide::{Device, Dtype, LaunchConfig, Tensor};

oxide::kernel! {
    #[kernel]
    #[launch_contract(block = (256, 1, 1), requires = (a.len() >= c.len(), b.len() >= c.len()))]
    fn vecadd(a: &[f32], b: &[f32], c: DisjointSlice<f32>) {
        let i = thread::index_1d();
        if let Some(out) = c.get_mut(i) {
            *out = a[i] + b[i];
        }
    }
}

oxide::kernel! {
    #[kernel]
    fn scale(out: DisjointSlice<f32>, a: f32) {
        let i = thread::index_1d();
        if let Some(o) = out.get_mut(i) { *o = a; }
    }
}

oxide::kernel! {
    #[kernel]
    fn count(x: &[u32], hist: &[Atomic<u32>], bins: u32) {
        let i = thread::index_1d();
        if i.get() < x.len() {
            hist.atomic_add((x[i] % bins) as usize, 1);
        }
    }
}

// names no Oxide kernel accepts: the error comes from Oxide, at load
oxide::kernel! {
    #[kernel]
    fn broken(out: DisjointSlice<f32>) {
        let i = thread::index_1d();
        if let Some(o) = out.get_mut(i) { *o = nowhere; }
    }
}

#[test]
fn typed_launchers() {
    let dev = Device::cpu().unwrap();
    let n = 1000usize;
    let a = Tensor::from_slice(dev, &vec![1.5f32; n]).unwrap();
    let b = Tensor::from_slice(dev, &vec![2.0f32; n]).unwrap();
    let c = Tensor::empty(dev, Dtype::F32, &[n as i64]).unwrap();
    let k = vecadd::load(dev).unwrap();
    k.launch(&LaunchConfig::for_elements(n, 256), &a, &b, &c).unwrap();
    assert!(c.to_vec::<f32>().unwrap().iter().all(|&v| v == 3.5));
    let s = scale::load(dev).unwrap();
    s.launch(&LaunchConfig::for_elements(n, 256), &c, 4.0f32).unwrap();
    assert!(c.to_vec::<f32>().unwrap().iter().all(|&v| v == 4.0));
    assert!(scale::SOURCE.contains("fn scale"));

    let x: Vec<u32> = (0..n as u32).collect();
    let tx = Tensor::from_slice(dev, &x).unwrap();
    let hist = Tensor::from_slice(dev, &[0u32; 10]).unwrap();
    let h = count::load(dev).unwrap();
    let stream = dev.stream().unwrap();
    h.launch_on(Some(&stream), &LaunchConfig::for_elements(n, 256), &tx, &hist, 10u32).unwrap();
    stream.synchronize().unwrap();
    assert_eq!(hist.to_vec::<u32>().unwrap(), vec![100u32; 10]);

    // the kernel's element types are Oxide's to check, at launch
    let e = k.launch(&LaunchConfig::for_elements(n, 256), &tx, &b, &c).unwrap_err();
    assert!(e.message().contains("u32"), "{}", e.message());
}

#[test]
fn oxide_diagnostics_name_the_macro() {
    let e = broken::load(Device::cpu().unwrap()).err().expect("an unknown name compiles");
    assert!(e.message().contains("(kernel!)") && e.message().contains("nowhere"), "{}", e.message());
}

oxide::tile! {
    #[tile]
    fn add<const B: i32>(z: &mut Tensor<f32, [B]>, x: &Tensor<f32, [-1]>, y: &Tensor<f32, [-1]>, s: f32) {
        let i = tile_id(0);
        let a = x.partition([B]).load([i]);
        let b = y.partition([B]).load([i]);
        z.store(a + b * s);
    }
}

#[test]
fn tile_launcher() {
    let dev = Device::cpu().unwrap();
    let n = 1000usize;
    let x = Tensor::from_slice(dev, &(0..n).map(|i| i as f32).collect::<Vec<_>>()).unwrap();
    let y = Tensor::from_slice(dev, &vec![1.0f32; n]).unwrap();
    let z = Tensor::empty(dev, Dtype::F32, &[n as i64]).unwrap();
    let k = add::load(dev).unwrap();
    k.launch(&LaunchConfig::default(), &z.partition(&[128]).unwrap(), &x, &y, 2.0f32).unwrap();
    let got = z.to_vec::<f32>().unwrap();
    assert!(got.iter().enumerate().all(|(i, &v)| v == i as f32 + 2.0), "{:?}", &got[..4]);
    assert!(add::SOURCE.contains("const B"));
}

oxide::kernel! {
    #[kernel]
    fn axpy_any<T: Float>(x: &[T], y: &[T], out: DisjointSlice<T>, a: T) {
        let i = thread::index_1d();
        if let Some(o) = out.get_mut(i) { *o = a * x[i] + y[i]; }
    }
}

oxide::tile! {
    #[tile]
    fn add_any<T: Num, const B: i32>(z: &mut Tensor<T, [B]>, x: &Tensor<T, [-1]>, c: T) {
        z.store(x.partition([B]).load([tile_id(0)]) + c);
    }
}

/// One source, every dtype: the launcher takes tensors of any dtype the bound
/// admits and any Rust number for `a: T`.
#[test]
fn generic_launchers() {
    let dev = Device::cpu().unwrap();
    let k = axpy_any::load(dev).unwrap();
    let cfg = LaunchConfig::for_elements(3, 256);
    let x = Tensor::from_slice(dev, &[1.0f64, 2.0, 3.0]).unwrap();
    let y = Tensor::from_slice(dev, &[0.5f64; 3]).unwrap();
    let out = Tensor::empty(dev, Dtype::F64, &[3]).unwrap();
    k.launch(&cfg, &x, &y, &out, 2.0).unwrap();
    assert_eq!(out.to_vec::<f64>().unwrap(), vec![2.5, 4.5, 6.5]);
    let x = Tensor::from_slice(dev, &[1.0f32, 2.0, 3.0]).unwrap();
    let y = Tensor::from_slice(dev, &[0.5f32; 3]).unwrap();
    let out = Tensor::empty(dev, Dtype::F32, &[3]).unwrap();
    k.launch(&cfg, &x, &y, &out, 2i32).unwrap();
    assert_eq!(out.to_vec::<f32>().unwrap(), vec![2.5, 4.5, 6.5]);
    // dtypes that disagree are Oxide's error at launch
    let e = k.launch(&cfg, &x, &Tensor::from_slice(dev, &[0.5f64; 3]).unwrap(), &out, 1.0).unwrap_err();
    assert!(e.to_string().contains("type generic 'T' is f32 from argument 1 ('x') and f64 from argument 2 ('y')"), "{e}");

    let t = add_any::load(dev).unwrap();
    let x = Tensor::from_slice(dev, &(0..100).collect::<Vec<i32>>()).unwrap();
    let z = Tensor::empty(dev, Dtype::I32, &[100]).unwrap();
    t.launch(&LaunchConfig::default(), &z.partition(&[32]).unwrap(), &x, 7).unwrap();
    assert_eq!(z.to_vec::<i32>().unwrap(), (7..107).collect::<Vec<i32>>());
    let x = Tensor::from_slice(dev, &[0.25f32; 5]).unwrap();
    let z = Tensor::empty(dev, Dtype::F32, &[5]).unwrap();
    t.launch(&LaunchConfig::default(), &z.partition(&[4]).unwrap(), &x, 0.5).unwrap();
    assert_eq!(z.to_vec::<f32>().unwrap(), vec![0.75f32; 5]);
}
