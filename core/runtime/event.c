/* event.c - events: points in a stream's work, to wait for or to time. On the
 * CPU, work runs when it is queued, so an event completes when it is recorded
 * and holds the host time of that moment. */
#include <stdlib.h>

#include "runtime/runtime.h"

struct ox_event_s {
  ox_device dev;
  CUevent cu;
  uint64_t host_ns; /* CPU: when it was recorded; 0 = never */
  int recorded;
};

ox_status ox_event_create(ox_device dev, ox_event *out) {
  if (!out)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_event_create: out is NULL");
  *out = NULL;
  if (!dev)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_event_create: device is NULL");
  ox_event e = calloc(1, sizeof *e);
  if (!e)
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "ox_event_create: out of memory");
  e->dev = dev;
  if (dev->type == OX_DEVICE_CUDA) {
    ox_status s = oxr_cuda_make_current(dev);
    CUresult r = s ? CUDA_SUCCESS : oxr_cu.cuEventCreate(&e->cu, 0);
    if (s || r) {
      free(e);
      return s ? s : oxr_cuda_error(r, "cuEventCreate");
    }
  }
  *out = e;
  return OX_OK;
}

void ox_event_destroy(ox_event e) {
  if (!e)
    return;
  if (e->cu && oxr_cuda_make_current(e->dev) == OX_OK)
    oxr_cu.cuEventDestroy(e->cu);
  free(e);
}

static ox_status check_pair(const char *fn, ox_event e, ox_stream s) {
  if (!e || !s)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: %s is NULL", fn, e ? "stream" : "event");
  if (!s->live)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: the stream was destroyed", fn);
  if (e->dev != s->dev)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: the event is on %s, the stream on %s", fn,
                         e->dev->name, s->dev->name);
  return OX_OK;
}

ox_status ox_event_record(ox_event e, ox_stream s) {
  ox_status st = check_pair("ox_event_record", e, s);
  if (st)
    return st;
  e->recorded = 1;
  if (!e->cu) {
    e->host_ns = oxb_now_ns();
    return OX_OK;
  }
  st = oxr_cuda_make_current(e->dev);
  CUresult r = st ? CUDA_SUCCESS : oxr_cu.cuEventRecord(e->cu, s->cu);
  return st ? st : r ? oxr_cuda_error(r, "cuEventRecord") : OX_OK;
}

ox_status ox_event_synchronize(ox_event e) {
  if (!e)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_event_synchronize: event is NULL");
  if (!e->cu)
    return OX_OK;
  ox_status st = oxr_cuda_make_current(e->dev);
  CUresult r = st ? CUDA_SUCCESS : oxr_cu.cuEventSynchronize(e->cu);
  return st ? st : r ? oxr_cuda_error(r, "cuEventSynchronize") : OX_OK;
}

ox_status ox_stream_wait_event(ox_stream s, ox_event e) {
  ox_status st = check_pair("ox_stream_wait_event", e, s);
  if (st || !e->cu)
    return st;
  st = oxr_cuda_make_current(e->dev);
  CUresult r = st ? CUDA_SUCCESS : oxr_cu.cuStreamWaitEvent(s->cu, e->cu, 0);
  return st ? st : r ? oxr_cuda_error(r, "cuStreamWaitEvent") : OX_OK;
}

ox_status ox_event_elapsed_ms(ox_event start, ox_event end, float *ms) {
  if (!start || !end || !ms)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_event_elapsed_ms: NULL argument");
  if (!start->recorded || !end->recorded)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_event_elapsed_ms: an event was never recorded");
  if (start->dev != end->dev)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_event_elapsed_ms: events of two devices");
  if (!start->cu) {
    *ms = (float)((double)(end->host_ns - start->host_ns) / 1e6);
    return OX_OK;
  }
  ox_status st = oxr_cuda_make_current(start->dev);
  CUresult r = st ? CUDA_SUCCESS : oxr_cu.cuEventElapsedTime(ms, start->cu, end->cu);
  return st ? st : r ? oxr_cuda_error(r, "cuEventElapsedTime") : OX_OK;
}
