/* The node-level compute region (see node.h and include/vgpu_node.h). */
#include "node.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define LD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

struct vgpu_node_region *vgpu_node_open(const char *path, char *err, size_t errlen)
{
    const off_t size = (off_t)sizeof(struct vgpu_node_region);
    struct vgpu_node_region *r = MAP_FAILED;
    struct stat st;
    int fd;

    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) {
        snprintf(err, errlen, "GPUWARDEN_NODE_REGION=%s: cannot open: %s", path,
                 strerror(errno));
        return NULL;
    }
    (void)fchmod(fd, 0666); /* containers of other users share it; umask must not narrow it */
    if (flock(fd, LOCK_EX) != 0 || fstat(fd, &st) != 0) {
        snprintf(err, errlen, "GPUWARDEN_NODE_REGION=%s: cannot lock: %s", path,
                 strerror(errno));
        goto fail;
    }
    if (st.st_size < size && ftruncate(fd, size) != 0) {
        snprintf(err, errlen, "GPUWARDEN_NODE_REGION=%s: cannot size to %lld bytes: %s", path,
                 (long long)size, strerror(errno));
        goto fail;
    }
    r = mmap(NULL, (size_t)size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (r == MAP_FAILED) {
        snprintf(err, errlen, "GPUWARDEN_NODE_REGION=%s: cannot map: %s", path,
                 strerror(errno));
        goto fail;
    }
    if (LD(&r->magic) == 0) {
        r->version = VGPU_NODE_VERSION;
        r->nslots = VGPU_NODE_SLOTS;
        __atomic_store_n(&r->magic, VGPU_NODE_MAGIC, __ATOMIC_RELEASE);
    }
    if (LD(&r->magic) != VGPU_NODE_MAGIC || r->version != VGPU_NODE_VERSION ||
        r->nslots != VGPU_NODE_SLOTS) {
        snprintf(err, errlen,
                 "GPUWARDEN_NODE_REGION=%s: not a gpuwarden node region of version %u with %u "
                 "slots (magic %#llx, version %u, %u slots)",
                 path, VGPU_NODE_VERSION, VGPU_NODE_SLOTS, (unsigned long long)r->magic,
                 r->version, r->nslots);
        munmap(r, (size_t)size);
        r = MAP_FAILED;
        goto fail;
    }
    (void)flock(fd, LOCK_UN);
    close(fd);
    return r;
fail:
    close(fd);
    return NULL;
}

static int fresh(uint64_t then, uint64_t now, uint64_t window)
{
    return then + window > now; /* `then` may be a little after `now` (another CPU's clock) */
}

int vgpu_node_claim(struct vgpu_node_region *r, const struct vgpu_node_me *me,
                    const uint8_t uuid[16], uint64_t now_ns)
{
    uint32_t i;

    for (i = 0; i < VGPU_NODE_SLOTS; i++) {
        struct vgpu_node_slot *s = &r->slots[i];
        uint64_t owner = LD(&s->owner);
        uint64_t beat = __atomic_load_n(&s->heartbeat_ns, __ATOMIC_ACQUIRE);

        if (owner != 0 && fresh(beat, now_ns, VGPU_NODE_STALE_NS))
            continue;
        if (!__atomic_compare_exchange_n(&s->owner, &owner, me->owner, 0, __ATOMIC_ACQ_REL,
                                         __ATOMIC_RELAXED))
            continue;
        ST(&s->container_id, 0);
        memcpy(s->uuid, uuid, 16);
        ST(&s->priority, me->priority);
        ST(&s->pid, me->pid);
        ST(&s->flags, 0);
        ST(&s->turn, 0);
        ST(&s->active_ns, now_ns);
        ST(&s->container_id, me->container_id);
        __atomic_store_n(&s->heartbeat_ns, now_ns, __ATOMIC_RELEASE);
        return (int)i;
    }
    return -1;
}

int vgpu_node_beat(struct vgpu_node_region *r, int slot, const struct vgpu_node_me *me,
                   uint64_t now_ns, uint64_t active_ns, uint32_t flags, uint32_t turn)
{
    struct vgpu_node_slot *s = &r->slots[slot];

    if (LD(&s->owner) != me->owner)
        return -1;
    ST(&s->priority, me->priority);
    ST(&s->turn, turn);
    ST(&s->flags, flags);
    if (active_ns > LD(&s->active_ns))
        ST(&s->active_ns, active_ns);
    __atomic_store_n(&s->heartbeat_ns, now_ns, __ATOMIC_RELEASE);
    return 0;
}

