/* smddp-check-az - check that a cluster's instances, subnets and storage share one Availability Zone */

/*
 * Three modes, one per job:
 *   --emit       this host's record (IMDS + /proc/mounts), one JSON line;
 *   --compare    many hosts' records in, a verdict out;
 *   (neither)    this host alone: its record, judged as a cluster of one
 *                (storage, S3 buckets and peers checked against it).
 * A failed query still emits a record (with "error"), so that a pipe of
 * many hosts' --emit into --compare cannot lose a host silently.
 */
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>

#include "check-az.h"
#include "common/tool.h"

#define INPUT_MAX       (64u << 20)
#define S3_TIMEOUT_S    10.0
#define PEER_TIMEOUT_S  2.0
#define MAX_ITEMS       256

enum mode { MODE_CHECK, MODE_EMIT, MODE_COMPARE };

struct options {
	enum mode mode;
	bool json;
	bool resolve;
	bool verbose;
	const char *mounts;
	const char *s3_endpoint;
	const char *s3[MAX_ITEMS];
	size_t ns3;
	char *peers[MAX_ITEMS];
	size_t npeers;
	char **files;
	int nfiles;
};

static void usage(void)
{
	printf("Usage: %s [--emit | --compare [FILE...|-]] [OPTIONS]\n"
	       "\n"
	       "Check that the instances, subnets and storage of a cluster are in one\n"
	       "Availability Zone, from the EC2 instance metadata service (IMDSv2).\n"
	       "\n"
	       "Modes:\n"
	       "  -e, --emit             print this host's record as one JSON line\n"
	       "  -c, --compare          judge the records in FILEs (JSON lines or arrays;\n"
	       "                         '-' or none: standard input)\n"
	       "                         without either: check this host alone\n"
	       "\n"
	       "Options:\n"
	       "  -j, --json             the verdict as one JSON object\n"
	       "  -m, --mounts FILE      read mounts from FILE, not /proc/mounts\n"
	       "      --no-resolve       do not resolve storage server names\n"
	       "      --s3 BUCKET        compare the region of BUCKET with the hosts'\n"
	       "                         (repeatable)\n"
	       "      --s3-endpoint URL  HEAD URL/BUCKET instead of https://BUCKET.s3.amazonaws.com\n"
	       "      --peers HOST[:PORT][,...]\n"
	       "                         TCP connect round trips to peers (port 22 by\n"
	       "                         default): a hint, never part of the verdict\n"
	       "  -v, --verbose          log every metadata request on stderr\n"
	       "  -h, --help             show this help and exit\n"
	       "  -V, --version          show the version and exit\n"
	       "\n"
	       "Exit status: 0 one AZ, 3 a mismatch, 1 undecided or a query failed, 2 usage.\n"
	       "See smddp-check-az(1).\n", tool_name());
}

