// app.cpp - a user's C++ program against an installed Oxide: the C++ header.
#include <oxide/oxide.hpp>

#include <cstdio>
#include <vector>

int main() {
  try {
    auto dev = oxide::Device::cpu();
    auto mod = oxide::Module::compile(dev,
                                      "#[kernel]\n"
                                      "fn inc(x: &[f32], out: DisjointSlice<f32>) {\n"
                                      "    let i = thread::index_1d();\n"
                                      "    if let Some(o) = out.get_mut(i) { *o = x[i] + 1.0; }\n"
                                      "}\n",
                                      "inc.oxk");
    auto x = oxide::Tensor::from_host(dev, std::vector<float>{1, 2, 3});
    auto out = oxide::Tensor::empty(dev, OX_F32, {3});
    mod.kernel("inc").launch({{1}, {32}}, x, out);
    dev.default_stream().synchronize();
    std::vector<float> r = out.to_host<float>();
    if (r != std::vector<float>{2, 3, 4}) {
      std::fprintf(stderr, "wrong result\n");
      return 1;
    }
    std::printf("PASSED (C++)\n");
    return 0;
  } catch (const oxide::Error &e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
