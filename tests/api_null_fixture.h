/* api_null_fixture.h - valid arguments and the checks for the generated
 * api_null_test.c (tests/gen_api_null_test.py). */
#ifndef OXIDE_API_NULL_FIXTURE_H
#define OXIDE_API_NULL_FIXTURE_H

#include <stdint.h>

#include "oxide/oxide.h"

/* Valid arguments, made once. */
typedef struct fx_inputs {
  ox_device dev;
  ox_stream stream;
  ox_event event; /* recorded */
  ox_tensor t, t2; /* f32 [4] */
  ox_module mod;
  ox_kernel kernel; /* k(x: &[f32], out: DisjointSlice<f32>) */
  ox_chain chain;
  ox_arg args[2];
  ox_launch_config cfg;
  ox_tile_candidate cands[1]; /* sets a generic the kernel lacks (it is no tile kernel) */
  ox_generic_value cand_value;
  ox_compile_options opts;
  int64_t shape[1];
  int perm[1];
  int64_t grid[OX_MAX_DIMS];
  float buf[4];
  const char *source;
  char path[256];
} fx_inputs;

/* Where outputs go; whatever a call put there is given back after it. */
typedef struct fx_outputs {
  ox_device device;
  ox_stream stream;
  ox_event event;
  ox_tensor tensor;
  ox_module module;
  ox_kernel kernel;
  ox_chain chain;
  void *managed;
  char *text;
  int count;
  float ms;
  ox_param_info param;
} fx_outputs;

extern fx_inputs F;
extern fx_outputs O;

/* A fresh exported DLPack tensor (for ox_tensor_from_dlpack, which takes it). */
void *fx_dlpack(void);
/* Names the call about to be made, clears the last error. */
void fx_begin(const char *fn, const char *param);
/* Checks a call returning ox_status, whose NULL argument is an error unless
 * `nullable`, with a message unless the function sets none (`message` 0). */
void fx_status(ox_status st, int nullable, int message);
/* Checks a call returning a value: the last error must say
 * OX_ERR_INVALID_ARGUMENT unless `nullable`. */
void fx_value(int nullable);
/* Checks a void call: NULL is ignored (`ignores`) or an error is set. */
void fx_void(int ignores);
/* Reports how many calls were made (the generated test's total). */
void fx_done(int calls);
/* The generated calls. */
void fx_run_all(void);

#endif
