/* cmd/run/run.h - what the parts of smddp-run share: options, the plan, small helpers */
#ifndef SMDDP_RUN_RUN_H
#define SMDDP_RUN_RUN_H

/*
 * smddp-run is split by concern, as util-linux splits lscpu: main() and
 * the steps of a launch in cmd/smddp-run.c; the command line in options.c;
 * the plan from it in plan.c, from SageMaker's configuration in
 * sagemaker.c, from Slurm in slurm.c; the launchers' rendezvous of per-node
 * mode in nodes.c; mpirun in mpirun.c; this host's ranks in local.c, their
 * output in output.c, the loop that watches them in loop.c (these share
 * struct run, in launch.h); helpers in util.c. Each source of a plan turns
 * what it knows into a struct plan.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdnoreturn.h>

#include "common/tool.h"

#define MAX_NPROC        1024
#define MAX_HOSTS        4096
#define DEFAULT_GRACE_S  5.0
#define DEFAULT_PORT     29500   /* across hosts: torchrun's default */
#define DEFAULT_WORKER_WAIT_S 600.0
#define DEFAULT_JOIN_TIMEOUT_S 300.0

/* ---- options ------------------------------------------------------------ */

enum bind { BIND_UNSET, BIND_NONE, BIND_CORE, BIND_NUMA };
enum launcher { LAUNCH_AUTO, LAUNCH_NONE, LAUNCH_SLURM };

/* A growable, NULL-terminated vector of strings it owns. */
struct strv {
	char **v;
	size_t n, cap;
};

struct options {
	long nproc;             /* 0: detect */
	int tag;                /* -1: default (on when nproc > 1) */
	const char *master_addr;  /* NULL: default */
	long master_port;       /* 0: pick a free one (local) or DEFAULT_PORT */
	double grace_s;
	bool keep_going;        /* --on-failure continue */
	int store;              /* --store: 1 launcher, 0 rank0, -1 default */
	double timeout_s;       /* 0: none */
	const char *timeout_arg;
	char **argv;            /* PROGRAM ARGS... */

	const char *hosts;      /* --hosts */
	const char *hostfile;   /* --hostfile */
	bool dry_run;
	struct strv mpirun_args;  /* --mpirun-args, split into words */
	struct strv envs;       /* --env VAR[=VALUE], in order */
	enum bind bind;
	const char *netif;      /* --network-interface */
	int sagemaker;          /* -1: auto-detect, 0: --no-sagemaker, 1: --sagemaker */
	const char *resource_config, *hyperparameters, *distribution;
	double worker_wait_s;   /* --worker-wait */

	/* per-node mode (torchrun's) */
	long nnodes;            /* 0: not given */
	long node_rank;         /* -1: not given */
	long launcher_port;     /* 0: master port + 1 */
	double join_timeout_s;
	bool standalone;
	const char *job_id;     /* --rdzv-id */

	bool unbuffered;        /* --unbuffered */
	const char *trace_dir;  /* --trace-dir */
	enum launcher launcher; /* --launcher */
	struct strv srun_args;  /* --srun-args, split into words */
};

/* ---- the plan: what runs where -------------------------------------------- */

enum plan_kind {
	PLAN_LOCAL,     /* smddp-run forks this host's ranks (one or many hosts) */
	PLAN_MPIRUN,    /* smddp-run runs mpirun, which runs the wrapper per rank */
	PLAN_SRUN,      /* smddp-run runs srun, which runs smddp-run per node */
	PLAN_WORKER,    /* SageMaker, an mpirun form, not the master: wait for it */
	PLAN_IDLE,      /* SageMaker: this host is not in the training groups */
};

struct plan {
	enum plan_kind kind;
	const char *form;        /* "local", "hosts", "pytorchddp"... */
	struct strv hosts;       /* in job order; the first is the master */
	const char *current_host;
	int nnodes;              /* per-node mode: the job's nodes; else 0 */
	int node_rank;
	long ppn;                /* ranks per host */
	char *master_addr;
	long master_port;        /* 0: pick a free one */
	const char *netif;
	const char *instance_type;
	struct strv env;         /* NAME=VALUE set beyond the rank variables */
	struct strv fwd;         /* more names for mpirun -x (--env VAR) */
	struct strv mpi_opts;    /* custom_mpi_options, split into words */
	char *tf_config[2];      /* parameter_server: local rank 0 (ps), 1 (worker) */
};

/* ---- util.c --------------------------------------------------------------- */

noreturn void out_of_memory(void);
char *xstrdup(const char *s);
char *xasprintf(const char *fmt, ...) TOOL_PRINTF(1, 2);
void strv_take(struct strv *sv, char *s);       /* takes ownership of S */
void strv_add(struct strv *sv, const char *s);
void strv_free(struct strv *sv);                /* the strings too */
bool strv_has(const struct strv *sv, const char *s);
int cmp_str(const void *a, const void *b);      /* for qsort() of strings */
char *envv_find(const struct strv *e, const char *name);
void envv_set(struct strv *e, const char *name, const char *value, bool override);
bool valid_env_name(const char *s, size_t n);
int split_words(const char *s, struct strv *out);
void print_quoted(FILE *f, const char *s);
void print_words(char *const *av, const bool *newline);
bool valid_host(const char *h);
int count_gpus(void);
char *self_path(void);

/* ---- sagemaker.c ---------------------------------------------------------- */

bool sm_detect(void);
void sagemaker_plan(const struct options *o, struct plan *p);
int efa_rdma(const char *type);     /* -1: not an EFA type; else device RDMA */

/* ---- slurm.c (and slurm.h) ------------------------------------------------ */

bool slurm_wanted(const struct options *o);
void slurm_plan(const struct options *o, struct plan *p);
void slurm_argv(const struct options *o, const struct plan *p, int tag, struct strv *av);
void slurm_dry_run(const struct plan *p, const struct strv *av);

#endif /* SMDDP_RUN_RUN_H */
