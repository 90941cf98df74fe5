/* cache_test - the compiled-kernel cache under damage and contention, on the
 * CPU device, in private cache directories (OXIDE_CACHE_DIR under a mkdtemp
 * folder): every damaged, foreign or unsafe entry or directory is a miss
 * that compiles again and gives the right result, after which the entry is
 * valid again; concurrent writers (threads and processes); stale temporary
 * files; the LRU limits on disk and in memory; the directory's default path.
 * The in-memory cache is kept out of the way (OXIDE_MEM_CACHE_MAX_BYTES=1: no
 * artifact fits) except where it is tested, so compiles read the disk. The
 * debug log (OXIDE_DEBUG_CACHE) is captured to check why an entry was
 * refused. Runs as root too: then a directory and an entry owned by
 * `nobody` (uid 65534) are tried; without root those parts are skipped. */
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define N 300          /* elements per launch */
#define HDR 152        /* an entry's header (core/api/cache.c) */
#define FLIP_TRIALS 40 /* random damage trials */

static ox_device dev;
static char root[64];

/* ------------------------------------------------------------ helpers */

/* A kernel `name` computing c = 2a + v: distinct v, distinct kernels. */
static void source(char *buf, size_t n, const char *name, int v) {
  snprintf(buf, n,
           "#[kernel]\n"
           "fn %s(a: &[f32], c: DisjointSlice<f32>) {\n"
           "    let i = thread::index_1d();\n"
           "    if let Some(out) = c.get_mut(i) { *out = a[i] * 2.0 + %d.0; }\n"
           "}\n",
           name, v);
}

/* Compiles, launches and checks variant `v` of kernel `name`; NULL when all
 * went well, else what failed. No CHECK here: threads call it. */
static const char *run_variant(const char *name, int v, int *from_cache) {
  char src[512];
  source(src, sizeof src, name, v);
  ox_module m = NULL;
  ox_kernel k;
  ox_compile_options o = {.filename = "cache.oxk"};
  *from_cache = -1;
  if (ox_module_compile(dev, src, &o, &m) != OX_OK)
    return "compile failed";
  *from_cache = ox_module_from_cache(m);
  const char *err = NULL;
  ox_tensor ta = NULL, tc = NULL;
  float a[N], c[N];
  for (int i = 0; i < N; i++)
    a[i] = (float)i, c[i] = -1;
  int64_t n = N;
  if (ox_module_get_kernel(m, name, &k) != OX_OK ||
      ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, a, sizeof a, &ta) != OX_OK ||
      ox_tensor_from_host(dev, NULL, OX_F32, 1, &n, c, sizeof c, &tc) != OX_OK) {
    err = "setup failed";
  } else {
    ox_launch_config cfg = {{(N + 127) / 128, 1, 1}, {128, 1, 1}};
    ox_arg args[2] = {ox_arg_tensor(ta), ox_arg_tensor(tc)};
    if (ox_launch(k, NULL, &cfg, args, 2) != OX_OK)
      err = "launch failed";
    else if (ox_tensor_to_host(tc, NULL, c, sizeof c) != OX_OK)
      err = "copy back failed";
    else
      for (int i = 0; i < N && !err; i++)
        if (c[i] != 2.0f * a[i] + (float)v)
          err = "wrong result";
  }
  ox_tensor_release(ta);
  ox_tensor_release(tc);
  ox_module_destroy(m);
  return err;
}

/* Runs variant v and checks the result and, unless want_cache < 0, whether
 * it came from the cache. */
static void expect(const char *name, int v, int want_cache, const char *what) {
  int fc;
  const char *e = run_variant(name, v, &fc);
  CHECK(!e, "%s: %s", what, e);
  if (want_cache >= 0)
    CHECK(fc == want_cache, "%s: from_cache %d, expected %d", what, fc, want_cache);
}

