/* topo.h - internal interface of the node topology module (lib/topo/).
 *
 * A topology is held as one cJSON tree in the canonical shape of schema 1
 * (man 5 smddp-topo.json): discovery builds it, loading a file checks the
 * file and rebuilds it in the same shape, and everything else (JSON output,
 * accessors, --expect comparison) reads that tree.  So a dumped topology
 * loaded back is the same topology, byte for byte.
 */
#ifndef SD_TOPO_TOPO_H
#define SD_TOPO_TOPO_H

#include <cjson/cJSON.h>

#include <smddp/smddp.h>

#include "util/sd.h"

#define SD_TOPO_SCHEMA 1

struct smddp_topo {
	cJSON *root; /* canonical schema-1 tree */
};

/* The topology the library itself uses: smddp_topo_get()'s (SMDDP_TOPO_FILE,
 * else discovery), made once per process on first call, thread-safe, kept
 * until exit: do not free it.  A failure is remembered and returned to every
 * caller, with its sentence in smddp_topo_error(). */
int sd_topo_shared(const struct smddp_topo **out);

/* discover.c: builds the canonical tree of the machine seen under sysroot
 * ("/" is the live machine: hwloc, NVML and libfabric are used there, never
 * under another root).  A failure's sentence goes to err. */
int sd_topo_discover(const char *sysroot, cJSON **out, struct sd_err *err);

/* json.c: checks a parsed file against schema 1 and rebuilds it in the
 * canonical shape (keys in order, absent optional fields filled in). */
int sd_topo_normalize(const cJSON *in, cJSON **out);
/* Compares have (canonical) with an expect tree (partial); appends one line
 * per difference to *report (malloc'd) and counts them.  A failure's
 * sentence goes to err. */
int sd_topo_compare_tree(const cJSON *have, const cJSON *expect, char **report, int *ndiff,
			 struct sd_err *err);

/* Relations between two devices, best first, as nvidia-smi topo -m names
 * them; "NV<n>" (NVLink) ranks before all of them. */
int sd_topo_relation_rank(const char *rel);

#endif
