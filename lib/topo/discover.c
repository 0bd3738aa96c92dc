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
 * Under a sysroot, paths are resolved by sd_topo_resolve() (sysfs.c),
 * confined to the root, and a "link file" stands in for a symlink: a
 * regular file whose text is "!<symlink>TARGET".  Sysfs links form cycles (net/eth0/device
 * points back up to an ancestor), which tar -h (make dist) and other
 * copiers follow forever; link files keep a captured tree a plain tree.
 */
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/sd.h"
#include "topo/discover.h"
#include "topo/topo.h"

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

int sd_topo_discover(const char *sysroot, cJSON **out, struct sd_err *err)
{
	struct ctx c;
	cJSON *root = NULL, *by = NULL, *cpu = NULL, *numa = NULL;
	char host[256], model[256];
	const char *by_cpu = "sysfs", *by_gpus = "sysfs", *by_fabric = "none";
	int rc = SMDDP_ENOMEM, nnuma;

	memset(&c, 0, sizeof(c));
	if (sysroot == NULL || *sysroot == '\0')
		sysroot = "/";
	if (realpath(sysroot, c.root) == NULL)
		return sd_err_set(err, SMDDP_EINVAL, "sysroot %s: %s", sysroot, strerror(errno));
	c.live = strcmp(c.root, "/") == 0;
	if (c.live) {
		c.root[0] = '\0';
	} else {
		char p[PATH_MAX * 2], q[PATH_MAX * 2];

		/* A typo in --sysroot would otherwise describe an empty machine. */
		snprintf(p, sizeof(p), "%s/sys", c.root);
		snprintf(q, sizeof(q), "%s/proc", c.root);
		if (access(p, F_OK) != 0 && access(q, F_OK) != 0)
			return sd_err_set(err, SMDDP_EINVAL,
					  "sysroot %s: neither sys/ nor proc/ under it", sysroot);
	}

	by = cJSON_CreateObject();
	cpu = cJSON_CreateObject();
	numa = cJSON_CreateArray();
	c.gpu_arr = cJSON_CreateArray();
	c.nic_arr = cJSON_CreateArray();
	if (by == NULL || cpu == NULL || numa == NULL || c.gpu_arr == NULL || c.nic_arr == NULL)
		goto out;

#ifdef HAVE_HWLOC
	if (c.live && sd_topo_cpus_hwloc(cpu, numa) == 0)
		by_cpu = "hwloc";
#endif
	if (strcmp(by_cpu, "sysfs") == 0) {
		rc = sd_topo_cpus_sysfs(&c, cpu, numa);
		if (rc != SMDDP_OK)
			goto out;
	}
	sd_topo_cpu_model(&c, model, sizeof(model));
	cJSON_AddItemToObject(cpu, "model", sd_topo_str_or_null(model));
	nnuma = cJSON_GetArraySize(numa);

	if (c.live && sd_topo_gpus_nvml(&c) == 0) {
		by_gpus = "nvml";
	} else {
		/* NVML may have found some before failing */
		free_devs(c.gpus, c.ngpus);
		c.gpus = NULL;
		c.ngpus = 0;
		while (cJSON_GetArraySize(c.gpu_arr) > 0)
			cJSON_DeleteItemFromArray(c.gpu_arr, 0);
		rc = sd_topo_gpus_sysfs(&c);
		if (rc != SMDDP_OK)
			goto out;
	}
	rc = sd_topo_nics_sysfs(&c);
	if (rc != SMDDP_OK)
		goto out;
#ifdef HAVE_LIBFABRIC
	if (c.live) {
		sd_topo_fabric_providers(&c);
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
			      sd_topo_str_or_null(sd_topo_read(&c, "/proc/sys/kernel/hostname", host,
							       sizeof(host)) == 0
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
			sd_err_set(err, rc, "out of memory while discovering the topology");
		cJSON_Delete(root);
		return rc;
	}
	*out = root;
	return SMDDP_OK;
}
