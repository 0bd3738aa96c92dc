/* cmd/check-az/compare.c - judge many hosts' records: one AZ, one VPC, storage in reach */

/*
 * The rules, strongest evidence first:
 *
 *  - AZ IDs (use1-az4) name the physical zone for every account; AZ names
 *    (us-east-1a) are shuffled per account. All hosts must share one AZ ID.
 *    Only when a record lacks the ID are names compared, with a warning.
 *  - One VPC: hosts of one job talk over private addresses.
 *  - A subnet lives in exactly one AZ, so a storage server IP inside a host's
 *    subnet CIDR proves the storage's AZ. Outside every known subnet, the
 *    storage is "unproven", which is not an error: its subnet may simply be
 *    one no host is in.
 *  - FSx and EFS names carry their region; another region than the hosts'
 *    is a mismatch. An S3 bucket is regional: its region must be the hosts'.
 *  - Connect round trips to peers are printed as a hint and never decide.
 *
 * The verdict is built as one JSON object; the human report is a rendering
 * of that object, so both always say the same.
 */
#include "config.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "check-az.h"
#include "common/tool.h"

static const char *str(const cJSON *o, const char *key)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
	return cJSON_IsString(v) && v->valuestring[0] ? v->valuestring : NULL;
}

TOOL_PRINTF(2, 3)
static void addf(cJSON *arr, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	cJSON_AddItemToArray(arr, cJSON_CreateString(buf));
}

/* ---- reading records ---------------------------------------------------- */

int records_parse(cJSON *records, const char *text, const char *origin,
                  char *err, size_t errlen)
{
	const char *p = text;
	for (;;) {
		while (*p && isspace((unsigned char)*p))
			p++;
		if (!*p)
			return 0;
		const char *end = NULL;
		cJSON *v = cJSON_ParseWithOpts(p, &end, false);
		if (!v) {
			int line = 1;
			for (const char *q = text; q < p; q++)
				line += *q == '\n';
			snprintf(err, errlen, "%s:%d: not a JSON record", origin, line);
			return -1;
		}
		if (cJSON_IsArray(v)) {
			cJSON *e;
			while ((e = cJSON_DetachItemFromArray(v, 0)))
				cJSON_AddItemToArray(records, e);
			cJSON_Delete(v);
		} else {
			cJSON_AddItemToArray(records, v);
		}
		p = end;
	}
}

/* ---- the facts of one host ------------------------------------------------ */

struct host {
	const cJSON *rec;
	char label[320];
	const char *iid, *az, *azid, *region, *vpc, *error;
};

static void host_init(struct host *h, const cJSON *rec, size_t index)
{
	memset(h, 0, sizeof *h);
	h->rec = rec;
	h->iid = str(rec, "instance_id");
	h->az = str(rec, "availability_zone");
	h->azid = str(rec, "availability_zone_id");
	h->region = str(rec, "region");
	h->error = str(rec, "error");
	const char *name = str(rec, "hostname");
	if (name && h->iid)
		snprintf(h->label, sizeof h->label, "%s (%s)", name, h->iid);
	else if (name || h->iid)
		snprintf(h->label, sizeof h->label, "%s", name ? name : h->iid);
	else
		snprintf(h->label, sizeof h->label, "record %zu", index + 1);
	/* the VPC of the primary interface (device 0), else of the first one */
	const cJSON *ifc;
	cJSON_ArrayForEach(ifc, cJSON_GetObjectItemCaseSensitive(rec, "interfaces")) {
		const cJSON *dev = cJSON_GetObjectItemCaseSensitive(ifc, "device_number");
		if (!h->vpc || (cJSON_IsNumber(dev) && dev->valuedouble == 0))
			h->vpc = str(ifc, "vpc_id") ? str(ifc, "vpc_id") : h->vpc;
	}
}

/* The zone a host is in, by the basis chosen for the whole comparison. */
static const char *zone_of(const struct host *h, bool by_id)
{
	return by_id ? h->azid : h->az;
}

