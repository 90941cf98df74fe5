/* cache.c - the compiled-kernel cache: artifacts (cubins, host objects) by
 * key, in a bounded in-memory LRU list and in a per-user directory on disk.
 *
 * The artifacts are native code that this process will run, so nothing on
 * disk is trusted: the directory must belong to the user and be closed to
 * writes by others, and an entry must be a regular file of the user's whose
 * header names the key asked for and whose checksum matches its content. Any
 * failed check is a miss (the caller compiles again and the new entry replaces
 * the bad one), never an error, a crash or a hang. $OXIDE_DEBUG_CACHE logs
 * every event to stderr. The disk cache is kept under a size limit by
 * evicting the least recently used entries; entries are written to a
 * temporary file and renamed into place, so no reader sees a partial one.
 *
 * An entry is a 152-byte header followed by the artifact:
 *   0  "OXKCACHE"     8  u32 format version   12  u32 header size
 *   16 u64 artifact length   24  the key (64 hex digits)
 *   88 BLAKE3 (64 hex digits) of bytes 0..87 and of the artifact.
 * Names: "<key>.o" or "<key>.cubin"; temporary files ".tmp.<pid>.<n>.<name>". */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "api/api.h"

#define HDR_SIZE 152
#define FORMAT_VERSION 1u
#define DISK_MAX_DEFAULT ((uint64_t)1 << 30) /* 1 GiB */
#define MEM_MAX_DEFAULT ((uint64_t)64 << 20) /* 64 MiB */
#define MAX_ARTIFACT ((uint64_t)1 << 30)     /* a header claiming more is damaged */
#define RESCAN_WRITES 32                     /* a process rescans the directory this often */
#define STALE_TEMP_S (10 * 60)               /* a dead writer's temporary file: removed after */
#define ABANDONED_TEMP_S (24 * 60 * 60)      /* any temporary file: removed after */

static const char magic[8] = {'O', 'X', 'K', 'C', 'A', 'C', 'H', 'E'};

/* ------------------------------------------------------------ settings */

static bool debug_on(void) {
  const char *v = getenv("OXIDE_DEBUG_CACHE");
  return v && *v && strcmp(v, "0") != 0;
}

/* One line per cache event on stderr, when $OXIDE_DEBUG_CACHE is set. */
static void debug_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void debug_log(const char *fmt, ...) {
  if (!debug_on())
    return;
  char line[2 * PATH_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "oxide cache: %s\n", line);
}

/* Parses a byte count: decimal digits with an optional K, M or G (powers of
 * 1024). Returns false for anything else (signs, spaces, overflow). */
static bool parse_size(const char *s, uint64_t *out) {
  uint64_t v = 0;
  const char *p = s;
  if (*p < '0' || *p > '9')
    return false;
  for (; *p >= '0' && *p <= '9'; p++) {
    unsigned d = (unsigned)(*p - '0');
    if (v > (UINT64_MAX - d) / 10)
      return false;
    v = v * 10 + d;
  }
  unsigned shift = 0;
  if (*p == 'k' || *p == 'K')
    shift = 10;
  else if (*p == 'm' || *p == 'M')
    shift = 20;
  else if (*p == 'g' || *p == 'G')
    shift = 30;
  if (shift)
    p++;
  if (*p || v > (UINT64_MAX >> shift))
    return false;
  *out = v << shift;
  return true;
}

/* A size limit from the environment: `def` when unset or empty, and when
 * invalid (*bad then set; the debug log says so). */
static uint64_t env_size(const char *var, uint64_t def, bool *bad) {
  const char *s = getenv(var);
  uint64_t v;
  if (bad)
    *bad = false;
  if (!s || !*s)
    return def;
  if (parse_size(s, &v))
    return v;
  if (bad)
    *bad = true;
  debug_log("%s='%s' is not a size (bytes, or a number followed by K, M or G): using %llu", var, s,
            (unsigned long long)def);
  return def;
}

static uint64_t disk_limit(bool *bad) { return env_size("OXIDE_CACHE_MAX_BYTES", DISK_MAX_DEFAULT, bad); }
static uint64_t mem_limit(bool *bad) { return env_size("OXIDE_MEM_CACHE_MAX_BYTES", MEM_MAX_DEFAULT, bad); }

