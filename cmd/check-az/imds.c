/* cmd/check-az/imds.c - IMDSv2 client over libcurl, with the AWS SDKs' environment and fallbacks */

/*
 * Design. The AWS SDKs (botocore, the Java and Go SDKs) agree on how to talk
 * to the instance metadata service, and users configure it through the same
 * variables for every tool, so this client follows them rather than invent:
 *
 *  - PUT /latest/api/token with X-aws-ec2-metadata-token-ttl-seconds gets a
 *    session token, sent with every GET as X-aws-ec2-metadata-token (IMDSv2).
 *  - 403, 404 or 405 on that PUT means an IMDS without v2 (or one that
 *    refuses it): fall back to plain GETs (IMDSv1), unless
 *    AWS_EC2_METADATA_V1_DISABLED is true.
 *  - A PUT that connects but gets no answer is the container case: the PUT's
 *    response is sent with an IP TTL of HttpPutResponseHopLimit (1 by
 *    default), and a container behind a bridge is one hop further, so the
 *    answer is dropped on the way. GETs are not limited that way, which is
 *    why the SDKs fall back to IMDSv1 here too. We say so, with the fix.
 *  - 401 on a GET means the token expired or was refused: renew it once.
 *  - Timeouts and 5xx are retried AWS_METADATA_SERVICE_NUM_ATTEMPTS times in
 *    all; other answers are final.
 *  - EC2's metadata service signs every answer "Server: EC2ws". A 403 or 404
 *    without it, where no token was had, comes from something else at that
 *    address (a proxy, a web server, another cloud): then we say that there
 *    is no metadata service here, rather than that EC2's is turned off, or
 *    that it lacks an item.
 *
 * Requests never go through a proxy: http_proxy in the environment must not
 * send the link-local metadata address to a proxy that would answer for
 * another machine.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "check-az.h"
#include "common/tool.h"

#define TOKEN_TTL_S     21600   /* the longest IMDS grants */
#define BODY_MAX        (1u << 20)

struct imds {
	struct imds_config cfg;
	CURL *curl;
	enum { TOK_NONE, TOK_V2, TOK_V1 } state;
	char token[512];
	char error[CHECKAZ_ERRLEN];
};

struct reply {
	long status;            /* 0: no HTTP answer */
	CURLcode rc;
	bool connected;         /* the TCP connection was made */
	char *body;
	size_t len;
	bool too_big;
	char server[64];        /* its Server header, "" if none */
	char curl_error[CURL_ERROR_SIZE];
};

static bool env_true(const char *name)
{
	const char *v = getenv(name);
	return v && strcasecmp(v, "true") == 0;
}

int imds_config_from_env(struct imds_config *cfg, char *err, size_t errlen)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->timeout_s = 1;
	cfg->attempts = 1;

	if (env_true("AWS_EC2_METADATA_DISABLED")) {
		snprintf(err, errlen, "the instance metadata service is disabled by "
		         "AWS_EC2_METADATA_DISABLED=%s: unset it to query it",
		         getenv("AWS_EC2_METADATA_DISABLED"));
		return 1;
	}
	cfg->v1_disabled = env_true("AWS_EC2_METADATA_V1_DISABLED");

	const char *mode = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
	const char *dflt = "http://169.254.169.254";
	if (mode && *mode) {
		if (strcasecmp(mode, "IPv6") == 0)
			dflt = "http://[fd00:ec2::254]";
		else if (strcasecmp(mode, "IPv4") != 0) {
			snprintf(err, errlen, "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE=%s: "
			         "expected IPv4 or IPv6", mode);
			return -1;
		}
	}
	const char *ep = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	if (!ep || !*ep)
		ep = dflt;
	else if (strncmp(ep, "http://", 7) != 0 && strncmp(ep, "https://", 8) != 0) {
		snprintf(err, errlen, "AWS_EC2_METADATA_SERVICE_ENDPOINT=%s: "
		         "expected a URL starting with http:// or https://", ep);
		return -1;
	}
	size_t n = strlen(ep);
	while (n > 0 && ep[n - 1] == '/')
		n--;
	if (n >= sizeof cfg->endpoint) {
		snprintf(err, errlen, "AWS_EC2_METADATA_SERVICE_ENDPOINT is too long");
		return -1;
	}
	memcpy(cfg->endpoint, ep, n);
	cfg->endpoint[n] = '\0';

	const char *t = getenv("AWS_METADATA_SERVICE_TIMEOUT");
	if (t && *t && tool_parse_double(t, 0.001, 3600, &cfg->timeout_s) < 0) {
		snprintf(err, errlen, "AWS_METADATA_SERVICE_TIMEOUT=%s: expected seconds "
		         "(more than 0, at most 3600)", t);
		return -1;
	}
	const char *a = getenv("AWS_METADATA_SERVICE_NUM_ATTEMPTS");
	if (a && *a && tool_parse_long(a, 1, 100, &cfg->attempts) < 0) {
		snprintf(err, errlen, "AWS_METADATA_SERVICE_NUM_ATTEMPTS=%s: expected "
		         "a whole number from 1 to 100", a);
		return -1;
	}
	return 0;
}

