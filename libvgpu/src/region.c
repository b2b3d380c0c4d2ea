/* region.c: see region.h. */
#include "region.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "budget.h"
#include "log.h"

void vgpu_region_format(struct vgpu_region *r)
{
    r->version = VGPU_REGION_VERSION;
    r->flags = 0;
    r->total_bytes = sizeof(struct vgpu_region);
    r->max_devices = VGPU_MAX_DEVICES;
    r->max_procs = VGPU_MAX_PROCS;
    /* magic last: a reader that sees it sees the rest */
    __atomic_store_n(&r->magic, VGPU_REGION_MAGIC, __ATOMIC_RELEASE);
}

int vgpu_region_validate(const struct vgpu_region *r, uint64_t file_bytes, char *why,
                         size_t why_len)
{
    uint64_t magic = __atomic_load_n(&r->magic, __ATOMIC_ACQUIRE);
    if (file_bytes != sizeof(struct vgpu_region)) {
        snprintf(why, why_len, "size is %llu bytes, a version %u region has %zu",
                 (unsigned long long)file_bytes, VGPU_REGION_VERSION, sizeof(struct vgpu_region));
        return -1;
    }
    if (magic != VGPU_REGION_MAGIC) {
        snprintf(why, why_len, "magic is 0x%016llx, expected 0x%016llx (not a gpuwarden region)",
                 (unsigned long long)magic, (unsigned long long)VGPU_REGION_MAGIC);
        return -1;
    }
    if (r->version != VGPU_REGION_VERSION || r->total_bytes != sizeof(struct vgpu_region) ||
        r->max_devices != VGPU_MAX_DEVICES || r->max_procs != VGPU_MAX_PROCS) {
        snprintf(why, why_len, "version %u with %u devices and %u process slots, this libvgpu "
                 "reads version %u with %u and %u", r->version, r->max_devices, r->max_procs,
                 VGPU_REGION_VERSION, VGPU_MAX_DEVICES, VGPU_MAX_PROCS);
        return -1;
    }
    return 0;
}

int vgpu_region_open_private(struct vgpu_region_handle *h)
{
    void *p = mmap(NULL, sizeof(struct vgpu_region), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return -1;
    h->r = p;
    h->fd = -1;
    vgpu_region_format(h->r);
    return 0;
}

/* Take the file lock, waiting at most VGPU_REGION_LOCK_WAIT_MS: a process of the container that
 * stops (SIGSTOP, a debugger) while it holds the lock must not stall every other one forever. */
static int vgpu_region_lock(int fd)
{
    struct timespec pause = {0, 1000000}; /* 1 ms, growing to 16 ms */
    unsigned waited_ms = 0;
    while (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        if ((errno != EWOULDBLOCK && errno != EINTR) || waited_ms >= VGPU_REGION_LOCK_WAIT_MS)
            return -1;
        nanosleep(&pause, NULL);
        waited_ms += (unsigned)(pause.tv_nsec / 1000000);
        if (pause.tv_nsec < 16000000)
            pause.tv_nsec *= 2;
    }
    return 0;
}

static int vgpu_region_map(int fd, struct vgpu_region **out)
{
    void *p = mmap(NULL, sizeof(struct vgpu_region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED)
        return -1;
    *out = p;
    return 0;
}

int vgpu_region_open(const char *path, struct vgpu_region_handle *h, char *why, size_t why_len)
{
    struct vgpu_region *r = NULL;
    struct stat st;
    int locked = 0;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(why, why_len, "cannot open it: %s", strerror(errno));
        return -1;
    }
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_len, "cannot stat it: %s", strerror(errno));
        goto fail;
    }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, why_len, "it is not a regular file");
        goto fail;
    }
    /* The usual case, a formatted region, needs no lock: the magic is written last. */
    if ((uint64_t)st.st_size == sizeof(struct vgpu_region) && vgpu_region_map(fd, &r) == 0 &&
        __atomic_load_n(&r->magic, __ATOMIC_ACQUIRE) == VGPU_REGION_MAGIC)
        goto validate;
    /* New, or left unformatted: format it under the lock.  Every creator (this one, the agent's)
     * holds the lock from sizing to the magic, so a region with a zero magic whose lock is free
     * was left by a creator that died half-way: nobody uses it, and it is formatted again. */
    if (vgpu_region_lock(fd) != 0) {
        snprintf(why, why_len, "it is being created by another process that has held its lock "
                 "for more than %u ms (stopped?)", VGPU_REGION_LOCK_WAIT_MS);
        goto fail;
    }
    locked = 1;
    if (fstat(fd, &st) != 0) {
        snprintf(why, why_len, "cannot stat it: %s", strerror(errno));
        goto fail;
    }
    if (st.st_size == 0 && ftruncate(fd, (off_t)sizeof(struct vgpu_region)) != 0) {
        snprintf(why, why_len, "cannot size it: %s", strerror(errno));
        goto fail;
    }
    if (st.st_size != 0 && (uint64_t)st.st_size != sizeof(struct vgpu_region)) {
        snprintf(why, why_len, "size is %lld bytes, a version %u region has %zu",
                 (long long)st.st_size, VGPU_REGION_VERSION, sizeof(struct vgpu_region));
        goto fail;
    }
    if (r == NULL && vgpu_region_map(fd, &r) != 0) {
        snprintf(why, why_len, "cannot map it: %s", strerror(errno));
        goto fail;
    }
    if (__atomic_load_n(&r->magic, __ATOMIC_ACQUIRE) == 0) {
        if (st.st_size != 0)
            vgpu_log(VGPU_LOG_WARN, "%s: the region was left unformatted (its creator died "
                     "half-way); formatting it again", path);
        memset(r, 0, sizeof *r);
        vgpu_region_format(r);
    }
