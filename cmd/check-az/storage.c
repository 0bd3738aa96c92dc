/* cmd/check-az/storage.c - the network file systems a host mounts, and what their names say */

/*
 * /proc/mounts names the server as it was given to mount(8), and sometimes
 * what the kernel resolved it to:
 *
 *   lustre  10.0.1.5@tcp:/fsname            MGS NIDs, ':' between failover
 *           10.0.1.5@tcp,10.0.1.6@tcp:/fs   nodes, ',' between one node's NIDs
 *   nfs4    fs-0123.efs.us-east-1.amazonaws.com:/ ... addr=10.0.1.7,...
 *   nfs     [fd00::5]:/export ... addr=fd00::5
 *
 * A record keeps the servers as written (the DNS name says the region of an
 * FSx or EFS file system) and the IP addresses, which --compare checks
 * against the hosts' subnets. Names are resolved here, on the host that
 * mounts them, since that is where they resolve to the right addresses
 * (EFS mount target names resolve per AZ).
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <sys/socket.h>

#include "check-az.h"

/* Decodes the octal escapes of /proc/mounts ("\040" for a space) in place. */
static void unescape(char *s)
{
	char *d = s;
	while (*s) {
		if (s[0] == '\\' && s[1] >= '0' && s[1] <= '3' && s[2] >= '0' && s[2] <= '7'
		    && s[3] >= '0' && s[3] <= '7') {
			*d++ = (char)((s[1] - '0') * 64 + (s[2] - '0') * 8 + (s[3] - '0'));
			s += 4;
		} else {
			*d++ = *s++;
		}
	}
	*d = '\0';
}

static bool is_ip_literal(const char *s)
{
	unsigned char buf[sizeof(struct in6_addr)];
	return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

bool json_array_has(const cJSON *arr, const char *s)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, arr)
		if (cJSON_IsString(e) && strcmp(e->valuestring, s) == 0)
			return true;
	return false;
}

void json_add_unique(cJSON *arr, const char *s)
{
	if (s && !json_array_has(arr, s))
		cJSON_AddItemToArray(arr, cJSON_CreateString(s));
}

/* Adds SERVER (a host as written) to the entry: its IP, or its addresses. */
static void add_server(cJSON *entry, const char *server, bool resolve, bool need_ip)
{
	cJSON *servers = cJSON_GetObjectItemCaseSensitive(entry, "servers");
	cJSON *ips = cJSON_GetObjectItemCaseSensitive(entry, "ips");
	if (!*server || json_array_has(servers, server))
		return;
	cJSON_AddItemToArray(servers, cJSON_CreateString(server));
	if (is_ip_literal(server)) {
		json_add_unique(ips, server);
		return;
	}
	struct fs_dns d;
	if (!cJSON_GetObjectItemCaseSensitive(entry, "dns_name") && fs_dns_parse(server, &d) == 0)
		cJSON_AddStringToObject(entry, "dns_name", server);
	if (!need_ip)
		return;
	if (!resolve) {
		cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(entry, "unresolved"),
		                     cJSON_CreateString(server));
		return;
	}
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	int rc;
	do
		rc = getaddrinfo(server, NULL, &hints, &res);
	while (rc == EAI_SYSTEM && errno == EINTR);
	if (rc != 0) {
		cJSON_AddItemToArray(cJSON_GetObjectItemCaseSensitive(entry, "unresolved"),
		                     cJSON_CreateString(server));
		return;
	}
	for (struct addrinfo *a = res; a; a = a->ai_next) {
		char buf[INET6_ADDRSTRLEN];
		const void *src = a->ai_family == AF_INET
			? (const void *)&((struct sockaddr_in *)a->ai_addr)->sin_addr
			: (const void *)&((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
		if ((a->ai_family == AF_INET || a->ai_family == AF_INET6)
		    && inet_ntop(a->ai_family, src, buf, sizeof buf))
			json_add_unique(ips, buf);
	}
	freeaddrinfo(res);
}

/* "10.0.1.5@tcp,10.0.1.6@tcp:10.0.2.5@tcp:/fsname": every NID's address. */
static void lustre_servers(cJSON *entry, const char *source, bool resolve)
{
	const char *end = strstr(source, ":/");
	size_t n = end ? (size_t)(end - source) : strlen(source);
	char *nids = strndup(source, n);
	if (!nids)
		return;
	char *save = NULL;
	for (char *nid = strtok_r(nids, ":,", &save); nid; nid = strtok_r(NULL, ":,", &save)) {
		char *at = strchr(nid, '@');
		if (at)
			*at = '\0';
		add_server(entry, nid, resolve, true);
	}
	free(nids);
}

/* "host:/path", "[v6]:/path", plus the kernel's own "addr=IP" option. */
static void nfs_servers(cJSON *entry, const char *source, const char *opts, bool resolve)
{
	char host[256] = "";
	if (source[0] == '[') {
		const char *e = strchr(source, ']');
		if (e && (size_t)(e - source - 1) < sizeof host)
			snprintf(host, sizeof host, "%.*s", (int)(e - source - 1), source + 1);
	} else {
		const char *e = strchr(source, ':');
		size_t n = e ? (size_t)(e - source) : strlen(source);
		if (n < sizeof host)
			snprintf(host, sizeof host, "%.*s", (int)n, source);
	}
	/* addr= is what the kernel talks to: take it as given, it needs no
	 * resolving, and do not resolve the name again if we have it. */
	const char *a = strstr(opts, "addr=");
	while (a && a != opts && a[-1] != ',')
		a = strstr(a + 1, "addr=");
	if (a) {
		char ip[INET6_ADDRSTRLEN + 1];
		size_t n = strcspn(a + 5, ",");
		if (n < sizeof ip) {
			snprintf(ip, sizeof ip, "%.*s", (int)n, a + 5);
			if (is_ip_literal(ip))
				json_add_unique(cJSON_GetObjectItemCaseSensitive(entry, "ips"), ip);
		}
	}
	add_server(entry, host, resolve,
	           cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(entry, "ips")) == 0);
}

