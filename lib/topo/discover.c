/* discover.c - finds this node's CPUs, NUMA nodes, GPUs and NICs.
 *
 * The sysfs reader is the reference: it is what runs under a sysroot (tests
 * replay captured /sys and /proc trees) and what runs when nothing better is
 * there.  On the live machine ("/") better sources fill in what sysfs cannot
 * say: hwloc for sockets, cores and NUMA nodes (when built with it), NVML
 * (libnvidia-ml.so.1, loaded with dlopen so that CUDA-less builds and
 * machines work) for GPU names, memory and NVLinks, and libfabric's
 * fi_getinfo for the providers and domains of each NIC.
 *
 * Locality comes from the PCI paths that sysfs device links resolve to
 * (/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/...): the longer the
 * common prefix of two devices' paths, the closer they are.
 *
 * Under a sysroot, paths are resolved by resolve() below, confined to the
 * root, and a "link file" stands in for a symlink: a regular file whose
 * text is "!<symlink>TARGET".  Sysfs links form cycles (net/eth0/device
 * points back up to an ancestor), which tar -h (make dist) and other
 * copiers follow forever; link files keep a captured tree a plain tree.
 */
#include "config.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef HAVE_HWLOC
#include <hwloc.h>
#endif
#ifdef HAVE_LIBFABRIC
#include <rdma/fabric.h>
#endif

#include "core/sd.h"
#include "topo/topo.h"

struct dev {
	char *name;  /* netdev or ib device name (NICs) */
	char bus[16]; /* "0000:10:1c.0", "" when not on PCI */
	char *path;  /* resolved PCI path under the root, NULL when unknown */
	int numa;    /* -1 unknown */
	/* GPUs (NVML) */
	int nvlinks; /* -1 unknown */
	int switch_links;
	char (*remote)[16]; /* remote bus id per active link */
};

struct ctx {
	char root[PATH_MAX]; /* realpath of the sysroot, "" for "/" */
	int live;
	struct dev *gpus, *nics;
	int ngpus, nnics;
	cJSON *gpu_arr, *nic_arr;
};

/* ---- small readers -------------------------------------------------------- */

#define LINK_MAGIC "!<symlink>"

