/* cpus.c - discovery of CPUs, sockets, cores and NUMA nodes: sysfs, or hwloc on the live machine */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif

#include "util/sd.h"
#include "text/cpulist.h"
#include "topo/discover.h"

struct cpuscan {
	const struct ctx *c;
	long *pkg, *core;
	int n, cap;
};

static int cpu_one(void *arg, int cpu)
{
	struct cpuscan *s = arg;
	char rel[128];
	long pkg = 0, core = cpu;

	snprintf(rel, sizeof(rel), "/sys/devices/system/cpu/cpu%d/topology/physical_package_id",
		 cpu);
	sd_topo_read_long(s->c, rel, 10, &pkg);
	snprintf(rel, sizeof(rel), "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
	sd_topo_read_long(s->c, rel, 10, &core);
	if (s->n == s->cap) {
		int cap = s->cap ? s->cap * 2 : 64;
		long *p = realloc(s->pkg, (size_t)cap * sizeof(long));
		long *q;

		if (p == NULL)
			return -1;
		s->pkg = p;
		q = realloc(s->core, (size_t)cap * sizeof(long));
		if (q == NULL)
			return -1;
		s->core = q;
		s->cap = cap;
	}
	s->pkg[s->n] = pkg;
	s->core[s->n] = core;
	s->n++;
	return 0;
}

void sd_topo_cpu_model(const struct ctx *c, char *model, size_t len)
{
	char line[512];
	FILE *f;

	model[0] = '\0';
	f = sd_topo_open(c, "/proc/cpuinfo");
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) != NULL) {
		char *colon = strchr(line, ':');

		if (strncmp(line, "model name", 10) != 0 || colon == NULL)
			continue;
		colon++;
		while (*colon == ' ' || *colon == '\t')
			colon++;
		colon[strcspn(colon, "\n")] = '\0';
		snprintf(model, len, "%s", colon);
		break;
	}
	fclose(f);
}

static long long meminfo_mb(const struct ctx *c, const char *rel)
{
	char line[256];
	FILE *f;
	long long mb = -1;

	f = sd_topo_open(c, rel);
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL) {
		/* "MemTotal:  24683584 kB" or "Node 0 MemTotal:  24683584 kB" */
		char *m = strstr(line, "MemTotal:");
		long long kb;

		if (m != NULL && sscanf(m + 9, "%lld", &kb) == 1) {
			mb = kb / 1024;
			break;
		}
	}
	fclose(f);
	return mb;
}

int sd_topo_cpus_sysfs(const struct ctx *c, cJSON *cpu, cJSON *numa)
{
	char online[4096], rel[128], list[4096];
	struct cpuscan s = {.c = c};
	int sockets = 0, cores = 0;
	char **nodes;
	int nn;

	if (sd_topo_read(c, "/sys/devices/system/cpu/online", online, sizeof(online)) != 0 &&
	    sd_topo_read(c, "/sys/devices/system/cpu/present", online, sizeof(online)) != 0)
		online[0] = '\0';
	if (online[0] != '\0' && sd_text_cpulist(online, cpu_one, &s) != 0) {
		free(s.pkg);
		free(s.core);
		return SMDDP_ENOMEM;
	}
	for (int i = 0; i < s.n; i++) {
		int newpkg = 1, newcore = 1;

		for (int j = 0; j < i; j++) {
			if (s.pkg[j] == s.pkg[i]) {
				newpkg = 0;
				if (s.core[j] == s.core[i])
					newcore = 0;
			}
		}
		sockets += newpkg;
		cores += newcore;
	}
	cJSON_AddItemToObject(cpu, "sockets", sd_topo_num_or_null(s.n ? sockets : -1));
	cJSON_AddItemToObject(cpu, "cores", sd_topo_num_or_null(s.n ? cores : -1));
	cJSON_AddItemToObject(cpu, "threads", sd_topo_num_or_null(s.n ? s.n : -1));
	free(s.pkg);
	free(s.core);

	nodes = sd_topo_list_dir(c, "/sys/devices/system/node", &nn);
	for (int i = 0; i < nn; i++) {
		char *end;
		long id;
		cJSON *o;

		if (strncmp(nodes[i], "node", 4) != 0)
			continue;
		id = strtol(nodes[i] + 4, &end, 10);
		if (end == nodes[i] + 4 || *end != '\0')
			continue;
		o = cJSON_CreateObject();
		cJSON_AddItemToArray(numa, o);
		cJSON_AddNumberToObject(o, "node", (double)id);
		snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%ld/cpulist", id);
		cJSON_AddItemToObject(o, "cpus",
				      sd_topo_str_or_null(sd_topo_read(c, rel, list, sizeof(list)) == 0 ? list : NULL));
		snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%ld/meminfo", id);
		cJSON_AddItemToObject(o, "memory_mb", sd_topo_num_or_null(meminfo_mb(c, rel)));
	}
	sd_topo_free_list(nodes);
	if (cJSON_GetArraySize(numa) == 0) {
		/* A kernel without NUMA: one node holding everything. */
		cJSON *o = cJSON_CreateObject();

		cJSON_AddItemToArray(numa, o);
		cJSON_AddNumberToObject(o, "node", 0);
		cJSON_AddItemToObject(o, "cpus", sd_topo_str_or_null(online));
		cJSON_AddItemToObject(o, "memory_mb", sd_topo_num_or_null(meminfo_mb(c, "/proc/meminfo")));
	}
	return SMDDP_OK;
}

#ifdef HAVE_HWLOC
int sd_topo_cpus_hwloc(cJSON *cpu, cJSON *numa)
{
	hwloc_topology_t t;
	int n;

	if (hwloc_topology_init(&t) != 0)
		return -1;
	if (hwloc_topology_load(t) != 0) {
		hwloc_topology_destroy(t);
		return -1;
	}
	cJSON_AddNumberToObject(cpu, "sockets", hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PACKAGE));
	cJSON_AddNumberToObject(cpu, "cores", hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_CORE));
	cJSON_AddNumberToObject(cpu, "threads", hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_PU));
	n = hwloc_get_nbobjs_by_type(t, HWLOC_OBJ_NUMANODE);
	for (int i = 0; i < n; i++) {
		hwloc_obj_t o = hwloc_get_obj_by_type(t, HWLOC_OBJ_NUMANODE, (unsigned)i);
		cJSON *j = cJSON_CreateObject();
		char list[4096] = "";

		cJSON_AddItemToArray(numa, j);
		cJSON_AddNumberToObject(j, "node", o->os_index);
		if (o->cpuset != NULL)
			hwloc_bitmap_list_snprintf(list, sizeof(list), o->cpuset);
		cJSON_AddItemToObject(j, "cpus", sd_topo_str_or_null(list));
		cJSON_AddItemToObject(j, "memory_mb",
				      sd_topo_num_or_null(
					      o->attr ? (long long)(o->attr->numanode.local_memory >> 20)
						      : -1));
	}
	hwloc_topology_destroy(t);
	return 0;
}
#endif
