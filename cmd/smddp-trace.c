/* smddp-trace - reads the flight recorder dumps of all ranks and says who was behind, and where */
#include "config.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/flight.h"
#include "common/tool.h"

#define PROG "smddp-trace"

static void usage(void)
{
	printf("Usage: %s [OPTION]... [DIR|FILE]...\n"
	       "Read the flight recorder dumps of a job (smddp-trace.JOB.RANK.jsonl, written by\n"
	       "libsmddp to SMDDP_TRACE_DIR) and say which ranks were behind, in which call,\n"
	       "and which ranks disagreed.\n"
	       "\n"
	       "  -j, --json            JSON lines: one per rank and communicator, one per finding\n"
	       "      --job ID          the job to read where the dumps of several are found\n"
	       "  -h, --help            show this help and exit\n"
	       "  -V, --version         show the version and exit\n"
	       "\n"
	       "Without DIR or FILE, SMDDP_TRACE_DIR is read.\n"
	       "Exit status: 0 nothing wrong, 1 failure, 2 usage error, 3 a rank was behind or\n"
	       "ranks disagreed.\n"
	       "See smddp-trace(1).\n",
	       PROG);
}

static const char *kind_name(enum flight_kind k)
{
	switch (k) {
	case FLIGHT_MISMATCH: return "mismatch";
	case FLIGHT_BEHIND: return "behind";
	case FLIGHT_STUCK: return "stuck";
	default: return "nodump";
	}
}

static cJSON *int_array(const int *v, int n)
{
	cJSON *a = cJSON_CreateArray();

	for (int i = 0; a && i < n; i++)
		cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
	return a;
}

static void print_json(cJSON *o)
{
	char *s = o ? cJSON_PrintUnformatted(o) : NULL;

	if (s)
		puts(s);
	free(s);
	cJSON_Delete(o);
}

static void json_rank(const struct flight_job *j, const struct flight_comm *c, int r)
{
	const struct flight_part *p = &c->part[r];
	const struct flight_call *k = flight_last(p);
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "type", "rank");
	cJSON_AddStringToObject(o, "job", j->job);
	cJSON_AddStringToObject(o, "comm", c->id);
	cJSON_AddNumberToObject(o, "rank", r);
	cJSON_AddBoolToObject(o, "dump", p->present);
	if (p->present) {
		const struct flight_rank *fr = &j->rank[p->world_rank];

		cJSON_AddNumberToObject(o, "world_rank", p->world_rank);
		cJSON_AddStringToObject(o, "host", fr->host);
		cJSON_AddNumberToObject(o, "pid", (double)fr->pid);
		cJSON_AddStringToObject(o, "reason", fr->reason);
		cJSON_AddNumberToObject(o, "calls", (double)p->calls);
	}
	if (k) {
		cJSON_AddNumberToObject(o, "last_seq", (double)k->seq);
		cJSON_AddStringToObject(o, "coll", k->coll);
		if (k->has_count) {
			cJSON_AddNumberToObject(o, "count", (double)k->count);
			cJSON_AddStringToObject(o, "dtype", k->dtype);
		}
		if (k->has_op)
			cJSON_AddStringToObject(o, "op", k->op);
		if (k->has_root)
			cJSON_AddNumberToObject(o, "root", k->root);
		cJSON_AddStringToObject(o, "state", k->state);
		if (k->error[0])
			cJSON_AddStringToObject(o, "error", k->error);
		if (k->nwaited)
			cJSON_AddItemToObject(o, "waited_on", int_array(k->waited, k->nwaited));
		if (k->end_us)
			cJSON_AddNumberToObject(o, "time_us", (double)(k->end_us - k->start_us));
	}
	print_json(o);
}

static void json_finding(const struct flight_job *j, const struct flight_finding *f)
{
	cJSON *o = cJSON_CreateObject();

	cJSON_AddStringToObject(o, "type", "finding");
	cJSON_AddStringToObject(o, "job", j->job);
	cJSON_AddStringToObject(o, "kind", kind_name(f->kind));
	cJSON_AddStringToObject(o, "comm", f->comm->id);
	if (f->kind != FLIGHT_NODUMP)
		cJSON_AddNumberToObject(o, "seq", (double)f->seq);
	cJSON_AddItemToObject(o, f->kind == FLIGHT_NODUMP ? "ranks" : "behind",
			      int_array(f->behind, f->nbehind));
	if (f->kind != FLIGHT_NODUMP)
		cJSON_AddItemToObject(o, "waiting", int_array(f->waiting, f->nwaiting));
	cJSON_AddStringToObject(o, "message", f->text);
	print_json(o);
}

