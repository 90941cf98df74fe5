/* oxide - the command-line tool.
 *
 *   oxide compile FILE.oxk [--emit ast|ir|llvm|ptx|asm] [--arch sm_XX] [--target cuda|cpu] [-O N]
 *                 [--contiguous]   (tile kernels: code for contiguous16 tensors, as most launches)
 *                 [--generic NAME=VALUE]...  (a const generic's value, others are 16; a type
 *                                             generic's dtype, f32, bf16, ..., others their bound's first)
 *   oxide doctor
 *   oxide version
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oxide/oxide.h"

static int usage(void) {
  fprintf(stderr,
          "usage: oxide compile FILE.oxk [--emit ast|ir|llvm|ptx|asm] [--arch sm_XX] "
          "[--target cuda|cpu] [-O N] [--contiguous]\n"
          "                     [--generic NAME=VALUE]...\n"
          "       oxide doctor\n"
          "       oxide version\n");
  return 2;
}

static int compile(int argc, char **argv) {
  const char *file = NULL, *emit = "ptx";
  ox_target target = OX_TARGET_DEFAULT;
  ox_compile_options o = {.size = sizeof o};
  static ox_generic_value generics[64];
  static char names[64][128];
  o.generics = generics;
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--emit") && v) {
      emit = v;
      i++;
    } else if (!strcmp(a, "--arch") && v) {
      if (sscanf(v, "sm_%d", &o.sm) != 1 || o.sm < 80) {
        fprintf(stderr, "oxide: --arch takes sm_80 or newer, got '%s'\n", v);
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--target") && v) {
      if (!strcmp(v, "cuda"))
        target = OX_TARGET_CUDA;
      else if (!strcmp(v, "cpu"))
        target = OX_TARGET_CPU;
      else {
        fprintf(stderr, "oxide: --target takes cuda or cpu, got '%s'\n", v);
        return 2;
      }
      i++;
    } else if (!strcmp(a, "--generic") && v) {
      const char *eq = strchr(v, '=');
      char *end = NULL;
      long long value = eq ? strtoll(eq + 1, &end, 10) : 0;
      int dtype = -1; /* a type generic's value: a dtype's name */
      for (int t = 0; eq && t <= OX_F8E5M2; t++)
        if (!strcmp(eq + 1, ox_dtype_name((ox_dtype)t))) {
          dtype = t;
          value = 1;
          end = (char *)"";
        }
      if (!eq || eq == v || eq - v >= (long)sizeof names[0] || !eq[1] || *end || value <= 0) {
        fprintf(stderr, "oxide: --generic takes NAME=VALUE with a positive VALUE or a dtype (f32, "
                        "bf16, ...), got '%s'\n", v);
        return 2;
      }
      if (o.num_generics == 64) {
        fprintf(stderr, "oxide: at most 64 --generic options\n");
        return 2;
      }
      memcpy(names[o.num_generics], v, (size_t)(eq - v));
      names[o.num_generics][eq - v] = 0;
      generics[o.num_generics].name = names[o.num_generics];
      generics[o.num_generics++].value = dtype >= 0 ? dtype : value;
      i++;
    } else if (!strcmp(a, "--contiguous")) {
      o.emit_contiguous = 1;
    } else if (!strcmp(a, "-O") && v) {
      o.opt_level = atoi(v);
      i++;
    } else if (a[0] == '-') {
      fprintf(stderr, "oxide: unknown option '%s'\n", a);
      return usage();
    } else if (!file) {
      file = a;
    } else {
      return usage();
    }
  }
  if (!file)
    return usage();
  static const struct {
    const char *name;
    ox_emit_kind kind;
  } kinds[] = {{"ast", OX_EMIT_AST}, {"ir", OX_EMIT_IR}, {"llvm", OX_EMIT_LLVM},
               {"ptx", OX_EMIT_PTX}, {"asm", OX_EMIT_ASM}};
  ox_emit_kind kind = 0;
  for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
    if (!strcmp(emit, kinds[i].name))
      kind = kinds[i].kind;
  if (!kind) {
    fprintf(stderr, "oxide: --emit takes ast, ir, llvm, ptx or asm, got '%s'\n", emit);
    return 2;
  }
  if (kind == OX_EMIT_LLVM && target == OX_TARGET_DEFAULT)
    target = OX_TARGET_CUDA;
  FILE *f = fopen(file, "rb");
  if (!f) {
    perror(file);
    return 1;
  }
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  size_t n;
  while (text && (n = fread(text + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (len + 1 == cap) {
      cap *= 2;
      char *t = realloc(text, cap);
      if (!t) {
        free(text);
        text = NULL;
      }
      text = t;
    }
  }
  fclose(f);
  if (!text) {
    fprintf(stderr, "oxide: out of memory\n");
    return 1;
  }
  text[len] = 0;
  if (strlen(text) != len) {
    fprintf(stderr, "%s: error: the file contains a NUL byte\n", file);
    free(text);
    return 1;
  }
  o.filename = file;
  char *out = NULL;
  ox_status s = ox_emit(text, &o, target, kind, &out);
  free(text);
  if (s) {
    fprintf(stderr, "%s", ox_last_error());
    size_t el = strlen(ox_last_error());
    if (el && ox_last_error()[el - 1] != '\n')
      fputc('\n', stderr);
    return 1;
  }
  fputs(out, stdout);
  ox_free(out);
  return 0;
}

int main(int argc, char **argv) {
  if (argc < 2)
    return usage();
  if (!strcmp(argv[1], "compile"))
    return compile(argc - 2, argv + 2);
  if (!strcmp(argv[1], "doctor")) {
    char *r = NULL;
    if (ox_doctor(&r)) {
      fprintf(stderr, "oxide: %s\n", ox_last_error());
      return 1;
    }
    fputs(r, stdout);
    ox_free(r);
    return 0;
  }
  if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
    printf("oxide %s\n", ox_version());
    return 0;
  }
  return usage();
}