struct imds *imds_open(const struct imds_config *cfg)
{
	struct imds *m = calloc(1, sizeof *m);
	if (!m)
		return NULL;
	m->cfg = *cfg;
	m->curl = curl_easy_init();
	if (!m->curl) {
		free(m);
		return NULL;
	}
	return m;
}

void imds_close(struct imds *m)
{
	if (!m)
		return;
	curl_easy_cleanup(m->curl);
	free(m);
}

const char *imds_error(const struct imds *m)
{
	return m->error;
}

const char *imds_version(const struct imds *m)
{
	return m->state == TOK_V2 ? "v2" : m->state == TOK_V1 ? "v1" : NULL;
}

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
	struct reply *r = arg;
	size_t n = size * nmemb;
	if (r->len + n > BODY_MAX) {
		r->too_big = true;
		return 0;
	}
	char *b = realloc(r->body, r->len + n + 1);
	if (!b)
		return 0;
	memcpy(b + r->len, data, n);
	r->body = b;
	r->len += n;
	b[r->len] = '\0';
	return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct reply *r = arg;
	size_t n = size * nmemb;
	if (n > 7 && strncasecmp(data, "Server:", 7) == 0) {
		size_t i = 7;
		while (i < n && (data[i] == ' ' || data[i] == '\t'))
			i++;
		size_t len = n - i;
		while (len > 0 && isspace((unsigned char)data[i + len - 1]))
			len--;
		if (len >= sizeof r->server)
			len = sizeof r->server - 1;
		memcpy(r->server, data + i, len);
		r->server[len] = '\0';
	}
	return n;
}

/* Answered as EC2's metadata service answers. */
static bool looks_like_imds(const struct reply *r)
{
	return strncasecmp(r->server, "EC2ws", 5) == 0;
}

static void reply_free(struct reply *r)
{
	free(r->body);
	memset(r, 0, sizeof *r);
}

/* One HTTP exchange, retried on timeouts, connection errors and 5xx. */
static void request(struct imds *m, bool put, const char *path, struct reply *r)
{
	char url[1024], hdr[600];
	snprintf(url, sizeof url, "%s/latest/%s", m->cfg.endpoint, path);
	if (put)
		snprintf(hdr, sizeof hdr, "X-aws-ec2-metadata-token-ttl-seconds: %d", TOKEN_TTL_S);
	else if (m->state == TOK_V2)
		snprintf(hdr, sizeof hdr, "X-aws-ec2-metadata-token: %s", m->token);
	else
		hdr[0] = '\0';

	for (long attempt = 1;; attempt++) {
		memset(r, 0, sizeof *r);
		CURL *c = m->curl;
		curl_easy_reset(c);
		struct curl_slist *hl = NULL;
		if (hdr[0])
			hl = curl_slist_append(NULL, hdr);
		long ms = (long)(m->cfg.timeout_s * 1000 + 0.5);
		curl_easy_setopt(c, CURLOPT_URL, url);
		curl_easy_setopt(c, CURLOPT_NOPROXY, "*");
		curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
		curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, ms > 0 ? ms : 1);
		curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, ms > 0 ? ms : 1);
		curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
		curl_easy_setopt(c, CURLOPT_HTTPHEADER, hl);
		curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
		curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
		curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
		curl_easy_setopt(c, CURLOPT_HEADERDATA, r);
		curl_easy_setopt(c, CURLOPT_ERRORBUFFER, r->curl_error);
		curl_easy_setopt(c, CURLOPT_USERAGENT, PACKAGE_NAME "/" PACKAGE_VERSION " smddp-check-az");
		if (put) {
			curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
			curl_easy_setopt(c, CURLOPT_POSTFIELDS, "");
			curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE, 0L);
		}
		r->rc = curl_easy_perform(c);
		curl_slist_free_all(hl);
		curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
		/* pretransfer: the request was about to go out on a connection,
		 * new or reused (a reused one has no connect time) */
		curl_off_t connect_us = 0, pretransfer_us = 0;
		curl_easy_getinfo(c, CURLINFO_CONNECT_TIME_T, &connect_us);
		curl_easy_getinfo(c, CURLINFO_PRETRANSFER_TIME_T, &pretransfer_us);
		r->connected = connect_us > 0 || pretransfer_us > 0 || r->status > 0;
		if (!r->curl_error[0] && r->rc != CURLE_OK)
			snprintf(r->curl_error, sizeof r->curl_error, "%s", curl_easy_strerror(r->rc));
		if (m->cfg.verbose) {
			if (r->rc == CURLE_OK)
				tool_warn("%s %s: HTTP %ld", put ? "PUT" : "GET", url, r->status);
			else
				tool_warn("%s %s: %s", put ? "PUT" : "GET", url, r->curl_error);
		}
		bool retry = (r->rc != CURLE_OK && !r->too_big) || r->status >= 500;
		if (!retry || attempt >= m->cfg.attempts)
			return;
		reply_free(r);
	}
}

