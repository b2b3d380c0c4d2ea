/*
 * simstate.h - the simulated GPU's shared state: one file at $GPUWARDEN_SIM_STATE, mmap'ed by
 * every process that loads the simulated libcuda or libnvidia-ml.
 *
 * The file is created on first use under flock(); the magic and version are written last, so a
 * process that sees them sees a complete file.  Every field is fixed-width; shared counters are
 * updated with __atomic builtins.  Devices hold memory totals and a kernel timeline (busy_until
 * plus a ring of recent kernel records); processes hold per-device usage, keyed by
 * (pid, start time) so a reused PID is never mistaken for a dead process's entry.
 */
#ifndef GWSIM_STATE_H
#define GWSIM_STATE_H

#include <pthread.h>
#include <stdint.h>

#define GWSIM_MAGIC 0x5550474d49535747ULL /* "GWSIMGPU" little-endian */
#define GWSIM_VERSION 5u /* 2: the DVFS load (dvfs[]); 3: time slices (sched[], queue[]); 4:
                         * timeslice_ns in the head, where `gpuwarden sim env` reads it; 5: the
                         * cost of a switch between processes (sched[].switch_ns) */
#define GWSIM_MAX_DEVICES 8u
#define GWSIM_MAX_PROCS 256u
#define GWSIM_RING 65536u /* kernel records kept per device: a second of 5-us kernels at 30 % (NVML
                           * reports whole periods of up to 1 s) */
#define GWSIM_QUEUE 16384u /* kernels queued and not yet finished per device, time-sliced mode (a
                           * launch waits while the oldest record it would reuse still runs) */
#define GWSIM_NAME_LEN 96u
#define GWSIM_SM_COUNT 132u
#define GWSIM_DEFAULT_MEMORY (80ULL << 30)
#define GWSIM_DEFAULT_CTX_OVERHEAD (300ULL << 20)
#define GWSIM_DEFAULT_TIMESLICE_US 1000L /* the order of a real driver's (README.md) */
#define GWSIM_MAX_TIMESLICE_US 1000000L
#define GWSIM_MAX_SWITCH_US 100000L /* GPUWARDEN_SIM_SWITCH */

enum gwsim_proc_state { GWSIM_PROC_FREE = 0, GWSIM_PROC_CLAIMING = 1, GWSIM_PROC_LIVE = 2,
                        GWSIM_PROC_RECLAIMING = 3 };

struct gwsim_kernel {
    uint64_t seq;      /* ring position + 1, written last; 0 = empty */
    uint64_t start_ns; /* CLOCK_MONOTONIC */
    uint64_t end_ns;
    uint32_t pid;
    uint32_t mhz;      /* the SM clock it runs at (DVFS), 0 without DVFS */
};

struct gwsim_device {
    uint64_t total_bytes;
    uint64_t used_bytes;    /* atomic */
    uint64_t busy_until_ns; /* atomic: when the last queued kernel ends */
    uint64_t busy_total_ns; /* atomic: all kernel time ever queued */
    uint64_t ring_head;     /* atomic: kernels ever recorded */
    uint32_t sm_count;
    uint32_t index;
    char name[GWSIM_NAME_LEN];
    uint8_t uuid[16];
};

/* A process's queue on one device, time-sliced mode (under the device's sched lock): its
 * kernels run in the order it launched them, linked through the device's queue[]. */
struct gwsim_pqueue {
    uint64_t head, tail; /* queue position + 1 of its oldest and newest unfinished kernel; 0 none */
    uint64_t launched;   /* kernels ever queued */
    uint64_t done;       /* kernels finished (they finish in launch order) */
    uint64_t queued_ns;  /* run time ever queued */
    uint64_t run_ns;     /* run time ever given */
};

struct gwsim_proc {
    uint32_t state; /* enum gwsim_proc_state, atomic */
    int32_t pid;
    uint64_t starttime; /* /proc/PID/stat field 22 */
    uint64_t used[GWSIM_MAX_DEVICES];    /* atomic, context overhead included */
    uint64_t busy_ns[GWSIM_MAX_DEVICES]; /* atomic */
    uint32_t has_ctx[GWSIM_MAX_DEVICES]; /* 1 while the process holds a context there */
    struct gwsim_pqueue q[GWSIM_MAX_DEVICES];
};

