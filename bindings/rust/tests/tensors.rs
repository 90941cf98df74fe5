//! Tensors made on the device (full, arange), copies between tensors and
//! devices, events and per-thread streams, on the CPU (and on CUDA device 0
//! when one is usable).
use oxide::{Device, DeviceType, Dtype, Event, Tensor};

fn devices() -> Vec<Device> {
    let mut d = vec![Device::cpu().unwrap()];
    if Device::count(DeviceType::Cuda).unwrap() > 0 {
        d.push(Device::cuda(0).unwrap());
    }
    d
}

#[test]
fn full_and_arange() {
    for dev in devices() {
        let t = Tensor::full(dev, Dtype::F32, &[2, 3], 2.5).unwrap();
        assert_eq!(t.shape(), vec![2, 3]);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![2.5f32; 6]);
        let r = Tensor::arange(dev, Dtype::I32, 3.0, 2.0, 5).unwrap();
        assert_eq!(r.to_vec::<i32>().unwrap(), vec![3, 5, 7, 9, 11]);
        let e = Tensor::arange(dev, Dtype::F32, 0.0, 1.0, -1).unwrap_err();
        assert!(!e.message().is_empty());
    }
}

#[test]
fn copies_between_tensors_and_devices() {
    let cpu = Device::cpu().unwrap();
    for dev in devices() {
        let src = Tensor::arange(dev, Dtype::F32, 0.0, 1.0, 6).unwrap().reshape(&[2, 3]).unwrap();
        // a strided view into a contiguous tensor
        let dst = Tensor::zeros(dev, Dtype::F32, &[3, 2]).unwrap();
        dst.copy_from(&src.transpose(0, 1).unwrap(), None).unwrap();
        assert_eq!(dst.to_vec::<f32>().unwrap(), vec![0.0, 3.0, 1.0, 4.0, 2.0, 5.0]);
        // to another device and back
        let host = dst.to(cpu, None).unwrap();
        assert_eq!(host.device().device_type(), DeviceType::Cpu);
        let back = host.to(dev, None).unwrap();
        assert_eq!(back.to_vec::<f32>().unwrap(), dst.to_vec::<f32>().unwrap());
        // a mismatched shape is refused with a message
        let e = Tensor::zeros(dev, Dtype::F32, &[4]).unwrap().copy_from(&src, None).unwrap_err();
        assert!(!e.message().is_empty());
    }
}

#[test]
fn events_order_and_time_streams() {
    for dev in devices() {
        let (s, other) = (dev.stream().unwrap(), dev.stream().unwrap());
        let (start, end) = (Event::new(dev).unwrap(), Event::new(dev).unwrap());
        start.record(&s).unwrap();
        let t = Tensor::full(dev, Dtype::F32, &[1 << 16], 1.0).unwrap();
        end.record(&s).unwrap();
        other.wait_event(&end).unwrap();
        end.synchronize().unwrap();
        assert!(start.elapsed_ms(&end).unwrap() >= 0.0);
        assert_eq!(t.to_vec::<f32>().unwrap()[0], 1.0);
        // per-thread streams: borrowed, one per thread
        let p = dev.per_thread_stream().unwrap();
        p.synchronize().unwrap();
        std::thread::spawn(move || dev.per_thread_stream().unwrap().synchronize().unwrap()).join().unwrap();
    }
}