static void trim(char *s)
{
	size_t n = strlen(s);
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		s[--n] = '\0';
}

static const char *fix_hop_limit =
	"if this runs in a container (docker bridge network, a Kubernetes pod), the "
	"token's answer is dropped one hop short: IMDSv2 sends it with an IP TTL of "
	"HttpPutResponseHopLimit, 1 by default, and a container needs 2 (aws ec2 "
	"modify-instance-metadata-options --instance-id ID --http-put-response-hop-limit 2), "
	"or use the host network";

/* A request that got no HTTP answer: err says why, in the caller's words. */
static void no_answer(struct imds *m, const struct reply *r, const char *what)
{
	if (r->too_big)
		snprintf(m->error, sizeof m->error, "%s: the answer of %s is larger than %u bytes",
		         what, m->cfg.endpoint, BODY_MAX);
	else if (r->rc == CURLE_OPERATION_TIMEDOUT && !r->connected)
		snprintf(m->error, sizeof m->error, "%s: no connection to %s within %g s "
		         "(not an EC2 instance, IMDS turned off, or a wrong "
		         "AWS_EC2_METADATA_SERVICE_ENDPOINT[_MODE]; raise "
		         "AWS_METADATA_SERVICE_TIMEOUT on a busy host)",
		         what, m->cfg.endpoint, m->cfg.timeout_s);
	else if (r->rc == CURLE_OPERATION_TIMEDOUT)
		snprintf(m->error, sizeof m->error, "%s: %s did not answer within %g s "
		         "(raise AWS_METADATA_SERVICE_TIMEOUT or "
		         "AWS_METADATA_SERVICE_NUM_ATTEMPTS on a busy host)",
		         what, m->cfg.endpoint, m->cfg.timeout_s);
	else
		snprintf(m->error, sizeof m->error, "%s: cannot reach %s: %s (not an EC2 "
		         "instance, or a wrong AWS_EC2_METADATA_SERVICE_ENDPOINT[_MODE])",
		         what, m->cfg.endpoint, r->curl_error);
}

