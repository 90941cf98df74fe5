// header_check.cpp - the C++ header alone, compiled with the strictest
// warnings a user might build with (-Wpedantic -Wold-style-cast ...), by the
// build's C++ compiler and, as a test, by clang++ when there is one.
#include <oxide/oxide.hpp>

int oxide_header_check();
int oxide_header_check() { return oxide::dtype_of<float>::value == OX_F32 ? 0 : 1; }
