//! Events: points in a stream's work, to wait for (on the host or on another
//! stream) and to time.

use std::ptr;

use crate::{check, ffi, Device, Result, Stream};

/// A point in a stream's work, destroyed when dropped:
///
/// ```no_run
/// # fn main() -> oxide::Result<()> {
/// let dev = oxide::Device::default_device()?;
/// let (s, other) = (dev.stream()?, dev.stream()?);
/// let (start, end) = (oxide::Event::new(dev)?, oxide::Event::new(dev)?);
/// start.record(&s)?;
/// // ... launches on s ...
/// end.record(&s)?;
/// other.wait_event(&end)?;   // later work on `other` waits for it, on the device
/// end.synchronize()?;        // the host waits for it
/// println!("{} ms", start.elapsed_ms(&end)?);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct Event {
    raw: ffi::ox_event,
}

impl Event {
    /// A new event on `dev`.
    pub fn new(dev: Device) -> Result<Event> {
        let mut e = ptr::null_mut();
        check(unsafe { ffi::ox_event_create(dev.as_raw(), &mut e) })?;
        Ok(Event { raw: e })
    }

    /// Marks the current end of `stream`'s queued work (on the CPU, where work
    /// is done when queued, the present).
    pub fn record(&self, stream: &Stream) -> Result<()> {
        check(unsafe { ffi::ox_event_record(self.raw, stream.as_raw()) })
    }

    /// Waits until the work before the last record is done.
    pub fn synchronize(&self) -> Result<()> {
        check(unsafe { ffi::ox_event_synchronize(self.raw) })
    }

    /// Milliseconds from this event to `end`, both recorded and completed, of one device.
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        let mut ms = 0.0f32;
        check(unsafe { ffi::ox_event_elapsed_ms(self.raw, end.raw, &mut ms) })?;
        Ok(ms)
    }

    pub fn as_raw(&self) -> ffi::ox_event {
        self.raw
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        unsafe { ffi::ox_event_destroy(self.raw) }
    }
}

// SAFETY: an event may move to another thread: its handle is an entry of the C API's
// locked table. It is not Sync: a CPU event's record writes its time without a lock,
// so two threads recording one event at once would race.
unsafe impl Send for Event {}

impl Stream {
    /// Later work here waits, on the device, for the work before `event`'s
    /// last record (an event of another GPU too).
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        check(unsafe { ffi::ox_stream_wait_event(self.as_raw(), event.raw) })
    }
}
