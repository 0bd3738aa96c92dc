/* trace.h - the flight recorder: each communicator's last calls, dumped as JSON lines on failure. */
#ifndef SD_TRACE_H
#define SD_TRACE_H

#include "base/comm-types.h"

/* Creates c's recorder (SMDDP_TRACE_ENTRIES of them; 0: none) and
 * registers it for dumps.  id names the communicator the same way on every
 * rank ("0" for a world, "<parent>.<split call>.<color>" for a split);
 * world_rank and world_size name the process in its job.  Failure to
 * allocate only means no recorder. */
void sd_trace_open(struct smddp_comm *c, const char *id, int world_rank, int world_size);
/* Unregisters and frees it; waits for a dump in progress (a signal's). */
void sd_trace_close(struct smddp_comm *c);
/* The id and world rank of c's recorder, for a split's; NULL, -1 without. */
const char *sd_trace_id(const struct smddp_comm *c);
int sd_trace_world_rank(const struct smddp_comm *c, int *world_size);

/* A call begins (c->cur filled, seq counted), and ends with rc (a device
 * call that returns 0 ends "queued": its stream finishes it, unseen); an
 * end without a begin is nothing. */
void sd_trace_begin(struct smddp_comm *c);
void sd_trace_end(struct smddp_comm *c, int rc);

/* Writes every registered recorder of this process to SMDDP_TRACE_DIR;
 * why: "error", "timeout", "request", "signal".  0, or -1 with errno. */
int sd_trace_dump(const char *why);

/* End of a failed call: dumps (once per failure) when SMDDP_TRACE_DIR is set. */
void sd_trace_failed(struct smddp_comm *c, int rc);

#endif
