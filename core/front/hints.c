/* hints.c - the Oxide spelling of names from CUDA, Triton and NumPy, for the
 * front end's "unknown function" and "unknown name" errors (docs/language.md
 * section 10). A table and its lookup; calls nothing. */
#include "front/sema.h"

#include <string.h>

/* What to write instead of a CUDA, Triton or NumPy name that Oxide spells
 * another way: the hint of an "unknown function" or "unknown name" error. */
const char *oxs_spelled_otherwise(bool tile, const char *name) {
  static const struct {
    const char *name, *simt, *tile;
  } hints[] = {
      {"thread_idx_x", "thread::thread_idx_x()", NULL},  {"thread_idx_y", "thread::thread_idx_y()", NULL},
      {"thread_idx_z", "thread::thread_idx_z()", NULL},  {"block_idx_x", "thread::block_idx_x()", NULL},
      {"block_idx_y", "thread::block_idx_y()", NULL},    {"block_idx_z", "thread::block_idx_z()", NULL},
      {"block_dim_x", "thread::block_dim_x()", NULL},    {"grid_dim_x", "thread::grid_dim_x()", NULL},
      {"threadIdx", "thread::thread_idx_x() (and _y, _z)", NULL},
      {"blockIdx", "thread::block_idx_x() (and _y, _z)", "tile_id(axis)"},
      {"blockDim", "thread::block_dim_x() (and _y, _z)", NULL},
      {"gridDim", "thread::grid_dim_x() (and _y, _z)", "num_tiles(axis)"},
      {"__syncthreads", "sync_threads()", NULL},         {"syncthreads", "sync_threads()", NULL},
      {"__shfl_sync", "warp::shuffle(v, lane)", NULL},   {"shfl", "warp::shuffle(v, lane)", NULL},
      {"__shfl_down_sync", "warp::shuffle_down(v, delta)", NULL}, {"shfl_down", "warp::shuffle_down(v, delta)", NULL},
      {"__shfl_up_sync", "warp::shuffle_up(v, delta)", NULL}, {"shfl_up", "warp::shuffle_up(v, delta)", NULL},
      {"__shfl_xor_sync", "warp::shuffle_xor(v, mask)", NULL}, {"shfl_xor", "warp::shuffle_xor(v, mask)", NULL},
      {"__ballot_sync", "warp::ballot(p)", NULL},        {"__all_sync", "warp::all(p)", NULL},
      {"__any_sync", "warp::any(p)", NULL},              {"laneid", "warp::lane_id()", NULL},
      {"atomicAdd", "a.atomic_add(i, v) on an &[Atomic<T>] parameter", "h.atomic_add([..], t) on an atomic tensor"},
      {"atomic_add", "a.atomic_add(i, v) on an &[Atomic<T>] parameter", "h.atomic_add([..], t) on an atomic tensor"},
      {"atomicMax", "a.atomic_max(i, v)", NULL},         {"atomicMin", "a.atomic_min(i, v)", NULL},
      {"atomicCAS", "a.atomic_cas(i, expected, v)", NULL}, {"atomicExch", "a.atomic_exchange(i, v)", NULL},
      {"program_id", NULL, "tile_id(axis)"},             {"num_programs", NULL, "num_tiles(axis)"},
      {"arange", NULL, "iota([n], 0)"},                  {"zeros", NULL, "full([..], 0.0f32)"},
      {"ones", NULL, "full([..], 1.0f32)"},              {"where", NULL, "select(c, a, b)"},
      {"sum", NULL, "reduce_sum(t, axis)"},              {"load", NULL, "x.partition([..]).load([..]) or x.load_at([..], [..])"},
      {"store", NULL, "z.store(t)"},
      {"expf", "exp(x)", "exp(x)"},                      {"__expf", "exp(x)", "exp(x)"},
      {"logf", "ln(x)", "ln(x)"},                        {"sqrtf", "sqrt(x)", "sqrt(x)"},
      {"rsqrtf", "rsqrt(x)", "rsqrt(x)"},                {"fmaxf", "max(x, y)", "max(x, y)"},
      {"fminf", "min(x, y)", "min(x, y)"},               {"fabsf", "abs(x)", "abs(x)"},
      {"tanhf", "tanh(x)", "tanh(x)"},                   {"erff", "erf(x)", "erf(x)"},
  };
  for (size_t i = 0; i < OXB_COUNT(hints); i++)
    if (!strcmp(hints[i].name, name)) {
      return tile && hints[i].tile ? hints[i].tile : hints[i].simt ? hints[i].simt : hints[i].tile;
    }
  return NULL;
}