/* Reads the target of a link file; -1 when path is not one. */
static int link_file(const char *path, char *target, size_t len)
{
	char buf[PATH_MAX + sizeof(LINK_MAGIC)];
	FILE *f = fopen(path, "re");
	size_t n;

	if (f == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if (strncmp(buf, LINK_MAGIC, strlen(LINK_MAGIC)) != 0)
		return -1;
	buf[strcspn(buf, "\n")] = '\0';
	snprintf(target, len, "%s", buf + strlen(LINK_MAGIC));
	return 0;
}

/* Resolves rel (which may cross symlinks and link files) to the path the
 * kernel would show ("/sys/devices/..."), without leaving the root: ".."
 * stops at it and absolute targets start from it.  NULL if it does not
 * exist.  On the live machine this is realpath(). */
static char *resolve(const struct ctx *c, const char *rel)
{
	char cur[PATH_MAX] = "", rest[PATH_MAX * 2], full[PATH_MAX * 2], target[PATH_MAX];
	int hops = 0;

	if (c->live) {
		char r[PATH_MAX];

		return realpath(rel, r) ? strdup(r) : NULL;
	}
	snprintf(rest, sizeof(rest), "%s", rel);
	while (rest[0] != '\0') {
		char comp[NAME_MAX + 1], tail[PATH_MAX * 2];
		size_t l;
		struct stat st;
		const char *p = rest;

		while (*p == '/')
			p++;
		l = strcspn(p, "/");
		if (l == 0)
			break;
		if (l > NAME_MAX)
			return NULL;
		memcpy(comp, p, l);
		comp[l] = '\0';
		snprintf(tail, sizeof(tail), "%s", p + l);
		if (strcmp(comp, ".") == 0) {
			snprintf(rest, sizeof(rest), "%s", tail);
			continue;
		}
		if (strcmp(comp, "..") == 0) {
			char *slash = strrchr(cur, '/');

			if (slash != NULL)
				*slash = '\0';
			snprintf(rest, sizeof(rest), "%s", tail);
			continue;
		}
		snprintf(full, sizeof(full), "%s%s/%s", c->root, cur, comp);
		if (lstat(full, &st) != 0)
			return NULL;
		if (S_ISLNK(st.st_mode) || (S_ISREG(st.st_mode) && st.st_size < PATH_MAX &&
					    link_file(full, target, sizeof(target)) == 0)) {
			ssize_t n;

			if (++hops > 40)
				return NULL; /* a loop */
			if (S_ISLNK(st.st_mode)) {
				n = readlink(full, target, sizeof(target) - 1);
				if (n <= 0)
					return NULL;
				target[n] = '\0';
			}
			if (target[0] == '/')
				cur[0] = '\0';
			if (strlen(target) + strlen(tail) + 2 > sizeof(rest))
				return NULL;
			snprintf(rest, sizeof(rest), "%s%s", target, tail);
			continue;
		}
		if (strlen(cur) + l + 2 > sizeof(cur))
			return NULL;
		strcat(cur, "/");
		strcat(cur, comp);
		snprintf(rest, sizeof(rest), "%s", tail);
	}
	return strdup(cur[0] ? cur : "/");
}

/* The real path of rel under the root, through links; 0 when it does not
 * resolve. */
static int path_rel(const struct ctx *c, const char *rel, char *p, size_t len)
{
	char *r = c->live ? NULL : resolve(c, rel);

	if (!c->live && r == NULL)
		return 0;
	snprintf(p, len, "%s%s", c->root, c->live ? rel : r);
	free(r);
	return 1;
}

/* fopen/opendir of a path under the root, through links. */
static FILE *open_rel(const struct ctx *c, const char *rel)
{
	char p[PATH_MAX * 2];

	return path_rel(c, rel, p, sizeof(p)) ? fopen(p, "re") : NULL;
}

static DIR *opendir_rel(const struct ctx *c, const char *rel)
{
	char p[PATH_MAX * 2];

	return path_rel(c, rel, p, sizeof(p)) ? opendir(p) : NULL;
}

static int rd(const struct ctx *c, const char *rel, char *buf, size_t len)
{
	FILE *f = open_rel(c, rel);
	size_t n;

	if (f == NULL)
		return -1;
	n = fread(buf, 1, len - 1, f);
	if (ferror(f)) { /* e.g. EINVAL reading speed of a link that is down */
		fclose(f);
		return -1;
	}
	fclose(f);
	buf[n] = '\0';
	while (n > 0 && isspace((unsigned char)buf[n - 1]))
		buf[--n] = '\0';
	return 0;
}

static int rd_long(const struct ctx *c, const char *rel, int base, long *out)
{
	char buf[64], *end;

	if (rd(c, rel, buf, sizeof(buf)) != 0 || buf[0] == '\0')
		return -1;
	errno = 0;
	*out = strtol(buf, &end, base);
	return errno != 0 || (*end != '\0' && !isspace((unsigned char)*end)) ? -1 : 0;
}

static int is_bdf(const char *s, size_t len)
{
	unsigned a, b, d, f;
	int used = 0;

	return len == 12 && sscanf(s, "%4x:%2x:%2x.%1x%n", &a, &b, &d, &f, &used) == 4 &&
	       used == 12;
}

/* Cuts path after its last PCI component; copies that component to bus. */
static int pci_cut(char *path, char bus[16])
{
	char *end = path + strlen(path);

	while (end > path) {
		char *s = end;

		while (s > path && s[-1] != '/')
			s--;
		if (is_bdf(s, (size_t)(end - s))) {
			memcpy(bus, s, 12);
			bus[12] = '\0';
			*end = '\0';
			return 0;
		}
		end = s > path ? s - 1 : path;
	}
	return -1;
}

static void lower(char *s)
{
	for (; *s; s++)
		*s = (char)tolower((unsigned char)*s);
}

static int numa_of(const struct ctx *c, const char *pcipath)
{
	char rel[PATH_MAX];
	long v;

	snprintf(rel, sizeof(rel), "%s/numa_node", pcipath);
	return rd_long(c, rel, 10, &v) == 0 && v >= 0 ? (int)v : -1;
}

static cJSON *num_or_null(long long v)
{
	return v >= 0 ? cJSON_CreateNumber((double)v) : cJSON_CreateNull();
}

static cJSON *str_or_null(const char *s)
{
	return s != NULL && *s != '\0' ? cJSON_CreateString(s) : cJSON_CreateNull();
}

typedef int (*list_fn)(void *arg, int cpu);

/* Walks a kernel cpu list ("0-3,8,10-11"). */
static int cpulist_walk(const char *s, list_fn fn, void *arg)
{
	while (*s) {
		char *end;
		long a = strtol(s, &end, 10), b = a;

		if (end == s)
			return -1;
		if (*end == '-') {
			s = end + 1;
			b = strtol(s, &end, 10);
			if (end == s || b < a)
				return -1;
		}
		for (long i = a; i <= b; i++)
			if (fn(arg, (int)i) != 0)
				return -1;
		s = end;
		if (*s == ',')
			s++;
		else if (*s != '\0')
			return -1;
	}
	return 0;
}

static int names_cmp(const void *a, const void *b)
{
	return strverscmp(*(char *const *)a, *(char *const *)b);
}

/* The entries of a directory under the root, sorted naturally; NULL-ended. */
static char **list_dir(const struct ctx *c, const char *rel, int *n)
{
	DIR *d;
	struct dirent *e;
	char **v = NULL;
	int cap = 0;

	*n = 0;
	d = opendir_rel(c, rel);
	if (d == NULL)
		return NULL;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		if (*n + 1 >= cap) {
			char **nv = realloc(v, (size_t)(cap = cap ? cap * 2 : 16) * sizeof(*v));

			if (nv == NULL)
				break;
			v = nv;
		}
		v[(*n)++] = strdup(e->d_name);
	}
	closedir(d);
	if (v == NULL)
		return NULL;
	v[*n] = NULL;
	qsort(v, (size_t)*n, sizeof(*v), names_cmp);
	return v;
}

