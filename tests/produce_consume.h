/* produce_consume.h - the kernels of the stream-ordering tests
 * (streams_test, wrap_test): a slow producer and a consumer that reads
 * what it wrote, so that a missing cross-stream wait shows as stale data. */
#ifndef OXIDE_TESTS_PRODUCE_CONSUME_H
#define OXIDE_TESTS_PRODUCE_CONSUME_H

static const char *PRODUCE_CONSUME =
    "#[kernel]\n"
    "fn produce(x: DisjointSlice<f32>, value: f32, spin: u32, a: f32, b: f32) {\n"
    "    let i = thread::index_1d();\n"
    "    // slow on purpose: a dependent chain the compiler cannot fold (a = 1, b = 0)\n"
    "    let mut v = value;\n"
    "    for k in 0..spin { v = v * a + b; }\n"
    "    if let Some(o) = x.get_mut(i) { *o = v; }\n"
    "}\n"
    "#[kernel]\n"
    "fn consume(x: &[f32], y: DisjointSlice<f32>) {\n"
    "    let i = thread::index_1d();\n"
    "    if let Some(o) = y.get_mut(i) { *o = x[i] + 1.0; }\n"
    "}\n";

#endif