/* Sends stderr (the cache's debug log) to a file until log_end. */
static int saved_stderr = -1;
static char logbuf[1 << 16];
static void log_begin(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/log", root);
  fflush(stderr);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  saved_stderr = dup(2);
  dup2(fd, 2);
  close(fd);
  setenv("OXIDE_DEBUG_CACHE", "1", 1);
}
static const char *log_end(void) {
  char path[128];
  snprintf(path, sizeof path, "%s/log", root);
  unsetenv("OXIDE_DEBUG_CACHE");
  fflush(stderr);
  dup2(saved_stderr, 2);
  close(saved_stderr);
  logbuf[0] = 0;
  FILE *f = fopen(path, "r");
  if (f) {
    size_t n = fread(logbuf, 1, sizeof logbuf - 1, f);
    logbuf[n] = 0;
    fclose(f);
  }
  return logbuf;
}

/* A private cache directory root/sub (mode 0700), made the current one. */
static void use_dir(char *out, size_t n, const char *sub) {
  snprintf(out, n, "%s/%s", root, sub);
  mkdir(out, 0700);
  setenv("OXIDE_CACHE_DIR", out, 1);
}

static bool is_entry(const char *s) {
  size_t n = strlen(s);
  return n == 66 && !strcmp(s + 64, ".o");
}

/* Counts the entries (and, in *temps, the temporary files) of `dir`, summing
 * their sizes; `names` (optional) receives up to `max` entry names. */
static int list_dir(const char *dir, char (*names)[80], int max, uint64_t *bytes, int *temps) {
  DIR *d = opendir(dir);
  int n = 0;
  if (bytes)
    *bytes = 0;
  if (temps)
    *temps = 0;
  if (!d)
    return 0;
  for (struct dirent *e; (e = readdir(d));) {
    char path[512];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    if (!strncmp(e->d_name, ".tmp.", 5) && temps)
      ++*temps;
    if (!is_entry(e->d_name) || lstat(path, &st) != 0)
      continue;
    if (names && n < max)
      memcpy(names[n], e->d_name, 67); /* an entry name: 66 characters */
    if (bytes)
      *bytes += (uint64_t)st.st_size;
    n++;
  }
  closedir(d);
  return n;
}

static char *read_all(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *b = malloc(n > 0 ? (size_t)n : 1);
  *len = b && n > 0 ? fread(b, 1, (size_t)n, f) : 0;
  fclose(f);
  return b;
}

/* Overwrites a file in place (same inode, owner and mode). */
static void write_all(const char *path, const void *data, size_t len) {
  int fd = open(path, O_WRONLY | O_TRUNC);
  CHECK(fd >= 0 && write(fd, data, len) == (ssize_t)len, "write %s", path);
  if (fd >= 0)
    close(fd);
}

static uint64_t rng = 0x5eed1234abcdULL;
static unsigned rnd(void) {
  rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
  return (unsigned)(rng >> 33);
}

/* ------------------------------------------------- forging valid entries */

/* BLAKE3 from the LLVM in this process (a shared-LLVM build) or from a
 * libLLVM on this machine: the test writes entries whose checksum is right
 * but whose code is not the key's. Without it those cases are skipped. */
typedef void (*b3_init_fn)(void *);
typedef void (*b3_update_fn)(void *, const void *, size_t);
typedef void (*b3_final_fn)(const void *, uint8_t *, size_t);
static b3_init_fn b3_init;
static b3_update_fn b3_update;
static b3_final_fn b3_final;