static void free_list(char **v)
{
	for (char **p = v; p != NULL && *p != NULL; p++)
		free(*p);
	free(v);
}

/* ---- CPUs and NUMA nodes -------------------------------------------------- */

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
	rd_long(s->c, rel, 10, &pkg);
	snprintf(rel, sizeof(rel), "/sys/devices/system/cpu/cpu%d/topology/core_id", cpu);
	rd_long(s->c, rel, 10, &core);
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

static void cpu_model(const struct ctx *c, char *model, size_t len)
{
	char line[512];
	FILE *f;

	model[0] = '\0';
	f = open_rel(c, "/proc/cpuinfo");
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

	f = open_rel(c, rel);
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

static int cpus_sysfs(const struct ctx *c, cJSON *cpu, cJSON *numa)
{
	char online[4096], rel[128], list[4096];
	struct cpuscan s = {.c = c};
	int sockets = 0, cores = 0;
	char **nodes;
	int nn;

	if (rd(c, "/sys/devices/system/cpu/online", online, sizeof(online)) != 0 &&
	    rd(c, "/sys/devices/system/cpu/present", online, sizeof(online)) != 0)
		online[0] = '\0';
	if (online[0] != '\0' && cpulist_walk(online, cpu_one, &s) != 0) {
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
	cJSON_AddItemToObject(cpu, "sockets", num_or_null(s.n ? sockets : -1));
	cJSON_AddItemToObject(cpu, "cores", num_or_null(s.n ? cores : -1));
	cJSON_AddItemToObject(cpu, "threads", num_or_null(s.n ? s.n : -1));
	free(s.pkg);
	free(s.core);

	nodes = list_dir(c, "/sys/devices/system/node", &nn);
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
				      str_or_null(rd(c, rel, list, sizeof(list)) == 0 ? list : NULL));
		snprintf(rel, sizeof(rel), "/sys/devices/system/node/node%ld/meminfo", id);
		cJSON_AddItemToObject(o, "memory_mb", num_or_null(meminfo_mb(c, rel)));
	}
	free_list(nodes);
	if (cJSON_GetArraySize(numa) == 0) {
		/* A kernel without NUMA: one node holding everything. */
		cJSON *o = cJSON_CreateObject();

		cJSON_AddItemToArray(numa, o);
		cJSON_AddNumberToObject(o, "node", 0);
		cJSON_AddItemToObject(o, "cpus", str_or_null(online));
		cJSON_AddItemToObject(o, "memory_mb", num_or_null(meminfo_mb(c, "/proc/meminfo")));
	}
	return SMDDP_OK;
}

#ifdef HAVE_HWLOC
static int cpus_hwloc(cJSON *cpu, cJSON *numa)
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
		cJSON_AddItemToObject(j, "cpus", str_or_null(list));
		cJSON_AddItemToObject(j, "memory_mb",
				      num_or_null(o->attr ? (long long)(o->attr->numanode.local_memory >> 20)
							  : -1));
	}
	hwloc_topology_destroy(t);
	return 0;
}
#endif

/* ---- GPUs --------------------------------------------------------------- */

static const struct {
	unsigned id;
	const char *name;
} nv_names[] = {
	/* Those of the AWS instances in share/expect and their neighbours; others
	 * show their PCI ids (NVML, where present, names them all). */
	{0x1db1, "Tesla V100-SXM2-16GB"}, {0x1db5, "Tesla V100-SXM2-32GB"},
	{0x1eb8, "Tesla T4"},             {0x20b0, "NVIDIA A100-SXM4-40GB"},
	{0x20b2, "NVIDIA A100-SXM4-80GB"}, {0x2237, "NVIDIA A10G"},
	{0x26b5, "NVIDIA L40S"},          {0x27b8, "NVIDIA L4"},
	{0x2330, "NVIDIA H100 80GB HBM3"}, {0x2335, "NVIDIA H200"},
};

