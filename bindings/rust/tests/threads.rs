//! Tensors, streams, modules and kernels shared between threads: writers
//! (kernels and host copies, each writing every element with one value) and
//! readers on other threads; every read sees one whole write.
use oxide::{Arg, Device, LaunchConfig, Module, Tensor};

const FILL: &str = r#"#[kernel]
fn fill(out: DisjointSlice<f32>, v: f32) {
    let i = thread::index_1d();
    if let Some(o) = out.get_mut(i) { *o = v; }
}
"#;

#[test]
fn shared_across_threads() {
    let dev = Device::cpu().unwrap();
    let n = 1usize << 16;
    let t = Tensor::from_slice(dev, &vec![0.0f32; n]).unwrap();
    let m = Module::compile(dev, FILL).unwrap();
    let k = m.kernel("fill").unwrap();
    std::thread::scope(|scope| {
        for w in 0..2 {
            let (t, k) = (t.clone(), k); // a clone moves to the thread; the kernel is shared
            scope.spawn(move || {
                let s = dev.stream().unwrap(); // each writer on its own stream
                for r in 0..50 {
                    let v = (w * 1000 + r) as f32;
                    if r % 2 == 0 {
                        let cfg = LaunchConfig::for_elements(n, 256);
                        k.launch_on(Some(&s), &cfg, &[Arg::tensor(&t), Arg::f32(v)]).unwrap();
                    } else {
                        t.copy_from_slice(&vec![v; n]).unwrap();
                    }
                }
            });
        }
        for _ in 0..2 {
            let t = &t; // shared by reference (Sync)
            scope.spawn(move || {
                for _ in 0..100 {
                    let got: Vec<f32> = t.to_vec().unwrap();
                    assert!(got.iter().all(|&x| x == got[0]), "a read saw two writes at once");
                }
            });
        }
    });
}