static bool find_blake3(void) {
  void *h = RTLD_DEFAULT;
  if (!dlsym(h, "llvm_blake3_hasher_init"))
    h = dlopen("libLLVM-19.so", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    h = dlopen("libLLVM.so.19.1", RTLD_NOW | RTLD_LOCAL);
  if (!h)
    return false;
  b3_init = (b3_init_fn)(uintptr_t)dlsym(h, "llvm_blake3_hasher_init");
  b3_update = (b3_update_fn)(uintptr_t)dlsym(h, "llvm_blake3_hasher_update");
  b3_final = (b3_final_fn)(uintptr_t)dlsym(h, "llvm_blake3_hasher_finalize");
  return b3_init && b3_update && b3_final;
}

/* Writes to `path` a well-formed entry for `key` holding `payload`. */
static void forge_entry(const char *path, const char *key, const void *payload, size_t len) {
  static _Alignas(64) unsigned char hasher[4096];
  unsigned char *e = malloc(HDR + len);
  uint32_t version = 1, hsize = HDR;
  uint64_t l = len;
  memcpy(e, "OXKCACHE", 8);
  memcpy(e + 8, &version, 4);
  memcpy(e + 12, &hsize, 4);
  memcpy(e + 16, &l, 8);
  memcpy(e + 24, key, 64);
  memcpy(e + HDR, payload, len);
  uint8_t d[32];
  b3_init(hasher);
  b3_update(hasher, e, 88);
  b3_update(hasher, payload, len);
  b3_final(hasher, d, 32);
  for (int i = 0; i < 32; i++) {
    char two[3];
    snprintf(two, sizeof two, "%02x", d[i]);
    memcpy(e + 88 + 2 * i, two, 2);
  }
  unlink(path);
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  CHECK(fd >= 0 && write(fd, e, HDR + len) == (ssize_t)(HDR + len), "forge %s", path);
  if (fd >= 0)
    close(fd);
  free(e);
}

/* ---------------------------------------------------- damaged entries */

static char entry[512], other[512]; /* kernel k (v=1) and kernel other (v=2) */

/* Compiles again after damage: not from the cache, the right result, the
 * log names `reason`; then the rewritten entry is valid (from the cache). */
static void after_damage(const char *what, const char *reason) {
  int fc;
  log_begin();
  const char *e = run_variant("k", 1, &fc);
  const char *log = log_end();
  CHECK(!e, "%s: %s", what, e);
  CHECK(fc == 0, "%s: the damaged entry was used (from_cache %d)", what, fc);
  CHECK(strstr(log, reason) != NULL, "%s: the log does not say \"%s\":\n%s", what, reason, log);
  expect("k", 1, 1, what); /* valid again */
  struct stat st;
  CHECK(lstat(entry, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 0777) == 0600 &&
            st.st_uid == geteuid(),
        "%s: the entry was not rewritten as a regular 0600 file", what);
}

static void truncate_to(off_t n) { CHECK(truncate(entry, n) == 0, "truncate"); }

static void test_damaged_entries(void) {
  char dir[256], names[4][80];
  use_dir(dir, sizeof dir, "damage");
  expect("k", 1, 0, "first compile");
  expect("k", 1, 1, "second compile");
  CHECK(list_dir(dir, names, 4, NULL, NULL) == 1, "one entry expected");
  snprintf(entry, sizeof entry, "%s/%s", dir, names[0]);
  expect("other", 2, 0, "another kernel");
  CHECK(list_dir(dir, names, 4, NULL, NULL) == 2, "two entries expected");
  snprintf(other, sizeof other, "%s/%s", dir, strcmp(entry + strlen(dir) + 1, names[0]) ? names[0] : names[1]);
  struct stat st;
  CHECK(stat(entry, &st) == 0 && (st.st_mode & 0777) == 0600, "entry mode %o", st.st_mode & 0777);

  /* random bytes flipped: half the trials in the header, half anywhere */
  for (int t = 0; t < FLIP_TRIALS; t++) {
    size_t len;
    unsigned char *b = (unsigned char *)read_all(entry, &len);
    CHECK(b && len > HDR, "read entry");
    if (!b || len <= HDR) {
      free(b);
      break;
    }
    int flips = 1 + (int)(rnd() % 8);
    for (int f = 0; f < flips; f++)
      b[rnd() % (t % 2 ? len : HDR)] ^= (unsigned char)(1 + rnd() % 255);
    write_all(entry, b, len);
    free(b);
    char what[64];
    snprintf(what, sizeof what, "flip trial %d (%d bytes)", t, flips);
    after_damage(what, "rejected");
  }
  truncate_to(st.st_size / 2);
  after_damage("truncated to half", "does not match its header");
  truncate_to(100);
  after_damage("truncated into the header", "too short");
  truncate_to(0);
  after_damage("empty", "too short");
  size_t olen;
  char *ob = read_all(other, &olen);
  write_all(entry, ob, olen);
  after_damage("another kernel's entry copied over it", "entry of another key");
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.copy", other);
  int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0 && write(fd, ob, olen) == (ssize_t)olen, "copy");
  close(fd);
  CHECK(rename(tmp, entry) == 0, "rename");
  after_damage("another kernel's entry renamed onto it", "entry of another key");
  unsigned char *b;
  size_t len;
  b = (unsigned char *)read_all(entry, &len);
  b[8]++;
  write_all(entry, b, len);
  after_damage("another format version", "format version");
  b[8]--;
  b[0] ^= 0x20;
  write_all(entry, b, len);
  after_damage("bad magic", "bad magic");
  b[0] ^= 0x20;
  b[len - 1] ^= 1;
  write_all(entry, b, len);
  after_damage("the last byte changed", "checksum mismatch");
  free(b);

  unlink(entry);
  CHECK(mkfifo(entry, 0600) == 0, "mkfifo");
  after_damage("a FIFO", "not a regular file");
  unlink(entry);
  CHECK(symlink("/dev/zero", entry) == 0, "symlink");
  after_damage("a symbolic link to /dev/zero", "symbolic link");
  unlink(entry);
  CHECK(symlink(other, entry) == 0, "symlink");
  after_damage("a symbolic link to another entry", "symbolic link");
  expect("other", 2, 1, "the symbolic link's target is intact");
  unlink(entry);
  CHECK(mkdir(entry, 0700) == 0, "mkdir");
  after_damage("a directory", "not a regular file");
  chmod(entry, 0620);
  after_damage("a group-writable entry", "group or others may write");
  chmod(entry, 0602);
  after_damage("a world-writable entry", "group or others may write");
  if (geteuid() == 0) {
    CHECK(chown(entry, 65534, 65534) == 0, "chown");
    after_damage("an entry owned by nobody", "belongs to uid 65534");
  } else {
    printf("cache_test: not root: the entry owned by another user is not tried\n");
  }

  /* well-formed entries whose code is not the key's: they pass the checks
   * and fail to load; dropped, compiled again, replaced */
  if (find_blake3()) {
    const char *key = strrchr(entry, '/') + 1;
    forge_entry(entry, key, ob + HDR, olen - HDR); /* has "other", not "k" */
    after_damage("a valid entry holding another kernel's code", "does not load");
    char junk[4096];
    for (size_t i = 0; i < sizeof junk; i++)
      junk[i] = (char)rnd();
    forge_entry(entry, key, junk, sizeof junk);
    after_damage("a valid entry holding no object file", "does not load");
    forge_entry(entry, key, "", 0);
    after_damage("a valid entry holding nothing", "does not load");
  } else {
    printf("cache_test: no LLVM BLAKE3 in reach: the forged-entry cases are skipped\n");
  }
  free(ob);
  int temps;
  list_dir(dir, NULL, 0, NULL, &temps);
  CHECK(temps == 0, "%d temporary files left", temps);
}