static void gpu_fill_sysfs(struct ctx *c, struct dev *g, cJSON *o)
{
	char rel[PATH_MAX], list[4096];

	snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s", g->bus);
	g->path = resolve(c, rel);
	g->numa = g->path ? numa_of(c, g->path) : -1;
	cJSON_AddItemToObject(o, "numa_node", num_or_null(g->numa));
	snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/local_cpulist", g->bus);
	cJSON_AddItemToObject(o, "cpus", str_or_null(rd(c, rel, list, sizeof(list)) == 0 ? list
										 : NULL));
}

static int gpus_sysfs(struct ctx *c)
{
	int n;
	char **devs = list_dir(c, "/sys/bus/pci/devices", &n);

	for (int i = 0; i < n; i++) {
		char rel[PATH_MAX], name[64];
		long cls, vendor, devid = 0;
		struct dev *g;
		cJSON *o;

		snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/class", devs[i]);
		if (rd_long(c, rel, 16, &cls) != 0)
			continue;
		snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/vendor", devs[i]);
		if (rd_long(c, rel, 16, &vendor) != 0 || vendor != 0x10de)
			continue;
		if ((cls >> 8) != 0x0302 && (cls >> 8) != 0x0300)
			continue;
		if (!is_bdf(devs[i], strlen(devs[i])))
			continue;
		g = realloc(c->gpus, (size_t)(c->ngpus + 1) * sizeof(*g));
		if (g == NULL) {
			free_list(devs);
			return SMDDP_ENOMEM;
		}
		c->gpus = g;
		g = &c->gpus[c->ngpus++];
		memset(g, 0, sizeof(*g));
		g->nvlinks = -1;
		snprintf(g->bus, sizeof(g->bus), "%s", devs[i]);
		lower(g->bus);
		snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/device", devs[i]);
		rd_long(c, rel, 16, &devid);
		snprintf(name, sizeof(name), "NVIDIA GPU 10de:%04lx", devid);
		for (size_t k = 0; k < sizeof(nv_names) / sizeof(nv_names[0]); k++)
			if (nv_names[k].id == (unsigned)devid)
				snprintf(name, sizeof(name), "%s", nv_names[k].name);
		o = cJSON_CreateObject();
		cJSON_AddItemToArray(c->gpu_arr, o);
		cJSON_AddStringToObject(o, "name", name);
		cJSON_AddStringToObject(o, "pci_bus_id", g->bus);
		cJSON_AddNullToObject(o, "memory_mb"); /* sysfs does not say */
		gpu_fill_sysfs(c, g, o);
		cJSON_AddNullToObject(o, "nvlinks");
	}
	free_list(devs);
	return SMDDP_OK;
}

/* NVML, declared here rather than from nvml.h, which CUDA-less machines lack;
 * these are the stable v2/v3 entry points and layouts of the NVML ABI. */
typedef struct nvml_device *nvml_dev;
struct nvml_pci {
	char bus_id_legacy[16];
	unsigned domain, bus, device, pci_device_id, pci_subsystem_id;
	char bus_id[32];
};
struct nvml_memory {
	unsigned long long total, free, used;
};
#define NVML_MAX_LINKS 18

static void nvml_bus(const struct nvml_pci *p, char bus[16])
{
	/* "00000000:10:1C.0" -> "0000:10:1c.0" */
	size_t n = strnlen(p->bus_id, sizeof(p->bus_id));

	snprintf(bus, 16, "%s", n >= 12 ? p->bus_id + n - 12 : p->bus_id);
	lower(bus);
}

