// SPDX-License-Identifier: (GPL-2.0-only OR BSD-2-Clause)
/*
 * journey: sends a CPU's pending packet journey (struct nt_journey in
 * maps.h), which the points hold while a packet's next steps on that CPU
 * join it. Not attached anywhere: user space runs it on every CPU
 * (BPF_PROG_TEST_RUN on a CPU) before it counts the records lost, so that
 * the count covers every journey made before it, and so that a CPU gone
 * quiet holds its last journey at most a tick.
 */
#include "common.h"

/* It runs in an interrupt on its CPU: a program it interrupted while
 * changing the journey (busy) keeps it, and user space runs this again
 * (1). */
SEC("raw_tp")
int journey_flush(void *ctx)
{
	struct nt_journey *j = nt_journey();

	if (!j || !j->pending)
		return 0;
	if (j->busy)
		return 1;
	nt_journey_send_unnested(j, 0);
	return 0;
}