/* ---------------------------------------------------- the directory */

static void test_directory(void) {
  char dir[256];
  use_dir(dir, sizeof dir, "perm");
  expect("k", 10, 0, "perm: first compile");
  expect("k", 10, 1, "perm: second compile");
  /* a directory others may write to is neither read nor written */
  const int modes[] = {0770, 0707, 0720};
  for (int i = 0; i < 3; i++) {
    char what[64];
    snprintf(what, sizeof what, "directory mode %o", modes[i]);
    chmod(dir, (mode_t)modes[i]);
    log_begin();
    expect("k", 10, 0, what);
    expect("k", 11, 0, what);
    const char *log = log_end();
    CHECK(strstr(log, "group or others may write to it"), "%s: log:\n%s", what, log);
    chmod(dir, 0700);
    CHECK(list_dir(dir, NULL, 0, NULL, NULL) == 1, "%s: an entry was written", what);
  }
  expect("k", 10, 1, "mode restored");
  /* a symbolic link to it: refused (the last component is never followed) */
  char link[256];
  snprintf(link, sizeof link, "%s/link", root);
  CHECK(symlink(dir, link) == 0, "symlink");
  setenv("OXIDE_CACHE_DIR", link, 1);
  log_begin();
  expect("k", 10, 0, "cache directory is a symbolic link");
  const char *log = log_end();
  CHECK(strstr(log, "symbolic link"), "log:\n%s", log);
  /* a regular file */
  char file[256];
  snprintf(file, sizeof file, "%s/log", root);
  setenv("OXIDE_CACHE_DIR", file, 1);
  log_begin();
  expect("k", 10, 0, "cache directory is a file");
  log = log_end();
  CHECK(strstr(log, "not a directory"), "log:\n%s", log);
  /* created with mode 0700, parents too */
  char fresh[256];
  snprintf(fresh, sizeof fresh, "%s/new/sub/", root); /* a trailing slash, too */
  setenv("OXIDE_CACHE_DIR", fresh, 1);
  expect("k", 10, 0, "a new directory");
  expect("k", 10, 1, "a new directory, again");
  struct stat st;
  fresh[strlen(fresh) - 1] = 0;
  CHECK(lstat(fresh, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700, "mode %o",
        st.st_mode & 0777);
  CHECK(!strcmp(ox_cache_dir(), fresh), "trailing slash kept: %s", ox_cache_dir());
  /* another user's directory (the original attack: /tmp/.cache/oxide made by
   * nobody), holding a valid entry: not used */
  if (geteuid() == 0) {
    char theirs[256];
    use_dir(theirs, sizeof theirs, "nobody");
    expect("k", 10, 0, "nobody: first compile");
    CHECK(chown(theirs, 65534, 65534) == 0, "chown");
    log_begin();
    expect("k", 10, 0, "a directory owned by nobody");
    expect("k", 12, 0, "a directory owned by nobody");
    log = log_end();
    CHECK(strstr(log, "belongs to uid 65534"), "log:\n%s", log);
    CHECK(list_dir(theirs, NULL, 0, NULL, NULL) == 1, "an entry was written in nobody's directory");
    CHECK(chown(theirs, 0, 0) == 0, "chown");
    expect("k", 10, 1, "owner restored");
  } else {
    printf("cache_test: not root: the directory owned by another user is not tried\n");
  }
}

/* The default path: never a directory shared between users. */
static void test_default_path(void) {
  const char *vars[] = {"OXIDE_CACHE_DIR", "XDG_CACHE_HOME", "HOME"};
  char *saved[3];
  for (int i = 0; i < 3; i++) {
    const char *v = getenv(vars[i]);
    saved[i] = v ? strdup(v) : NULL;
    unsetenv(vars[i]);
  }
  char want[4200];
  struct passwd *pw = getpwuid(geteuid());
  struct stat st;
  if (pw && pw->pw_dir && pw->pw_dir[0] == '/' && stat(pw->pw_dir, &st) == 0 && S_ISDIR(st.st_mode) &&
      st.st_uid == geteuid())
    snprintf(want, sizeof want, "%s/.cache/oxide", pw->pw_dir);
  else
    snprintf(want, sizeof want, "/tmp/oxide-cache-%u", (unsigned)geteuid());
  CHECK(!strcmp(ox_cache_dir(), want), "no HOME: %s, expected %s", ox_cache_dir(), want);
  CHECK(strcmp(ox_cache_dir(), "/tmp/.cache/oxide") != 0, "the shared directory again");
  setenv("HOME", "/h", 1);
  CHECK(!strcmp(ox_cache_dir(), "/h/.cache/oxide"), "HOME: %s", ox_cache_dir());
  setenv("XDG_CACHE_HOME", "relative", 1);
  CHECK(!strcmp(ox_cache_dir(), "/h/.cache/oxide"), "relative XDG_CACHE_HOME: %s", ox_cache_dir());
  setenv("XDG_CACHE_HOME", "/x/", 1);
  CHECK(!strcmp(ox_cache_dir(), "/x//oxide"), "XDG_CACHE_HOME: %s", ox_cache_dir());
  setenv("OXIDE_CACHE_DIR", "/a/b//", 1);
  CHECK(!strcmp(ox_cache_dir(), "/a/b"), "OXIDE_CACHE_DIR: %s", ox_cache_dir());
  setenv("OXIDE_CACHE", "off", 1);
  CHECK(!strcmp(ox_cache_dir(), ""), "OXIDE_CACHE=off: %s", ox_cache_dir());
  unsetenv("OXIDE_CACHE");
  for (int i = 0; i < 3; i++) {
    if (saved[i])
      setenv(vars[i], saved[i], 1);
    else
      unsetenv(vars[i]);
    free(saved[i]);
  }
}

/* ------------------------------------------------ temporary files */

static void make_file(const char *dir, const char *name, time_t age_s) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  CHECK(fd >= 0 && write(fd, "partial", 7) == 7, "make %s", path);
  struct timespec t[2] = {{time(NULL) - age_s, 0}, {time(NULL) - age_s, 0}};
  if (fd >= 0) {
    futimens(fd, t);
    close(fd);
  }
}