/* Gets a session token, or settles for IMDSv1 where the SDKs would. */
static int fetch_token(struct imds *m)
{
	struct reply r;
	request(m, true, "api/token", &r);
	int rc = -1;
	if (r.rc == CURLE_OK && r.status == 200 && r.body) {
		trim(r.body);
		if (!r.body[0] || strlen(r.body) >= sizeof m->token || strpbrk(r.body, "\r\n")) {
			snprintf(m->error, sizeof m->error, "the IMDSv2 token from %s is "
			         "empty, too long or not one line", m->cfg.endpoint);
			goto out;
		}
		strcpy(m->token, r.body);
		m->state = TOK_V2;
		rc = 0;
		goto out;
	}
	if (r.rc == CURLE_OK && (r.status == 403 || r.status == 404 || r.status == 405)) {
		if (m->cfg.v1_disabled) {
			snprintf(m->error, sizeof m->error, "%s refused an IMDSv2 session token "
			         "(HTTP %ld to PUT /latest/api/token) and "
			         "AWS_EC2_METADATA_V1_DISABLED=true forbids the IMDSv1 fallback",
			         m->cfg.endpoint, r.status);
			goto out;
		}
		if (m->cfg.verbose)
			tool_warn("no IMDSv2 token (HTTP %ld): falling back to IMDSv1", r.status);
		m->state = TOK_V1;
		rc = 0;
		goto out;
	}
	if (r.rc == CURLE_OPERATION_TIMEDOUT && r.connected) {
		/* The hop-limit signature: connected, asked, and the answer never came. */
		if (m->cfg.v1_disabled) {
			snprintf(m->error, sizeof m->error, "the IMDSv2 token request to %s "
			         "timed out after %g s and AWS_EC2_METADATA_V1_DISABLED=true "
			         "forbids the IMDSv1 fallback; %s",
			         m->cfg.endpoint, m->cfg.timeout_s, fix_hop_limit);
			goto out;
		}
		tool_warn("the IMDSv2 token request to %s timed out after %g s, falling "
		          "back to IMDSv1; %s", m->cfg.endpoint, m->cfg.timeout_s, fix_hop_limit);
		m->state = TOK_V1;
		rc = 0;
		goto out;
	}
	if (r.rc != CURLE_OK) {
		no_answer(m, &r, "IMDSv2 token request");
		goto out;
	}
	snprintf(m->error, sizeof m->error, "%s answered HTTP %ld to PUT /latest/api/token%s",
	         m->cfg.endpoint, r.status,
	         r.status == 400 ? " (a bad X-aws-ec2-metadata-token-ttl-seconds, or "
	                           "a forwarded request: IMDS refuses X-Forwarded-For)" : "");
out:
	reply_free(&r);
	return rc;
}

int imds_get(struct imds *m, const char *path, char **body)
{
	*body = NULL;
	if (m->state == TOK_NONE && fetch_token(m) < 0)
		return -1;

	bool renewed = false;
	for (;;) {
		struct reply r;
		request(m, false, path, &r);
		if (r.rc != CURLE_OK) {
			char what[300];
			snprintf(what, sizeof what, "GET /latest/%s", path);
			no_answer(m, &r, what);
			reply_free(&r);
			return -1;
		}
		long st = r.status;
		if ((st == 403 || st == 404) && m->state == TOK_V1 && !looks_like_imds(&r)) {
			/* no token, and not EC2's way of answering: someone else */
			char server[96] = "no Server header";
			if (r.server[0])
				snprintf(server, sizeof server, "Server: %s", r.server);
			snprintf(m->error, sizeof m->error, "%s answered HTTP %ld to GET /latest/%s, "
			         "but not as EC2's metadata service answers (%s, not EC2ws): no "
			         "instance metadata service here (not EC2, or IMDS off)",
			         m->cfg.endpoint, st, path, server);
			reply_free(&r);
			return -1;
		}
		if (st == 200) {
			*body = r.body ? r.body : strdup("");
			if (!*body) {
				snprintf(m->error, sizeof m->error, "out of memory");
				return -1;
			}
			trim(*body);
			return 0;
		}
		reply_free(&r);
		if (st == 404)
			return 1;
		if (st == 401 && m->state == TOK_V2 && !renewed) {
			/* expired or revoked: one new token, then the same GET again */
			renewed = true;
			m->state = TOK_NONE;
			if (fetch_token(m) < 0)
				return -1;
			continue;
		}
		if (st == 401 && m->state == TOK_V1)
			snprintf(m->error, sizeof m->error, "%s requires IMDSv2 (HTTP 401 to an "
			         "IMDSv1 GET /latest/%s) but gave no session token",
			         m->cfg.endpoint, path);
		else if (st == 401)
			snprintf(m->error, sizeof m->error, "%s refused a fresh IMDSv2 token "
			         "(HTTP 401 to GET /latest/%s, twice)", m->cfg.endpoint, path);
		else if (st == 403)
			snprintf(m->error, sizeof m->error, "%s answered 403 Forbidden to GET "
			         "/latest/%s: the instance metadata service is turned off for "
			         "this instance (aws ec2 modify-instance-metadata-options "
			         "--instance-id ID --http-endpoint enabled)", m->cfg.endpoint, path);
		else
			snprintf(m->error, sizeof m->error, "%s answered HTTP %ld to GET /latest/%s",
			         m->cfg.endpoint, st, path);
		return -1;
	}
}