static int gpus_nvml(struct ctx *c)
{
	void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	int (*init)(void), (*shutdown)(void), (*count)(unsigned *);
	int (*by_index)(unsigned, nvml_dev *), (*name)(nvml_dev, char *, unsigned);
	int (*pci)(nvml_dev, struct nvml_pci *), (*mem)(nvml_dev, struct nvml_memory *);
	int (*link_state)(nvml_dev, unsigned, int *), (*link_pci)(nvml_dev, unsigned, struct nvml_pci *);
	unsigned n = 0;
	int rc = -1;

	if (h == NULL)
		return -1;
	*(void **)&init = dlsym(h, "nvmlInit_v2");
	*(void **)&shutdown = dlsym(h, "nvmlShutdown");
	*(void **)&count = dlsym(h, "nvmlDeviceGetCount_v2");
	*(void **)&by_index = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&name = dlsym(h, "nvmlDeviceGetName");
	/* _v3 and _v2 fill the same structure; older drivers have only _v2. */
	*(void **)&pci = dlsym(h, "nvmlDeviceGetPciInfo_v3");
	if (pci == NULL)
		*(void **)&pci = dlsym(h, "nvmlDeviceGetPciInfo_v2");
	*(void **)&mem = dlsym(h, "nvmlDeviceGetMemoryInfo");
	*(void **)&link_state = dlsym(h, "nvmlDeviceGetNvLinkState");
	*(void **)&link_pci = dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
	if (!init || !shutdown || !count || !by_index || !name || !pci || !mem) {
		dlclose(h);
		return -1;
	}
	if (init() != 0) {
		SD_INFO(SD_SUB_INIT, "topology: NVML is present but nvmlInit failed; reading sysfs");
		dlclose(h);
		return -1;
	}
	if (count(&n) != 0)
		goto out;
	c->gpus = calloc(n ? n : 1, sizeof(*c->gpus));
	if (c->gpus == NULL)
		goto out;
	for (unsigned i = 0; i < n; i++) {
		struct dev *g = &c->gpus[c->ngpus];
		nvml_dev d;
		char nm[96] = "";
		struct nvml_pci p;
		struct nvml_memory m;
		cJSON *o;

		if (by_index(i, &d) != 0 || pci(d, &p) != 0)
			continue;
		c->ngpus++;
		nvml_bus(&p, g->bus);
		g->nvlinks = -1;
		o = cJSON_CreateObject();
		cJSON_AddItemToArray(c->gpu_arr, o);
		cJSON_AddItemToObject(o, "name", str_or_null(name(d, nm, sizeof(nm)) == 0 ? nm : NULL));
		cJSON_AddStringToObject(o, "pci_bus_id", g->bus);
		cJSON_AddItemToObject(o, "memory_mb",
				      num_or_null(mem(d, &m) == 0 ? (long long)(m.total >> 20) : -1));
		gpu_fill_sysfs(c, g, o);
		if (link_state != NULL) {
			/* A link whose far end is unknown ("") counts as one to
			 * NVSwitch, which reaches every peer. */
			g->remote = calloc(NVML_MAX_LINKS, sizeof(*g->remote));
			g->nvlinks = 0;
			for (unsigned l = 0; g->remote && l < NVML_MAX_LINKS; l++) {
				int active = 0;
				struct nvml_pci rp;

				if (link_state(d, l, &active) != 0 || !active)
					continue;
				if (link_pci != NULL && link_pci(d, l, &rp) == 0)
					nvml_bus(&rp, g->remote[g->nvlinks]);
				g->nvlinks++;
			}
		}
		cJSON_AddItemToObject(o, "nvlinks", num_or_null(g->nvlinks));
	}
	rc = 0;
out:
	shutdown();
	dlclose(h);
	return rc;
}

/* ---- NICs ------------------------------------------------------------------ */

static struct dev *nic_add(struct ctx *c)
{
	struct dev *d = realloc(c->nics, (size_t)(c->nnics + 1) * sizeof(*d));

	if (d == NULL)
		return NULL;
	c->nics = d;
	d = &c->nics[c->nnics++];
	memset(d, 0, sizeof(*d));
	d->numa = -1;
	return d;
}