static void text_rank(const struct flight_job *j, const struct flight_comm *c, int r)
{
	const struct flight_part *p = &c->part[r];
	const struct flight_call *k = flight_last(p);
	char what[200];

	if (!p->present) {
		printf("  rank %d: no dump\n", r);
		return;
	}
	const struct flight_rank *fr = &j->rank[p->world_rank];
	printf("  rank %d", r);
	if (strcmp(c->id, "0"))
		printf(" (world rank %d)", p->world_rank);
	printf(" on %s, pid %ld, dumped on %s: ", fr->host, fr->pid, fr->reason);
	if (!k) {
		printf("no calls\n");
		return;
	}
	flight_describe(k, what, sizeof(what));
	printf("call %llu (%s) %s", (unsigned long long)k->seq, what, k->state);
	if (k->error[0])
		printf(": %s", k->error);
	if (k->end_us && strcmp(k->state, "done"))
		printf(" after %.3f s", (double)(k->end_us - k->start_us) / 1e6);
	for (int i = 0; i < k->nwaited; i++)
		printf("%s%d", i ? "," : k->nwaited > 1 ? ", waiting for ranks " : ", waiting for rank ",
		       k->waited[i]);
	printf("\n");
}

int main(int argc, char **argv)
{
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"job", required_argument, NULL, 'J'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	const char *job = NULL;
	struct flight_job *j = NULL;
	struct flight_finding *f = NULL;
	size_t nf = 0;
	char err[1024];
	int json = 0, c, several = 0;

	tool_init(PROG);
	opterr = 0;
	while ((c = getopt_long(argc, argv, "+:jhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'j': json = 1; break;
		case 'J': job = optarg; break;
		case 'h': usage(); return TOOL_EXIT_OK;
		case 'V': tool_print_version(); return TOOL_EXIT_OK;
		default: tool_getopt_error_long(c, optopt, argv, optind, longopts);
		}
	}
	if (job && !*job)
		tool_usage_error("--job: empty job id");
	const char *env = getenv("SMDDP_TRACE_DIR");
	const char *const *paths = (const char *const *)argv + optind;
	int npaths = argc - optind;

	if (!npaths) {
		if (!env || !*env)
			tool_usage_error("no DIR given and SMDDP_TRACE_DIR is not set");
		paths = &env;
		npaths = 1;
	}
	for (int i = 0; i < npaths; i++)
		if (!*paths[i])
			tool_usage_error("empty file name");
	if (flight_load(paths, npaths, job, &j, &several, err, sizeof(err)) != 0) {
		if (several)
			tool_usage_error("%s: pick one with --job", err);
		tool_warn("%s", err);
		return TOOL_EXIT_FAILURE;
	}
	if (flight_analyze(j, &f, &nf) != 0) {
		tool_warn("out of memory");
		flight_free(j);
		return TOOL_EXIT_FAILURE;
	}
	if (!json) {
		int ndump = 0;

		for (int r = 0; r < j->nranks; r++)
			ndump += j->rank[r].present;
		printf("job %s: %d rank%s, %d dump%s\n", j->job, j->nranks, j->nranks == 1 ? "" : "s",
		       ndump, ndump == 1 ? "" : "s");
	}
	for (size_t i = 0; i < j->ncomm; i++) {
		const struct flight_comm *cm = &j->comm[i];

		if (!json)
			printf("communicator %s (%d rank%s): the last call of each rank\n", cm->id,
			       cm->size, cm->size == 1 ? "" : "s");
		for (int r = 0; r < cm->size; r++) {
			if (json)
				json_rank(j, cm, r);
			else
				text_rank(j, cm, r);
		}
	}
	for (size_t i = 0; i < nf; i++) {
		if (json)
			json_finding(j, &f[i]);
		else
			printf("verdict: %s\n", f[i].text);
	}
	if (!nf && !json)
		printf("verdict: no rank was behind and no ranks disagreed\n");
	flight_findings_free(f, nf);
	flight_free(j);
	if (fflush(stdout) != 0) {
		tool_warn_errno("write error");
		return TOOL_EXIT_FAILURE;
	}
	return nf ? TOOL_EXIT_CHECK : TOOL_EXIT_OK;
}