static void parse_args(int argc, char **argv, struct options *o)
{
	enum { OPT_NO_RESOLVE = 256, OPT_S3, OPT_S3_ENDPOINT, OPT_PEERS };
	static const struct option longopts[] = {
		{ "emit", no_argument, NULL, 'e' },
		{ "compare", no_argument, NULL, 'c' },
		{ "json", no_argument, NULL, 'j' },
		{ "mounts", required_argument, NULL, 'm' },
		{ "no-resolve", no_argument, NULL, OPT_NO_RESOLVE },
		{ "s3", required_argument, NULL, OPT_S3 },
		{ "s3-endpoint", required_argument, NULL, OPT_S3_ENDPOINT },
		{ "peers", required_argument, NULL, OPT_PEERS },
		{ "verbose", no_argument, NULL, 'v' },
		{ "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	memset(o, 0, sizeof *o);
	o->resolve = true;
	o->s3_endpoint = getenv("SMDDP_CHECK_AZ_S3_ENDPOINT");
	if (o->s3_endpoint && !*o->s3_endpoint)
		o->s3_endpoint = NULL;
	bool emit = false, compare = false;
	int c;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":ecjm:vhV", longopts, NULL)) != -1) {
		switch (c) {
		case 'e': emit = true; break;
		case 'c': compare = true; break;
		case 'j': o->json = true; break;
		case 'm':
			if (!*optarg)
				tool_usage_error("--mounts needs a file name");
			o->mounts = optarg;
			break;
		case OPT_NO_RESOLVE: o->resolve = false; break;
		case OPT_S3:
			if (o->ns3 == MAX_ITEMS)
				tool_usage_error("more than %d --s3 buckets", MAX_ITEMS);
			if (!s3_bucket_name_ok(optarg))
				tool_usage_error("--s3 '%s': not an S3 bucket name (3 to 63 of a-z 0-9 . -)",
				                 optarg);
			o->s3[o->ns3++] = optarg;
			break;
		case OPT_S3_ENDPOINT:
			if (strncmp(optarg, "http://", 7) != 0 && strncmp(optarg, "https://", 8) != 0)
				tool_usage_error("--s3-endpoint '%s': expected an http:// or https:// URL",
				                 optarg);
			o->s3_endpoint = optarg;
			break;
		case OPT_PEERS: {
			char *save = NULL;
			for (char *p = strtok_r(optarg, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
				if (o->npeers == MAX_ITEMS)
					tool_usage_error("more than %d peers", MAX_ITEMS);
				o->peers[o->npeers++] = p;
			}
			if (!o->npeers)
				tool_usage_error("--peers needs HOST[:PORT][,...]");
			break;
		}
		case 'v': o->verbose = true; break;
		case 'h': usage(); exit(TOOL_EXIT_OK);
		case 'V': tool_print_version(); exit(TOOL_EXIT_OK);
		default: tool_getopt_error_long(c, optopt, argv, optind, longopts);
		}
	}
	if (emit && compare)
		tool_usage_error("--emit and --compare exclude each other");
	o->mode = emit ? MODE_EMIT : compare ? MODE_COMPARE : MODE_CHECK;
	o->files = argv + optind;
	o->nfiles = argc - optind;
	if (o->mode != MODE_COMPARE && o->nfiles > 0)
		tool_usage_error("unexpected argument '%s' (FILEs go with --compare)", argv[optind]);
	if (o->mode == MODE_COMPARE && (o->mounts || !o->resolve))
		tool_usage_error("--mounts and --no-resolve describe this host: not with --compare");
	if (o->mode == MODE_EMIT && (o->ns3 || o->npeers))
		tool_usage_error("--s3 and --peers are judged, not emitted: use them with "
		                 "--compare or alone");
	if (!o->mounts)
		o->mounts = "/proc/mounts";
}

/* This host's record, or an error record; false when the query failed. */
static bool this_host(const struct options *o, cJSON **rec)
{
	char err[CHECKAZ_ERRLEN] = "";
	struct imds_config cfg;
	int rc = imds_config_from_env(&cfg, err, sizeof err);
	if (rc != 0) {
		tool_warn("%s", err);
		*rec = emit_error_record(err);
		return false;
	}
	cfg.verbose = o->verbose;
	struct imds *m = imds_open(&cfg);
	if (!m) {
		snprintf(err, sizeof err, "cannot start libcurl");
		tool_warn("%s", err);
		*rec = emit_error_record(err);
		return false;
	}
	*rec = emit_record(m, o->mounts, o->resolve, err, sizeof err);
	imds_close(m);
	if (!*rec) {
		tool_warn("%s", err);
		*rec = emit_error_record(err);
		return false;
	}
	return true;
}