static int nics_sysfs(struct ctx *c)
{
	int n, nib;
	char **net = list_dir(c, "/sys/class/net", &n);
	char **ib = list_dir(c, "/sys/class/infiniband", &nib);
	int rc = SMDDP_OK;

	for (int i = 0; i < n; i++) {
		char rel[PATH_MAX];
		long speed;
		char *p;
		struct dev *d;
		cJSON *o;

		/* Virtual interfaces (lo, bridges, veths, ifb) have no device link. */
		snprintf(rel, sizeof(rel), "/sys/class/net/%s/device", net[i]);
		p = resolve(c, rel);
		if (p == NULL)
			continue;
		d = nic_add(c);
		if (d == NULL) {
			free(p);
			rc = SMDDP_ENOMEM;
			goto out;
		}
		d->name = strdup(net[i]);
		if (pci_cut(p, d->bus) == 0) {
			d->path = p;
			d->numa = numa_of(c, p);
		} else {
			free(p);
		}
		o = cJSON_CreateObject();
		cJSON_AddItemToArray(c->nic_arr, o);
		cJSON_AddStringToObject(o, "name", net[i]);
		cJSON_AddItemToObject(o, "pci_bus_id", str_or_null(d->bus));
		cJSON_AddItemToObject(o, "numa_node", num_or_null(d->numa));
		snprintf(rel, sizeof(rel), "/sys/class/net/%s/speed", net[i]);
		cJSON_AddItemToObject(o, "speed_mbps",
				      num_or_null(rd_long(c, rel, 10, &speed) == 0 ? speed : -1));
		cJSON_AddFalseToObject(o, "efa");
		cJSON_AddNullToObject(o, "ib_device");
		cJSON_AddArrayToObject(o, "providers");
	}

	/* RDMA devices: attached to the netdev on the same PCI function (mlx5),
	 * or NICs of their own (EFA is a PCI function without a netdev). */
	for (int i = 0; i < nib; i++) {
		char rel[PATH_MAX], bus[16] = "", rate[64];
		char *p;
		long vendor = 0;
		int k;
		cJSON *o = NULL;

		snprintf(rel, sizeof(rel), "/sys/class/infiniband/%s/device", ib[i]);
		p = resolve(c, rel);
		if (p == NULL || pci_cut(p, bus) != 0) {
			free(p);
			continue;
		}
		snprintf(rel, sizeof(rel), "%s/vendor", p);
		rd_long(c, rel, 16, &vendor);
		for (k = 0; k < c->nnics; k++)
			if (strcmp(c->nics[k].bus, bus) == 0)
				break;
		if (k < c->nnics) {
			free(p);
			o = cJSON_GetArrayItem(c->nic_arr, k);
		} else {
			struct dev *d = nic_add(c);
			double gbps;

			if (d == NULL) {
				free(p);
				rc = SMDDP_ENOMEM;
				goto out;
			}
			d->name = strdup(ib[i]);
			snprintf(d->bus, sizeof(d->bus), "%s", bus);
			d->path = p;
			d->numa = numa_of(c, p);
			o = cJSON_CreateObject();
			cJSON_AddItemToArray(c->nic_arr, o);
			cJSON_AddStringToObject(o, "name", ib[i]);
			cJSON_AddStringToObject(o, "pci_bus_id", bus);
			cJSON_AddItemToObject(o, "numa_node", num_or_null(d->numa));
			/* "100 Gb/sec (4X EDR)" */
			snprintf(rel, sizeof(rel), "/sys/class/infiniband/%s/ports/1/rate", ib[i]);
			cJSON_AddItemToObject(o, "speed_mbps",
					      num_or_null(rd(c, rel, rate, sizeof(rate)) == 0 &&
								  sscanf(rate, "%lf", &gbps) == 1
							  ? (long long)(gbps * 1000 + 0.5)
							  : -1));
			cJSON_AddFalseToObject(o, "efa");
			cJSON_AddNullToObject(o, "ib_device");
			cJSON_AddArrayToObject(o, "providers");
		}
		cJSON_ReplaceItemInObject(o, "efa", cJSON_CreateBool(vendor == 0x1d0f));
		cJSON_ReplaceItemInObject(o, "ib_device", cJSON_CreateString(ib[i]));
	}
out:
	free_list(net);
	free_list(ib);
	return rc;
}

#ifdef HAVE_LIBFABRIC
/* Which NIC a libfabric domain runs on: by PCI address where the provider
 * says it, else by name (tcp names the netdev, efa "rdmap16s27-rdm"). */
static int fabric_nic(const struct ctx *c, const cJSON *nics, const struct fi_info *fi)
{
	const char *dom = fi->domain_attr ? fi->domain_attr->name : NULL;

	if (fi->nic != NULL && fi->nic->bus_attr != NULL &&
	    fi->nic->bus_attr->bus_type == FI_BUS_PCI) {
		const struct fi_pci_attr *a = &fi->nic->bus_attr->attr.pci;
		char bus[16];

		snprintf(bus, sizeof(bus), "%04x:%02x:%02x.%x", a->domain_id, a->bus_id,
			 a->device_id, a->function_id);
		for (int k = 0; k < c->nnics; k++)
			if (strcmp(c->nics[k].bus, bus) == 0)
				return k;
	}
	for (int k = 0; dom != NULL && k < c->nnics; k++) {
		const cJSON *ibd = cJSON_GetObjectItem(cJSON_GetArrayItem(nics, k), "ib_device");
		size_t l;

		if (strcmp(dom, c->nics[k].name) == 0)
			return k;
		if (cJSON_IsString(ibd) && (l = strlen(ibd->valuestring)) > 0 &&
		    strncmp(dom, ibd->valuestring, l) == 0 && (dom[l] == '\0' || dom[l] == '-'))
			return k;
	}
	return -1;
}

static void fabric_providers(struct ctx *c)
{
	struct fi_info *list = NULL;

	if (c->nnics == 0 ||
	    fi_getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), NULL, NULL, 0, NULL, &list) != 0)
		return;
	for (struct fi_info *fi = list; fi != NULL; fi = fi->next) {
		const char *prov = fi->fabric_attr ? fi->fabric_attr->prov_name : NULL;
		const char *dom = fi->domain_attr ? fi->domain_attr->name : NULL;
		int k = fabric_nic(c, c->nic_arr, fi);
		cJSON *arr, *e;
		int dup = 0;

		if (k < 0 || prov == NULL || dom == NULL)
			continue;
		arr = cJSON_GetObjectItem(cJSON_GetArrayItem(c->nic_arr, k), "providers");
		cJSON_ArrayForEach(e, arr)
		{
			if (strcmp(cJSON_GetObjectItem(e, "provider")->valuestring, prov) == 0 &&
			    strcmp(cJSON_GetObjectItem(e, "domain")->valuestring, dom) == 0)
				dup = 1;
		}
		if (dup)
			continue;
		e = cJSON_CreateObject();
		cJSON_AddStringToObject(e, "provider", prov);
		cJSON_AddStringToObject(e, "domain", dom);
		cJSON_AddItemToArray(arr, e);
	}
	fi_freeinfo(list);
}
#endif

