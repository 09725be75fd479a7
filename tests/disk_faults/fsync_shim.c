/* LD_PRELOAD shim for the disk-fault tests: fsync(2) and fdatasync(2) fail with EIO while the
 * file named by $FSYNC_SHIM_FAIL_IF exists, and behave normally otherwise, so one process can
 * meet a failing disk and then a recovered one. While the file named by $FSYNC_SHIM_STALL_IF
 * exists they do not return (a slow disk the test ends by removing the file). Built by tests/persistence/disk_faults.rs with `cc`. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

static int failing(void) {
    const char *flag = getenv("FSYNC_SHIM_FAIL_IF");
    const char *stall = getenv("FSYNC_SHIM_STALL_IF");
    while (stall != NULL && access(stall, F_OK) == 0) usleep(1000);
    return flag != NULL && access(flag, F_OK) == 0;
}

int fsync(int fd) {
    static int (*real)(int);
    if (failing()) {
        errno = EIO;
        return -1;
    }
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    return real(fd);
}

int fdatasync(int fd) {
    static int (*real)(int);
    if (failing()) {
        errno = EIO;
        return -1;
    }
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    return real(fd);
}