/* ---- time slices (GPUWARDEN_SIM_TIMESLICE) ------------------------------------------------
 * With a time slice set, a device runs each process's kernels in its launch order and
 * alternates between processes with queued work, round robin in process-table order: the one
 * running keeps the device until its queue is empty or its slice ends while another has work
 * (slices are counted from when it took the device, renewed while it runs alone), as a real
 * GPU's scheduler alternates between contexts.  A kernel's end is then known only once it has
 * run: the schedule is worked out lazily, up to the present, by whoever looks (under `lock`),
 * and what has run is written to the device's ring, one record per stretch a process held it.
 * Without a time slice (0) every kernel runs in launch order whoever queued it, its end fixed
 * when it is queued (the ring holds it at once). */
struct gwsim_qkernel {
    uint64_t n;       /* the process's kernel number on the device (pqueue.launched) */
    uint64_t left_ns; /* run time still to go */
    uint64_t end_ns;  /* when it finished, 0 while it has not */
    uint64_t next;    /* queue position + 1 of the same process's next kernel; 0 none */
    uint32_t proc;    /* process-table index */
    uint32_t mhz;
};

struct gwsim_sched {
    pthread_mutex_t lock;   /* process-shared, robust */
    uint64_t at_ns;         /* the schedule is worked out up to here */
    uint64_t slice_end_ns;  /* when the running process's slice ends */
    uint64_t done_ns;       /* kernel time run, all processes */
    uint64_t queued;        /* kernels ever queued (queue positions handed out) */
    int32_t cur;            /* process-table index running, -1 none */
    uint32_t waiting;       /* processes with queued kernels */
    uint64_t switch_ns;     /* GPUWARDEN_SIM_SWITCH at creation: a switch between processes */
    uint64_t ready_ns;      /* `cur` runs from here on (the switch to it done) */
    uint64_t last_end_ns;   /* when the last stretch that ran ended */
    int32_t last;           /* the process that ran it, -1 none */
    uint32_t reserved;
};

/* What a launch gives back: enough to tell when the kernel has finished, and when. */
struct gwsim_ticket {
    uint64_t end_ns; /* its end, once known (at once without time slices); 0 until then */
    uint64_t n;      /* time-sliced: the process's kernel number on the device; 0 for none */
    uint64_t pos;    /* time-sliced: its queue position */
    uint64_t cum_ns; /* time-sliced: the process's queued_ns with it */
};

/* The load the DVFS model (GPUWARDEN_SIM_DVFS) sets the clock from: the device's busy share
 * averaged exponentially over the window, updated by whoever reads it (under `lock`). */
struct gwsim_dvfs {
    uint32_t lock;     /* spin flag */
    uint32_t reserved;
    uint64_t at_ns;    /* when `load_ppm` was last brought up to date */
    uint64_t done_ns;  /* kernel time completed on the device by then */
    uint64_t load_ppm; /* busy share, averaged, in parts per million */
};

struct gwsim_state {
    uint64_t magic;
    uint32_t version;
    uint32_t num_devices;
    uint64_t file_size;
    uint64_t ctx_overhead;
    uint64_t timeslice_ns; /* GPUWARDEN_SIM_TIMESLICE at creation; 0: launch order */
    struct gwsim_device dev[GWSIM_MAX_DEVICES];
    struct gwsim_proc proc[GWSIM_MAX_PROCS];
    struct gwsim_kernel ring[GWSIM_MAX_DEVICES][GWSIM_RING];
    struct gwsim_dvfs dvfs[GWSIM_MAX_DEVICES];
    struct gwsim_sched sched[GWSIM_MAX_DEVICES];
    struct gwsim_qkernel queue[GWSIM_MAX_DEVICES][GWSIM_QUEUE];
};

/* The mapped state, or NULL (after one clear message on stderr) when it cannot be used. */
struct gwsim_state *gwsim_state(void);

/* This process's entry, claimed on first call (NULL when the table is full). */
struct gwsim_proc *gwsim_self(void);

/* Release the entries of dead processes (or of reused PIDs) and their memory. */
void gwsim_reclaim_dead(struct gwsim_state *st);

/* Reserve bytes on a device for this process: 0, or -1 when the device is full (after a
 * reclaim of dead processes). */
int gwsim_charge(unsigned dev, uint64_t bytes);
void gwsim_uncharge(unsigned dev, uint64_t bytes);