/* ---- subnets -------------------------------------------------------------- */

struct subnet {
	const char *id, *cidr, *vpc;
	uint32_t net, mask;     /* host order; mask 0 with prefix 0 */
	bool valid;
	size_t host;            /* the first host in it */
	cJSON *hosts;
};

static bool parse_cidr(const char *cidr, uint32_t *net, uint32_t *mask)
{
	char ip[32];
	const char *slash = cidr ? strchr(cidr, '/') : NULL;
	long bits;
	if (!slash || (size_t)(slash - cidr) >= sizeof ip
	    || tool_parse_long(slash + 1, 0, 32, &bits) < 0)
		return false;
	snprintf(ip, sizeof ip, "%.*s", (int)(slash - cidr), cidr);
	struct in_addr a;
	if (inet_pton(AF_INET, ip, &a) != 1)
		return false;
	*mask = bits == 0 ? 0 : 0xffffffffu << (32 - bits);
	*net = ntohl(a.s_addr) & *mask;
	return true;
}

static bool in_subnet(const struct subnet *s, const char *ip)
{
	struct in_addr a;
	if (!s->valid || inet_pton(AF_INET, ip, &a) != 1)
		return false;
	return (ntohl(a.s_addr) & s->mask) == s->net;
}

static bool is_loopback(const char *ip)
{
	struct in_addr a;
	if (inet_pton(AF_INET, ip, &a) == 1)
		return (ntohl(a.s_addr) >> 24) == 127;
	return strcmp(ip, "::1") == 0;
}

/* ---- the verdict ---------------------------------------------------------- */

struct judge {
	struct host *hosts;
	size_t nhosts;
	struct subnet *subnets;
	size_t nsubnets;
	bool by_id;             /* zones compared by AZ ID */
	bool zone_known;        /* every valid host has a zone on that basis */
	cJSON *out, *mismatches, *undecided, *warnings;
};

static void judge_zones(struct judge *j)
{
	size_t valid = 0, with_id = 0, with_name = 0;
	for (size_t i = 0; i < j->nhosts; i++) {
		const struct host *h = &j->hosts[i];
		if (h->error)
			continue;
		valid++;
		with_id += h->azid != NULL;
		with_name += h->az != NULL;
	}
	cJSON *ids = cJSON_AddArrayToObject(j->out, "availability_zone_ids");
	cJSON *names = cJSON_AddArrayToObject(j->out, "availability_zones");
	cJSON *regions = cJSON_AddArrayToObject(j->out, "regions");
	cJSON *vpcs = cJSON_AddArrayToObject(j->out, "vpcs");
	for (size_t i = 0; i < j->nhosts; i++) {
		const struct host *h = &j->hosts[i];
		if (h->error)
			continue;
		json_add_unique(ids, h->azid);
		json_add_unique(names, h->az);
		json_add_unique(regions, h->region);
		json_add_unique(vpcs, h->vpc);
	}
	if (valid == 0) {
		cJSON_AddNullToObject(j->out, "basis");
		addf(j->undecided, "no host's placement is known");
		return;
	}
	if (with_id == valid) {
		j->by_id = true;
		j->zone_known = true;
		cJSON_AddStringToObject(j->out, "basis", "availability_zone_id");
	} else if (with_name == valid) {
		j->zone_known = true;
		cJSON_AddStringToObject(j->out, "basis", "availability_zone");
		addf(j->warnings, "%zu of %zu records lack the AZ ID: comparing AZ names, "
		     "which map to different physical zones in different AWS accounts",
		     valid - with_id, valid);
	} else {
		cJSON_AddNullToObject(j->out, "basis");
		addf(j->undecided, "%zu of %zu records have neither AZ ID nor AZ name",
		     valid - with_name, valid);
		return;
	}
	cJSON *zones = j->by_id ? ids : names;
	if (cJSON_GetArraySize(zones) > 1) {
		/* name each zone with its hosts */
		const cJSON *z;
		cJSON_ArrayForEach(z, zones) {
			char who[1024] = "";
			size_t n = 0;
			for (size_t i = 0; i < j->nhosts; i++) {
				const struct host *h = &j->hosts[i];
				if (h->error || strcmp(zone_of(h, j->by_id), z->valuestring) != 0)
					continue;
				size_t used = strlen(who);
				snprintf(who + used, sizeof who - used, "%s%s", n++ ? ", " : "", h->label);
			}
			addf(j->mismatches, "%s %s: %s", j->by_id ? "AZ ID" : "AZ", z->valuestring, who);
		}
	} else if (j->by_id && cJSON_GetArraySize(names) > 1) {
		addf(j->warnings, "one AZ ID but %d AZ names: the hosts belong to different "
		     "AWS accounts, whose names differ for the same zone", cJSON_GetArraySize(names));
	}
	if (cJSON_GetArraySize(regions) > 1)
		addf(j->mismatches, "the hosts are in %d regions", cJSON_GetArraySize(regions));
}