validate:
    if (vgpu_region_validate(r, sizeof(struct vgpu_region), why, why_len) != 0)
        goto fail;
    if (locked)
        flock(fd, LOCK_UN);
    h->r = r;
    h->fd = fd;
    return 0;
fail:
    if (r != NULL)
        munmap(r, sizeof(struct vgpu_region));
    close(fd); /* drops the lock too */
    return -1;
}

void vgpu_uuid_text(const uint8_t u[16], char out[VGPU_UUID_TEXT])
{
    snprintf(out, VGPU_UUID_TEXT, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
}

int vgpu_region_find_device(const struct vgpu_region *r, const uint8_t uuid[16])
{
    for (unsigned i = 0; i < VGPU_MAX_DEVICES; i++) {
        const struct vgpu_region_device *d = &r->devices[i];
        if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) == VGPU_DEVICE_READY &&
            memcmp(d->uuid, uuid, 16) == 0)
            return (int)i;
    }
    return -1;
}

int vgpu_region_add_device(struct vgpu_region_handle *h, const uint8_t uuid[16], uint64_t limit)
{
    int idx = vgpu_region_find_device(h->r, uuid);
    if (idx >= 0)
        return idx; /* registered already (the usual case): no lock */
    if (h->fd >= 0 && vgpu_region_lock(h->fd) != 0)
        return VGPU_REGION_LOCK_TIMEOUT;
    idx = vgpu_region_find_device(h->r, uuid);
    for (unsigned i = 0; idx < 0 && i < VGPU_MAX_DEVICES; i++) {
        struct vgpu_region_device *d = &h->r->devices[i];
        /* under the lock an entry is READY or unused: any other state is garbage, taken back */
        if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) == VGPU_DEVICE_READY)
            continue;
        memcpy(d->uuid, uuid, 16);
        __atomic_store_n(&d->limit_bytes, limit, __ATOMIC_RELAXED);
        __atomic_store_n(&d->used_bytes, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&d->state, VGPU_DEVICE_READY, __ATOMIC_RELEASE);
        idx = (int)i;
    }
    if (h->fd >= 0)
        flock(h->fd, LOCK_UN);
    return idx < 0 ? VGPU_REGION_TABLE_FULL : idx;
}

ssize_t vgpu_read_small(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n;

    if (fd < 0)
        return -1;
    n = read(fd, buf, size - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = '\0';
    return n;
}

/* State (field 3) and start time (field 22) of /proc/<pid>/stat: 0, or -1 when unreadable. */
static int vgpu_proc_stat(uint32_t pid, char *state, uint64_t *start_time)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    if (vgpu_read_small(path, buf, sizeof buf) <= 0)
        return -1;
    char *p = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
    if (p == NULL || p[1] != ' ' || p[2] == '\0')
        return -1;
    *state = p[2];
    /* after ") " come fields 3..; start_time is field 22 */
    unsigned long long v = 0;
    int field = 2;
    for (p++; *p != '\0' && field < 22; p++)
        if (*p == ' ')
            field++;
    if (field != 22 || sscanf(p, "%llu", &v) != 1)
        return -1;
    *start_time = (uint64_t)v;
    return 0;
}

uint64_t vgpu_proc_start_time(uint32_t pid)
{
    char state;
    uint64_t start_time;
    return vgpu_proc_stat(pid, &state, &start_time) == 0 ? start_time : 0;
}

int vgpu_proc_alive(uint32_t pid, uint64_t start_time)
{
    char state;
    uint64_t now;
    if (pid == 0)
        return 0;
    if (kill((pid_t)pid, 0) != 0 && errno == ESRCH)
        return 0;
    if (vgpu_proc_stat(pid, &state, &now) != 0) /* no /proc view (other pid namespace) */
        return 1;
    /* a zombie (killed, not yet reaped) has given its GPU memory back: kill() still finds it */
    if (state == 'Z' || state == 'X')
        return 0;
    return now == start_time;
}