void vgpu_node_touch(struct vgpu_node_region *r, int slot, uint64_t now_ns)
{
    ST(&r->slots[slot].active_ns, now_ns);
}

void vgpu_node_cut_claim(struct vgpu_node_region *r, int slot, uint64_t seen, uint64_t now_ns)
{
    if (seen > now_ns)
        (void)__atomic_compare_exchange_n(&r->slots[slot].active_ns, &seen, now_ns, 0,
                                          __ATOMIC_SEQ_CST, __ATOMIC_RELAXED);
}

void vgpu_node_release(struct vgpu_node_region *r, int slot, uint64_t owner)
{
    uint64_t expect = owner;

    ST(&r->slots[slot].heartbeat_ns, 0);
    (void)__atomic_compare_exchange_n(&r->slots[slot].owner, &expect, 0, 0, __ATOMIC_ACQ_REL,
                                      __ATOMIC_RELAXED);
}

/* The container of a live slot (heartbeat fresh) on `uuid`, 0 when it is free, stale or on
 * another GPU. */
static uint64_t live_on(const struct vgpu_node_slot *s, const uint8_t uuid[16], uint64_t now_ns)
{
    if (LD(&s->owner) == 0 ||
        !fresh(__atomic_load_n(&s->heartbeat_ns, __ATOMIC_ACQUIRE), now_ns, VGPU_NODE_STALE_NS))
        return 0;
    return memcmp(s->uuid, uuid, 16) != 0 ? 0 : LD(&s->container_id);
}

/* The container id of a live slot of another container on `uuid`, else 0. */
static uint64_t other_live(const struct vgpu_node_slot *s, const uint8_t uuid[16],
                           uint64_t my_container, uint64_t now_ns)
{
    uint64_t cid = live_on(s, uuid, now_ns);

    return cid == my_container ? 0 : cid;
}

static int light(const struct vgpu_node_slot *s)
{
    return (LD(&s->flags) & (VGPU_NODE_FLAG_LIMITED | VGPU_NODE_FLAG_LIGHT)) ==
           (VGPU_NODE_FLAG_LIMITED | VGPU_NODE_FLAG_LIGHT);
}

/* A high that is not held to a share, or a light container. */
static int claiming(const struct vgpu_node_slot *s)
{
    return (LD(&s->priority) == 0 && !(LD(&s->flags) & VGPU_NODE_FLAG_LIMITED)) || light(s);
}

/* How long a claimer's claim lasts past its activity. */
static uint64_t grace(const struct vgpu_node_slot *s)
{
    return light(s) ? VGPU_NODE_LIGHT_GRACE_NS : VGPU_NODE_CLAIM_GRACE_NS;
}

uint32_t vgpu_node_claimers(const struct vgpu_node_region *r, const uint8_t uuid[16],
                            uint64_t my_container, uint64_t now_ns, int lights, uint32_t *slots,
                            uint32_t max)
{
    uint32_t i, n = 0;

    for (i = 0; i < VGPU_NODE_SLOTS && n < max; i++) {
        const struct vgpu_node_slot *s = &r->slots[i];
        if (other_live(s, uuid, my_container, now_ns) != 0 && claiming(s) && (lights || !light(s)))
            slots[n++] = i;
    }
    return n;
}

uint64_t vgpu_node_claim_end(const struct vgpu_node_region *r, const uint32_t *slots, uint32_t n,
                             uint64_t now_ns, int *all_light_out)
{
    uint64_t end = 0;
    uint32_t i;
    int all_light = 1;

    for (i = 0; i < n; i++) {
        const struct vgpu_node_slot *s = &r->slots[slots[i] % VGPU_NODE_SLOTS];
        uint64_t e = LD(&s->active_ns) + grace(s);
        if (LD(&s->owner) == 0 || !claiming(s) || e <= now_ns)
            continue;
        all_light = all_light && light(s);
        end = e > end ? e : end;
    }
    if (all_light_out != NULL)
        *all_light_out = end != 0 && all_light;
    return end;
}