/* ---- locality ------------------------------------------------------------- */

/* The components of a resolved path below its host bridge ("pci0000:00"),
 * host bridge first; 0 when there is none. */
static int below_host(const char *path, const char *comp[], size_t len[], int max)
{
	int n = 0, found = 0;

	for (const char *p = path; p && *p;) {
		size_t l;

		while (*p == '/')
			p++;
		l = strcspn(p, "/");
		if (l == 0)
			break;
		if (!found && strncmp(p, "pci", 3) == 0)
			found = 1;
		if (found && n < max) {
			comp[n] = p;
			len[n++] = l;
		}
		p += l;
	}
	return n;
}

/* nvidia-smi topo -m's names for the path between two PCI devices. */
static const char *pci_relation(const struct dev *a, const struct dev *b, int nnuma)
{
	const char *ca[32], *cb[32];
	size_t la[32], lb[32];
	int na = a->path ? below_host(a->path, ca, la, 32) : 0;
	int nb = b->path ? below_host(b->path, cb, lb, 32) : 0;
	int common = 0;

	if (na < 2 || nb < 2 || la[0] != lb[0] || memcmp(ca[0], cb[0], la[0]) != 0) {
		/* Other host bridges, or placement unknown: NUMA decides. */
		if (nnuma <= 1 || (a->numa >= 0 && a->numa == b->numa) || (a->numa < 0 && b->numa < 0))
			return "NODE";
		return "SYS";
	}
	/* Bridges shared below the host bridge (never the devices themselves). */
	while (common + 1 < na - 1 && common + 1 < nb - 1 && la[common + 1] == lb[common + 1] &&
	       memcmp(ca[common + 1], cb[common + 1], la[common + 1]) == 0)
		common++;
	if (common == 0)
		return "PHB";
	/* What each has of its own below the shared bridge, itself included:
	 * two or less is one PCIe switch between them, more a tree of them. */
	if (na - 1 - common <= 2 && nb - 1 - common <= 2)
		return "PIX";
	return "PXB";
}

static int links_between(const struct dev *a, const struct dev *b)
{
	int n = 0;

	for (int l = 0; a->remote && l < a->nvlinks; l++)
		n += strcmp(a->remote[l], b->bus) == 0;
	return n;
}

static int is_gpu_bus(const struct ctx *c, const char *bus)
{
	for (int i = 0; i < c->ngpus; i++)
		if (strcmp(c->gpus[i].bus, bus) == 0)
			return 1;
	return 0;
}

static cJSON *matrix(struct ctx *c, int cols_gpu, int nnuma)
{
	cJSON *m = cJSON_CreateArray();
	int ncols = cols_gpu ? c->ngpus : c->nnics;

	for (int i = 0; i < c->ngpus; i++) {
		cJSON *row = cJSON_CreateArray();
		struct dev *a = &c->gpus[i];

		cJSON_AddItemToArray(m, row);
		for (int j = 0; j < ncols; j++) {
			struct dev *b = cols_gpu ? &c->gpus[j] : &c->nics[j];
			char nv[16];

			if (cols_gpu && i == j) {
				cJSON_AddItemToArray(row, cJSON_CreateString("X"));
				continue;
			}
			if (cols_gpu && a->nvlinks > 0 && b->nvlinks > 0) {
				int direct = links_between(a, b);

				/* Through NVSwitch, every link reaches every peer. */
				if (direct == 0) {
					for (int l = 0; l < a->nvlinks; l++)
						a->switch_links += !is_gpu_bus(c, a->remote[l]);
					for (int l = 0; l < b->nvlinks; l++)
						b->switch_links += !is_gpu_bus(c, b->remote[l]);
					direct = a->switch_links < b->switch_links ? a->switch_links
										   : b->switch_links;
					a->switch_links = b->switch_links = 0;
				}
				if (direct > 0) {
					snprintf(nv, sizeof(nv), "NV%d", direct);
					cJSON_AddItemToArray(row, cJSON_CreateString(nv));
					continue;
				}
			}
			cJSON_AddItemToArray(row, cJSON_CreateString(pci_relation(a, b, nnuma)));
		}
	}
	return m;
}

static void free_devs(struct dev *v, int n)
{
	for (int i = 0; i < n; i++) {
		free(v[i].name);
		free(v[i].path);
		free(v[i].remote);
	}
	free(v);
}

