/* cmd/run/launch.h - the state of a launch (struct run), shared by the parts that run it */
#ifndef SMDDP_RUN_LAUNCH_H
#define SMDDP_RUN_LAUNCH_H

/*
 * One launch is one struct run: main() (cmd/smddp-run.c) fills it in steps,
 * local.c starts the ranks, output.c moves their output, loop.c watches them
 * until the end; mpirun.c hands the ranks to mpirun instead.
 */
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/types.h>

#include "clock/clock.h"
#include "run/nodes.h"
#include "run/run.h"

#define START_WAIT_MS    30000   /* a rank must reach exec() within this */
#define KILL_WAIT_MS     10000   /* ranks must be gone this long after SIGKILL */
#define SWEEP_WAIT_MS    5000    /* leftover descendants must be gone */
#define DRAIN_WAIT_MS    5000    /* pipes must reach EOF once everyone is dead */
#define OUTQ_HIGH        (1u << 20)  /* stop reading ranks above this backlog */
#define LINE_MAX_BYTES   (1u << 20)  /* a longer unterminated line is cut */
#define READ_CHUNK       65536

extern char **environ;

/* Where this launcher's ranks sit in the job. Local mode: one node. */
struct layout {
	int nnodes;
	int node_rank;
	int local_size;
};

/* ---- run state ------------------------------------------------------- */

/* Bytes waiting to be written to smddp-run's stdout or stderr. */
struct outq {
	int fd;
	char *buf;
	size_t off, len, cap;   /* pending bytes are buf[off, len) */
	bool broken;            /* the reader went away: discard from now on */
	bool chunked;           /* not a regular file: write at most PIPE_BUF */
	bool tty;               /* a terminal: a '\r' ends a piece too (progress lines) */
};

/* One rank's stdout or stderr, read through a pipe when tagging. */
struct stream {
	int fd;                 /* -1 once closed */
	char *part;             /* the unterminated tail */
	size_t plen, pcap;
	struct outq *q;
};

struct rank {
	int rank;               /* global rank */
	pid_t pid;              /* 0: never started */
	bool exited;            /* observed with WNOWAIT; still a zombie */
	char tag[24];           /* "[R] " */
	size_t taglen;
	struct stream out, err;
};

enum phase {
	PH_RUN,                 /* ranks running */
	PH_STOP,                /* SIGTERM (or a forwarded signal) sent, grace running */
	PH_KILL,                /* SIGKILL sent, waiting for the ranks to die */
	PH_DRAIN,               /* all ranks dead: reading pipes to EOF, flushing */
};

enum cause {
	CAUSE_NONE,             /* all ranks exited 0 */
	CAUSE_RANK,             /* a rank failed: exit with its status */
	CAUSE_SIGNAL,           /* smddp-run got a signal: die by it */
	CAUSE_TIMEOUT,          /* --timeout: 124 */
	CAUSE_EXEC,             /* cannot execute PROGRAM: 126 or 127 */
	CAUSE_LAUNCH,           /* fork, pipe... failed: 1 */
	CAUSE_REMOTE,           /* per-node mode: another node failed first */
};

struct run {
	struct options opt;
	struct layout lay;
	const struct plan *plan;
	bool mpirun;            /* the one child is mpirun (or srun), not a rank */
	const char *engine;     /* its name: "mpirun" or "srun" */
	char **mpirun_env;
	pid_t self;
	int sigfd;
	sigset_t origmask;
	struct sigaction origpipe, origchld;
	struct rlimit orignofile;   /* restored in the ranks */
	bool raised_nofile;
	int devnull;
	bool out_via;           /* ranks' stdout is read by smddp-run (tagging, --unbuffered) */
	bool use_pty;           /* ... through a pseudo-terminal, so that it is line-buffered */
	struct winsize ws;      /* smddp-run's terminal's size, for the ranks' */
	bool have_ws;
	bool use_pty_err;       /* ranks' stderr too: smddp-run's is a terminal (progress) */

	char job_id[NODES_ID_MAX];
	char token[NODES_TOKEN_MAX];
	char master_port[8];    /* MASTER_PORT: torch's store, libsmddp's rendezvous */
	char smddp_port[8];     /* SMDDP_MASTER_PORT: libsmddp's; another with our store */
	bool agent_store;       /* --store launcher: the ranks are told so */
	struct store *store;    /* ... and this serves it (not in --dry-run) */
	struct nodes *nodes;    /* per-node mode: the other nodes' launchers */
	bool told_nodes;        /* our first failure went to them */

