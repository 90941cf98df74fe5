// noexcept_test - the C++ header in a program built with -fno-exceptions:
// calls that succeed work as usual; a failing call runs the handler set with
// oxide::set_error_handler (here: it checks the message and exits with 42, in
// a child process), never returns into the failed call.
#include <oxide/oxide.hpp>

#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

static void on_error(ox_status s, const char *message) {
  bool ok = s == OX_ERR_NOT_FOUND && std::strstr(message, "no kernel 'nope'");
  std::_Exit(ok ? 42 : 1);
}

int main() {
  auto dev = oxide::Device::cpu();
  auto mod = oxide::Module::compile(dev, "#[kernel]\n"
                                         "fn k(x: &[f32], out: DisjointSlice<f32>) {\n"
                                         "    let i = thread::index_1d();\n"
                                         "    if let Some(o) = out.get_mut(i) { *o = x[i] * 3.0; }\n"
                                         "}\n");
  auto x = oxide::Tensor::from_host(dev, {1.0f, 2.0f});
  auto y = oxide::Tensor::empty(dev, OX_F32, {2});
  mod.kernel("k").launch({{1}, {32}}, x, y);
  if (y.to_host<float>() != std::vector<float>{3, 6}) {
    std::fprintf(stderr, "noexcept_test: wrong result\n");
    return 1;
  }
  pid_t pid = fork();
  if (pid == 0) {
    oxide::set_error_handler(on_error);
    mod.kernel("nope"); // fails: the handler exits
    std::_Exit(2);      // reached only if the failed call returned
  }
  int status = 0;
  waitpid(pid, &status, 0);
  bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 42;
  std::printf("noexcept_test: %s\n", ok ? "PASSED" : "FAILED");
  return ok ? 0 : 1;
}
