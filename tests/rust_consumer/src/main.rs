//! saxpy on the CPU (and on CUDA device 0 when there is one), checked.
use oxide::{Arg, Device, DeviceType, LaunchConfig, Module, Tensor};

// SAXPY: kernels/saxpy.oxk, checked by build.rs
include!(concat!(env!("OUT_DIR"), "/oxide_kernels.rs"));

fn main() -> Result<(), oxide::Error> {
    let mut devices = vec![Device::cpu()?];
    if Device::count(DeviceType::Cuda)? > 0 {
        devices.push(Device::cuda(0)?);
    }
    for dev in devices {
        let n = 4099usize;
        let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let y = vec![1.0f32; n];
        let (tx, ty) = (Tensor::from_slice(dev, &x)?, Tensor::from_slice(dev, &y)?);
        let out = Tensor::empty(dev, oxide::Dtype::F32, &[n as i64])?;
        let opts = oxide::CompileOptions { filename: Some("kernels/saxpy.oxk".into()), ..Default::default() };
        let m = Module::compile_with(dev, SAXPY, &opts)?;
        let k = m.kernel("saxpy")?;
        k.launch(
            &LaunchConfig::for_elements(n, 256),
            &[Arg::tensor(&tx), Arg::tensor(&ty), Arg::tensor(&out), Arg::f32(3.0)],
        )?;
        let got: Vec<f32> = out.to_vec()?;
        let bad = got.iter().enumerate().filter(|&(i, &v)| v != 3.0 * i as f32 + 1.0).count();
        println!("oxide_consumer on {}: {} of {} wrong", dev.name(), bad, n);
        if bad != 0 {
            std::process::exit(1);
        }
    }
    Ok(())
}
