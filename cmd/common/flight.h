/* cmd/common/flight.h - reads the flight recorder dumps of a job and says who was behind (not installed) */
#ifndef SMDDP_CMD_FLIGHT_H
#define SMDDP_CMD_FLIGHT_H

/*
 * The library writes one file per process, smddp-trace.<job>.<rank>.jsonl
 * (smddp(7), SMDDP_TRACE_DIR); smddp-trace and smddp-run read them here.
 * Calls are aligned by their sequence number within each communicator:
 * every rank numbers the calls of a communicator alike, so call N of one
 * rank is call N of every other, and a rank whose last call is below N
 * never entered it.
 */
#include <stddef.h>
#include <stdint.h>

struct flight_call {
	uint64_t seq, count;
	char coll[24], dtype[16], op[8], state[12], error[24];
	int has_count, has_op, has_root, root;
	int waited[8], nwaited;
	int64_t start_us, end_us;
};

/* One rank's part of one communicator. */
struct flight_part {
	int present;
	int world_rank;
	uint64_t calls;         /* calls it began */
	struct flight_call *call;
	size_t ncall;
};

struct flight_comm {
	char id[48];
	int size;
	struct flight_part *part;   /* [size], by rank in the communicator */
};

struct flight_rank {
	int present;
	char host[128], reason[16], file[1024];
	long pid;
};

struct flight_job {
	char job[64];
	int nranks;
	struct flight_rank *rank;   /* [nranks] */
	struct flight_comm *comm;
	size_t ncomm;
};

enum flight_kind { FLIGHT_MISMATCH, FLIGHT_BEHIND, FLIGHT_STUCK, FLIGHT_NODUMP };

struct flight_finding {
	enum flight_kind kind;
	const struct flight_comm *comm;
	uint64_t seq;
	int *behind, nbehind;       /* BEHIND: never entered seq */
	int *waiting, nwaiting;     /* ranks inside seq, not done */
	char text[1024];            /* one line, no newline */
};

/* Reads the dumps of job (NULL: the only job found) under each of paths
 * (a directory's smddp-trace.*.jsonl, or a file).  0, or -1 with a
 * sentence in err: nothing found, a file that is not a dump, several jobs
 * and job NULL (*several set then). */
int flight_load(const char *const *paths, int npaths, const char *job, struct flight_job **out,
		int *several, char *err, size_t errlen);
void flight_free(struct flight_job *j);

/* What went wrong, first things first (the world communicator, then by
 * call): *n findings in *out, free with flight_findings_free. */
int flight_analyze(const struct flight_job *j, struct flight_finding **out, size_t *n);
void flight_findings_free(struct flight_finding *f, size_t n);

/* "allreduce, 4099 x float32, sum" */
void flight_describe(const struct flight_call *c, char *buf, size_t len);
/* The last call of part p, or NULL. */
const struct flight_call *flight_last(const struct flight_part *p);

#endif /* SMDDP_CMD_FLIGHT_H */