static char *slurp(FILE *f, const char *name)
{
	size_t len = 0, cap = 65536;
	char *buf = malloc(cap);
	if (!buf)
		return NULL;
	for (;;) {
		if (cap - len < 2) {
			if (cap >= INPUT_MAX) {
				tool_warn("%s: more than %u bytes of records", name, INPUT_MAX);
				free(buf);
				return NULL;
			}
			char *b = realloc(buf, cap * 2);
			if (!b) {
				free(buf);
				return NULL;
			}
			buf = b;
			cap *= 2;
		}
		size_t n = fread(buf + len, 1, cap - len - 1, f);
		len += n;
		if (n == 0) {
			if (ferror(f)) {
				tool_warn_errno("%s", name);
				free(buf);
				return NULL;
			}
			break;
		}
	}
	buf[len] = '\0';
	return buf;
}

static int read_records(const struct options *o, cJSON *records)
{
	char err[CHECKAZ_ERRLEN];
	int n = o->nfiles ? o->nfiles : 1;
	bool stdin_read = false;
	for (int i = 0; i < n; i++) {
		const char *name = o->nfiles ? o->files[i] : "-";
		bool is_stdin = strcmp(name, "-") == 0;
		if (is_stdin && stdin_read)
			continue;
		FILE *f = is_stdin ? stdin : fopen(name, "re");
		if (!f) {
			tool_warn_errno("%s", name);
			return -1;
		}
		char *text = slurp(f, is_stdin ? "standard input" : name);
		if (!is_stdin)
			fclose(f);
		stdin_read |= is_stdin;
		if (!text)
			return -1;
		int rc = records_parse(records, text, is_stdin ? "standard input" : name,
		                       err, sizeof err);
		free(text);
		if (rc < 0) {
			tool_warn("%s", err);
			return -1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	tool_init("smddp-check-az");
	struct options o;
	parse_args(argc, argv, &o);
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
		tool_warn("cannot initialise libcurl");
		return TOOL_EXIT_FAILURE;
	}
	int status;
	cJSON *records = cJSON_CreateArray();

	if (o.mode == MODE_EMIT) {
		cJSON *rec;
		bool ok = this_host(&o, &rec);
		char *s = cJSON_PrintUnformatted(rec);
		printf("%s\n", s);
		free(s);
		cJSON_Delete(rec);
		status = ok ? TOOL_EXIT_OK : TOOL_EXIT_FAILURE;
		goto out;
	}
	if (o.mode == MODE_COMPARE) {
		if (read_records(&o, records) < 0) {
			status = TOOL_EXIT_FAILURE;
			goto out;
		}
	} else {
		cJSON *rec;
		/* A pipe reading --json gets a verdict whatever happened, as from
		 * --compare of the error record (undecided, 1); a reader of the
		 * report has the error on stderr already. */
		if (!this_host(&o, &rec) && !o.json) {
			cJSON_Delete(rec);
			status = TOOL_EXIT_FAILURE;
			goto out;
		}
		cJSON_AddItemToArray(records, rec);
	}

	struct s3_result s3[MAX_ITEMS];
	struct peer_result peers[MAX_ITEMS];
	for (size_t i = 0; i < o.ns3; i++) {
		memset(&s3[i], 0, sizeof s3[i]);
		s3[i].bucket = o.s3[i];
		s3_bucket_region(o.s3_endpoint, o.s3[i], S3_TIMEOUT_S, s3[i].region,
		                 sizeof s3[i].region, s3[i].error, sizeof s3[i].error);
	}
	for (size_t i = 0; i < o.npeers; i++) {
		memset(&peers[i], 0, sizeof peers[i]);
		peers[i].peer = o.peers[i];
		peer_rtt(o.peers[i], PEER_TIMEOUT_S, &peers[i].rtt_us, peers[i].error,
		         sizeof peers[i].error);
	}
	status = (int)compare_records(records, s3, o.ns3, peers, o.npeers, o.json, stdout);
out:
	cJSON_Delete(records);
	curl_global_cleanup();
	if (fflush(stdout) != 0 || ferror(stdout)) {
		tool_warn_errno("standard output");
		if (status == TOOL_EXIT_OK)
			status = TOOL_EXIT_FAILURE;
	}
	return status;
}
