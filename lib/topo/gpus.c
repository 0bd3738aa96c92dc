/* gpus.c - discovery of NVIDIA GPUs: PCI functions in sysfs, or NVML on the live machine */
#include "config.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/sd.h"
#include "topo/discover.h"

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
	g->path = sd_topo_resolve(c, rel);
	g->numa = g->path ? sd_topo_numa_of(c, g->path) : -1;
	cJSON_AddItemToObject(o, "numa_node", sd_topo_num_or_null(g->numa));
	snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/local_cpulist", g->bus);
	cJSON_AddItemToObject(o, "cpus",
			      sd_topo_str_or_null(sd_topo_read(c, rel, list, sizeof(list)) == 0 ? list
												: NULL));
}

int sd_topo_gpus_sysfs(struct ctx *c)
{
	int n;
	char **devs = sd_topo_list_dir(c, "/sys/bus/pci/devices", &n);

	for (int i = 0; i < n; i++) {
		char rel[PATH_MAX], name[64];
		long cls, vendor, devid = 0;
		struct dev *g;
		cJSON *o;

		snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/class", devs[i]);
		if (sd_topo_read_long(c, rel, 16, &cls) != 0)
			continue;
		snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/vendor", devs[i]);
		if (sd_topo_read_long(c, rel, 16, &vendor) != 0 || vendor != 0x10de)
			continue;
		if ((cls >> 8) != 0x0302 && (cls >> 8) != 0x0300)
			continue;
		if (!sd_topo_is_bdf(devs[i], strlen(devs[i])))
			continue;
		g = realloc(c->gpus, (size_t)(c->ngpus + 1) * sizeof(*g));
		if (g == NULL) {
			sd_topo_free_list(devs);
			return SMDDP_ENOMEM;
		}
		c->gpus = g;
		g = &c->gpus[c->ngpus++];
		memset(g, 0, sizeof(*g));
		g->nvlinks = -1;
		snprintf(g->bus, sizeof(g->bus), "%s", devs[i]);
		sd_topo_lower(g->bus);
		snprintf(rel, sizeof(rel), "/sys/bus/pci/devices/%s/device", devs[i]);
		sd_topo_read_long(c, rel, 16, &devid);
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
	sd_topo_free_list(devs);
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
	sd_topo_lower(bus);
}

int sd_topo_gpus_nvml(struct ctx *c)
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
		cJSON_AddItemToObject(o, "name", sd_topo_str_or_null(name(d, nm, sizeof(nm)) == 0 ? nm : NULL));
		cJSON_AddStringToObject(o, "pci_bus_id", g->bus);
		cJSON_AddItemToObject(o, "memory_mb",
				      sd_topo_num_or_null(mem(d, &m) == 0 ? (long long)(m.total >> 20) : -1));
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
		cJSON_AddItemToObject(o, "nvlinks", sd_topo_num_or_null(g->nvlinks));
	}
	rc = 0;
out:
	shutdown();
	dlclose(h);
	return rc;
}
