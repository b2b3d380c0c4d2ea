/* simstate.c - create, validate and map the shared state; process entries; the timeline. */
#include "simstate.h"

#include "../../include/vgpu_size.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

static struct gwsim_state *g_state;
static int g_state_failed;
static pthread_once_t g_state_once = PTHREAD_ONCE_INIT;

static struct gwsim_proc *g_self;
static pthread_mutex_t g_self_lock = PTHREAD_MUTEX_INITIALIZER;

void gwsim_error(const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    fprintf(stderr, "gpuwarden-sim: %s\n", buf);
}

uint64_t gwsim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t gwsim_realtime_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

void gwsim_sleep_until(uint64_t mono_ns)
{
    struct timespec ts = {.tv_sec = (time_t)(mono_ns / 1000000000ULL),
                          .tv_nsec = (long)(mono_ns % 1000000000ULL)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
}

uint64_t gwsim_proc_starttime(int32_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
    if (p == NULL || p[1] != ' ')
        return 0;
    p += 2;
    if (*p == 'Z' || *p == 'X') /* exited, not yet reaped: its GPU memory is gone */
        return 0;
    for (int field = 3; field < 22; field++) { /* p points at field 3 (state) */
        p = strchr(p, ' ');
        if (p == NULL)
            return 0;
        p++;
    }
    return strtoull(p, NULL, 10);
}

void gwsim_uuid_text(const uint8_t u[16], char out[GWSIM_UUID_TEXT])
{
    snprintf(out, GWSIM_UUID_TEXT, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
}

static void uuid_for(unsigned index, uint64_t file_id, uint8_t out[16])
{
    /* FNV-1a over a fixed tag, the state file's identity and the index, stretched to 16 bytes:
     * fixed for the life of the file, and two state files are two different sets of GPUs (the
     * compute limiter's node region tells GPUs apart by UUID). */
    uint64_t h = 1469598103934665603ULL;
    const char *tag = "gpuwarden-sim-gpu";
    for (const char *c = tag; *c; c++)
        h = (h ^ (uint8_t)*c) * 1099511628211ULL;
    for (unsigned i = 0; i < 8; i++)
        h = (h ^ ((file_id >> (8 * i)) & 0xffu)) * 1099511628211ULL;
    for (unsigned i = 0; i < 16; i++) {
        h = (h ^ (index * 16u + i)) * 1099511628211ULL;
        out[i] = (uint8_t)(h >> 56);
    }
    out[6] = (uint8_t)((out[6] & 0x0f) | 0x40);
}

static int env_size(const char *name, uint64_t fallback, uint64_t *out)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') {
        *out = fallback;
        return 0;
    }
    if (vgpu_parse_size(v, 0, out) != 0) { /* bytes without a unit, as `sim env` writes it */
        gwsim_error("%s=\"%s\" is not a size: use %s (e.g. 80GiB)", name, v, VGPU_SIZE_SYNTAX);
        return -1;
    }
    return 0;
}