static void judge_vpcs(struct judge *j)
{
	cJSON *vpcs = cJSON_GetObjectItemCaseSensitive(j->out, "vpcs");
	for (size_t i = 0; i < j->nhosts; i++) {
		const struct host *h = &j->hosts[i];
		if (!h->error && !h->vpc)
			addf(j->warnings, "%s: no VPC in the record (no network interfaces)", h->label);
	}
	if (cJSON_GetArraySize(vpcs) <= 1)
		return;
	const cJSON *v;
	cJSON_ArrayForEach(v, vpcs) {
		char who[1024] = "";
		size_t n = 0;
		for (size_t i = 0; i < j->nhosts; i++) {
			const struct host *h = &j->hosts[i];
			if (h->error || !h->vpc || strcmp(h->vpc, v->valuestring) != 0)
				continue;
			size_t used = strlen(who);
			snprintf(who + used, sizeof who - used, "%s%s", n++ ? ", " : "", h->label);
		}
		addf(j->mismatches, "VPC %s: %s", v->valuestring, who);
	}
}

static void collect_subnets(struct judge *j)
{
	cJSON *list = cJSON_AddArrayToObject(j->out, "subnets");
	for (size_t i = 0; i < j->nhosts; i++) {
		const struct host *h = &j->hosts[i];
		if (h->error)
			continue;
		const cJSON *ifc;
		cJSON_ArrayForEach(ifc, cJSON_GetObjectItemCaseSensitive(h->rec, "interfaces")) {
			const char *id = str(ifc, "subnet_id");
			if (!id)
				continue;
			struct subnet *s = NULL;
			for (size_t k = 0; k < j->nsubnets; k++)
				if (strcmp(j->subnets[k].id, id) == 0)
					s = &j->subnets[k];
			if (!s) {
				s = &j->subnets[j->nsubnets++];
				memset(s, 0, sizeof *s);
				s->id = id;
				s->cidr = str(ifc, "subnet_ipv4_cidr_block");
				s->vpc = str(ifc, "vpc_id");
				s->valid = parse_cidr(s->cidr, &s->net, &s->mask);
				s->host = i;
				cJSON *o = cJSON_CreateObject();
				cJSON_AddStringToObject(o, "subnet_id", id);
				if (s->cidr)
					cJSON_AddStringToObject(o, "cidr", s->cidr);
				else
					cJSON_AddNullToObject(o, "cidr");
				if (s->vpc)
					cJSON_AddStringToObject(o, "vpc_id", s->vpc);
				else
					cJSON_AddNullToObject(o, "vpc_id");
				const char *z = zone_of(h, j->by_id);
				if (z)
					cJSON_AddStringToObject(o, "zone", z);
				else
					cJSON_AddNullToObject(o, "zone");
				s->hosts = cJSON_AddArrayToObject(o, "hosts");
				cJSON_AddItemToArray(list, o);
			}
			json_add_unique(s->hosts, h->label);
		}
	}
}