void vgpu_node_census(const struct vgpu_node_region *r, const uint8_t uuid[16],
                      uint64_t my_container, uint64_t now_ns, struct vgpu_node_census *out)
{
    /* Count containers, not processes: remember the ids already counted (bounded). */
    uint64_t seen[64];
    uint64_t present[64];
    uint32_t nseen = 0;
    uint32_t npresent = 0;
    uint32_t i;

    out->high = 0;
    out->low = 0;
    out->light = 0;
    out->present = 0;
    for (i = 0; i < VGPU_NODE_SLOTS; i++) {
        const struct vgpu_node_slot *s = &r->slots[i];
        uint64_t cid = other_live(s, uuid, my_container, now_ns);
        uint32_t j;

        if (cid == 0)
            continue;
        for (j = 0; j < npresent && present[j] != cid; j++)
            ;
        if (j == npresent) {
            out->present++;
            if (npresent < 64)
                present[npresent++] = cid;
        }
        if (!fresh(LD(&s->active_ns), now_ns, VGPU_NODE_ACTIVE_NS))
            continue;
        for (j = 0; j < nseen && seen[j] != cid; j++)
            ;
        if (j < nseen)
            continue;
        if (nseen < 64)
            seen[nseen++] = cid;
        /* A high-priority container claims the GPU (lows yield) only when it is not itself
         * held to a share; a paced one is a plain neighbour: lows take turns with it, each
         * held to its own share, instead of leaving the GPU idle beside a capped high.  A
         * claiming high counts only while busy (work queued or launched within the grace):
         * between its bursts the GPU is the lows' as if they were alone. */
        if (claiming(s)) {
            if (fresh(LD(&s->active_ns), now_ns, grace(s)))
                ++*(light(s) ? &out->light : &out->high);
        } else {
            out->low++;
        }
    }
}

/* The other containers on `uuid` active at `now_ns` whose flags under `mask` are `want`, as
 * turn members, one per container; and, when `own_class` is not NULL, the largest period class
 * the paced (LIMITED, not LIGHT) active processes of `my_container` there ask for, in the same
 * pass. */
static uint32_t members(const struct vgpu_node_region *r, const uint8_t uuid[16],
                        uint64_t my_container, uint64_t now_ns, uint32_t mask, uint32_t want,
                        struct lim_turn_member *out, uint32_t max, uint32_t *own_class)
{
    uint32_t i, n = 0;

    if (own_class != NULL)
        *own_class = 0;
    for (i = 0; i < VGPU_NODE_SLOTS; i++) {
        const struct vgpu_node_slot *s = &r->slots[i];
        uint64_t cid = live_on(s, uuid, now_ns);
        uint32_t turn = LD(&s->turn);
        uint32_t flags = LD(&s->flags);
        struct lim_turn_member m = {cid, VGPU_NODE_TURN_PCT(turn), VGPU_NODE_TURN_CLASS(turn),
                                    (flags & VGPU_NODE_FLAG_CAPPED) ? 1u : 0u,
                                    (flags & VGPU_NODE_FLAG_REST) ? 1u : 0u,
                                    VGPU_NODE_TURN_LONGEST_NS(turn)};

        if (cid == 0 || !fresh(LD(&s->active_ns), now_ns, VGPU_NODE_ACTIVE_NS))
            continue;
        if (cid == my_container) {
            if (own_class != NULL && m.period_class > *own_class &&
                (flags & (VGPU_NODE_FLAG_LIMITED | VGPU_NODE_FLAG_LIGHT)) ==
                    VGPU_NODE_FLAG_LIMITED)
                *own_class = m.period_class;
            continue;
        }
        if ((flags & mask) == want)
            lim_turn_merge(out, &n, max, m); /* a container's processes count once */
    }
    return n;
}

uint32_t vgpu_node_paced(const struct vgpu_node_region *r, const uint8_t uuid[16],
                         uint64_t my_container, uint64_t now_ns, int yielding,
                         struct lim_turn_member *out, uint32_t max, uint32_t *own_class)
{
    return members(r, uuid, my_container, now_ns,
                   VGPU_NODE_FLAG_LIMITED | VGPU_NODE_FLAG_LIGHT |
                       (yielding ? 0u : VGPU_NODE_FLAG_YIELDING),
                   VGPU_NODE_FLAG_LIMITED, out, max, own_class);
}

uint32_t vgpu_node_lights(const struct vgpu_node_region *r, const uint8_t uuid[16],
                          uint64_t my_container, uint64_t now_ns, struct lim_turn_member *out,
                          uint32_t max)
{
    return members(r, uuid, my_container, now_ns, VGPU_NODE_FLAG_LIMITED | VGPU_NODE_FLAG_LIGHT,
                   VGPU_NODE_FLAG_LIMITED | VGPU_NODE_FLAG_LIGHT, out, max, NULL);
}