int sd_topo_discover(const char *sysroot, cJSON **out)
{
	struct ctx c;
	cJSON *root = NULL, *by = NULL, *cpu = NULL, *numa = NULL;
	char host[256], model[256];
	const char *by_cpu = "sysfs", *by_gpus = "sysfs", *by_fabric = "none";
	int rc = SMDDP_ENOMEM, nnuma;

	memset(&c, 0, sizeof(c));
	if (sysroot == NULL || *sysroot == '\0')
		sysroot = "/";
	if (realpath(sysroot, c.root) == NULL) {
		sd_topo_set_error("sysroot %s: %s", sysroot, strerror(errno));
		return SMDDP_EINVAL;
	}
	c.live = strcmp(c.root, "/") == 0;
	if (c.live) {
		c.root[0] = '\0';
	} else {
		char p[PATH_MAX * 2], q[PATH_MAX * 2];

		/* A typo in --sysroot would otherwise describe an empty machine. */
		snprintf(p, sizeof(p), "%s/sys", c.root);
		snprintf(q, sizeof(q), "%s/proc", c.root);
		if (access(p, F_OK) != 0 && access(q, F_OK) != 0) {
			sd_topo_set_error("sysroot %s: neither sys/ nor proc/ under it", sysroot);
			return SMDDP_EINVAL;
		}
	}

	by = cJSON_CreateObject();
	cpu = cJSON_CreateObject();
	numa = cJSON_CreateArray();
	c.gpu_arr = cJSON_CreateArray();
	c.nic_arr = cJSON_CreateArray();
	if (by == NULL || cpu == NULL || numa == NULL || c.gpu_arr == NULL || c.nic_arr == NULL)
		goto out;

#ifdef HAVE_HWLOC
	if (c.live && cpus_hwloc(cpu, numa) == 0)
		by_cpu = "hwloc";
#endif
	if (strcmp(by_cpu, "sysfs") == 0) {
		rc = cpus_sysfs(&c, cpu, numa);
		if (rc != SMDDP_OK)
			goto out;
	}
	cpu_model(&c, model, sizeof(model));
	cJSON_AddItemToObject(cpu, "model", str_or_null(model));
	nnuma = cJSON_GetArraySize(numa);

	if (c.live && gpus_nvml(&c) == 0) {
		by_gpus = "nvml";
	} else {
		/* NVML may have found some before failing */
		free_devs(c.gpus, c.ngpus);
		c.gpus = NULL;
		c.ngpus = 0;
		while (cJSON_GetArraySize(c.gpu_arr) > 0)
			cJSON_DeleteItemFromArray(c.gpu_arr, 0);
		rc = gpus_sysfs(&c);
		if (rc != SMDDP_OK)
			goto out;
	}
	rc = nics_sysfs(&c);
	if (rc != SMDDP_OK)
		goto out;
#ifdef HAVE_LIBFABRIC
	if (c.live) {
		fabric_providers(&c);
		by_fabric = "libfabric";
	}
#endif
	cJSON_AddStringToObject(by, "cpu", by_cpu);
	cJSON_AddStringToObject(by, "gpus", by_gpus);
	cJSON_AddStringToObject(by, "fabric", by_fabric);

	rc = SMDDP_ENOMEM;
	root = cJSON_CreateObject();
	if (root == NULL)
		goto out;
	cJSON_AddNumberToObject(root, "schema", SD_TOPO_SCHEMA);
	cJSON_AddItemToObject(root, "host",
			      str_or_null(rd(&c, "/proc/sys/kernel/hostname", host, sizeof(host)) == 0
						  ? host
						  : NULL));
	cJSON_AddItemToObject(root, "discovered_by", by);
	cJSON_AddItemToObject(root, "cpu", cpu);
	cJSON_AddItemToObject(root, "numa", numa);
	cJSON_AddItemToObject(root, "gpus", c.gpu_arr);
	cJSON_AddItemToObject(root, "nics", c.nic_arr);
	by = cpu = numa = c.gpu_arr = c.nic_arr = NULL;
	cJSON_AddItemToObject(root, "gpu_links", matrix(&c, 1, nnuma));
	cJSON_AddItemToObject(root, "gpu_nic", matrix(&c, 0, nnuma));
	rc = SMDDP_OK;
out:
	free_devs(c.gpus, c.ngpus);
	free_devs(c.nics, c.nnics);
	cJSON_Delete(by);
	cJSON_Delete(cpu);
	cJSON_Delete(numa);
	cJSON_Delete(c.gpu_arr);
	cJSON_Delete(c.nic_arr);
	if (rc != SMDDP_OK) {
		if (rc == SMDDP_ENOMEM)
			sd_topo_set_error("out of memory while discovering the topology");
		cJSON_Delete(root);
		return rc;
	}
	*out = root;
	return SMDDP_OK;
}