static void judge_storage(struct judge *j)
{
	cJSON *list = cJSON_AddArrayToObject(j->out, "storage");
	for (size_t i = 0; i < j->nhosts; i++) {
		const struct host *h = &j->hosts[i];
		if (h->error)
			continue;
		const cJSON *st;
		cJSON_ArrayForEach(st, cJSON_GetObjectItemCaseSensitive(h->rec, "storage")) {
			const char *type = str(st, "type"), *source = str(st, "source");
			if (!source)
				continue;
			/* one entry per file system, with every host that mounts it */
			cJSON *o = NULL, *e;
			cJSON_ArrayForEach(e, list)
				if (strcmp(str(e, "source"), source) == 0)
					o = e;
			if (o) {
				json_add_unique(cJSON_GetObjectItemCaseSensitive(o, "hosts"), h->label);
				continue;
			}
			o = cJSON_CreateObject();
			cJSON_AddItemToArray(list, o);
			cJSON_AddStringToObject(o, "type", type ? type : "unknown");
			cJSON_AddStringToObject(o, "source", source);
			cJSON_AddItemToObject(o, "hosts", cJSON_CreateArray());
			json_add_unique(cJSON_GetObjectItemCaseSensitive(o, "hosts"), h->label);
			cJSON *ips = cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(st, "ips"), true);
			if (ips && !cJSON_IsArray(ips)) { /* not ours to keep: a list or nothing */
				cJSON_Delete(ips);
				ips = NULL;
			}
			cJSON_AddItemToObject(o, "ips", ips ? ips : cJSON_CreateArray());
			ips = cJSON_GetObjectItemCaseSensitive(o, "ips");

			/* the region an FSx/EFS name carries */
			const char *dns = str(st, "dns_name");
			struct fs_dns d;
			bool named = dns && fs_dns_parse(dns, &d) == 0;
			if (!named) {
				const cJSON *s;
				cJSON_ArrayForEach(s, cJSON_GetObjectItemCaseSensitive(st, "servers"))
					if (!named && cJSON_IsString(s) && fs_dns_parse(s->valuestring, &d) == 0) {
						named = true;
						dns = s->valuestring;
					}
			}
			if (named) {
				cJSON_AddStringToObject(o, "dns_name", dns);
				cJSON_AddStringToObject(o, "region", d.region);
			} else {
				cJSON_AddNullToObject(o, "dns_name");
				cJSON_AddNullToObject(o, "region");
			}
			const char *status = "unproven";
			char detail[1024] = "";
			if (named && h->region && strcmp(d.region, h->region) != 0) {
				status = "mismatch";
				snprintf(detail, sizeof detail, "%s is in region %s, %s in %s",
				         dns, d.region, h->label, h->region);
				addf(j->mismatches, "storage %s: %s", source, detail);
			}
			if (named && d.az_name[0] && h->az && strcmp(d.az_name, h->az) != 0)
				addf(j->warnings, "storage %s: an EFS mount target in %s, mounted by "
				     "%s in %s: cross-AZ traffic (if both names are of one account)",
				     source, d.az_name, h->label, h->az);

			/* a server IP in a host's subnet proves the AZ */
			const struct subnet *hit = NULL;
			const char *hit_ip = NULL;
			bool loopback = false;
			const cJSON *ip;
			cJSON_ArrayForEach(ip, ips) {
				if (!cJSON_IsString(ip))
					continue;
				loopback |= is_loopback(ip->valuestring);
				for (size_t k = 0; k < j->nsubnets && !hit; k++)
					if (in_subnet(&j->subnets[k], ip->valuestring)) {
						hit = &j->subnets[k];
						hit_ip = ip->valuestring;
					}
			}
			if (hit) {
				cJSON_AddStringToObject(o, "subnet_id", hit->id);
				const char *z = zone_of(&j->hosts[hit->host], j->by_id);
				if (z)
					cJSON_AddStringToObject(o, "zone", z);
				else
					cJSON_AddNullToObject(o, "zone");
				/* every host that mounts it must be in that zone: checked
				 * below, once all of them are known */
				if (strcmp(status, "mismatch") != 0)
					status = "proven";
				if (!strcmp(status, "proven"))
					snprintf(detail, sizeof detail, "%s is in %s %s (%s)", hit_ip,
					         hit->id, hit->cidr ? hit->cidr : "", z ? z : "zone unknown");
			} else if (!strcmp(status, "unproven")) {
				cJSON_AddNullToObject(o, "subnet_id");
				cJSON_AddNullToObject(o, "zone");
				if (cJSON_GetArraySize(ips) == 0)
					snprintf(detail, sizeof detail, "no server IP (a name that did not resolve)");
				else if (loopback)
					snprintf(detail, sizeof detail, "mounted through a local tunnel "
					         "(efs-utils TLS): the server's IP is not in the record");
				else
					snprintf(detail, sizeof detail, "no server IP is in a subnet of "
					         "the hosts: the AZ is not proven (not wrong either)");
			} else {
				cJSON_AddNullToObject(o, "subnet_id");
				cJSON_AddNullToObject(o, "zone");
			}
			cJSON_AddStringToObject(o, "status", status);
			cJSON_AddStringToObject(o, "detail", detail);
		}
	}
	/* Now that every host that mounts each file system is known: a proven
	 * zone must be the zone of each of them. */
	cJSON *o;
	cJSON_ArrayForEach(o, list) {
		const char *z = str(o, "zone");
		if (!z || strcmp(str(o, "status"), "proven") != 0)
			continue;
		for (size_t k = 0; k < j->nhosts; k++) {
			const struct host *m = &j->hosts[k];
			const char *mz = zone_of(m, j->by_id);
			if (m->error || !mz || strcmp(mz, z) == 0
			    || !json_array_has(cJSON_GetObjectItemCaseSensitive(o, "hosts"), m->label))
				continue;
			cJSON_ReplaceItemInObjectCaseSensitive(o, "status", cJSON_CreateString("mismatch"));
			char d[1024];
			snprintf(d, sizeof d, "%s; mounted from %s in %s", str(o, "detail"),
			         m->label, mz);
			cJSON_ReplaceItemInObjectCaseSensitive(o, "detail", cJSON_CreateString(d));
			addf(j->mismatches, "storage %s: %s", str(o, "source"), d);
			break;
		}
	}
}