static bool exists(const char *dir, const char *name) {
  char path[512];
  struct stat st;
  snprintf(path, sizeof path, "%s/%s", dir, name);
  return lstat(path, &st) == 0;
}

static void test_temp_cleanup(void) {
  char dir[256], name[5][200];
  use_dir(dir, sizeof dir, "temps");
  pid_t dead = fork();
  if (dead == 0)
    _exit(0);
  waitpid(dead, NULL, 0);
  const char *k = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.o";
  snprintf(name[0], sizeof name[0], ".tmp.%d.0.%s", (int)dead, k);        /* old, dead: removed */
  snprintf(name[1], sizeof name[1], ".tmp.%d.1.%s", (int)dead, k);        /* new, dead: kept */
  snprintf(name[2], sizeof name[2], ".tmp.%d.2.%s", (int)getpid(), k);    /* old, alive: kept */
  snprintf(name[3], sizeof name[3], ".tmp.%d.3.%s", (int)getpid(), k);    /* two days: removed */
  snprintf(name[4], sizeof name[4], "notes.txt");                         /* not Oxide's: kept */
  const time_t age[5] = {3600, 5, 3600, 2 * 86400, 2 * 86400};
  for (int i = 0; i < 5; i++)
    make_file(dir, name[i], age[i]);
  /* an entry of the first cache format, in its two-hex-digit folder */
  char shard[300];
  snprintf(shard, sizeof shard, "%s/ab", dir);
  mkdir(shard, 0700);
  make_file(shard, "cdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789.o", 0);
  /* the first write of this process to this directory cleans up */
  log_begin();
  expect("k", 20, 0, "temps: compile");
  const char *log = log_end();
  CHECK(!exists(dir, name[0]), "a dead writer's old temporary file was kept");
  CHECK(exists(dir, name[1]), "a recent temporary file was removed");
  CHECK(exists(dir, name[2]), "a live writer's temporary file was removed");
  CHECK(!exists(dir, name[3]), "a two-day-old temporary file was kept");
  CHECK(exists(dir, name[4]), "a file that is not Oxide's was removed");
  CHECK(!exists(dir, "ab"), "the old-format folder was kept");
  CHECK(strstr(log, "removed the stale temporary file"), "log:\n%s", log);
  expect("k", 20, 1, "temps: again");
}

