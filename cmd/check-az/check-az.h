/* cmd/check-az/check-az.h - the parts of smddp-check-az: IMDS client, host record, verdict, S3, peers */
#ifndef SMDDP_CHECK_AZ_H
#define SMDDP_CHECK_AZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

/* Every record --emit writes carries this, so that --compare can refuse a
 * record of a future, incompatible layout. */
#define CHECKAZ_SCHEMA "smddp-check-az/1"

#define CHECKAZ_ERRLEN 1024

/* ---- imds.c: the EC2 instance metadata service, IMDSv2 first ---------- */

struct imds_config {
	char endpoint[512];     /* "http://169.254.169.254", no trailing '/' */
	double timeout_s;       /* per request, connect included */
	long attempts;          /* total tries of a request that timed out or got 5xx */
	bool v1_disabled;       /* no IMDSv1 fallback */
	bool verbose;           /* one stderr line per request */
};

/* Reads the AWS_* variables with the AWS SDKs' meaning. Returns 0, or 1 when
 * AWS_EC2_METADATA_DISABLED is true, or -1 on a bad value; err says why. */
int imds_config_from_env(struct imds_config *cfg, char *err, size_t errlen);

struct imds;
struct imds *imds_open(const struct imds_config *cfg);
void imds_close(struct imds *m);
/* GET /latest/PATH. 0: *body (malloc'd, trailing whitespace trimmed);
 * 1: not there (404); -1: failure, imds_error() says what and what to try. */
int imds_get(struct imds *m, const char *path, char **body);
const char *imds_error(const struct imds *m);
/* "v2" with a session token, "v1" after the fallback, NULL before any request. */
const char *imds_version(const struct imds *m);

/* ---- storage.c: file systems this host mounts -------------------------- */

/* String arrays used as sets: is s in arr; add s (unless NULL or there). */
bool json_array_has(const cJSON *arr, const char *s);
void json_add_unique(cJSON *arr, const char *s);

/* A JSON array of the lustre/nfs/efs entries of a mounts file
 * (/proc/mounts format); NULL with err when it cannot be read. */
cJSON *storage_from_mounts(const char *path, bool resolve, char *err, size_t errlen);

/* What an AWS file-system DNS name says: "fs-0123.fsx.us-east-1.amazonaws.com"
 * (FSx), "fs-0123.efs.us-east-1.amazonaws.com" or, for an EFS mount target,
 * "us-east-1a.fs-0123.efs.us-east-1.amazonaws.com". Anything may follow the
 * region ("amazonaws.com", "amazonaws.com.cn"). 0 when the name is one. */
struct fs_dns {
	char service[8];        /* "fsx" or "efs" */
	char fs_id[64];
	char region[32];
	char az_name[32];       /* EFS mount target only, else "" */
};
int fs_dns_parse(const char *name, struct fs_dns *out);

/* ---- emit.c: this host's record ---------------------------------------- */

/* The record of this host, or NULL with err. */
cJSON *emit_record(struct imds *m, const char *mounts_path, bool resolve,
                   char *err, size_t errlen);
/* The record that stands for a host whose query failed. */
cJSON *emit_error_record(const char *error);

/* ---- s3.c and peers.c: extra evidence ------------------------------------ */

/* Region of BUCKET from the x-amz-bucket-region header of an unsigned HEAD.
 * endpoint NULL: https://BUCKET.s3.amazonaws.com, else ENDPOINT/BUCKET. */
bool s3_bucket_name_ok(const char *bucket);
int s3_bucket_region(const char *endpoint, const char *bucket, double timeout_s,
                     char *region, size_t regionlen, char *err, size_t errlen);

/* Best of a few TCP connects to HOST[:PORT] ([V6]:PORT), port 22 by default. */
int peer_rtt(const char *spec, double timeout_s, double *rtt_us, char *err, size_t errlen);

/* ---- compare.c: the verdict ---------------------------------------------- */

enum verdict {
	VERDICT_SAME = 0,       /* exit 0 */
	VERDICT_UNDECIDED = 1,  /* exit 1 */
	VERDICT_MISMATCH = 3,   /* exit 3 */
};

/* Extra evidence gathered on this machine, judged with the records. */
struct s3_result {
	const char *bucket;
	char region[32];        /* "" when the HEAD failed */
	char error[CHECKAZ_ERRLEN];
};
struct peer_result {
	const char *peer;
	double rtt_us;          /* < 0 when the connect failed */
	char error[CHECKAZ_ERRLEN];
};

/* Appends the records found in TEXT (JSON values one after another, JSON
 * lines, or arrays of records) to RECORDS. -1 with err on bad JSON. */
int records_parse(cJSON *records, const char *text, const char *origin,
                  char *err, size_t errlen);

/* Judges RECORDS, prints the human report (or with json, one JSON object) to
 * OUT, warnings to stderr, and returns the verdict, which is the exit status. */
enum verdict compare_records(const cJSON *records, const struct s3_result *s3, size_t ns3,
                             const struct peer_result *peers, size_t npeers,
                             bool json, FILE *out);

#endif /* SMDDP_CHECK_AZ_H */