/* Queue a kernel of duration_ns, run at SM clock mhz (0: no DVFS), on the device's timeline,
 * for this process; its ticket (end_ns set at once without time slices).  Waits while the
 * device's queue is full (time-sliced). */
struct gwsim_ticket gwsim_timeline_push(unsigned dev, uint64_t duration_ns, uint32_t mhz);

/* Whether the ticket's kernel has finished by now (a zero ticket has); fills in end_ns once it
 * has.  Only the process that queued it may ask. */
int gwsim_ticket_done(unsigned dev, struct gwsim_ticket *t);

/* Wait until the ticket's kernel has finished: spinning when `spin`, else sleeping. */
void gwsim_ticket_wait(unsigned dev, struct gwsim_ticket *t, int spin);

/* Work the schedule out up to now (time-sliced; nothing without time slices), so that the
 * ring holds everything that ran before now.  Callers of gwsim_busy_between do this first. */
void gwsim_timeline_settle(unsigned dev);

/* Busy nanoseconds on a device within [from_ns, to_ns]; pid 0 = all processes. */
uint64_t gwsim_busy_between(const struct gwsim_state *st, unsigned dev, uint32_t pid,
                            uint64_t from_ns, uint64_t to_ns);

/* ---- DVFS: a power-capped GPU that clocks down under load ----------------------------------
 * GPUWARDEN_SIM_DVFS=MAX_MHZ,SAT_MHZ[,WINDOW_MS[,EXPONENT]] (default off: a fixed clock, and NVML reports
 * no clock or power).  The GPU draws IDLE + u * P * (f / MAX)^1.5 at busy share u and SM clock f
 * (power ~ clock^1.5: a first fit to an H200; the H200 measured later drew a static 130-210 W
 * and went with about clock^1.1, which libvgpu's own estimate assumes, limiter.h
 * lim_sat_estimate, so the model here is not the estimate's), and runs the highest clock that
 * keeps that within the power
 * limit; P is such that the saturated GPU (u = 1) runs SAT_MHZ at the limit.  So the clock is
 * min(MAX, SAT * u^(-2/3)), u being the busy share averaged exponentially over WINDOW_MS
 * (default 300; the power controller's time constant).  A kernel runs its nominal time (grid x
 * GPUWARDEN_SIM_KERNEL_SCALE, at MAX_MHZ) x (MAX / f)^EXPONENT, f the clock when it is queued:
 * EXPONENT 1 (the default) is a compute-bound kernel, time ~ 1/clock; 0 a memory-bound one; an
 * H200's 4096² bf16 matmul moved with 0.60. */
#define GWSIM_POWER_LIMIT_MW 700000u
#define GWSIM_POWER_IDLE_MW 100000u

struct gwsim_dvfs_params {
    uint32_t max_mhz; /* 0: DVFS off */
    uint32_t sat_mhz;
    uint64_t window_ns;
    double exponent;  /* kernel time ~ clock^-exponent */
};

/* The parameters, read once per process (a bad value: one message, DVFS off). */
const struct gwsim_dvfs_params *gwsim_dvfs_params(void);

/* The clock the device would run a kernel at now (MHz; max_mhz when DVFS is off) and, when
 * `power_mw` is not NULL, its power draw, averaged like the load.  Brings the load up to date. */
uint32_t gwsim_dvfs_clock(unsigned dev, uint64_t now_ns, uint32_t *power_mw);

/* The SM clock NVML reports: that of the kernel running now, else gwsim_dvfs_clock. */
uint32_t gwsim_dvfs_clock_now(unsigned dev, uint64_t now_ns);

/* A device UUID as NVML and CUDA_VISIBLE_DEVICES write it ("GPU-xxxxxxxx-...", 40 chars). */
#define GWSIM_UUID_TEXT 48
void gwsim_uuid_text(const uint8_t uuid[16], char out[GWSIM_UUID_TEXT]);

uint64_t gwsim_now_ns(void);     /* CLOCK_MONOTONIC */
uint64_t gwsim_realtime_us(void); /* CLOCK_REALTIME in microseconds */
void gwsim_sleep_until(uint64_t mono_ns);

/* Process start time from /proc/PID/stat; 0 when the process is gone or a zombie. */
uint64_t gwsim_proc_starttime(int32_t pid);

/* Log once per process per key: every message names what was wrong and what is valid. */
void gwsim_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif /* GWSIM_STATE_H */