static void judge_s3(struct judge *j, const struct s3_result *s3, size_t ns3)
{
	cJSON *list = cJSON_AddArrayToObject(j->out, "s3");
	const cJSON *regions = cJSON_GetObjectItemCaseSensitive(j->out, "regions");
	for (size_t i = 0; i < ns3; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToArray(list, o);
		cJSON_AddStringToObject(o, "bucket", s3[i].bucket);
		if (!s3[i].region[0]) {
			cJSON_AddNullToObject(o, "region");
			cJSON_AddStringToObject(o, "status", "failed");
			cJSON_AddStringToObject(o, "detail", s3[i].error);
			addf(j->undecided, "S3 bucket %s: %s", s3[i].bucket, s3[i].error);
			continue;
		}
		cJSON_AddStringToObject(o, "region", s3[i].region);
		bool other = cJSON_GetArraySize(regions) == 0;
		const cJSON *r;
		cJSON_ArrayForEach(r, regions)
			other |= strcmp(r->valuestring, s3[i].region) != 0;
		if (cJSON_GetArraySize(regions) == 0) {
			cJSON_AddStringToObject(o, "status", "unknown");
			cJSON_AddStringToObject(o, "detail", "the hosts' region is not known");
		} else if (other) {
			char d[512];
			snprintf(d, sizeof d, "bucket %s is in %s, the hosts in %s", s3[i].bucket,
			         s3[i].region, cJSON_GetArrayItem(regions, 0)->valuestring);
			cJSON_AddStringToObject(o, "status", "mismatch");
			cJSON_AddStringToObject(o, "detail", d);
			addf(j->mismatches, "S3 %s", d);
		} else {
			cJSON_AddStringToObject(o, "status", "same-region");
			cJSON_AddStringToObject(o, "detail", "S3 is regional: same region as the hosts");
		}
	}
}

