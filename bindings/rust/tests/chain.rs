//! Chains from Rust: launches and a copy recorded once and run several times
//! (captured as a CUDA graph on CUDA device 0 when one is usable); an unsafe
//! kernel refused by the safe recorder; errors at record time.
use oxide::{Arg, Chain, Device, DeviceType, Dtype, LaunchConfig, Module, Tensor};

const SRC: &str = r#"
#[kernel]
fn bump(y: DisjointSlice<f32>, by: f32) {
    let i = thread::index_1d();
    if let Some(v) = y.get_mut(i) { *v += by; }
}
#[kernel]
unsafe fn poke(y: &mut [f32], at: usize) {
    y[at] = 1.0;
}
"#;

fn devices() -> Vec<Device> {
    let mut v = vec![Device::cpu().unwrap()];
    if Device::count(DeviceType::Cuda).unwrap_or(0) > 0 {
        v.push(Device::cuda(0).unwrap());
    }
    v
}

#[test]
fn a_chain_replays_its_steps_in_order() {
    for dev in devices() {
        let m = Module::compile(dev, SRC).unwrap();
        let bump = m.kernel("bump").unwrap();
        let y = Tensor::zeros(dev, Dtype::F32, &[1000]).unwrap();
        let snap = Tensor::zeros(dev, Dtype::F32, &[1000]).unwrap();
        let cfg = LaunchConfig::for_elements(1000, 256);
        let mut chain = Chain::new(dev).unwrap();
        chain.launch(&bump, &cfg, &[Arg::tensor(&y), Arg::f32(1.0)]).unwrap();
        chain.copy(&snap, &y).unwrap(); // after the first launch, before the second
        chain.launch(&bump, &cfg, &[Arg::tensor(&y), Arg::f32(2.0)]).unwrap();
        let s = dev.stream().unwrap();
        chain.capture(&s).unwrap(); // on the CPU: nothing to capture
        for _ in 0..3 {
            chain.run(Some(&s)).unwrap();
        }
        s.synchronize().unwrap();
        assert!(y.to_vec::<f32>().unwrap().iter().all(|&v| v == 9.0), "{dev:?}");
        assert!(snap.to_vec::<f32>().unwrap().iter().all(|&v| v == 7.0), "{dev:?}");
    }
}

#[test]
fn the_safe_recorder_refuses_an_unsafe_kernel() {
    let dev = Device::cpu().unwrap();
    let m = Module::compile(dev, SRC).unwrap();
    let poke = m.kernel("poke").unwrap();
    let y = Tensor::zeros(dev, Dtype::F32, &[4]).unwrap();
    let mut chain = Chain::new(dev).unwrap();
    let cfg = LaunchConfig::for_elements(1, 1);
    let e = chain.launch(&poke, &cfg, &[Arg::tensor(&y), Arg::u64(2)]).unwrap_err();
    assert!(e.to_string().contains("chain.launch_unchecked"), "{e}");
    // SAFETY: one thread writes y[2], inside y
    unsafe { chain.launch_unchecked(&poke, &cfg, &[Arg::tensor(&y), Arg::u64(2)]).unwrap() };
    chain.run(None).unwrap();
    dev.synchronize().unwrap();
    assert_eq!(y.to_vec::<f32>().unwrap(), vec![0.0, 0.0, 1.0, 0.0]);
}

#[test]
fn a_bad_launch_is_refused_when_recorded() {
    let dev = Device::cpu().unwrap();
    let m = Module::compile(dev, SRC).unwrap();
    let bump = m.kernel("bump").unwrap();
    let y = Tensor::zeros(dev, Dtype::F32, &[8]).unwrap();
    let mut chain = Chain::new(dev).unwrap();
    // f64 for an f32 parameter: refused now, not at run
    let e = chain.launch(&bump, &LaunchConfig::for_elements(8, 8), &[Arg::tensor(&y), Arg::f64(1.0)]).unwrap_err();
    assert!(e.to_string().contains("by"), "{e}");
    chain.run(None).unwrap(); // an empty chain runs
}
