/* cmd/run/slurm.h - what smddp-run needs of Slurm: its host lists */
#ifndef SMDDP_RUN_SLURM_H
#define SMDDP_RUN_SLURM_H

#include <stdbool.h>
#include <stddef.h>

/* Expands a Slurm host list ("node[01-03,7],gpu-b3", as in
 * SLURM_JOB_NODELIST) into its host names, in order: a NULL-terminated
 * array of MAX names at most, each and the array malloc'd; *N is the count.
 * NULL on a malformed list (or more than MAX names, or no memory), with
 * ERR saying why. */
char **slurm_hostlist(const char *list, size_t max, size_t *n, char *err, size_t errlen);

void slurm_hostlist_free(char **hosts);

/* Whether this process runs inside a Slurm job step (srun), rather than in
 * a batch script or an salloc shell: SLURM_STEP_ID is a number. */
bool slurm_in_step(void);

#endif /* SMDDP_RUN_SLURM_H */
