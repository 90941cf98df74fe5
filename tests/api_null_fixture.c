/* api_null_fixture.c - the fixtures and checks behind the generated
 * api_null_test.c: every public function called with NULL for each pointer
 * argument (see tests/gen_api_null_test.py), on the CPU device. Run under
 * ASan/UBSan/LSan in CI, so a crash, a wild read or a leak fails it too. */
#include "api_null_fixture.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../dlpack/dlpack.h"

fx_inputs F;
fx_outputs O;

static const char *cur_fn, *cur_param;
static int failures;

static const char SOURCE[] = "#[kernel]\n"
                             "fn k(x: &[f32], out: DisjointSlice<f32>) {\n"
                             "    let i = thread::index_1d();\n"
                             "    if let Some(o) = out.get_mut(i) {\n"
                             "        *o = x[i];\n"
                             "    }\n"
                             "}\n";

static void must(ox_status st, const char *what) {
  if (st != OX_OK) {
    fprintf(stderr, "api_null_test: setup failed: %s: %s\n", what, ox_last_error());
    exit(1);
  }
}

static void setup(void) {
  must(ox_device_get(OX_DEVICE_CPU, 0, &F.dev), "device");
  must(ox_stream_create(F.dev, &F.stream), "stream");
  must(ox_event_create(F.dev, &F.event), "event");
  must(ox_event_record(F.event, F.stream), "event record");
  F.shape[0] = 4;
  must(ox_tensor_zeros(F.dev, NULL, OX_F32, 1, F.shape, &F.t), "tensor");
  must(ox_tensor_zeros(F.dev, NULL, OX_F32, 1, F.shape, &F.t2), "tensor");
  F.source = SOURCE;
  must(ox_module_compile(F.dev, SOURCE, NULL, &F.mod), "compile");
  must(ox_module_get_kernel(F.mod, "k", &F.kernel), "kernel");
  must(ox_chain_create(F.dev, &F.chain), "chain");
  F.args[0] = ox_arg_tensor(F.t);
  F.args[1] = ox_arg_tensor(F.t2);
  F.cfg = (ox_launch_config){{1, 1, 1}, {4, 1, 1}};
  F.cand_value = (ox_generic_value){"B", 64};
  F.cands[0] = (ox_tile_candidate){&F.cand_value, 1};
  F.opts.filename = "api_null.oxk";
  snprintf(F.path, sizeof F.path, "/tmp/oxide-api-null-%ld.oxk", (long)getpid());
  FILE *f = fopen(F.path, "w");
  if (!f || fputs(SOURCE, f) < 0 || fclose(f) != 0) {
    fprintf(stderr, "api_null_test: cannot write %s\n", F.path);
    exit(1);
  }
}

static void teardown(void) {
  ox_chain_destroy(F.chain);
  ox_module_destroy(F.mod);
  ox_tensor_release(F.t);
  ox_tensor_release(F.t2);
  ox_event_destroy(F.event);
  ox_stream_destroy(F.stream);
  unlink(F.path);
}

void *fx_dlpack(void) {
  void *m = NULL;
  must(ox_tensor_to_dlpack(F.t, NULL, 1, &m), "DLPack export");
  return m;
}

/* Gives back what the last call made. */
static void cleanup(void) {
  ox_tensor_release(O.tensor);
  ox_stream_destroy(O.stream);
  ox_event_destroy(O.event);
  ox_module_destroy(O.module);
  ox_chain_destroy(O.chain);
  ox_free(O.text);
  if (O.managed) {
    DLManagedTensorVersioned *m = O.managed;
    m->deleter(m);
  }
  memset(&O, 0, sizeof O);
}

static void fail(const char *fmt, const char *detail) {
  fprintf(stderr, "api_null_test: %s with NULL %s: ", cur_fn, cur_param);
  fprintf(stderr, fmt, detail);
  fputc('\n', stderr);
  failures++;
}

void fx_begin(const char *fn, const char *param) {
  cur_fn = fn;
  cur_param = param;
  ox_clear_error();
}

void fx_status(ox_status st, int nullable, int message) {
  if (!nullable && (st != OX_ERR_INVALID_ARGUMENT || (message && !ox_last_error()[0])))
    fail("returned %s, not OX_ERR_INVALID_ARGUMENT with a message", ox_status_name(st));
  cleanup();
}

void fx_value(int nullable) {
  if (!nullable && ox_last_status() != OX_ERR_INVALID_ARGUMENT)
    fail("set the last error to %s, not OX_ERR_INVALID_ARGUMENT", ox_status_name(ox_last_status()));
  cleanup();
}

void fx_void(int ignores) {
  if (!ignores && ox_last_status() != OX_ERR_INVALID_ARGUMENT)
    fail("set the last error to %s, not OX_ERR_INVALID_ARGUMENT", ox_status_name(ox_last_status()));
  cleanup();
}

void fx_done(int calls) {
  if (calls < 80) {
    fprintf(stderr, "api_null_test: only %d calls generated: did the header parser miss functions?\n",
            calls);
    failures++;
  }
  printf("api_null_test: %d calls with a NULL argument, %d failed\n", calls, failures);
}

int main(void) {
  setup();
  fx_run_all();
  /* the fixtures still work: nothing above damaged them */
  float out[4] = {1, 1, 1, 1};
  F.buf[0] = F.buf[1] = F.buf[2] = F.buf[3] = 2;
  must(ox_tensor_copy_from_host(F.t, NULL, F.buf, sizeof F.buf), "copy in");
  must(ox_launch(F.kernel, F.stream, &F.cfg, F.args, 2), "launch");
  must(ox_stream_synchronize(F.stream), "synchronize");
  must(ox_tensor_to_host(F.t2, F.stream, out, sizeof out), "copy out");
  if (out[0] != 2 || out[3] != 2) {
    fprintf(stderr, "api_null_test: the fixture kernel gave %g, not 2\n", out[0]);
    failures++;
  }
  teardown();
  return failures ? 1 : 0;
}
