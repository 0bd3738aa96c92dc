/* discover.h - what the parts of node discovery share (lib/topo/, internal).
 *
 * sd_topo_discover() (discover.c) walks a struct ctx through cpus.c,
 * gpus.c and nics.c, which read the machine through sysfs.c, and then
 * relates the devices they found (locality, in discover.c).
 */
#ifndef SD_TOPO_DISCOVER_H
#define SD_TOPO_DISCOVER_H

#include <limits.h>
#include <stddef.h>
#include <stdio.h>

#include <cjson/cJSON.h>

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

/* sysfs.c: files and folders under the root, through links */
char *sd_topo_resolve(const struct ctx *c, const char *rel);
FILE *sd_topo_open(const struct ctx *c, const char *rel);
int sd_topo_read(const struct ctx *c, const char *rel, char *buf, size_t len);
int sd_topo_read_long(const struct ctx *c, const char *rel, int base, long *out);
char **sd_topo_list_dir(const struct ctx *c, const char *rel, int *n);
void sd_topo_free_list(char **v);
int sd_topo_is_bdf(const char *s, size_t len);
int sd_topo_pci_cut(char *path, char bus[16]);
void sd_topo_lower(char *s);
int sd_topo_numa_of(const struct ctx *c, const char *pcipath);
cJSON *sd_topo_num_or_null(long long v);
cJSON *sd_topo_str_or_null(const char *s);

/* cpus.c */
int sd_topo_cpus_sysfs(const struct ctx *c, cJSON *cpu, cJSON *numa);
int sd_topo_cpus_hwloc(cJSON *cpu, cJSON *numa); /* HAVE_HWLOC only */
void sd_topo_cpu_model(const struct ctx *c, char *model, size_t len);

/* gpus.c: sd_topo_gpus_nvml() is for the live machine; -1 when NVML is
 * not there or fails (it may have found some GPUs before it failed) */
int sd_topo_gpus_sysfs(struct ctx *c);
int sd_topo_gpus_nvml(struct ctx *c);

/* nics.c */
int sd_topo_nics_sysfs(struct ctx *c);
void sd_topo_fabric_providers(struct ctx *c); /* HAVE_LIBFABRIC only */

#endif