	struct rank *ranks;
	int nranks;             /* local ranks */
	cpu_set_t *cpus;        /* --bind on one machine: per local rank; else NULL */
	int nstarted;
	int nlive;              /* started and not yet exited */
	bool tstp_sent;         /* Ctrl-Z forwarded, no SIGCONT yet: rank stops are ours */

	struct outq qout, qerr;
	struct outq *qmsg;      /* where smddp-run's own messages go when tagging */

	enum phase phase;
	int64_t deadline;       /* of the current phase; 0: none */
	int64_t timeout_at;     /* --timeout; 0: none */

	/* --on-failure continue: the failures let pass, the first of them, and
	 * the ranks that exited 0 */
	int nlost;
	int lost_status;
	char lost_why[512];
	int nfinished;

	enum cause cause;
	int status;             /* exit status for CAUSE_RANK / EXEC / LAUNCH / REMOTE */
	int signo;              /* for CAUSE_SIGNAL */
	char why[512];          /* the first failure in a sentence, for the other nodes */

	/* the flight recorder (trace.c) */
	char trace_dir[1024];   /* the ranks' SMDDP_TRACE_DIR; "" when none */
	bool trace_private;     /* made by smddp-run: removed at the end */
	bool trace_signal;      /* ranks dump on SIGUSR1: sent when the job is stopped */
	bool trace_verdict;     /* every rank is here: read the dumps if the job fails */
	struct gather *trace_gather;  /* per-node mode, node 0: the other nodes' dumps */
	char trace_hint[1100];  /* through mpirun: where the dumps are, said on failure */
};

/* ---- options.c ------------------------------------------------------------ */

void parse_options(int argc, char **argv, struct options *o);

/* ---- plan.c --------------------------------------------------------------- */

void make_plan(const struct options *o, struct plan *p);
void plan_env(const struct options *o, struct plan *p);
void job_layout(const struct plan *p, struct layout *l);
int random_hex(char *out, size_t nhex);
void shm_job_id(const char *id, char *out, size_t outlen);
int pick_free_port(const char *addr);
void shared_identity(const struct plan *p, const char *salt, char *out, size_t nhex);
int shared_token(struct run *r, const char *token);

/* ---- local.c -------------------------------------------------------------- */

bool env_is_foreign_rank(const char *kv);
bool is_rank_env_name(const char *name, size_t n);
bool env_is_ours(const char *kv);
int start_rank(struct run *r, struct rank *rk, int lr);
cpu_set_t *bind_sets(enum bind how, int nranks);

/* ---- output.c ------------------------------------------------------------- */

void outq_init(struct outq *q, int fd);
size_t outq_pending(const struct outq *q);
void outq_flush_some(struct outq *q);
void stream_close(struct rank *rk, struct stream *s);
void stream_read(struct rank *rk, struct stream *s);
bool output_open(struct run *r);

/* ---- loop.c --------------------------------------------------------------- */

void stop_ranks(struct run *r);
void read_signals(struct run *r);
void event_loop(struct run *r);
void remove_job_shm(const char *job_id);
int exit_status(const struct run *r);
void exit_like(const struct run *r);

/* ---- trace.c -------------------------------------------------------------- */

int trace_env(struct run *r, struct plan *p);
int trace_start(struct run *r, struct plan *p, bool pernode);
void trace_signal_ranks(struct run *r);
void trace_nodes(struct run *r);
void trace_host_dir(const char *job_id, char *out, size_t len);
void trace_finish(struct run *r);

/* ---- mpirun.c ------------------------------------------------------------- */

void mpirun_environment(const struct run *r, struct strv *set, struct strv *names);
bool mpirun_found(const char *prog);
void mpirun_argv(const struct run *r, const struct strv *names, struct strv *av);
void dry_run_mpirun(const struct run *r, const struct strv *set, const struct strv *av);
void dry_run_local(const struct run *r);
int rank_wrapper(int argc, char **argv);

/* ---- sagemaker.c ---------------------------------------------------------- */

int worker_wait(const struct options *o, const struct plan *p);

#endif /* SMDDP_RUN_LAUNCH_H */
