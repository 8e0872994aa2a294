// An LD_PRELOAD library for the catalogue of bad inputs (tests/errors/catalogue.py): file operations on
// paths under $HP_FAIL_PREFIX fail as a full disk (HP_FAIL_OP=write: write calls fail with ENOSPC) or a
// read-only folder (HP_FAIL_OP=open: opening for writing and creating folders fail with EROFS). Works as
// root too, where chmod would not stop a write. With HP_FAIL_AFTER=N, the first N bytes written under the
// prefix go through and the disk fills after them (a write cut short, then ENOSPC): a disk that fills in the
// middle of a file. Everything else passes through to libc.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fnmatch.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

// A prefix with a '*' is a glob (fnmatch) that must match the whole path: ".../.model.tmp-*/model.h5*" names a
// file in a staging folder whose writer's pid is not known in advance.
static int under_prefix(const char* path) {
  const char* prefix = getenv("HP_FAIL_PREFIX");
  if (!prefix || !*prefix || !path) return 0;
  if (strchr(prefix, '*')) return fnmatch(prefix, path, 0) == 0;
  return strncmp(path, prefix, strlen(prefix)) == 0;
}

static int failing(const char* op) {
  const char* want = getenv("HP_FAIL_OP");
  return want && strcmp(want, op) == 0;
}

// Whether fd is a file under the prefix (its path from /proc/self/fd).
static int fd_under_prefix(int fd) {
  char link[64], path[4096];
  snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  const ssize_t n = readlink(link, path, sizeof path - 1);
  if (n <= 0) return 0;
  path[n] = 0;
  return under_prefix(path);
}

#define NEXT(name) ((__typeof__(&name))dlsym(RTLD_NEXT, #name))

// How many of n bytes a write to fd may still put on the disk: n when it is not failed, 0 on a full disk.
static size_t room(int fd, size_t n) {
  if (!failing("write") || !fd_under_prefix(fd)) return n;
  static size_t written = 0;
  const char* after = getenv("HP_FAIL_AFTER");
  const size_t limit = after ? strtoull(after, NULL, 10) : 0;
  const size_t left = written < limit ? limit - written : 0;
  const size_t take = n < left ? n : left;
  written += take;
  return take;
}

ssize_t write(int fd, const void* buf, size_t n) {
  const size_t take = room(fd, n);
  if (take == 0 && n > 0) {
    errno = ENOSPC;
    return -1;
  }
  return NEXT(write)(fd, buf, take);
}
ssize_t pwrite(int fd, const void* buf, size_t n, off_t off) {
  const size_t take = room(fd, n);
  if (take == 0 && n > 0) {
    errno = ENOSPC;
    return -1;
  }
  return NEXT(pwrite)(fd, buf, take, off);
}
ssize_t pwrite64(int fd, const void* buf, size_t n, off64_t off) {
  const size_t take = room(fd, n);
  if (take == 0 && n > 0) {
    errno = ENOSPC;
    return -1;
  }
  return NEXT(pwrite64)(fd, buf, take, off);
}
ssize_t writev(int fd, const struct iovec* iov, int cnt) {
  size_t n = 0;
  for (int i = 0; i < cnt; ++i) n += iov[i].iov_len;
  if (room(fd, n) < n) {  // a writev is all or nothing here: none of the callers depends on a short one
    errno = ENOSPC;
    return -1;
  }
  return NEXT(writev)(fd, iov, cnt);
}

static int writes(int flags) { return (flags & (O_WRONLY | O_RDWR | O_CREAT | O_TRUNC)) != 0; }

// Whether an open of `path` with `flags` is refused (errno set): writing under the prefix in "open" mode.
static int refused(const char* path, int flags) {
  if (!failing("open") || !writes(flags) || !under_prefix(path)) return 0;
  errno = EROFS;
  return 1;
}

// The mode argument, present only when the flags create a file.
#define MODE_OF(flags, last)             \
  mode_t mode = 0;                       \
  if ((flags) & (O_CREAT | O_TMPFILE)) { \
    va_list ap;                          \
    va_start(ap, last);                  \
    mode = va_arg(ap, mode_t);           \
    va_end(ap);                          \
  }

int open(const char* path, int flags, ...) {
  MODE_OF(flags, flags)
  return refused(path, flags) ? -1 : NEXT(open)(path, flags, mode);
}
int open64(const char* path, int flags, ...) {
  MODE_OF(flags, flags)
  return refused(path, flags) ? -1 : NEXT(open64)(path, flags, mode);
}
int openat(int dir, const char* path, int flags, ...) {
  MODE_OF(flags, flags)
  return refused(path, flags) ? -1 : NEXT(openat)(dir, path, flags, mode);
}
int openat64(int dir, const char* path, int flags, ...) {
  MODE_OF(flags, flags)
  return refused(path, flags) ? -1 : NEXT(openat64)(dir, path, flags, mode);
}

FILE* fopen(const char* path, const char* mode) {
  if (failing("open") && strpbrk(mode, "wa+") && under_prefix(path)) {
    errno = EROFS;
    return NULL;
  }
  return NEXT(fopen)(path, mode);
}
FILE* fopen64(const char* path, const char* mode) {
  if (failing("open") && strpbrk(mode, "wa+") && under_prefix(path)) {
    errno = EROFS;
    return NULL;
  }
  return NEXT(fopen64)(path, mode);
}
int mkdir(const char* path, mode_t mode) {
  if (failing("open") && under_prefix(path)) {
    errno = EROFS;
    return -1;
  }
  return NEXT(mkdir)(path, mode);
}
int rename(const char* from, const char* to) {
  if (failing("open") && under_prefix(to)) {
    errno = EROFS;
    return -1;
  }
  return NEXT(rename)(from, to);
}
