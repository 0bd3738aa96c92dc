/* cmd/check-az/emit.c - this host's record: placement, network and storage, from IMDS and /proc/mounts */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check-az.h"
#include "common/tool.h"

/* Outcome of one metadata item: a string, JSON null (404), or failure. */
static int get_item(struct imds *m, const char *path, cJSON *obj, const char *key,
                    bool required, char *err, size_t errlen)
{
	char *v = NULL;
	int rc = imds_get(m, path, &v);
	if (rc < 0) {
		snprintf(err, errlen, "%s", imds_error(m));
		return -1;
	}
	if (rc == 1 && required) {
		snprintf(err, errlen, "the instance metadata has no %s (HTTP 404 to GET "
		         "/latest/%s)", key, path);
		return -1;
	}
	if (rc == 1)
		cJSON_AddNullToObject(obj, key);
	else
		cJSON_AddStringToObject(obj, key, v);
	free(v);
	return 0;
}

static cJSON *interfaces(struct imds *m, char *err, size_t errlen)
{
	char *macs = NULL;
	int rc = imds_get(m, "meta-data/network/interfaces/macs/", &macs);
	if (rc < 0) {
		snprintf(err, errlen, "%s", imds_error(m));
		return NULL;
	}
	cJSON *list = cJSON_CreateArray();
	if (rc == 1)
		return list;
	static const struct { const char *item, *key; } items[] = {
		{ "subnet-id", "subnet_id" },
		{ "subnet-ipv4-cidr-block", "subnet_ipv4_cidr_block" },
		{ "vpc-id", "vpc_id" },
	};
	char *save = NULL;
	for (char *mac = strtok_r(macs, "\n", &save); mac; mac = strtok_r(NULL, "\n", &save)) {
		size_t n = strlen(mac);
		while (n > 0 && (mac[n - 1] == '/' || mac[n - 1] == '\r'))
			mac[--n] = '\0';
		if (!n)
			continue;
		cJSON *ifc = cJSON_CreateObject();
		cJSON_AddItemToArray(list, ifc);
		cJSON_AddStringToObject(ifc, "mac", mac);
		char path[512], *v = NULL;
		snprintf(path, sizeof path, "meta-data/network/interfaces/macs/%s/device-number", mac);
		rc = imds_get(m, path, &v);
		if (rc < 0)
			goto fail;
		long dev;
		if (rc == 0 && tool_parse_long(v, 0, 1000000, &dev) == 0)
			cJSON_AddNumberToObject(ifc, "device_number", (double)dev);
		else
			cJSON_AddNullToObject(ifc, "device_number");
		free(v);
		for (size_t i = 0; i < sizeof items / sizeof items[0]; i++) {
			snprintf(path, sizeof path, "meta-data/network/interfaces/macs/%s/%s",
			         mac, items[i].item);
			if (get_item(m, path, ifc, items[i].key, false, err, errlen) < 0) {
				free(macs);
				cJSON_Delete(list);
				return NULL;
			}
		}
	}
	free(macs);
	return list;
fail:
	snprintf(err, errlen, "%s", imds_error(m));
	free(macs);
	cJSON_Delete(list);
	return NULL;
}

static void add_hostname(cJSON *rec)
{
	char host[256];
	if (gethostname(host, sizeof host) == 0) {
		host[sizeof host - 1] = '\0';
		cJSON_AddStringToObject(rec, "hostname", host);
	} else {
		cJSON_AddNullToObject(rec, "hostname");
	}
}

cJSON *emit_error_record(const char *error)
{
	cJSON *rec = cJSON_CreateObject();
	cJSON_AddStringToObject(rec, "schema", CHECKAZ_SCHEMA);
	add_hostname(rec);
	cJSON_AddStringToObject(rec, "error", error);
	return rec;
}

cJSON *emit_record(struct imds *m, const char *mounts_path, bool resolve,
                   char *err, size_t errlen)
{
	static const struct { const char *path, *key; bool required; } items[] = {
		{ "meta-data/instance-id", "instance_id", true },
		{ "meta-data/instance-type", "instance_type", false },
		{ "meta-data/placement/region", "region", false },
		{ "meta-data/placement/availability-zone", "availability_zone", true },
		{ "meta-data/placement/availability-zone-id", "availability_zone_id", false },
		{ "meta-data/placement/group-name", "placement_group", false },
		{ "meta-data/placement/partition-number", "partition_number", false },
		{ "meta-data/local-ipv4", "local_ipv4", false },
	};
	cJSON *rec = cJSON_CreateObject();
	cJSON_AddStringToObject(rec, "schema", CHECKAZ_SCHEMA);
	add_hostname(rec);
	for (size_t i = 0; i < sizeof items / sizeof items[0]; i++)
		if (get_item(m, items[i].path, rec, items[i].key, items[i].required, err, errlen) < 0)
			goto fail;

	/* partition-number is a number; an older IMDS without placement/region
	 * still has the AZ name, whose region is the name less its letter. */
	cJSON *part = cJSON_GetObjectItemCaseSensitive(rec, "partition_number");
	long pn;
	if (cJSON_IsString(part)) {
		if (tool_parse_long(part->valuestring, 0, 1000000, &pn) == 0)
			cJSON_ReplaceItemInObjectCaseSensitive(rec, "partition_number",
			                                       cJSON_CreateNumber((double)pn));
		else
			cJSON_ReplaceItemInObjectCaseSensitive(rec, "partition_number", cJSON_CreateNull());
	}
	cJSON *region = cJSON_GetObjectItemCaseSensitive(rec, "region");
	const char *az = cJSON_GetObjectItemCaseSensitive(rec, "availability_zone")->valuestring;
	if (!cJSON_IsString(region) && strlen(az) > 1) {
		char r[64];
		snprintf(r, sizeof r, "%.*s", (int)strlen(az) - 1, az);
		cJSON_ReplaceItemInObjectCaseSensitive(rec, "region", cJSON_CreateString(r));
	}

	cJSON *ifs = interfaces(m, err, errlen);
	if (!ifs)
		goto fail;
	cJSON_AddItemToObject(rec, "interfaces", ifs);

	cJSON *st = storage_from_mounts(mounts_path, resolve, err, errlen);
	if (!st)
		goto fail;
	cJSON_AddItemToObject(rec, "storage", st);
	cJSON_AddStringToObject(rec, "imds", imds_version(m) ? imds_version(m) : "v2");
	return rec;
fail:
	cJSON_Delete(rec);
	return NULL;
}