/* ------------------------------------------------------ size limits */

static void test_disk_limit(void) {
  char dir[256], names[64][80];
  uint64_t bytes;
  use_dir(dir, sizeof dir, "lru");
  expect("k", 100, 0, "lru: first");
  CHECK(list_dir(dir, names, 64, &bytes, NULL) == 1, "one entry");
  char hot[80];
  snprintf(hot, sizeof hot, "%s", names[0]);
  uint64_t limit = bytes * 6 + bytes / 2; /* six entries */
  char lim[32];
  snprintf(lim, sizeof lim, "%llu", (unsigned long long)limit);
  setenv("OXIDE_CACHE_MAX_BYTES", lim, 1);
  log_begin();
  for (int v = 101; v <= 116; v++) {
    char what[64];
    snprintf(what, sizeof what, "lru: kernel %d", v);
    expect("k", v, 0, what);
    expect("k", 100, 1, "lru: the hot kernel"); /* used after every write */
    int n = list_dir(dir, NULL, 0, &bytes, NULL);
    CHECK(bytes <= limit, "%s: %d entries, %llu bytes > limit %llu", what, n, (unsigned long long)bytes,
          (unsigned long long)limit);
  }
  const char *log = log_end();
  CHECK(strstr(log, "evicted"), "no eviction logged:\n%s", log);
  CHECK(exists(dir, hot), "the most recently used entry was evicted");
  expect("k", 116, 1, "lru: the newest entry");
  expect("k", 101, 0, "lru: the oldest entry was evicted");
  /* 0: nothing on disk (not read, not written) */
  setenv("OXIDE_CACHE_MAX_BYTES", "0", 1);
  expect("k", 100, 0, "OXIDE_CACHE_MAX_BYTES=0");
  expect("k", 117, 0, "OXIDE_CACHE_MAX_BYTES=0");
  CHECK(!exists(dir, "x") && list_dir(dir, NULL, 0, NULL, NULL) <= 6, "entries");
  expect("k", 117, 0, "OXIDE_CACHE_MAX_BYTES=0: not written");
  /* invalid: the default, said in the log and by the doctor */
  const char *bad[] = {"12abc", "-5", "1T", " 7", "99999999999999999999999"};
  for (int i = 0; i < 5; i++) {
    setenv("OXIDE_CACHE_MAX_BYTES", bad[i], 1);
    log_begin();
    expect("k", 118 + i, 0, bad[i]);
    expect("k", 118 + i, 1, bad[i]);
    log = log_end();
    CHECK(strstr(log, "is not a size"), "OXIDE_CACHE_MAX_BYTES=%s: log:\n%s", bad[i], log);
    char *doc = NULL;
    CHECK_OK(ox_doctor(&doc));
    CHECK(doc && strstr(doc, "is not a size"), "doctor: %s", doc ? doc : "");
    ox_free(doc);
  }
  setenv("OXIDE_CACHE_MAX_BYTES", "64k", 1);
  char *doc = NULL;
  CHECK_OK(ox_doctor(&doc));
  CHECK(doc && strstr(doc, "at most 65536 bytes on disk"), "doctor: %s", doc ? doc : "");
  ox_free(doc);
  unsetenv("OXIDE_CACHE_MAX_BYTES");
}

