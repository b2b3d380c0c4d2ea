/* The cheapest possible entry uprobe, for bench_bpf.py's baseline: what the audit's launch
 * counter adds over the uprobe trap itself. */
#include <uapi/linux/ptrace.h>

int bare_enter(struct pt_regs *ctx)
{
	return 0;
}