static void now_realtime(struct timespec t[2]) {
  clock_gettime(CLOCK_REALTIME, &t[0]);
  t[1] = t[0];
}

/* --------------------------------------------------------- the directory */

static pthread_once_t pw_once = PTHREAD_ONCE_INIT;
static char pw_home[2048];

/* The user's home directory from the password database, when it is a
 * directory the user owns (not "/nonexistent", nor a system user's "/"). */
static void find_pw_home(void) {
  struct passwd pw, *res = NULL;
  char buf[8192];
  if (getpwuid_r(geteuid(), &pw, buf, sizeof buf, &res) != 0 || !res || !res->pw_dir ||
      res->pw_dir[0] != '/')
    return;
  struct stat st;
  if (stat(res->pw_dir, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid())
    snprintf(pw_home, sizeof pw_home, "%s", res->pw_dir);
}

/* Writes the cache directory's path to buf (without trailing slashes, so
 * that O_NOFOLLOW applies to its last component). Returns -1 when the cache
 * is off ($OXIDE_CACHE), 1 when the path does not fit, else 0. */
static int dir_path(char *buf, size_t n) {
  buf[0] = 0;
  const char *off = getenv("OXIDE_CACHE");
  if (off && (!strcmp(off, "0") || !strcmp(off, "off")))
    return -1;
  const char *d = getenv("OXIDE_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
  int len;
  if (d && *d)
    len = snprintf(buf, n, "%s", d);
  else if (x && x[0] == '/') /* the XDG specification: relative paths are ignored */
    len = snprintf(buf, n, "%s/oxide", x);
  else if (h && *h)
    len = snprintf(buf, n, "%s/.cache/oxide", h);
  else {
    pthread_once(&pw_once, find_pw_home);
    if (pw_home[0])
      len = snprintf(buf, n, "%s/.cache/oxide", pw_home);
    else /* per user, never shared: another user's directory of this name is refused */
      len = snprintf(buf, n, "/tmp/oxide-cache-%u", (unsigned)geteuid());
  }
  if (len < 0 || (size_t)len >= n)
    return 1;
  while (len > 1 && buf[len - 1] == '/')
    buf[--len] = 0;
  return 0;
}

const char *ox_cache_dir(void) {
  static _Thread_local char buf[PATH_MAX];
  dir_path(buf, sizeof buf);
  return buf;
}

bool oxa_cache_enabled(void) {
  char buf[PATH_MAX];
  return dir_path(buf, sizeof buf) >= 0;
}

/* Creates the missing parents of `path` (mode 0700, as the XDG specification
 * asks); errors show when the directory itself is made. */
static void make_parents(const char *path) {
  char p[PATH_MAX];
  snprintf(p, sizeof p, "%s", path);
  for (char *s = p + 1; *s; s++)
    if (*s == '/') {
      *s = 0;
      mkdir(p, 0700);
      *s = '/';
    }
}

/* Opens the cache directory (creating it with mode 0700 when `create`) and
 * checks the directory actually opened: it must belong to this user and
 * nobody else may write to it, else others could plant code that this
 * process runs. Returns its descriptor, or -1 with the reason in `why` (""
 * when it merely does not exist yet). */
static int dir_open(const char *path, bool create, char *why, size_t n) {
  why[0] = 0;
  int flags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int fd = open(path, flags);
  if (fd < 0 && errno == ENOENT && create) {
    make_parents(path);
    if (mkdir(path, 0700) != 0 && errno != EEXIST) {
      snprintf(why, n, "cannot create it: %s", strerror(errno));
      return -1;
    }
    fd = open(path, flags);
  }
  if (fd < 0) {
    int e = errno;
    struct stat st;
    if (e == ENOENT && !create)
      return -1;
    if ((e == ELOOP || e == ENOTDIR) && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
      snprintf(why, n, "it is a symbolic link (name the directory itself)");
    else if (e == ENOTDIR)
      snprintf(why, n, "it is not a directory");
    else
      snprintf(why, n, "cannot open it: %s", strerror(e));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st) != 0)
    snprintf(why, n, "cannot stat it: %s", strerror(errno));
  else if (st.st_uid != geteuid())
    snprintf(why, n, "it belongs to uid %u, not to this user (uid %u)", (unsigned)st.st_uid,
             (unsigned)geteuid());
  else if (st.st_mode & (S_IWGRP | S_IWOTH))
    snprintf(why, n, "group or others may write to it: mode %03o", (unsigned)(st.st_mode & 0777));
  if (why[0]) {
    close(fd);
    return -1;
  }
  return fd;
}

/* ------------------------------------------------------------- entries */

static bool is_hex(const char *s, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
      return false;
  return true;
}

static void entry_name(char *buf, size_t n, const char *key, const char *ext) {
  snprintf(buf, n, "%.64s.%s", key, ext);
}

/* The checksum: BLAKE3 of the header's fields before it and of the artifact. */
static void checksum(const unsigned char *hdr, const void *data, size_t len, char out[64]) {
  oxb_hasher h;
  oxb_hash_init(&h);
  oxb_hash_update(&h, hdr, 88);
  oxb_hash_update(&h, data, len);
  char hex[65];
  oxb_hash_final_hex(&h, hex);
  memcpy(out, hex, 64);
}

static void header_make(unsigned char *h, const char *key, const void *data, size_t len) {
  uint32_t version = FORMAT_VERSION, hsize = HDR_SIZE;
  uint64_t l = len;
  memcpy(h, magic, 8);
  memcpy(h + 8, &version, 4);
  memcpy(h + 12, &hsize, 4);
  memcpy(h + 16, &l, 8);
  memcpy(h + 24, key, 64);
  checksum(h, data, len, (char *)h + 88);
}

static bool read_full(int fd, void *buf, size_t n) {
  size_t off = 0;
  while (off < n) {
    ssize_t r = read(fd, (char *)buf + off, n - off);
    if (r < 0 && errno == EINTR)
      continue;
    if (r <= 0)
      return false;
    off += (size_t)r;
  }
  return true;
}

static bool write_full(int fd, const void *buf, size_t n) {
  size_t off = 0;
  while (off < n) {
    ssize_t w = write(fd, (const char *)buf + off, n - off);
    if (w < 0 && errno == EINTR)
      continue;
    if (w <= 0)
      return false;
    off += (size_t)w;
  }
  return true;
}

/* Reads the entry open at `fd` (`st`: its fstat) and checks it completely
 * before anything uses it. Returns the artifact (malloc'ed), or NULL with the
 * reason in `why`. */
static char *entry_read(int fd, const struct stat *st, const char *key, size_t *len, char *why,
                        size_t n) {
  unsigned char h[HDR_SIZE];
  uint32_t version, hsize;
  uint64_t l;
  why[0] = 0;
  if (!S_ISREG(st->st_mode)) {
    snprintf(why, n, "not a regular file");
    return NULL;
  }
  if (st->st_uid != geteuid()) {
    snprintf(why, n, "it belongs to uid %u, not to this user", (unsigned)st->st_uid);
    return NULL;
  }
  if (st->st_mode & (S_IWGRP | S_IWOTH)) {
    snprintf(why, n, "group or others may write to it: mode %03o", (unsigned)(st->st_mode & 0777));
    return NULL;
  }
  if (st->st_size < HDR_SIZE) {
    snprintf(why, n, "%lld bytes, too short for the %d-byte header", (long long)st->st_size, HDR_SIZE);
    return NULL;
  }
  if (!read_full(fd, h, HDR_SIZE)) {
    snprintf(why, n, "cannot read its header");
    return NULL;
  }
  memcpy(&version, h + 8, 4);
  memcpy(&hsize, h + 12, 4);
  memcpy(&l, h + 16, 8);
  if (memcmp(h, magic, sizeof magic) != 0) {
    snprintf(why, n, "not an Oxide cache entry (bad magic)");
    return NULL;
  }
  if (version != FORMAT_VERSION || hsize != HDR_SIZE) {
    snprintf(why, n, "format version %u with a %u-byte header (expected version %u, %d bytes)",
             version, hsize, FORMAT_VERSION, HDR_SIZE);
    return NULL;
  }
  if (l > MAX_ARTIFACT || (uint64_t)st->st_size - HDR_SIZE != l) {
    snprintf(why, n, "its size (%lld bytes) does not match its header (%d + %llu)",
             (long long)st->st_size, HDR_SIZE, (unsigned long long)l);
    return NULL;
  }
  if (memcmp(h + 24, key, 64) != 0) {
    char other[17]; /* shown only as hex: the bytes come from the file */
    for (int i = 0; i < 16; i++)
      other[i] = is_hex((const char *)h + 24 + i, 1) ? (char)h[24 + i] : '?';
    other[16] = 0;
    snprintf(why, n, "it holds the entry of another key (%s...)", other);
    return NULL;
  }
  char *data = malloc(l ? l : 1);
  if (!data) {
    snprintf(why, n, "out of memory");
    return NULL;
  }
  char sum[64];
  if (!read_full(fd, data, l)) {
    snprintf(why, n, "cannot read it");
  } else {
    checksum(h, data, l, sum);
    if (memcmp(sum, h + 88, 64) != 0)
      snprintf(why, n, "checksum mismatch (the content is damaged)");
  }
  if (why[0]) {
    free(data);
    return NULL;
  }
  *len = l;
  return data;
}

/* Reads `key`'s entry from disk; NULL on a miss, and on any failed check. */
static char *disk_get(const char *key, const char *ext, size_t *len) {
  char dir[PATH_MAX], why[512] = "", name[80];
  if (disk_limit(NULL) == 0 || dir_path(dir, sizeof dir) != 0)
    return NULL;
  int dfd = dir_open(dir, false, why, sizeof why);
  if (dfd < 0) {
    if (why[0])
      debug_log("not using %s: %s; the disk cache is off", dir, why);
    else
      debug_log("miss %s/%s.%s (no cache directory yet)", dir, key, ext);
    return NULL;
  }
  entry_name(name, sizeof name, key, ext);
  char *data = NULL;
  struct stat st, st2;
  /* lstat first, so that a FIFO or a device is never even opened */
  if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno == ENOENT)
      debug_log("miss %s/%s", dir, name);
    else
      snprintf(why, sizeof why, "cannot stat it: %s", strerror(errno));
  } else if (S_ISLNK(st.st_mode)) {
    snprintf(why, sizeof why, "a symbolic link");
  } else if (!S_ISREG(st.st_mode)) {
    snprintf(why, sizeof why, "not a regular file");
  } else {
    /* O_NOFOLLOW and O_NONBLOCK: whatever was swapped in since cannot
     * redirect the read nor block it; fstat then says what was opened */
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
      snprintf(why, sizeof why, "cannot open it: %s", strerror(errno));
    } else {
      if (fstat(fd, &st2) != 0)
        snprintf(why, sizeof why, "cannot stat it: %s", strerror(errno));
      else if ((data = entry_read(fd, &st2, key, len, why, sizeof why))) {
        struct timespec t[2];
        now_realtime(t);
        futimens(fd, t); /* its recency, for the LRU eviction */
        debug_log("hit %s/%s (%zu bytes of code)", dir, name, *len);
      }
      close(fd);
    }
  }
  if (why[0])
    debug_log("rejected %s/%s: %s; compiling again", dir, name, why);
  close(dfd);
  return data;
}