struct vgpu_region_proc *vgpu_region_claim_slot(struct vgpu_region *r, uint32_t pid,
                                                uint64_t start_time)
{
    for (unsigned i = 0; i < VGPU_MAX_PROCS; i++) {
        struct vgpu_region_proc *s = &r->procs[i];
        uint32_t st = VGPU_PROC_FREE;
        if (__atomic_load_n(&s->state, __ATOMIC_RELAXED) != VGPU_PROC_FREE ||
            !__atomic_compare_exchange_n(&s->state, &st, VGPU_PROC_CLAIMING, 0,
                                         __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
            continue;
        s->pid = pid;
        s->start_time = start_time;
        for (unsigned d = 0; d < VGPU_MAX_DEVICES; d++) {
            __atomic_store_n(&s->used_bytes[d], 0, __ATOMIC_RELAXED);
            __atomic_store_n(&s->context_bytes[d], 0, __ATOMIC_RELAXED);
        }
        memset(&s->compute, 0, sizeof s->compute);
        __atomic_store_n(&s->state, VGPU_PROC_ACTIVE, __ATOMIC_RELEASE);
        return s;
    }
    return NULL;
}

static void vgpu_region_drain_slot(struct vgpu_region *r, struct vgpu_region_proc *s)
{
    for (unsigned d = 0; d < VGPU_MAX_DEVICES; d++) {
        uint64_t u = __atomic_exchange_n(&s->used_bytes[d], 0, __ATOMIC_ACQ_REL);
        if (u != 0)
            vgpu_sat_sub(&r->devices[d].used_bytes, u);
        __atomic_store_n(&s->context_bytes[d], 0, __ATOMIC_RELAXED);
    }
    s->pid = 0;
    s->start_time = 0;
    __atomic_store_n(&s->state, VGPU_PROC_FREE, __ATOMIC_RELEASE);
}

void vgpu_region_release_slot(struct vgpu_region *r, struct vgpu_region_proc *slot)
{
    uint32_t st = VGPU_PROC_ACTIVE;
    if (__atomic_compare_exchange_n(&slot->state, &st, VGPU_PROC_RECLAIMING, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED))
        vgpu_region_drain_slot(r, slot);
}

uint64_t vgpu_region_release_previous(struct vgpu_region *r, uint32_t pid, uint64_t start_time)
{
    /* No other process frees such a slot meanwhile: its (pid, start time) is alive to every
     * reclaimer, and this process claims under its slot lock. */
    uint64_t bytes = 0;
    if (start_time == 0)
        return 0;
    for (unsigned i = 0; i < VGPU_MAX_PROCS; i++) {
        struct vgpu_region_proc *s = &r->procs[i];
        if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) != VGPU_PROC_ACTIVE ||
            __atomic_load_n(&s->pid, __ATOMIC_RELAXED) != pid ||
            __atomic_load_n(&s->start_time, __ATOMIC_RELAXED) != start_time)
            continue;
        for (unsigned d = 0; d < VGPU_MAX_DEVICES; d++)
            bytes += __atomic_load_n(&s->used_bytes[d], __ATOMIC_RELAXED);
        vgpu_region_release_slot(r, s);
    }
    return bytes;
}

int vgpu_region_reclaim(struct vgpu_region_handle *h, vgpu_alive_fn alive)
{
    struct vgpu_region *r = h->r;
    int reclaimed = 0, active = 0;
    for (unsigned i = 0; i < VGPU_MAX_PROCS; i++) {
        struct vgpu_region_proc *s = &r->procs[i];
        uint32_t st = __atomic_load_n(&s->state, __ATOMIC_ACQUIRE);
        if (st == VGPU_PROC_FREE)
            continue;
        if (st != VGPU_PROC_ACTIVE || alive(s->pid, s->start_time)) {
            active++;
            continue;
        }
        if (!__atomic_compare_exchange_n(&s->state, &st, VGPU_PROC_RECLAIMING, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            active++;
            continue;
        }
        vgpu_region_drain_slot(r, s);
        reclaimed++;
    }
    /* Slots are taken back one by one with a compare-and-swap (no lock).  Only the reset below
     * excludes other reclaimers, and only when the lock is free now: never wait for it. */
    if (active == 0 && (h->fd < 0 || flock(h->fd, LOCK_EX | LOCK_NB) == 0)) {
        /* nobody counts anything: whatever a device still shows leaked (an owner killed between
         * its two counter updates).  The CAS fails if a new process reserved meanwhile. */
        for (unsigned d = 0; d < VGPU_MAX_DEVICES; d++) {
            uint64_t u = __atomic_load_n(&r->devices[d].used_bytes, __ATOMIC_ACQUIRE);
            if (u != 0)
                __atomic_compare_exchange_n(&r->devices[d].used_bytes, &u, 0, 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
        }
        if (h->fd >= 0)
            flock(h->fd, LOCK_UN);
    }
    return reclaimed;
}