static void test_memory_limit(void) {
  char dir[256], lim[32];
  uint64_t bytes;
  use_dir(dir, sizeof dir, "mem");
  expect("k", 200, 0, "mem: size");
  list_dir(dir, NULL, 0, &bytes, NULL);
  /* two artifacts fit (an entry is the artifact and a 152-byte header; the
   * memory cache counts the artifact and about 100 bytes) */
  snprintf(lim, sizeof lim, "%llu", (unsigned long long)(bytes * 2 + bytes / 2));
  setenv("OXIDE_MEM_CACHE_MAX_BYTES", lim, 1);
  expect("k", 200, 1, "mem: 200 from disk, now in memory");
  expect("k", 201, 0, "mem: 201");
  expect("k", 202, 0, "mem: 202 evicts 200");
  setenv("OXIDE_CACHE_MAX_BYTES", "0", 1); /* from now on, memory only */
  expect("k", 202, 1, "mem: 202 in memory");
  expect("k", 201, 1, "mem: 201 in memory");
  expect("k", 200, 0, "mem: 200 was evicted");
  expect("k", 201, 1, "mem: 201, the most recently used, kept");
  expect("k", 202, 0, "mem: 202, the least recently used, evicted");
  setenv("OXIDE_MEM_CACHE_MAX_BYTES", "0", 1); /* nothing in memory */
  expect("k", 203, 0, "mem: 0");
  expect("k", 203, 0, "mem: 0, again");
  expect("k", 201, 0, "mem: 0 drops what was kept");
  unsetenv("OXIDE_CACHE_MAX_BYTES");
  setenv("OXIDE_MEM_CACHE_MAX_BYTES", "1", 1);
}

