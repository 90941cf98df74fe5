/* lex.c - turns kernel text into tokens. */
#include "front/front.h"
#include "front/limits.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const keywords[] = {
    "fn",    "let",  "mut",    "if",    "else",  "while", "loop", "for",  "in",    "break",
    "continue", "return", "as", "unsafe", "true", "false", "const", "pub", "struct", "impl",
    "match", "static", "use", "mod", "self", "Self", "where", "ref", "move", "type", "enum"};

/* Longest first, so that "<<=" wins over "<<" and "<". */
static const char *const puncts[] = {"<<=", ">>=", "...", "..=", "::", "->", "=>", "==", "!=",
                                     "<=",  ">=",  "&&",  "||",  "+=", "-=", "*=", "/=", "%=",
                                     "&=",  "|=",  "^=",  "<<",  ">>", ".."};

typedef struct lexer {
  oxb_arena *a;
  oxb_diags *d;
  const oxb_source *src;
  const char *p;
  int line;
  const char *line_start;
} lexer;

static oxb_loc loc_of(lexer *L, const char *at) {
  oxb_loc loc = {L->line, (int)(at - L->line_start) + 1, (int)(at - L->src->text)};
  return loc;
}

static const struct {
  const char *name;
  ox_dtype t;
} suffixes[] = {{"i8", OX_I8},   {"i16", OX_I16}, {"i32", OX_I32}, {"i64", OX_I64},
                {"u8", OX_U8},   {"u16", OX_U16}, {"u32", OX_U32}, {"u64", OX_U64},
                {"usize", OX_U64}, {"isize", OX_I64}, {"f32", OX_F32}, {"f64", OX_F64}};

/* Reads a numeric literal: 123, 1_000, 0xff, 0b101, 1.5, 1e-3, 2.0f32, 7u8. */
static oxf_token *read_number(lexer *L, oxf_token *t) {
  const char *start = L->p, *p = L->p;
  char digits[256];
  int nd = 0;
  int base = 10;
  bool is_float = false;
  if (p[0] == '0' && (p[1] == 'x' || p[1] == 'X' || p[1] == 'b' || p[1] == 'B' || p[1] == 'o')) {
    base = (p[1] == 'x' || p[1] == 'X') ? 16 : (p[1] == 'o') ? 8 : 2;
    p += 2;
    while (isxdigit((unsigned char)*p) || *p == '_') {
      if (*p != '_' && nd < 255)
        digits[nd++] = *p;
      p++;
    }
  } else {
    while (isdigit((unsigned char)*p) || *p == '_') {
      if (*p != '_' && nd < 255)
        digits[nd++] = *p;
      p++;
    }
    /* "1..n" is a range, and "x.0" a field: a '.' makes a float only when a digit
     * follows or nothing identifier-like does. */
    if (*p == '.' && p[1] != '.' && !isalpha((unsigned char)p[1]) && p[1] != '_') {
      is_float = true;
      if (nd < 255)
        digits[nd++] = *p;
      p++;
      while (isdigit((unsigned char)*p) || *p == '_') {
        if (*p != '_' && nd < 255)
          digits[nd++] = *p;
        p++;
      }
    }
    if ((*p == 'e' || *p == 'E') &&
        (isdigit((unsigned char)p[1]) ||
         ((p[1] == '+' || p[1] == '-') && isdigit((unsigned char)p[2])))) {
      is_float = true;
      if (nd < 255)
        digits[nd++] = *p;
      p++;
      if (*p == '+' || *p == '-') {
        if (nd < 255)
          digits[nd++] = *p;
        p++;
      }
      while (isdigit((unsigned char)*p) || *p == '_') {
        if (*p != '_' && nd < 255)
          digits[nd++] = *p;
        p++;
      }
    }
  }
  digits[nd] = 0;
  /* suffix */
  const char *sfx = p;
  while (isalnum((unsigned char)*p) || *p == '_')
    p++;
  if (p > sfx) {
    size_t n = (size_t)(p - sfx);
    bool found = false;
    for (size_t i = 0; i < OXB_COUNT(suffixes); i++) {
      if (strlen(suffixes[i].name) == n && !strncmp(sfx, suffixes[i].name, n)) {
        t->suffix = (int)suffixes[i].t + 1;
        found = true;
      }
    }
    if (!found)
      oxb_error_at(L->d, loc_of(L, sfx), "invalid suffix '%.*s' on a number", (int)n, sfx);
  }
  if (nd == 0 || (base != 10 && is_float)) {
    oxb_error_at(L->d, loc_of(L, start), "malformed number");
    digits[0] = '0';
    digits[1] = 0;
  }
  bool float_suffix = t->suffix == OX_F32 + 1 || t->suffix == OX_F64 + 1;
  if (is_float && t->suffix && !float_suffix)
    oxb_error_at(L->d, loc_of(L, sfx), "integer suffix on a floating-point number");
  if (is_float || float_suffix) {
    t->kind = OXF_TK_FLOAT;
    t->fval = strtod(digits, NULL);
  } else {
    t->kind = OXF_TK_INT;
    uint64_t v = 0;
    for (int i = 0; digits[i]; i++) {
      int c = digits[i];
      int dv = isdigit(c) ? c - '0' : tolower(c) - 'a' + 10;
      if (dv >= base) {
        oxb_error_at(L->d, loc_of(L, start), "digit '%c' is not valid in base %d", c, base);
        break;
      }
      if (v > (UINT64_MAX - (uint64_t)dv) / (uint64_t)base)
        t->overflow = true;
      v = v * (uint64_t)base + (uint64_t)dv;
    }
    t->ival = v;
  }
  L->p = p;
  t->len = (int)(p - start);
  return t;
}