static void add_peers(struct judge *j, const struct peer_result *peers, size_t npeers)
{
	cJSON *list = cJSON_AddArrayToObject(j->out, "peers");
	for (size_t i = 0; i < npeers; i++) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToArray(list, o);
		cJSON_AddStringToObject(o, "peer", peers[i].peer);
		if (peers[i].rtt_us >= 0) {
			cJSON_AddNumberToObject(o, "connect_rtt_us", (double)(long)(peers[i].rtt_us + 0.5));
			cJSON_AddNullToObject(o, "error");
		} else {
			cJSON_AddNullToObject(o, "connect_rtt_us");
			cJSON_AddStringToObject(o, "error", peers[i].error);
		}
	}
}

/* ---- the human report ----------------------------------------------------- */

static void print_list(FILE *out, const char *tag, const cJSON *arr)
{
	const cJSON *e;
	cJSON_ArrayForEach(e, arr)
		fprintf(out, "%s: %s\n", tag, e->valuestring);
}

/* a member for printing: "" where it is missing or empty */
static const char *or_empty(const cJSON *o, const char *key)
{
	const char *s = str(o, key);
	return s ? s : "";
}

static void print_human(const struct judge *j, FILE *out)
{
	fprintf(out, "hosts: %zu\n", j->nhosts);
	for (size_t i = 0; i < j->nhosts; i++) {
		const struct host *h = &j->hosts[i];
		if (h->error) {
			fprintf(out, "  %s: query failed: %s\n", h->label, h->error);
			continue;
		}
		fprintf(out, "  %s: %s %s (%s), %s\n", h->label,
		        h->region ? h->region : "?", h->az ? h->az : "?",
		        h->azid ? h->azid : "no AZ ID", h->vpc ? h->vpc : "no VPC");
	}
	const cJSON *e;
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j->out, "subnets"))
		fprintf(out, "subnet: %s %s in %s, %d host(s)\n", or_empty(e, "subnet_id"),
		        str(e, "cidr") ? str(e, "cidr") : "(no CIDR)",
		        str(e, "zone") ? str(e, "zone") : "?",
		        cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(e, "hosts")));
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j->out, "storage"))
		fprintf(out, "storage: %s %s: %s: %s\n", or_empty(e, "type"), or_empty(e, "source"),
		        or_empty(e, "status"), or_empty(e, "detail"));
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j->out, "s3"))
		fprintf(out, "s3: %s: %s: %s\n", or_empty(e, "bucket"), or_empty(e, "status"), or_empty(e, "detail"));
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j->out, "peers")) {
		const cJSON *rtt = cJSON_GetObjectItemCaseSensitive(e, "connect_rtt_us");
		if (cJSON_IsNumber(rtt))
			fprintf(out, "peer: %s: connect %.0f us (a hint only: tens of us within "
			        "an AZ, about 1 ms or more across AZs)\n", or_empty(e, "peer"), rtt->valuedouble);
		else
			fprintf(out, "peer: %s: %s\n", or_empty(e, "peer"), or_empty(e, "error"));
	}
	print_list(out, "warning", j->warnings);
	print_list(out, "MISMATCH", j->mismatches);
	print_list(out, "UNDECIDED", j->undecided);
	const char *v = or_empty(j->out, "verdict");
	if (strcmp(v, "same-az") == 0) {
		const cJSON *zones = cJSON_GetObjectItemCaseSensitive(j->out,
			j->by_id ? "availability_zone_ids" : "availability_zones");
		fprintf(out, "verdict: same AZ (%s %s)\n", j->by_id ? "AZ ID" : "AZ name",
		        cJSON_GetArrayItem(zones, 0)->valuestring);
	} else if (strcmp(v, "mismatch") == 0) {
		fprintf(out, "verdict: MISMATCH\n");
	} else {
		fprintf(out, "verdict: UNDECIDED\n");
	}
}

