/* api.h - api.c: the entry and exit of every call, and whether a pointer is device memory. */
#ifndef SD_CORE_API_H
#define SD_CORE_API_H

#include <stddef.h>

#include "base/comm-types.h"

/* Entry of every collective call: checks the communicator and the arguments
 * that do not depend on buffers, counts the call, and with SMDDP_CHECK_COLL
 * compares it across ranks.  count 0 still counts the call. */
int sd_api_enter(struct smddp_comm *c, int coll, size_t count, int dtype, int op, int root,
		 void *stream);

/* Exit of every call: a failure that leaves ranks at different places in
 * the protocol marks c failed and tells the peers; returns rc. */
int sd_api_leave(struct smddp_comm *c, int rc);
/* 1 if p is CUDA device memory (the driver is loaded and says so). */
int sd_api_device_ptr(const void *p);
/* 1 once the process has loaded the CUDA driver: before that, every
 * pointer is host memory (one probe for a batch, not one per buffer). */
int sd_api_cuda_loaded(void);

#endif
