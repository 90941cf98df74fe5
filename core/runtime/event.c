/* event.c - events: points in a stream's work, to wait for or to time. On the
 * CPU, work runs when it is queued, so an event completes when it is recorded
 * and holds the host time of that moment.
 *
 * An event that was never recorded marks no work: waiting for it or timing it
 * is refused (CUDA would return at once, which hides a forgotten record). */
#include <stdlib.h>

#include "runtime/runtime.h"

typedef struct oxr_event {
  ox_event handle;
  ox_device dev;
  CUevent cu;
  uint64_t host_ns; /* CPU: when it was recorded */
  int recorded;     /* atomic: 1 once recorded */
} oxr_event;

/* The live event behind `h`, or NULL with the last error set. */
static oxr_event *event_get(const char *fn, ox_event h) {
  if (!h) {
    oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: event is NULL", fn);
    return NULL;
  }
  oxr_event *e = oxb_handle_get(OXB_H_EVENT, (uint64_t)(uintptr_t)h);
  if (!e)
    oxb_set_error(OX_ERR_INVALID_ARGUMENT,
                  "%s: the event handle is not live (the event was destroyed, or it is not an "
                  "event handle)",
                  fn);
  return e;
}

/* The event, which must have been recorded, or NULL with the last error set. */
static oxr_event *recorded_event(const char *fn, ox_event h) {
  oxr_event *e = event_get(fn, h);
  if (e && !__atomic_load_n(&e->recorded, __ATOMIC_ACQUIRE)) {
    oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: the event was never recorded (ox_event_record)", fn);
    return NULL;
  }
  return e;
}

/* The stream argument `sh` of an event call: required (NULL is an error,
 * not the default stream) and on the event's device. */
static ox_status event_stream(const char *fn, const oxr_event *e, ox_stream sh, oxr_stream **s) {
  if (!sh)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: stream is NULL", fn);
  return oxr_resolve_stream(fn, e->dev, sh, s);
}

ox_status ox_event_create(ox_device dev, ox_event *out) {
  if (!out)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "ox_event_create: out is NULL");
  *out = NULL;
  if (!oxr_device_check(__func__, dev))
    return ox_last_status();
  oxr_event *e = calloc(1, sizeof *e);
  uint64_t h = e ? oxb_handle_new(OXB_H_EVENT, e) : 0;
  if (!h) {
    free(e);
    return oxb_set_error(OX_ERR_OUT_OF_MEMORY, "ox_event_create: out of memory");
  }
  e->handle = (ox_event)(uintptr_t)h;
  e->dev = dev;
  if (dev->type == OX_DEVICE_CUDA) {
    ox_status s = oxr_cuda_make_current(dev);
    CUresult r = s ? CUDA_SUCCESS : oxr_cu.cuEventCreate(&e->cu, 0);
    if (s || r) {
      oxb_handle_free(h);
      free(e);
      return s ? s : oxr_cuda_error(r, "cuEventCreate");
    }
  }
  *out = e->handle;
  return OX_OK;
}

void ox_event_destroy(ox_event h) {
  if (!h)
    return;
  oxr_event *e = event_get(__func__, h);
  if (!e)
    return;
  oxb_handle_free((uint64_t)(uintptr_t)h);
  if (e->cu && oxr_cuda_make_current(e->dev) == OX_OK)
    oxr_cu.cuEventDestroy(e->cu);
  free(e);
}

ox_status ox_event_record(ox_event eh, ox_stream sh) {
  oxr_event *e = event_get(__func__, eh);
  oxr_stream *s;
  if (!e)
    return ox_last_status();
  ox_status st = event_stream(__func__, e, sh, &s);
  if (st)
    return st;
  if (!e->cu) {
    e->host_ns = oxb_now_ns();
  } else {
    st = oxr_cuda_make_current(e->dev);
    CUresult r = st ? CUDA_SUCCESS : oxr_cu.cuEventRecord(e->cu, s->cu);
    if (st || r)
      return st ? st : oxr_cuda_error(r, "cuEventRecord");
  }
  __atomic_store_n(&e->recorded, 1, __ATOMIC_RELEASE);
  return OX_OK;
}

ox_status ox_event_synchronize(ox_event h) {
  oxr_event *e = recorded_event(__func__, h);
  if (!e)
    return ox_last_status();
  if (!e->cu)
    return OX_OK;
  ox_status st = oxr_cuda_make_current(e->dev);
  CUresult r = st ? CUDA_SUCCESS : oxr_cu.cuEventSynchronize(e->cu);
  return st ? st : r ? oxr_cuda_error(r, "cuEventSynchronize") : OX_OK;
}

ox_status ox_stream_wait_event(ox_stream sh, ox_event eh) {
  oxr_event *e = recorded_event(__func__, eh);
  oxr_stream *s;
  if (!e)
    return ox_last_status();
  if (!sh)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: stream is NULL", __func__);
  /* a GPU's stream may wait for another GPU's event */
  s = oxr_stream_get(__func__, sh);
  if (!s)
    return ox_last_status();
  ox_status st = OX_OK;
  if (s->dev != e->dev && (s->dev->type != OX_DEVICE_CUDA || e->dev->type != OX_DEVICE_CUDA))
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: the stream is on %s, the event on %s", __func__,
                         s->dev->label, e->dev->label);
  if (!e->cu)
    return OX_OK;
  st = oxr_cuda_make_current(s->dev);
  CUresult r = st ? CUDA_SUCCESS : oxr_cu.cuStreamWaitEvent(s->cu, e->cu, 0);
  return st ? st : r ? oxr_cuda_error(r, "cuStreamWaitEvent") : OX_OK;
}

ox_status ox_stream_wait_stream(ox_stream sh, ox_stream oh) {
  oxr_stream *s = oxr_stream_get(__func__, sh);
  oxr_stream *o = s ? oxr_stream_get(__func__, oh) : NULL;
  if (!o)
    return ox_last_status();
  if (s->dev != o->dev && (s->dev->type != OX_DEVICE_CUDA || o->dev->type != OX_DEVICE_CUDA))
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: the streams are on %s and %s", __func__,
                         s->dev->label, o->dev->label);
  return oxr_stream_wait_stream(s, o);
}

ox_status ox_event_elapsed_ms(ox_event start_h, ox_event end_h, float *ms) {
  if (!ms)
    return oxb_set_error(OX_ERR_INVALID_ARGUMENT, "%s: ms is NULL", __func__);
  oxr_event *start = recorded_event(__func__, start_h);
  oxr_event *end = start ? recorded_event(__func__, end_h) : NULL;
  if (!end)
    return ox_last_status();
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