static int fill_new_state(struct gwsim_state *st, uint64_t file_id)
{
    uint64_t memory, overhead;
    const char *devs = getenv("GPUWARDEN_SIM_DEVICES");
    long ndev = 1;
    if (devs != NULL && *devs != '\0') {
        char *end = NULL;
        ndev = strtol(devs, &end, 10);
        if (*end != '\0' || ndev < 1 || ndev > (long)GWSIM_MAX_DEVICES) {
            gwsim_error("GPUWARDEN_SIM_DEVICES=\"%s\" is not valid: use an integer from 1 to %u",
                        devs, GWSIM_MAX_DEVICES);
            return -1;
        }
    }
    if (env_size("GPUWARDEN_SIM_MEMORY", GWSIM_DEFAULT_MEMORY, &memory) != 0 ||
        env_size("GPUWARDEN_SIM_CTX_OVERHEAD", GWSIM_DEFAULT_CTX_OVERHEAD, &overhead) != 0)
        return -1;
    if (memory == 0) {
        gwsim_error("GPUWARDEN_SIM_MEMORY must be more than 0 bytes");
        return -1;
    }
    const char *slice = getenv("GPUWARDEN_SIM_TIMESLICE");
    long slice_us = GWSIM_DEFAULT_TIMESLICE_US;
    if (slice != NULL && *slice != '\0') {
        char *end = NULL;
        slice_us = strtol(slice, &end, 10);
        if (*end != '\0' || slice[0] < '0' || slice[0] > '9' ||
            slice_us > GWSIM_MAX_TIMESLICE_US) {
            gwsim_error("GPUWARDEN_SIM_TIMESLICE=\"%s\" is not valid: use the time slice in "
                        "microseconds, an integer from 0 (kernels run in launch order) to %ld",
                        slice, GWSIM_MAX_TIMESLICE_US);
            return -1;
        }
    }
    st->timeslice_ns = (uint64_t)slice_us * 1000u;
    const char *sw = getenv("GPUWARDEN_SIM_SWITCH");
    long switch_us = 0;
    if (sw != NULL && *sw != '\0') {
        char *end = NULL;
        switch_us = strtol(sw, &end, 10);
        if (*end != '\0' || sw[0] < '0' || sw[0] > '9' || switch_us > GWSIM_MAX_SWITCH_US ||
            (switch_us != 0 && slice_us == 0)) {
            gwsim_error("GPUWARDEN_SIM_SWITCH=\"%s\" is not valid: use the microseconds a "
                        "switch between processes costs the device, an integer from 0 to %ld, "
                        "on a time-sliced device (GPUWARDEN_SIM_TIMESLICE above 0)",
                        sw, GWSIM_MAX_SWITCH_US);
            return -1;
        }
    }
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    for (unsigned i = 0; i < GWSIM_MAX_DEVICES; i++) {
        pthread_mutex_init(&st->sched[i].lock, &attr);
        st->sched[i].cur = -1;
        st->sched[i].last = -1;
        st->sched[i].switch_ns = (uint64_t)switch_us * 1000u;
    }
    pthread_mutexattr_destroy(&attr);
    st->num_devices = (uint32_t)ndev;
    st->ctx_overhead = overhead;
    st->file_size = sizeof *st;
    for (unsigned i = 0; i < (unsigned)ndev; i++) {
        struct gwsim_device *d = &st->dev[i];
        d->total_bytes = memory;
        d->sm_count = GWSIM_SM_COUNT;
        d->index = i;
        snprintf(d->name, sizeof d->name, "NVIDIA H200 (gpuwarden simulated)");
        uuid_for(i, file_id, d->uuid);
    }
    __atomic_store_n(&st->version, GWSIM_VERSION, __ATOMIC_RELEASE);
    __atomic_store_n(&st->magic, GWSIM_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

static void state_open(void)
{
    const char *path = getenv("GPUWARDEN_SIM_STATE");
    int fd = -1;
    void *map = MAP_FAILED;
    if (path == NULL || *path == '\0') {
        gwsim_error("GPUWARDEN_SIM_STATE is not set: it must name the simulated GPU's state file "
                    "(`gpuwarden sim env` prints the variables to export)");
        goto fail;
    }
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        gwsim_error("cannot open GPUWARDEN_SIM_STATE=%s: %s", path, strerror(errno));
        goto fail;
    }
    if (flock(fd, LOCK_EX) != 0) {
        gwsim_error("cannot lock %s: %s", path, strerror(errno));
        goto fail;
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        gwsim_error("cannot stat %s: %s", path, strerror(errno));
        goto fail;
    }
    int fresh = sb.st_size == 0;
    if (fresh && ftruncate(fd, (off_t)sizeof(struct gwsim_state)) != 0) {
        gwsim_error("cannot size %s: %s", path, strerror(errno));
        goto fail;
    }
    if (!fresh && (uint64_t)sb.st_size != sizeof(struct gwsim_state)) {
        gwsim_error("%s is not a gpuwarden simulated-GPU state file of this version (size %lld, "
                    "expected %zu): remove it or point GPUWARDEN_SIM_STATE elsewhere",
                    path, (long long)sb.st_size, sizeof(struct gwsim_state));
        goto fail;
    }
    map = mmap(NULL, sizeof(struct gwsim_state), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED) {
        gwsim_error("cannot map %s: %s", path, strerror(errno));
        goto fail;
    }
    struct gwsim_state *st = map;
    if (fresh && fill_new_state(st, (uint64_t)sb.st_dev << 32 ^ (uint64_t)sb.st_ino) != 0) {
        if (ftruncate(fd, 0) != 0) { /* leave no half-made file behind */
        }
        goto fail;
    }
    if (st->magic != GWSIM_MAGIC || st->version != GWSIM_VERSION ||
        st->file_size != sizeof *st || st->num_devices == 0 ||
        st->num_devices > GWSIM_MAX_DEVICES) {
        gwsim_error("%s is not a gpuwarden simulated-GPU state file (bad magic/version %u): "
                    "remove it or point GPUWARDEN_SIM_STATE elsewhere", path, st->version);
        goto fail;
    }
    flock(fd, LOCK_UN);
    close(fd);
    g_state = st;
    return;
fail:
    if (map != MAP_FAILED)
        munmap(map, sizeof(struct gwsim_state));
    if (fd >= 0)
        close(fd);
    g_state_failed = 1;
}

static void after_fork_child(void)
{
    g_self = NULL; /* the child is a new process: it claims its own entry when it needs one */
}

static void state_once(void)
{
    pthread_atfork(NULL, NULL, after_fork_child);
    state_open();
}

struct gwsim_state *gwsim_state(void)
{
    pthread_once(&g_state_once, state_once);
    return g_state_failed ? NULL : g_state;
}

static void drop_queue(struct gwsim_state *st, unsigned dev, struct gwsim_proc *p);

static void release_entry(struct gwsim_state *st, struct gwsim_proc *p)
{
    for (unsigned d = 0; d < st->num_devices; d++) {
        drop_queue(st, d, p);
        uint64_t used = __atomic_exchange_n(&p->used[d], 0, __ATOMIC_ACQ_REL);
        __atomic_fetch_sub(&st->dev[d].used_bytes, used, __ATOMIC_ACQ_REL);
        __atomic_store_n(&p->busy_ns[d], 0, __ATOMIC_RELEASE);
        __atomic_store_n(&p->has_ctx[d], 0, __ATOMIC_RELEASE);
    }
    p->pid = 0;
    p->starttime = 0;
    __atomic_store_n(&p->state, GWSIM_PROC_FREE, __ATOMIC_RELEASE);
}

/* Release every live entry `gone` says has no program any more. */
static void release_where(struct gwsim_state *st, int (*gone)(const struct gwsim_proc *))
{
    for (unsigned i = 0; i < GWSIM_MAX_PROCS; i++) {
        struct gwsim_proc *p = &st->proc[i];
        if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) != GWSIM_PROC_LIVE || !gone(p))
            continue;
        uint32_t expect = GWSIM_PROC_LIVE;
        if (__atomic_compare_exchange_n(&p->state, &expect, GWSIM_PROC_RECLAIMING, 0,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            release_entry(st, p);
    }
}

static int dead(const struct gwsim_proc *p)
{
    return gwsim_proc_starttime(p->pid) != p->starttime;
}

void gwsim_reclaim_dead(struct gwsim_state *st)
{
    release_where(st, dead);
}

static struct gwsim_proc *claim_entry(struct gwsim_state *st)
{
    int32_t pid = (int32_t)getpid();
    uint64_t start = gwsim_proc_starttime(pid);
    for (unsigned i = 0; i < GWSIM_MAX_PROCS; i++) {
        struct gwsim_proc *p = &st->proc[i];
        uint32_t expect = GWSIM_PROC_FREE;
        if (!__atomic_compare_exchange_n(&p->state, &expect, GWSIM_PROC_CLAIMING, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            continue;
        p->pid = pid;
        p->starttime = start;
        __atomic_store_n(&p->state, GWSIM_PROC_LIVE, __ATOMIC_RELEASE);
        return p;
    }
    return NULL;
}

/* Entries of this process's (pid, start time) when it claims one are its program's before an
 * exec: the real driver opens its files close-on-exec, and the memory goes with them (H100: a
 * process gone from nvidia-smi's compute apps after exec()ing `sleep`), so they are released. */
static int previous_program(const struct gwsim_proc *p)
{
    int32_t pid = (int32_t)getpid();
    return p->pid == pid && p->starttime == gwsim_proc_starttime(pid);
}

struct gwsim_proc *gwsim_self(void)
{
    struct gwsim_state *st = gwsim_state();
    if (st == NULL)
        return NULL;
    pthread_mutex_lock(&g_self_lock);
    if (g_self == NULL) {
        release_where(st, previous_program);
        g_self = claim_entry(st);
        if (g_self == NULL) {
            gwsim_reclaim_dead(st);
            g_self = claim_entry(st);
        }
        if (g_self == NULL)
            gwsim_error("the simulated GPU's process table is full (%u processes)",
                        GWSIM_MAX_PROCS);
    }
    struct gwsim_proc *self = g_self;
    pthread_mutex_unlock(&g_self_lock);
    return self;
}

static int try_charge(struct gwsim_device *d, uint64_t bytes)
{
    uint64_t used = __atomic_load_n(&d->used_bytes, __ATOMIC_ACQUIRE);
    do {
        if (bytes > d->total_bytes || used > d->total_bytes - bytes)
            return -1;
    } while (!__atomic_compare_exchange_n(&d->used_bytes, &used, used + bytes, 1,
                                          __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    return 0;
}

int gwsim_charge(unsigned dev, uint64_t bytes)
{
    struct gwsim_state *st = gwsim_state();
    struct gwsim_proc *self = gwsim_self();
    if (st == NULL || self == NULL || dev >= st->num_devices)
        return -1;
    if (try_charge(&st->dev[dev], bytes) != 0) {
        gwsim_reclaim_dead(st); /* only on the failure path, like the real driver's OOM */
        if (try_charge(&st->dev[dev], bytes) != 0)
            return -1;
    }
    __atomic_fetch_add(&self->used[dev], bytes, __ATOMIC_ACQ_REL);
    return 0;
}

void gwsim_uncharge(unsigned dev, uint64_t bytes)
{
    struct gwsim_state *st = gwsim_state();
    struct gwsim_proc *self = gwsim_self();
    if (st == NULL || self == NULL || dev >= st->num_devices)
        return;
    __atomic_fetch_sub(&self->used[dev], bytes, __ATOMIC_ACQ_REL);
    __atomic_fetch_sub(&st->dev[dev].used_bytes, bytes, __ATOMIC_ACQ_REL);
}

/* Launch order (no time slices): the kernel starts when the device's last one ends. */
static uint64_t push_in_order(struct gwsim_state *st, struct gwsim_proc *self, unsigned dev,
                              uint64_t duration_ns, uint32_t mhz)
{
    struct gwsim_device *d = &st->dev[dev];
    uint64_t now = gwsim_now_ns();
    uint64_t until = __atomic_load_n(&d->busy_until_ns, __ATOMIC_ACQUIRE);
    uint64_t start;
    do {
        start = until > now ? until : now;
    } while (!__atomic_compare_exchange_n(&d->busy_until_ns, &until, start + duration_ns, 1,
                                          __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE));
    uint64_t end = start + duration_ns;
    uint64_t pos = __atomic_fetch_add(&d->ring_head, 1, __ATOMIC_ACQ_REL);
    struct gwsim_kernel *k = &st->ring[dev][pos % GWSIM_RING];
    __atomic_store_n(&k->seq, 0, __ATOMIC_RELEASE);
    k->start_ns = start;
    k->end_ns = end;
    k->pid = self ? (uint32_t)self->pid : 0;
    k->mhz = mhz;
    __atomic_store_n(&k->seq, pos + 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&d->busy_total_ns, duration_ns, __ATOMIC_ACQ_REL);
    if (self != NULL)
        __atomic_fetch_add(&self->busy_ns[dev], duration_ns, __ATOMIC_ACQ_REL);
    return end;
}

/* ---- time slices (simstate.h) ------------------------------------------------------------ */

static void sched_lock(struct gwsim_sched *S)
{
    if (pthread_mutex_lock(&S->lock) == EOWNERDEAD)
        pthread_mutex_consistent(&S->lock); /* its holder died: the schedule is still whole */
}

static void advance(struct gwsim_state *st, unsigned dev, uint64_t now);

/* The device's schedule, locked and worked out up to now (returned in *now when not NULL). */
static struct gwsim_sched *sched_at_now(struct gwsim_state *st, unsigned dev, uint64_t *now)
{
    struct gwsim_sched *S = &st->sched[dev];
    sched_lock(S);
    uint64_t t = gwsim_now_ns();
    advance(st, dev, t);
    if (now != NULL)
        *now = t;
    return S;
}

static struct gwsim_qkernel *queued(struct gwsim_state *st, unsigned dev, uint64_t pos1)
{
    return &st->queue[dev][(pos1 - 1) % GWSIM_QUEUE];
}

/* Write what ran to the ring: one record per stretch a process held the device at one clock. */
static void ring_emit(struct gwsim_state *st, unsigned dev, uint64_t from, uint64_t to,
                      uint32_t pid, uint32_t mhz)
{
    struct gwsim_device *d = &st->dev[dev];
    uint64_t head = __atomic_load_n(&d->ring_head, __ATOMIC_ACQUIRE);
    if (head > 0) {
        struct gwsim_kernel *last = &st->ring[dev][(head - 1) % GWSIM_RING];
        if (__atomic_load_n(&last->seq, __ATOMIC_ACQUIRE) == head && last->pid == pid &&
            last->mhz == mhz && last->end_ns == from) {
            __atomic_store_n(&last->end_ns, to, __ATOMIC_RELEASE);
            return;
        }
    }
    struct gwsim_kernel *k = &st->ring[dev][head % GWSIM_RING];
    __atomic_store_n(&k->seq, 0, __ATOMIC_RELEASE);
    k->start_ns = from;
    k->end_ns = to;
    k->pid = pid;
    k->mhz = mhz;
    __atomic_store_n(&k->seq, head + 1, __ATOMIC_RELEASE);
    __atomic_store_n(&d->ring_head, head + 1, __ATOMIC_RELEASE);
}

/* The next process with queued kernels after `after` in table order, round robin; -1 none. */
static int32_t next_waiting(const struct gwsim_state *st, unsigned dev, int32_t after)
{
    for (int32_t i = 1; i <= (int32_t)GWSIM_MAX_PROCS; i++) {
        int32_t c = (after + i) % (int32_t)GWSIM_MAX_PROCS;
        if (st->proc[c].q[dev].head != 0)
            return c;
    }
    return -1;
}

/* `cur` takes the device at `t`: it runs once the switch from another process is done
 * (GPUWARDEN_SIM_SWITCH after that one's last stretch ended, which an idle device may have
 * spent already), and its slice counts from then. */
static void take_device(struct gwsim_sched *S, int32_t cur, uint64_t t, uint64_t slice)
{
    uint64_t ready = t;
    if (S->switch_ns != 0 && S->last >= 0 && S->last != cur &&
        S->last_end_ns + S->switch_ns > ready)
        ready = S->last_end_ns + S->switch_ns;
    S->cur = cur;
    S->ready_ns = ready;
    S->slice_end_ns = ready + slice;
}

/* Work the schedule out from where it stands up to `now` (sched lock held).  Nothing arrives
 * in between: every launch works it out up to its own moment before it queues. */
static void advance(struct gwsim_state *st, unsigned dev, uint64_t now)
{
    struct gwsim_sched *S = &st->sched[dev];
    uint64_t slice = st->timeslice_ns, t = S->at_ns;
    while (t < now) {
        int32_t cur = S->cur;
        if (cur < 0 || st->proc[cur].q[dev].head == 0) {
            cur = next_waiting(st, dev, cur);
            S->cur = cur;
            if (cur < 0)
                break; /* idle until now */
            take_device(S, cur, t, slice);
        } else if (t >= S->slice_end_ns) {
            if (S->waiting > 1) {
                cur = next_waiting(st, dev, cur); /* another: the slice is over */
                take_device(S, cur, t, slice);
            } else { /* alone: its slices renew, counted from when it took the device */
                S->slice_end_ns += ((t - S->slice_end_ns) / slice + 1) * slice;
            }
        }
        if (t < S->ready_ns) { /* switching to it: the device runs nothing */
            t = S->ready_ns < now ? S->ready_ns : now;
            continue;
        }
        struct gwsim_proc *p = &st->proc[cur];
        struct gwsim_pqueue *q = &p->q[dev];
        struct gwsim_qkernel *k = queued(st, dev, q->head);
        uint64_t until = now;
        if (S->waiting > 1 && S->slice_end_ns < until)
            until = S->slice_end_ns;
        uint64_t run = k->left_ns < until - t ? k->left_ns : until - t;
        if (run > 0)
            ring_emit(st, dev, t, t + run, (uint32_t)p->pid, k->mhz);
        k->left_ns -= run;
        t += run;
        S->done_ns += run;
        q->run_ns += run;
        S->last = cur;
        S->last_end_ns = t;
        if (k->left_ns == 0) {
            __atomic_store_n(&k->end_ns, t, __ATOMIC_RELEASE);
            q->head = k->next;
            __atomic_store_n(&q->done, q->done + 1, __ATOMIC_RELEASE); /* done_unlocked reads */
            if (q->head == 0) {
                q->tail = 0;
                S->waiting--;
            }
        }
    }
    if (now > S->at_ns)
        S->at_ns = now;
}

/* A dead process's kernels (sched lock taken here): gone from the device, as its context is. */
static void drop_queue(struct gwsim_state *st, unsigned dev, struct gwsim_proc *p)
{
    if (st->timeslice_ns == 0)
        return;
    uint64_t now;
    struct gwsim_sched *S = sched_at_now(st, dev, &now);
    struct gwsim_pqueue *q = &p->q[dev];
    for (uint64_t pos = q->head; pos != 0;) {
        struct gwsim_qkernel *k = queued(st, dev, pos);
        k->left_ns = 0;
        k->end_ns = now;
        pos = k->next;
    }
    if (q->head != 0)
        S->waiting--;
    if (S->cur == (int32_t)(p - st->proc))
        S->cur = -1;
    memset(q, 0, sizeof *q);
    pthread_mutex_unlock(&S->lock);
}

struct gwsim_ticket gwsim_timeline_push(unsigned dev, uint64_t duration_ns, uint32_t mhz)
{
    struct gwsim_ticket t = {0};
    struct gwsim_state *st = gwsim_state();
    struct gwsim_proc *self = gwsim_self(); /* before the lock: it may reclaim dead entries */
    if (st == NULL || dev >= st->num_devices) {
        t.end_ns = gwsim_now_ns();
        return t;
    }
    if (st->timeslice_ns == 0 || self == NULL) {
        t.end_ns = push_in_order(st, self, dev, duration_ns, mhz);
        return t;
    }
    struct gwsim_sched *S;
    struct gwsim_pqueue *q = &self->q[dev];
    struct gwsim_qkernel *k;
    for (;;) {
        S = sched_at_now(st, dev, NULL);
        k = &st->queue[dev][S->queued % GWSIM_QUEUE];
        if (k->n == 0 || k->end_ns != 0)
            break;
        pthread_mutex_unlock(&S->lock); /* the device's queue is full: wait for a record */
        gwsim_sleep_until(gwsim_now_ns() + 100000u);
    }
    uint64_t pos1 = ++S->queued;
    __atomic_store_n(&k->end_ns, 0, __ATOMIC_RELEASE); /* done_unlocked reads these two */
    __atomic_store_n(&k->n, ++q->launched, __ATOMIC_RELEASE);
    k->left_ns = duration_ns;
    k->next = 0;
    k->proc = (uint32_t)(self - st->proc);
    k->mhz = mhz;
    if (q->tail != 0) {
        queued(st, dev, q->tail)->next = pos1;
    } else {
        q->head = pos1;
        S->waiting++;
    }
    q->tail = pos1;
    q->queued_ns += duration_ns;
    t.n = k->n;
    t.pos = pos1;
    t.cum_ns = q->queued_ns;
    pthread_mutex_unlock(&S->lock);
    __atomic_fetch_add(&st->dev[dev].busy_total_ns, duration_ns, __ATOMIC_ACQ_REL);
    __atomic_fetch_add(&self->busy_ns[dev], duration_ns, __ATOMIC_ACQ_REL);
    return t;
}

/* Under the sched lock, up to date: whether the ticket's kernel is done (end filled in), else
 * a lower bound on how long it still takes. */
static int ticket_check(struct gwsim_state *st, unsigned dev, struct gwsim_proc *self,
                        struct gwsim_ticket *t, uint64_t now, uint64_t *at_least)
{
    struct gwsim_sched *S = &st->sched[dev];
    struct gwsim_pqueue *q = &self->q[dev];
    int32_t me = (int32_t)(self - st->proc);
    if (q->done >= t->n) {
        const struct gwsim_qkernel *k = queued(st, dev, t->pos);
        t->end_ns = k->n == t->n && k->proc == (uint32_t)me && k->end_ns != 0 ? k->end_ns : now;
        return 1;
    }
    uint64_t wait = t->cum_ns > q->run_ns ? t->cum_ns - q->run_ns : 1; /* its own work first */
    if (S->cur >= 0 && S->cur != me) { /* another holds the device to its slice's end or its
                                        * queue's, whichever comes first */
        const struct gwsim_pqueue *o = &st->proc[S->cur].q[dev];
        uint64_t left = o->queued_ns - o->run_ns;
        uint64_t slice_left = S->slice_end_ns > now ? S->slice_end_ns - now : 0;
        wait += left < slice_left ? left : slice_left;
    }
    *at_least = wait;
    return 0;
}

/* Without the lock: whether the schedule, as far as it was worked out, finished the ticket's
 * kernel (0 also when it cannot tell: the locked path decides). */
static int done_unlocked(struct gwsim_state *st, unsigned dev, struct gwsim_proc *self,
                         struct gwsim_ticket *t)
{
    if (__atomic_load_n(&self->q[dev].done, __ATOMIC_ACQUIRE) < t->n)
        return 0;
    const struct gwsim_qkernel *k = queued(st, dev, t->pos);
    uint64_t end = __atomic_load_n(&k->end_ns, __ATOMIC_ACQUIRE);
    if (end == 0 || __atomic_load_n(&k->n, __ATOMIC_ACQUIRE) != t->n)
        return 0;
    t->end_ns = end;
    return 1;
}

/* Work the schedule out to now and check the ticket under the lock (ticket_check); the
 * moment looked at goes to *now. */
static int ticket_look(struct gwsim_state *st, unsigned dev, struct gwsim_proc *self,
                       struct gwsim_ticket *t, uint64_t *now, uint64_t *at_least)
{
    struct gwsim_sched *S = sched_at_now(st, dev, now);
    int done = ticket_check(st, dev, self, t, *now, at_least);
    pthread_mutex_unlock(&S->lock);
    return done;
}

int gwsim_ticket_done(unsigned dev, struct gwsim_ticket *t)
{
    if (t->end_ns != 0)
        return gwsim_now_ns() >= t->end_ns;
    if (t->n == 0)
        return 1;
    struct gwsim_state *st = gwsim_state();
    struct gwsim_proc *self = gwsim_self();
    if (st == NULL || self == NULL || dev >= st->num_devices)
        return 1;
    uint64_t now, wait;
    return done_unlocked(st, dev, self, t) || ticket_look(st, dev, self, t, &now, &wait);
}

void gwsim_ticket_wait(unsigned dev, struct gwsim_ticket *t, int spin)
{
    if (t->end_ns == 0 && t->n == 0)
        return; /* no kernel (a stream's queue not full, say): nothing to look up */
    struct gwsim_state *st = gwsim_state();
    struct gwsim_proc *self = gwsim_self();
    for (;;) {
        uint64_t until = t->end_ns;
        if (until == 0) {
            if (t->n == 0 || st == NULL || self == NULL || dev >= st->num_devices ||
                done_unlocked(st, dev, self, t))
                return;
            uint64_t now, wait;
            if (ticket_look(st, dev, self, t, &now, &wait))
                return;
            until = now + wait; /* it cannot end before this: look again then */
        } else if (gwsim_now_ns() >= until) {
            return; /* ended already: no call into the kernel */
        }
        if (spin) {
            while (gwsim_now_ns() < until)
                ;
        } else {
            gwsim_sleep_until(until);
        }
        if (t->end_ns != 0)
            return;
    }
}

void gwsim_timeline_settle(unsigned dev)
{
    struct gwsim_state *st = gwsim_state();
    if (st == NULL || dev >= st->num_devices || st->timeslice_ns == 0)
        return;
    pthread_mutex_unlock(&sched_at_now(st, dev, NULL)->lock);
}

uint64_t gwsim_busy_between(const struct gwsim_state *st, unsigned dev, uint32_t pid,
                            uint64_t from_ns, uint64_t to_ns)
{
    if (dev >= st->num_devices || to_ns <= from_ns)
        return 0;
    uint64_t head = __atomic_load_n(&st->dev[dev].ring_head, __ATOMIC_ACQUIRE);
    uint64_t oldest = head > GWSIM_RING ? head - GWSIM_RING : 0;
    uint64_t busy = 0;
    /* Walk back from the newest record; records are (nearly) in start order, so stop once a
     * whole stretch of them ended before the window. */
    unsigned before_window = 0;
    for (uint64_t pos = head; pos > oldest && before_window < 64; pos--) {
        const struct gwsim_kernel *k = &st->ring[dev][(pos - 1) % GWSIM_RING];
        if (__atomic_load_n(&k->seq, __ATOMIC_ACQUIRE) != pos)
            continue;
        uint64_t s = k->start_ns, e = k->end_ns;
        uint32_t kpid = k->pid;
        if (__atomic_load_n(&k->seq, __ATOMIC_ACQUIRE) != pos)
            continue;
        if (e <= from_ns) {
            before_window++;
            continue;
        }
        before_window = 0;
        if (pid != 0 && kpid != pid)
            continue;
        uint64_t lo = s > from_ns ? s : from_ns;
        uint64_t hi = e < to_ns ? e : to_ns;
        if (hi > lo)
            busy += hi - lo;
    }
    return busy;
}

/* ---- DVFS (simstate.h) ---------------------------------------------------------------------- */

static struct gwsim_dvfs_params g_dvfs;
static pthread_once_t g_dvfs_once = PTHREAD_ONCE_INIT;

static void dvfs_read(void)
{
    const char *v = getenv("GPUWARDEN_SIM_DVFS");
    unsigned max = 0, sat = 0, win = 300;
    double exponent = 1.0;
    char tail = 0;
    int n;
    if (v == NULL || *v == '\0')
        return;
    n = sscanf(v, "%u,%u,%u,%lf%c", &max, &sat, &win, &exponent, &tail);
    if (n < 2 || n > 4 || max == 0 || max > 10000u || sat == 0 || sat > max || win < 1 ||
        win > 60000u || !(exponent >= 0.0 && exponent <= 2.0)) {
        gwsim_error("GPUWARDEN_SIM_DVFS=\"%s\" is not valid: use MAX_MHZ,SAT_MHZ[,WINDOW_MS"
                    "[,EXPONENT]] (0 < SAT_MHZ <= MAX_MHZ <= 10000, 1 <= WINDOW_MS <= 60000, "
                    "0 <= EXPONENT <= 2); no DVFS", v);
        return;
    }
    g_dvfs.sat_mhz = sat;
    g_dvfs.window_ns = (uint64_t)win * 1000000ULL;
    g_dvfs.exponent = exponent;
    g_dvfs.max_mhz = max;
}

const struct gwsim_dvfs_params *gwsim_dvfs_params(void)
{
    pthread_once(&g_dvfs_once, dvfs_read);
    return &g_dvfs;
}

/* Kernel time completed on a device by `now`: with time slices what the schedule has run; in
 * launch order the timeline is serial, so what is still queued is exactly busy_until - now. */
static uint64_t done_by(struct gwsim_state *st, unsigned dev, uint64_t now)
{
    if (st->timeslice_ns != 0) {
        struct gwsim_sched *S = &st->sched[dev];
        sched_lock(S);
        advance(st, dev, now);
        uint64_t done = S->done_ns;
        pthread_mutex_unlock(&S->lock);
        return done;
    }
    const struct gwsim_device *d = &st->dev[dev];
    uint64_t total = __atomic_load_n(&d->busy_total_ns, __ATOMIC_ACQUIRE);
    uint64_t until = __atomic_load_n(&d->busy_until_ns, __ATOMIC_ACQUIRE);
    uint64_t ahead = until > now ? until - now : 0;
    return total > ahead ? total - ahead : 0;
}

uint32_t gwsim_dvfs_clock(unsigned dev, uint64_t now, uint32_t *power_mw)
{
    const struct gwsim_dvfs_params *p = gwsim_dvfs_params();
    struct gwsim_state *st = gwsim_state();
    double u, f, pdyn;

    if (p->max_mhz == 0 || st == NULL || dev >= st->num_devices) {
        if (power_mw != NULL)
            *power_mw = GWSIM_POWER_IDLE_MW;
        return p->max_mhz;
    }
    struct gwsim_dvfs *s = &st->dvfs[dev];
    uint64_t done = done_by(st, dev, now); /* before the spin flag: it may take the sched lock */
    while (__atomic_exchange_n(&s->lock, 1u, __ATOMIC_ACQUIRE) != 0)
        ;
    if (s->at_ns == 0 || now < s->at_ns) {
        s->at_ns = now;
        s->done_ns = done;
    } else if (now > s->at_ns) {
        double dt = (double)(now - s->at_ns);
        double busy = done > s->done_ns ? (double)(done - s->done_ns) / dt : 0.0;
        double a = exp(-dt / (double)p->window_ns);
        busy = busy > 1.0 ? 1.0 : busy;
        s->load_ppm = (uint64_t)((double)s->load_ppm * a + busy * 1e6 * (1.0 - a));
        s->at_ns = now;
        s->done_ns = done;
    }
    u = (double)s->load_ppm / 1e6;
    __atomic_store_n(&s->lock, 0u, __ATOMIC_RELEASE);
    f = u > 0.0 ? (double)p->sat_mhz * pow(u, -2.0 / 3.0) : (double)p->max_mhz;
    if (f > (double)p->max_mhz)
        f = (double)p->max_mhz;
    if (power_mw != NULL) {
        pdyn = (double)(GWSIM_POWER_LIMIT_MW - GWSIM_POWER_IDLE_MW) /
               pow((double)p->sat_mhz / (double)p->max_mhz, 1.5);
        *power_mw = (uint32_t)((double)GWSIM_POWER_IDLE_MW +
                               u * pdyn * pow(f / (double)p->max_mhz, 1.5));
    }
    return (uint32_t)f;
}

uint32_t gwsim_dvfs_clock_now(unsigned dev, uint64_t now)
{
    struct gwsim_state *st = gwsim_state();
    uint32_t f = gwsim_dvfs_clock(dev, now, NULL);
    if (f == 0 || st == NULL || dev >= st->num_devices)
        return f;
    uint64_t head = __atomic_load_n(&st->dev[dev].ring_head, __ATOMIC_ACQUIRE);
    uint64_t oldest = head > GWSIM_RING ? head - GWSIM_RING : 0;
    /* the running kernel is at most a queue's depth (per stream) back from the newest */
    for (uint64_t pos = head, seen = 0; pos > oldest && seen < 4096; pos--, seen++) {
        const struct gwsim_kernel *k = &st->ring[dev][(pos - 1) % GWSIM_RING];
        if (__atomic_load_n(&k->seq, __ATOMIC_ACQUIRE) != pos)
            continue;
        uint64_t s = k->start_ns, e = k->end_ns;
        uint32_t mhz = k->mhz;
        if (e < now)
            break; /* records are in start order: nothing older runs now */
        if (s <= now && mhz != 0)
            return mhz;
    }
    return f;
}