/* Marks `key`'s entry on disk as used now (a hit in memory is a use too). */
static void disk_touch(const char *key, const char *ext) {
  char dir[PATH_MAX], path[PATH_MAX + 80];
  if (disk_limit(NULL) == 0 || dir_path(dir, sizeof dir) != 0)
    return;
  snprintf(path, sizeof path, "%s/%.64s.%s", dir, key, ext);
  struct timespec t[2];
  now_realtime(t);
  utimensat(AT_FDCWD, path, t, AT_SYMLINK_NOFOLLOW); /* fails harmlessly on others' files */
}

/* ------------------------------------------- eviction and cleaning up */

enum { NAME_OTHER, NAME_ENTRY, NAME_TEMP, NAME_OLD_SHARD };

/* What a name in the cache directory is; only Oxide's own names are ever
 * counted or removed, whatever else the directory holds. */
static int name_kind(const char *s) {
  size_t n = strlen(s);
  if ((n == 66 || n == 70) && is_hex(s, 64) && (!strcmp(s + 64, ".o") || !strcmp(s + 64, ".cubin")))
    return NAME_ENTRY;
  if (!strncmp(s, ".tmp.", 5) && s[5] >= '0' && s[5] <= '9')
    return NAME_TEMP;
  if (n == 2 && is_hex(s, 2))
    return NAME_OLD_SHARD;
  return NAME_OTHER;
}