enum verdict compare_records(const cJSON *records, const struct s3_result *s3, size_t ns3,
                             const struct peer_result *peers, size_t npeers,
                             bool json, FILE *out)
{
	struct judge j = { 0 };
	size_t n = (size_t)cJSON_GetArraySize(records), nifs = 0;
	j.hosts = calloc(n ? n : 1, sizeof *j.hosts);
	j.out = cJSON_CreateObject();
	j.mismatches = cJSON_CreateArray();
	j.undecided = cJSON_CreateArray();
	j.warnings = cJSON_CreateArray();
	cJSON *hosts = cJSON_AddArrayToObject(j.out, "hosts");

	const cJSON *rec;
	cJSON_ArrayForEach(rec, records) {
		struct host *h = &j.hosts[j.nhosts];
		host_init(h, rec, j.nhosts);
		j.nhosts++;
		const char *schema = str(rec, "schema");
		if (!cJSON_IsObject(rec)) {
			h->error = "not a JSON object";
		} else if (!h->error && schema && strcmp(schema, CHECKAZ_SCHEMA) != 0) {
			h->error = "a record of another schema";
		} else if (!h->error && !h->iid) {
			h->error = "a record without instance_id";
		}
		if (h->error)
			addf(j.undecided, "%s: %s", h->label, h->error);
		nifs += (size_t)cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(rec, "interfaces"));
		for (size_t k = 0; k + 1 < j.nhosts && h->iid; k++)
			if (j.hosts[k].iid && strcmp(j.hosts[k].iid, h->iid) == 0) {
				addf(j.warnings, "%s appears twice", h->iid);
				break;
			}
		cJSON *o = cJSON_CreateObject();
		cJSON_AddItemToArray(hosts, o);
		cJSON_AddStringToObject(o, "host", h->label);
#define ADD_OR_NULL(key, v) ((v) ? (void)cJSON_AddStringToObject(o, key, v) \
                                 : (void)cJSON_AddNullToObject(o, key))
		ADD_OR_NULL("instance_id", h->iid);
		ADD_OR_NULL("region", h->region);
		ADD_OR_NULL("availability_zone", h->az);
		ADD_OR_NULL("availability_zone_id", h->azid);
		ADD_OR_NULL("vpc_id", h->vpc);
		ADD_OR_NULL("error", h->error);
#undef ADD_OR_NULL
	}
	j.subnets = calloc(nifs ? nifs : 1, sizeof *j.subnets);
	if (n == 0)
		addf(j.undecided, "no records to compare");

	judge_zones(&j);
	judge_vpcs(&j);
	collect_subnets(&j);
	judge_storage(&j);
	judge_s3(&j, s3, ns3);
	add_peers(&j, peers, npeers);

	enum verdict v = cJSON_GetArraySize(j.mismatches) ? VERDICT_MISMATCH
		: cJSON_GetArraySize(j.undecided) ? VERDICT_UNDECIDED : VERDICT_SAME;
	cJSON_AddStringToObject(j.out, "verdict", v == VERDICT_SAME ? "same-az"
	                        : v == VERDICT_MISMATCH ? "mismatch" : "undecided");
	cJSON_AddNumberToObject(j.out, "exit_status", v);
	cJSON_AddItemToObject(j.out, "mismatches", j.mismatches);
	cJSON_AddItemToObject(j.out, "undecided", j.undecided);
	cJSON_AddItemToObject(j.out, "warnings", j.warnings);

	const cJSON *w;
	cJSON_ArrayForEach(w, j.warnings)
		tool_warn("warning: %s", w->valuestring);
	if (json) {
		char *s = cJSON_PrintUnformatted(j.out);
		fprintf(out, "%s\n", s);
		free(s);
	} else {
		print_human(&j, out);
	}
	cJSON_Delete(j.out);
	free(j.hosts);
	free(j.subnets);
	return v;
}
