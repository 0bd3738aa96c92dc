/* cmd/bench/bench_output.c - what rank 0 prints: the header, the table or JSON lines, progress */
#include "config.h"

#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <smddp/smddp.h>

#include "bench.h"
#include "sweep.h"
#include "../common/tool.h"

/* ---- output ----------------------------------------------------------------- */

bool show_progress;

void progress_clear(void)
{
	if (show_progress)
		fputs("\r\033[K", stderr);
}

void progress_show(const struct result *r, const char *be)
{
	char root[24] = "";

	if (!show_progress)
		return;
	if (r->root >= 0)
		snprintf(root, sizeof(root), " root %d", r->root);
	fprintf(stderr, "\r\033[K%s: %s %s%s%s%s: %" PRIu64 " B ...", be, coll_names[r->coll],
		smddp_dtype_name(r->dtype), r->op < 0 ? "" : " ",
		r->op < 0 ? "" : smddp_op_name((enum smddp_op)r->op), root, r->bytes);
	fflush(stderr);
}

void print_table_header(enum bench_coll c, const char *be, bool ratio)
{
	if (opt.json || rank != 0)
		return;
	printf("#\n# Collective: %s (%s)\n", coll_names[c], be);
	printf("#                                                              out-of-place"
	       "                       in-place          %s\n",
	       ratio ? "   busbw ratio" : "");
	/* -C 1: nccl-tests' header names the CPU time the same way */
	const char *t = opt.cputime ? "cputime" : "   time";

	printf("#       size         count      type   redop    root  %s   algbw   busbw"
	       " #wrong  %s   algbw   busbw #wrong%s\n",
	       t, t, ratio ? "     oop      ip" : "");
	printf("#        (B)    (elements)                               (us)  (GB/s)  (GB/s)"
	       "            (us)  (GB/s)  (GB/s)       %s\n",
	       ratio ? "     (x)     (x)" : "");
	fflush(stdout);
}