/* A temporary file whose writer is gone: older than some minutes and its
 * process dead (or older than a day: the pid may be another host's). */
static bool temp_stale(const char *name, const struct stat *st, time_t now) {
  time_t age = now - st->st_mtim.tv_sec;
  if (age < STALE_TEMP_S)
    return false;
  if (age > ABANDONED_TEMP_S)
    return true;
  long pid = strtol(name + 5, NULL, 10);
  if (pid <= 0 || pid > INT_MAX)
    return true;
  return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Removes the entries of the first cache format (unchecked, in folders
 * named by the key's first two hex digits): they are never read again. */
static void remove_old_shard(int dfd, const char *dir, const char *shard) {
  int fd = openat(dfd, shard, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  struct stat st;
  if (fd < 0)
    return;
  DIR *d = fstat(fd, &st) == 0 && st.st_uid == geteuid() ? fdopendir(fd) : NULL;
  if (!d) {
    close(fd);
    return;
  }
  int removed = 0;
  for (struct dirent *e; (e = readdir(d));) {
    const char *s = e->d_name;
    size_t n = strlen(s);
    bool old = n > 62 && is_hex(s, 62) &&
               (!strcmp(s + 62, ".o") || !strcmp(s + 62, ".cubin") || !strncmp(s + 62, ".o.tmp.", 7) ||
                !strncmp(s + 62, ".cubin.tmp.", 11));
    if (old && unlinkat(fd, s, 0) == 0)
      removed++;
  }
  closedir(d);
  bool gone = unlinkat(dfd, shard, AT_REMOVEDIR) == 0;
  if (removed || gone)
    debug_log("cleanup: removed %d entries of the old format in %s/%s%s", removed, dir, shard,
              gone ? " and the folder" : "");
}

typedef struct scan_item {
  char name[72];
  struct timespec mtime;
  uint64_t size;
} scan_item;

static int by_mtime(const void *a, const void *b) {
  const struct timespec *x = &((const scan_item *)a)->mtime, *y = &((const scan_item *)b)->mtime;
  if (x->tv_sec != y->tv_sec)
    return x->tv_sec < y->tv_sec ? -1 : 1;
  return x->tv_nsec < y->tv_nsec ? -1 : x->tv_nsec > y->tv_nsec;
}

/* Sums the sizes of the entries and temporary files, removes stale
 * temporary files and old-format folders, and when the sum is over `limit`
 * evicts the least recently used entries down to 90% of it (so that the next
 * scan is some writes away). Returns the bytes left. */
static uint64_t scan_dir(int dfd, const char *dir, uint64_t limit) {
  int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* closedir closes it */
  DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
  if (!d) {
    if (fd >= 0)
      close(fd);
    return 0;
  }
  scan_item *items = NULL;
  size_t n = 0, cap = 0;
  uint64_t total = 0;
  time_t now = time(NULL);
  for (struct dirent *e; (e = readdir(d));) {
    const char *s = e->d_name;
    int kind = name_kind(s);
    struct stat st;
    if (kind == NAME_OTHER || fstatat(dfd, s, &st, AT_SYMLINK_NOFOLLOW) != 0)
      continue;
    if (kind == NAME_OLD_SHARD) {
      if (S_ISDIR(st.st_mode))
        remove_old_shard(dfd, dir, s);
      continue;
    }
    if (!S_ISREG(st.st_mode)) /* in an entry's place: replaced when it is written */
      continue;
    if (kind == NAME_TEMP && temp_stale(s, &st, now)) {
      if (unlinkat(dfd, s, 0) == 0)
        debug_log("cleanup: removed the stale temporary file %s/%s", dir, s);
      continue;
    }
    total += (uint64_t)st.st_size;
    if (kind != NAME_ENTRY)
      continue;
    if (n == cap) {
      size_t ncap = cap ? cap * 2 : 256;
      scan_item *ni = realloc(items, ncap * sizeof *ni);
      if (!ni)
        continue; /* still counted; just not a candidate for eviction */
      items = ni;
      cap = ncap;
    }
    memcpy(items[n].name, s, strlen(s) + 1); /* an entry's name: 66 or 70 characters */
    items[n].mtime = st.st_mtim;
    items[n].size = (uint64_t)st.st_size;
    n++;
  }
  closedir(d);
  if (total > limit) {
    uint64_t target = limit - limit / 10, before = total;
    if (n)
      qsort(items, n, sizeof *items, by_mtime);
    for (size_t i = 0; i < n && total > target; i++)
      if (unlinkat(dfd, items[i].name, 0) == 0) {
        total -= items[i].size;
        debug_log("evicted %s/%s (%llu bytes; the cache held %llu bytes, its limit is %llu)", dir,
                  items[i].name, (unsigned long long)items[i].size, (unsigned long long)before,
                  (unsigned long long)limit);
      }
  }
  free(items);
  return total;
}

/* What this process knows of the directory's size: exact after a scan, then
 * an estimate that adds its own writes. A write scans (trims, cleans up) the
 * first time, when the estimate passes the limit, and every RESCAN_WRITES
 * writes, which bounds what other processes' writes add unseen. */
static pthread_mutex_t usage_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t scan_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
  dev_t dev;
  ino_t ino;
  bool known;
  uint64_t bytes;
  unsigned writes;
} usage;

static void account(int dfd, const char *dir, uint64_t added, uint64_t limit) {
  struct stat st;
  if (fstat(dfd, &st) != 0)
    return;
  pthread_mutex_lock(&usage_lock);
  if (usage.dev != st.st_dev || usage.ino != st.st_ino) { /* another directory: start over */
    usage.dev = st.st_dev;
    usage.ino = st.st_ino;
    usage.known = false;
    usage.bytes = 0;
    usage.writes = 0;
  }
  usage.bytes += added;
  usage.writes++;
  bool scan = !usage.known || usage.bytes > limit || usage.writes >= RESCAN_WRITES;
  pthread_mutex_unlock(&usage_lock);
  if (!scan || pthread_mutex_trylock(&scan_lock) != 0) /* another thread is scanning */
    return;
  uint64_t total = scan_dir(dfd, dir, limit);
  pthread_mutex_lock(&usage_lock);
  if (usage.dev == st.st_dev && usage.ino == st.st_ino) {
    usage.known = true;
    usage.bytes = total;
    usage.writes = 0;
  }
  pthread_mutex_unlock(&usage_lock);
  pthread_mutex_unlock(&scan_lock);
}

/* Writes `key`'s entry: a temporary file (O_EXCL, mode 0600) in the same
 * directory, then rename() over the entry's name, so readers see the old
 * entry or the new one, never a part. No fsync: a power loss may leave a
 * damaged entry, which the checks reject. */
static void disk_put(const char *key, const char *ext, const void *data, size_t len) {
  char dir[PATH_MAX], why[512], name[80], tmp[160];
  uint64_t limit = disk_limit(NULL), size = HDR_SIZE + (uint64_t)len;
  if (limit == 0 || dir_path(dir, sizeof dir) != 0)
    return;
  entry_name(name, sizeof name, key, ext);
  if (size > limit) {
    debug_log("not storing %s/%s: %llu bytes, more than the limit of %llu", dir, name,
              (unsigned long long)size, (unsigned long long)limit);
    return;
  }
  int dfd = dir_open(dir, true, why, sizeof why);
  if (dfd < 0) {
    debug_log("not using %s: %s; the disk cache is off", dir, why);
    return;
  }
  static _Atomic unsigned seq;
  snprintf(tmp, sizeof tmp, ".tmp.%ld.%u.%s", (long)getpid(), seq++, name);
  unsigned char h[HDR_SIZE];
  header_make(h, key, data, len);
  int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && write_full(fd, h, sizeof h) && write_full(fd, data, len);
  int err = errno;
  if (fd >= 0) {
    struct timespec t[2];
    now_realtime(t); /* finer than the file system's clock: orders entries for eviction */
    futimens(fd, t);
    if (close(fd) != 0 && ok) {
      ok = false;
      err = errno;
    }
  }
  if (ok && renameat(dfd, tmp, dfd, name) != 0) {
    err = errno;
    /* an (empty) directory in the entry's place: rename() cannot replace it */
    ok = (err == EISDIR || err == ENOTEMPTY || err == EEXIST) && unlinkat(dfd, name, AT_REMOVEDIR) == 0 &&
         renameat(dfd, tmp, dfd, name) == 0;
    if (!ok)
      err = errno;
  }
  if (!ok) {
    if (fd >= 0)
      unlinkat(dfd, tmp, 0);
    debug_log("cannot store %s/%s: %s", dir, name, strerror(err));
  } else {
    debug_log("stored %s/%s (%zu bytes of code)", dir, name, len);
    account(dfd, dir, size, limit);
  }
  close(dfd);
}

/* ------------------------------------------------------------ in memory */

/* Key -> artifact, least recently used evicted first once the entries' bytes
 * pass $OXIDE_MEM_CACHE_MAX_BYTES. Buckets by the key's first byte. */
typedef struct mem_entry {
  char key[65];
  char *data;
  size_t len;
  struct mem_entry *prev, *next; /* the LRU list, most recent first */
  struct mem_entry *chain;       /* the bucket */
} mem_entry;

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static mem_entry *mem_buckets[256], *mem_head, *mem_tail;
static uint64_t mem_bytes;

static uint64_t mem_cost(const mem_entry *e) { return e->len + sizeof *e; }

static unsigned hexval(char c) { return c >= 'a' ? (unsigned)(c - 'a' + 10) : (unsigned)(c - '0'); }

/* Where `key` is in its bucket, or the bucket's end (the caller holds mem_lock). */
static mem_entry **mem_slot(const char *key) {
  mem_entry **p = &mem_buckets[(hexval(key[0]) << 4 | hexval(key[1])) & 255];
  while (*p && strcmp((*p)->key, key) != 0)
    p = &(*p)->chain;
  return p;
}

static void lru_unlink(mem_entry *e) {
  if (e->prev)
    e->prev->next = e->next;
  else
    mem_head = e->next;
  if (e->next)
    e->next->prev = e->prev;
  else
    mem_tail = e->prev;
  e->prev = e->next = NULL;
}

static void lru_push_front(mem_entry *e) {
  e->prev = NULL;
  e->next = mem_head;
  if (mem_head)
    mem_head->prev = e;
  mem_head = e;
  if (!mem_tail)
    mem_tail = e;
}

/* Removes an entry (the caller holds mem_lock). */
static void mem_remove(mem_entry **slot) {
  mem_entry *e = *slot;
  *slot = e->chain;
  lru_unlink(e);
  mem_bytes -= mem_cost(e);
  free(e->data);
  free(e);
}

/* Evicts the least recently used entries down to `limit` (the caller holds
 * mem_lock); a lowered limit takes effect at the next get or put. */
static void mem_trim(uint64_t limit) {
  while (mem_bytes > limit && mem_tail) {
    mem_entry *old = mem_tail;
    debug_log("evicted %.64s from memory (%zu bytes)", old->key, old->len);
    mem_remove(mem_slot(old->key));
  }
}

static char *mem_get(const char *key, size_t *len) {
  char *r = NULL;
  uint64_t limit = mem_limit(NULL);
  pthread_mutex_lock(&mem_lock);
  mem_trim(limit);
  mem_entry *e = *mem_slot(key);
  if (e) {
    lru_unlink(e);
    lru_push_front(e);
    r = malloc(e->len ? e->len : 1);
    if (r) {
      memcpy(r, e->data, e->len);
      *len = e->len;
    }
  }
  pthread_mutex_unlock(&mem_lock);
  return r;
}

static void mem_put(const char *key, const char *data, size_t len) {
  uint64_t limit = mem_limit(NULL);
  mem_entry *e = NULL;
  char *copy = NULL;
  if (len + sizeof *e <= limit) {
    e = calloc(1, sizeof *e);
    copy = malloc(len ? len : 1);
    if (!e || !copy) {
      free(e);
      free(copy);
      e = NULL;
    }
  }
  pthread_mutex_lock(&mem_lock);
  mem_entry **slot = mem_slot(key);
  if (*slot)
    mem_remove(slot);
  if (e) {
    memcpy(copy, data, len);
    snprintf(e->key, sizeof e->key, "%s", key);
    e->data = copy;
    e->len = len;
    *mem_slot(key) = e; /* the end of the key's bucket, where it is now absent */
    lru_push_front(e);
    mem_bytes += mem_cost(e);
  }
  mem_trim(limit);
  pthread_mutex_unlock(&mem_lock);
}

static void mem_drop(const char *key) {
  pthread_mutex_lock(&mem_lock);
  mem_entry **slot = mem_slot(key);
  if (*slot)
    mem_remove(slot);
  pthread_mutex_unlock(&mem_lock);
}

/* ------------------------------------------------------------ interface */

char *oxa_cache_get(const char *key, const char *ext, size_t *len) {
  assert(strlen(key) == 64 && is_hex(key, 64));
  char *r = mem_get(key, len);
  if (r) {
    debug_log("hit in memory %.64s.%s (%zu bytes)", key, ext, *len);
    disk_touch(key, ext);
    return r;
  }
  r = disk_get(key, ext, len);
  if (r)
    mem_put(key, r, *len);
  return r;
}

void oxa_cache_put(const char *key, const char *ext, const void *data, size_t len) {
  assert(strlen(key) == 64 && is_hex(key, 64));
  mem_put(key, data, len);
  disk_put(key, ext, data, len);
}

void oxa_cache_drop(const char *key, const char *ext, const char *why) {
  char dir[PATH_MAX], err[512], name[80];
  mem_drop(key);
  entry_name(name, sizeof name, key, ext);
  int dfd = dir_path(dir, sizeof dir) == 0 ? dir_open(dir, false, err, sizeof err) : -1;
  if (dfd >= 0) {
    unlinkat(dfd, name, 0);
    close(dfd);
  }
  debug_log("dropped %s/%s, which does not load (%s); compiling again", dir, name, why);
}

static void add_size(oxb_str *o, uint64_t v) {
  if (v && v % (1u << 30) == 0)
    oxb_str_addf(o, "%llu GiB", (unsigned long long)(v >> 30));
  else if (v && v % (1u << 20) == 0)
    oxb_str_addf(o, "%llu MiB", (unsigned long long)(v >> 20));
  else
    oxb_str_addf(o, "%llu bytes", (unsigned long long)v);
}

void oxa_cache_report(oxb_str *o) {
  char dir[PATH_MAX], why[512] = "";
  int p = dir_path(dir, sizeof dir);
  if (p < 0) {
    oxb_str_addf(o, "off (OXIDE_CACHE=0)");
    return;
  }
  bool bad_disk, bad_mem;
  uint64_t dl = disk_limit(&bad_disk), ml = mem_limit(&bad_mem);
  int dfd = p == 0 ? dir_open(dir, false, why, sizeof why) : -1;
  if (dfd >= 0)
    close(dfd);
  oxb_str_addf(o, "%s (", dir);
  if (p != 0)
    oxb_str_addf(o, "not used: the path is too long; ");
  else if (why[0])
    oxb_str_addf(o, "not used: %s; ", why);
  else if (dl == 0)
    oxb_str_addf(o, "not used: OXIDE_CACHE_MAX_BYTES=0; ");
  else {
    if (dfd < 0)
      oxb_str_addf(o, "not created yet; ");
    oxb_str_addf(o, "at most ");
    add_size(o, dl);
    oxb_str_addf(o, " on disk, ");
  }
  if (ml) {
    add_size(o, ml);
    oxb_str_addf(o, " in memory)");
  } else {
    oxb_str_addf(o, "nothing in memory)");
  }
  if (bad_disk)
    oxb_str_addf(o, "; OXIDE_CACHE_MAX_BYTES='%s' is not a size", getenv("OXIDE_CACHE_MAX_BYTES"));
  if (bad_mem)
    oxb_str_addf(o, "; OXIDE_MEM_CACHE_MAX_BYTES='%s' is not a size", getenv("OXIDE_MEM_CACHE_MAX_BYTES"));
}
