#!/usr/bin/env bash
# The Rust crate as a user meets it: tests/rust_consumer, a crate outside the
# binding's workspace, built with plain `cargo build` (no OXIDE_LIB_DIR: the
# crate finds the repository's build/), then its binary copied out of the
# repository and run with an empty environment (no LD_LIBRARY_PATH): the
# static bundle is linked in.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
target=$(mktemp -d /tmp/oxide-rust-consumer.XXXXXX)
trap 'rm -rf "$target"' EXIT
env -u OXIDE_LIB_DIR cargo build --offline --quiet --manifest-path "$root/tests/rust_consumer/Cargo.toml" \
  --target-dir "$target/target"
cp "$target/target/debug/oxide_consumer" "$target/run-me"
if ldd "$target/run-me" | grep -q liboxide; then
  echo "oxide_consumer links liboxide.so dynamically: expected the static bundle" >&2
  exit 1
fi
(cd / && env -i HOME="$target" "$target/run-me")
# a kernel error fails `cargo build`, with the compiler's file:line:col
cp -r "$root/tests/rust_consumer" "$target/broken"
sed -i 's|../../bindings/rust|'"$root"'/bindings/rust|' "$target/broken/Cargo.toml"
sed -i 's/alpha \* x\[i\]/alpha * q[i]/' "$target/broken/kernels/saxpy.oxk"
if env -u OXIDE_LIB_DIR cargo build --offline --quiet --manifest-path "$target/broken/Cargo.toml" \
  --target-dir "$target/target" >"$target/broken.log" 2>&1; then
  echo "a broken kernel built" >&2
  exit 1
fi
if ! grep -q "kernels/saxpy.oxk:5:" "$target/broken.log"; then
  echo "the build failed without the kernel's location:" >&2
  cat "$target/broken.log" >&2
  exit 1
fi
echo "rust consumer: PASSED (and a kernel error failed the build at $(grep -o 'kernels/saxpy.oxk:5:[0-9]*' "$target/broken.log" | head -1))"