static void fmt_time(char *buf, size_t len, double us)
{
	snprintf(buf, len, us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f", us);
}

/* busbw of ours / busbw of theirs; both moved the same bytes with the same
 * factor, so this is their time over ours, which also holds where busbw
 * is 0 (one rank, or a size that rounds to 0 elements). */
static double ratio_of(const struct meas *ours, const struct meas *theirs)
{
	return ours->time_us > 0 ? theirs->time_us / ours->time_us : 0;
}

static void print_json_ratio(FILE *f, const char *pfx, const struct meas *ours,
			     const struct meas *theirs)
{
	if (ours->none || theirs->none)
		fprintf(f, ",\"%s_ratio\":null", pfx);
	else
		fprintf(f, ",\"%s_ratio\":%.6g", pfx, ratio_of(ours, theirs));
}

static void print_json_meas(FILE *f, const char *pfx, const struct meas *m)
{
	if (m->none) {
		fprintf(f, ",\"%s_time_us\":null,\"%s_algbw_gbps\":null,\"%s_busbw_gbps\":null,"
			"\"%s_wrong\":null", pfx, pfx, pfx, pfx);
		if (opt.cputime)
			fprintf(f, ",\"%s_cputime_us\":null", pfx);
		return;
	}
	fprintf(f, ",\"%s_time_us\":%.3f,\"%s_algbw_gbps\":%.6g,\"%s_busbw_gbps\":%.6g,\"%s_wrong\":",
		pfx, m->time_us, pfx, m->algbw, pfx, m->busbw, pfx);
	if (m->wrong < 0)
		fprintf(f, "null");
	else
		fprintf(f, "%" PRId64, m->wrong);
	if (opt.cputime)
		fprintf(f, ",\"%s_cputime_us\":%.3f", pfx, m->cputime_us);
}

FILE *json_file; /* -J, rank 0 */

static void print_json_row(FILE *f, const struct result *r, const char *impl,
			   const struct result *ours)
{
	const char *opname = r->op < 0 ? "none" : smddp_op_name((enum smddp_op)r->op);

	fprintf(f, "{\"collective\":\"%s\",\"impl\":\"%s\",\"size_bytes\":%" PRIu64
		",\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"root\":%d",
		coll_names[r->coll], impl, r->bytes, r->count, smddp_dtype_name(r->dtype), opname,
		r->root);
	print_json_meas(f, "oop", &r->m[0]);
	print_json_meas(f, "ip", &r->m[1]);
	fprintf(f, ",\"nranks\":%d", nranks);
	if (opt.offset)
		fprintf(f, ",\"offset_bytes\":%" PRIu64, opt.offset);
	if (ours) {
		print_json_ratio(f, "oop", &ours->m[0], &r->m[0]);
		print_json_ratio(f, "ip", &ours->m[1], &r->m[1]);
	}
	fprintf(f, "}\n");
	fflush(f);
}

void print_row(const struct result *r, const char *impl, const struct result *ours)
{
	const char *opname = r->op < 0 ? "none" : smddp_op_name((enum smddp_op)r->op);

	if (rank != 0)
		return;
	progress_clear();
	if (json_file)
		print_json_row(json_file, r, impl, ours);
	if (opt.json) {
		print_json_row(stdout, r, impl, ours);
		return;
	}
	printf("%12" PRIu64 "  %12zu  %8s  %6s  %6d", r->bytes, r->count, smddp_dtype_name(r->dtype),
	       opname, r->root);
	for (int k = 0; k < 2; k++) {
		char t[32], w[32];
		if (r->m[k].none) {
			printf("  %7s  %6s  %6s  %5s", "N/A", "N/A", "N/A", "N/A");
			continue;
		}
		fmt_time(t, sizeof(t), opt.cputime ? r->m[k].cputime_us : r->m[k].time_us);
		if (r->m[k].wrong < 0)
			snprintf(w, sizeof(w), "N/A");
		else
			snprintf(w, sizeof(w), "%" PRId64, r->m[k].wrong);
		printf("  %7s  %6.2f  %6.2f  %5s", t, r->m[k].algbw, r->m[k].busbw, w);
	}
	for (int k = 0; ours && k < 2; k++) {
		if (ours->m[k].none || r->m[k].none)
			printf("  %6s", "N/A");
		else
			printf("  %6.2f", ratio_of(&ours->m[k], &r->m[k]));
	}
	printf("\n");
	fflush(stdout);
}

void print_footer(const struct sweep *s)
{
	if (rank != 0 || opt.json)
		return;
	printf("# Out of bounds values : %" PRIu64 " %s\n", s->wrong, s->wrong ? "FAILED" : "OK");
	printf("# Avg bus bandwidth    : %g \n", s->bw_count ? s->bw_sum / (double)s->bw_count : 0.0);
	printf("#\n");
	fflush(stdout);
}

/* ---- the header --------------------------------------------------------------- */

struct rank_info {
	int32_t pid;
	int32_t rank;
	char host[56];
	int32_t gpu; /* -1: host memory */
	char gpu_name[60];
};

void print_header(void)
{
	struct rank_info me = { .pid = (int32_t)getpid(), .rank = rank, .gpu = -1 }, *all;
	int rc;

	gethostname(me.host, sizeof(me.host));
	me.host[sizeof(me.host) - 1] = 0;
#ifdef HAVE_CUDA
	if (opt.on_gpu) {
		me.gpu = bench_cuda_device();
		snprintf(me.gpu_name, sizeof(me.gpu_name), "%s", bench_cuda_device_name());
	}
#endif
	all = calloc((size_t)nranks, sizeof(*all));
	if (!all) {
		tool_warn("rank %d: out of memory", rank);
		smddp_comm_abort(comm);
		exit(TOOL_EXIT_FAILURE);
	}
	rc = smddp_allgather(&me, all, sizeof(me), SMDDP_UINT8, comm, NULL);
	if (rc)
		fail("allgather of the rank table", rc);
	if (rank == 0 && !opt.json) {
		printf("# Collective test starting: %s\n", PROG);
		printf("# nRanks %d minBytes %" PRIu64 " maxBytes %" PRIu64, nranks, opt.minbytes,
		       opt.maxbytes);
		if (opt.stepfactor > 1)
			printf(" step: %ld(factor)", opt.stepfactor);
		else
			printf(" step: %" PRIu64 "(bytes)", opt.stepbytes);
		printf(" warmup iters: %ld iters: %ld validation: %d blocking: %d\n", opt.warmup,
		       opt.iters, opt.check, opt.blocking);
		printf("# libsmddp %s; %s: median over iterations of the slowest rank\n",
		       smddp_version(), opt.cputime ? "cputime (until the call returns)" : "time");
		if (opt.ignored[0])
			printf("# nccl-tests options accepted and ignored: %s\n", opt.ignored);
		if (opt.offset)
			printf("# --offset %" PRIu64 ": rank r's buffers start r x %" PRIu64
			       " bytes into their allocations\n",
			       opt.offset, opt.offset);
		printf("#\n# Using ranks\n");
		for (int r = 0; r < nranks; r++)
			if (all[r].gpu >= 0)
				printf("#  Rank %2d Pid %6d on %10s device %2d [%s]\n", r,
				       (int)all[r].pid, all[r].host, (int)all[r].gpu, all[r].gpu_name);
			else
				printf("#  Rank %2d Pid %6d on %10s\n", r, (int)all[r].pid, all[r].host);
		fflush(stdout);
	}
	free(all);
}