oxf_token *oxf_tokenize(oxb_arena *a, oxb_diags *d, const oxb_source *src) {
  lexer L = {a, d, src, src->text, 1, src->text};
  oxf_token head = {0}, *cur = &head;
  /* past the size limit, nothing more is read (one error, at the limit) */
  bool too_long = src->len > (size_t)OXF_MAX_SOURCE_BYTES;
  const char *end = src->text + (too_long ? (size_t)OXF_MAX_SOURCE_BYTES : src->len);
  while (L.p < end) {
    const char *p = L.p;
    if (*p == '\n') {
      L.p++;
      L.line++;
      L.line_start = L.p;
      continue;
    }
    if (isspace((unsigned char)*p)) {
      L.p++;
      continue;
    }
    if (p[0] == '/' && p[1] == '/') {
      while (L.p < end && *L.p != '\n')
        L.p++;
      continue;
    }
    if (p[0] == '/' && p[1] == '*') {
      /* Rust block comments nest. */
      oxb_loc start = loc_of(&L, p); /* before the line count moves on */
      int depth = 0;
      const char *q = p;
      while (q < end) {
        if (q[0] == '/' && q + 1 < end && q[1] == '*') {
          depth++;
          q += 2;
        } else if (q[0] == '*' && q + 1 < end && q[1] == '/') {
          q += 2;
          if (--depth == 0)
            break;
        } else {
          if (*q == '\n') {
            L.line++;
            L.line_start = q + 1;
          }
          q++;
        }
      }
      if (depth > 0)
        oxb_error_at(d, start, "unterminated block comment");
      L.p = q;
      continue;
    }
    oxf_token *t = oxb_alloc(a, sizeof *t);
    t->text = p;
    t->loc = loc_of(&L, p);
    cur = cur->next = t;
    if (isdigit((unsigned char)*p)) {
      read_number(&L, t);
      continue;
    }
    if (isalpha((unsigned char)*p) || *p == '_') {
      const char *q = p;
      while (isalnum((unsigned char)*q) || *q == '_')
        q++;
      t->len = (int)(q - p);
      t->kind = OXF_TK_IDENT;
      for (size_t i = 0; i < OXB_COUNT(keywords); i++)
        if ((int)strlen(keywords[i]) == t->len && !strncmp(p, keywords[i], (size_t)t->len))
          t->kind = OXF_TK_KEYWORD;
      L.p = q;
      continue;
    }
    t->kind = OXF_TK_PUNCT;
    t->len = 0;
    for (size_t i = 0; i < OXB_COUNT(puncts); i++) {
      size_t n = strlen(puncts[i]);
      if ((size_t)(end - p) >= n && !strncmp(p, puncts[i], n)) {
        t->len = (int)n;
        break;
      }
    }
    if (!t->len) {
      if (strchr("+-*/%&|^!<>=()[]{},;:.#@?~", *p) && *p) {
        t->len = 1;
      } else {
        t->len = 1;
        if ((unsigned char)*p >= 0xc0) /* one error for a whole UTF-8 sequence */
          while (t->len < 4 && p + t->len < end && ((unsigned char)p[t->len] & 0xc0) == 0x80)
            t->len++;
        if (isprint((unsigned char)*p))
          oxb_error_at(d, t->loc, "unexpected character '%c'", *p);
        else if (t->len > 1)
          oxb_error_at(d, t->loc, "unexpected character '%.*s': only comments may use non-ASCII text",
                       t->len, p);
        else
          oxb_error_at(d, t->loc, "unexpected byte 0x%02x", (unsigned char)*p);
      }
    }
    L.p += t->len;
  }
  if (too_long) /* (tokens and comments never cross a line past `end`: L.line is end's line) */
    oxb_error_at(d, loc_of(&L, end), "the source is larger than %d bytes, the compiler's limit",
                 OXF_MAX_SOURCE_BYTES);
  oxf_token *eof = oxb_alloc(a, sizeof *eof);
  eof->kind = OXF_TK_EOF;
  eof->text = end;
  eof->loc = loc_of(&L, end);
  cur->next = eof;
  return head.next;
}
