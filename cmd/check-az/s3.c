/* cmd/check-az/s3.c - the region of an S3 bucket, from an unsigned HEAD */

/*
 * S3 answers a HEAD of a bucket with x-amz-bucket-region whether or not the
 * caller may read it (200, 301 to the right region, 403 to a stranger), so no
 * credentials and no signing are needed. Same-region matters for price and
 * speed; S3 is regional, so this is all that can be said about its AZ.
 */
#include "config.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <curl/curl.h>

#include "check-az.h"

struct hdr_state {
	char *region;
	size_t len;
};

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
	struct hdr_state *h = arg;
	size_t n = size * nmemb;
	static const char name[] = "x-amz-bucket-region:";
	if (n > sizeof name - 1 && strncasecmp(data, name, sizeof name - 1) == 0) {
		const char *v = data + sizeof name - 1;
		const char *end = data + n;
		while (v < end && isspace((unsigned char)*v))
			v++;
		while (end > v && isspace((unsigned char)end[-1]))
			end--;
		snprintf(h->region, h->len, "%.*s", (int)(end - v), v);
	}
	return n;
}

bool s3_bucket_name_ok(const char *b)
{
	size_t n = strlen(b);
	if (n < 3 || n > 63)
		return false;
	for (const char *p = b; *p; p++)
		if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p) && *p != '-' && *p != '.')
			return false;
	return true;
}

int s3_bucket_region(const char *endpoint, const char *bucket, double timeout_s,
                     char *region, size_t regionlen, char *err, size_t errlen)
{
	region[0] = '\0';
	if (!s3_bucket_name_ok(bucket)) {
		snprintf(err, errlen, "'%s' is not an S3 bucket name (3 to 63 of a-z 0-9 . -)", bucket);
		return -1;
	}
	char url[1024];
	if (endpoint) {
		size_t n = strlen(endpoint);
		while (n > 0 && endpoint[n - 1] == '/')
			n--;
		snprintf(url, sizeof url, "%.*s/%s", (int)n, endpoint, bucket);
	} else {
		snprintf(url, sizeof url, "https://%s.s3.amazonaws.com/", bucket);
	}
	CURL *c = curl_easy_init();
	if (!c) {
		snprintf(err, errlen, "curl_easy_init failed");
		return -1;
	}
	char cerr[CURL_ERROR_SIZE] = "";
	struct hdr_state h = { region, regionlen };
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
	curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(c, CURLOPT_HEADERDATA, &h);
	curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(c, CURLOPT_USERAGENT, PACKAGE_NAME "/" PACKAGE_VERSION " smddp-check-az");
	CURLcode rc = curl_easy_perform(c);
	long status = 0;
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
	curl_easy_cleanup(c);
	if (rc != CURLE_OK) {
		snprintf(err, errlen, "HEAD %s: %s", url, cerr[0] ? cerr : curl_easy_strerror(rc));
		return -1;
	}
	if (!region[0]) {
		snprintf(err, errlen, "HEAD %s: HTTP %ld without x-amz-bucket-region%s", url, status,
		         status == 404 ? " (no such bucket)" : "");
		return -1;
	}
	return 0;
}