/* ------------------------------------------------------ concurrency */

#define THREADS 6
#define KINDS 4

static void *writer_thread(void *arg) {
  int t = (int)(intptr_t)arg, fails = 0;
  for (int j = 0; j < KINDS; j++) {
    int fc;
    /* all threads race for the same kernels, each from its own start */
    if (run_variant("k", 300 + (j + t) % KINDS, &fc))
      fails++;
  }
  return (void *)(intptr_t)fails;
}

static void test_concurrency(const char *self) {
  char dir[256];
  int temps;
  use_dir(dir, sizeof dir, "threads");
  pthread_t th[THREADS];
  for (int t = 0; t < THREADS; t++)
    CHECK(pthread_create(&th[t], NULL, writer_thread, (void *)(intptr_t)t) == 0, "thread");
  for (int t = 0; t < THREADS; t++) {
    void *r;
    pthread_join(th[t], &r);
    CHECK(r == NULL, "thread %d: %d failures", t, (int)(intptr_t)r);
  }
  CHECK(list_dir(dir, NULL, 0, NULL, &temps) == KINDS && temps == 0, "entries, %d temporary files", temps);
  for (int v = 300; v < 300 + KINDS; v++)
    expect("k", v, 1, "after the threads");
  /* processes */
  use_dir(dir, sizeof dir, "procs");
  pid_t kids[4];
  for (int i = 0; i < 4; i++) {
    kids[i] = fork();
    if (kids[i] == 0) {
      char arg[16];
      snprintf(arg, sizeof arg, "%d", i);
      execl(self, self, "--writer", arg, (char *)NULL);
      _exit(99);
    }
  }
  for (int i = 0; i < 4; i++) {
    int st = 0;
    waitpid(kids[i], &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "writer process %d: status %#x", i, st);
  }
  CHECK(list_dir(dir, NULL, 0, NULL, &temps) == KINDS && temps == 0, "entries, %d temporary files", temps);
  for (int v = 310; v < 310 + KINDS; v++)
    expect("k", v, 1, "after the processes");
}

static int writer_process(int i) {
  int fails = 0, fc;
  for (int j = 0; j < KINDS; j++)
    if (run_variant("k", 310 + (j + i) % KINDS, &fc))
      fails++;
  return fails;
}

int main(int argc, char **argv) {
  alarm(300); /* a hang (a FIFO read, a lock) fails the test instead of stalling it */
  setenv("OXIDE_MEM_CACHE_MAX_BYTES", "1", 1);
  unsetenv("OXIDE_CACHE");
  unsetenv("OXIDE_CACHE_MAX_BYTES");
  CHECK_OK(ox_device_get(OX_DEVICE_CPU, 0, &dev));
  if (!dev)
    return test_done("cache_test");
  if (argc > 2 && !strcmp(argv[1], "--writer"))
    return writer_process(atoi(argv[2]));
  snprintf(root, sizeof root, "/tmp/oxide-cache-test-XXXXXX");
  CHECK(mkdtemp(root) != NULL, "mkdtemp");
  test_default_path();
  test_damaged_entries();
  test_directory();
  test_temp_cleanup();
  test_disk_limit();
  test_memory_limit();
  test_concurrency(argv[0]);
  char cmd[128];
  snprintf(cmd, sizeof cmd, "rm -rf %s", root);
  CHECK(system(cmd) == 0, "cleanup");
  return test_done("cache_test");
}
