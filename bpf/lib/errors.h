/* Error counters of the audit programs: every failure a probe can meet is counted here, into
 * the array map "errors", never printed.  Names are mirrored in bpf/errors.py (same order),
 * checked by tests/bpf/test_struct_layout_matches_c.py.
 */
#ifndef GW_ERRORS_H
#define GW_ERRORS_H

enum gw_err {
	GW_ERR_LOST_EVENT = 0,    /* ring buffer full: an event was dropped (ledger unaffected) */
	GW_ERR_PTRS_FULL = 1,     /* pointer map full: an allocation could not be accounted */
	GW_ERR_LEDGER_FULL = 2,   /* (pid, device) ledger map full */
	GW_ERR_PROCS_FULL = 3,    /* process map full */
	GW_ERR_CTX_FULL = 4,      /* context -> device map full */
	GW_ERR_THREADS_FULL = 5,  /* thread -> context stack map full */
	GW_ERR_PENDING_FULL = 6,  /* entry -> return argument map full: the call is not accounted */
	GW_ERR_LAUNCHES_FULL = 7, /* launch counter map full */
	GW_ERR_READ_USER = 8,     /* reading a call's argument or out-parameter failed */
	GW_ERR_CTX_STACK = 9,     /* context stack deeper than GW_CTX_STACK, or popped when empty */
	GW_ERR_KILL_FAILED = 10,  /* bpf_send_signal refused */
	GW_ERR_UNKNOWN_FORMAT = 11, /* array format of unknown size: accounted as 0 bytes */
	GW_ERR_REPLACED_PTR = 12, /* a pointer was handed out again without a free we saw */
	GW_ERR__COUNT = 13,
};

#endif /* GW_ERRORS_H */