cJSON *storage_from_mounts(const char *path, bool resolve, char *err, size_t errlen)
{
	FILE *f = fopen(path, "re");
	if (!f) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		return NULL;
	}
	cJSON *list = cJSON_CreateArray();
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		char source[4096], mnt[4096], type[64], opts[4096];
		if (sscanf(line, "%4095s %4095s %63s %4095s", source, mnt, type, opts) != 4)
			continue;
		const char *kind;
		if (strcmp(type, "lustre") == 0)
			kind = "lustre";
		else if (strcmp(type, "nfs") == 0 || strcmp(type, "nfs4") == 0)
			kind = "nfs";
		else if (strcmp(type, "efs") == 0)
			kind = "efs";
		else
			continue;
		unescape(source);
		unescape(mnt);
		/* the same file system mounted twice (bind mounts) counts once */
		bool seen = false;
		const cJSON *e;
		cJSON_ArrayForEach(e, list) {
			const cJSON *s = cJSON_GetObjectItemCaseSensitive(e, "source");
			if (cJSON_IsString(s) && strcmp(s->valuestring, source) == 0)
				seen = true;
		}
		if (seen)
			continue;
		cJSON *entry = cJSON_CreateObject();
		cJSON_AddStringToObject(entry, "type", kind);
		cJSON_AddStringToObject(entry, "source", source);
		cJSON_AddStringToObject(entry, "mountpoint", mnt);
		cJSON_AddItemToObject(entry, "servers", cJSON_CreateArray());
		cJSON_AddItemToObject(entry, "ips", cJSON_CreateArray());
		cJSON_AddItemToObject(entry, "unresolved", cJSON_CreateArray());
		if (strcmp(kind, "lustre") == 0)
			lustre_servers(entry, source, resolve);
		else
			nfs_servers(entry, source, opts, resolve);
		/* efs-utils mounts through a local TLS tunnel (stunnel on
		 * 127.0.0.1): the server is then the name in the source only. */
		if (!cJSON_GetObjectItemCaseSensitive(entry, "dns_name"))
			cJSON_AddNullToObject(entry, "dns_name");
		cJSON_AddItemToArray(list, entry);
	}
	free(line);
	if (ferror(f)) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		fclose(f);
		cJSON_Delete(list);
		return NULL;
	}
	fclose(f);
	return list;
}

static bool region_like(const char *s)
{
	/* "us-east-1", "ap-southeast-2", "us-gov-west-1", "cn-north-1" */
	int dashes = 0;
	if (!islower((unsigned char)s[0]))
		return false;
	for (const char *p = s; *p; p++) {
		if (*p == '-')
			dashes++;
		else if (!islower((unsigned char)*p) && !isdigit((unsigned char)*p))
			return false;
	}
	return dashes >= 2 && isdigit((unsigned char)s[strlen(s) - 1]);
}

int fs_dns_parse(const char *name, struct fs_dns *out)
{
	memset(out, 0, sizeof *out);
	char buf[256];
	if (snprintf(buf, sizeof buf, "%s", name) >= (int)sizeof buf)
		return -1;
	for (char *p = buf; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	char *label[8];
	int n = 0;
	char *save = NULL;
	for (char *l = strtok_r(buf, ".", &save); l && n < 8; l = strtok_r(NULL, ".", &save))
		label[n++] = l;
	/* [az.]fs-ID.SERVICE.REGION.rest... */
	for (int i = 0; i + 2 < n && i <= 1; i++) {
		if (strncmp(label[i], "fs-", 3) != 0 && strncmp(label[i], "fc-", 3) != 0)
			continue;
		if (strcmp(label[i + 1], "fsx") != 0 && strcmp(label[i + 1], "efs") != 0)
			continue;
		if (!region_like(label[i + 2]) || strlen(label[i + 2]) >= sizeof out->region)
			continue;
		snprintf(out->service, sizeof out->service, "%s", label[i + 1]);
		snprintf(out->fs_id, sizeof out->fs_id, "%s", label[i]);
		snprintf(out->region, sizeof out->region, "%s", label[i + 2]);
		if (i == 1 && strlen(label[0]) < sizeof out->az_name)
			snprintf(out->az_name, sizeof out->az_name, "%s", label[0]);
		return 0;
	}
	return -1;
}
