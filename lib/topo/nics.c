/* nics.c - discovery of NICs: netdevs and RDMA devices in sysfs, and their libfabric providers */
#include "config.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef HAVE_LIBFABRIC
#include <rdma/fabric.h>
#endif

#include "util/sd.h"
#include "topo/discover.h"

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

int sd_topo_nics_sysfs(struct ctx *c)
{
	int n, nib;
	char **net = sd_topo_list_dir(c, "/sys/class/net", &n);
	char **ib = sd_topo_list_dir(c, "/sys/class/infiniband", &nib);
	int rc = SMDDP_OK;

	for (int i = 0; i < n; i++) {
		char rel[PATH_MAX];
		long speed;
		char *p;
		struct dev *d;
		cJSON *o;

		/* Virtual interfaces (lo, bridges, veths, ifb) have no device link. */
		snprintf(rel, sizeof(rel), "/sys/class/net/%s/device", net[i]);
		p = sd_topo_resolve(c, rel);
		if (p == NULL)
			continue;
		d = nic_add(c);
		if (d == NULL) {
			free(p);
			rc = SMDDP_ENOMEM;
			goto out;
		}
		d->name = strdup(net[i]);
		if (sd_topo_pci_cut(p, d->bus) == 0) {
			d->path = p;
			d->numa = sd_topo_numa_of(c, p);
		} else {
			free(p);
		}
		o = cJSON_CreateObject();
		cJSON_AddItemToArray(c->nic_arr, o);
		cJSON_AddStringToObject(o, "name", net[i]);
		cJSON_AddItemToObject(o, "pci_bus_id", sd_topo_str_or_null(d->bus));
		cJSON_AddItemToObject(o, "numa_node", sd_topo_num_or_null(d->numa));
		snprintf(rel, sizeof(rel), "/sys/class/net/%s/speed", net[i]);
		cJSON_AddItemToObject(o, "speed_mbps",
				      sd_topo_num_or_null(sd_topo_read_long(c, rel, 10, &speed) == 0 ? speed : -1));
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
		p = sd_topo_resolve(c, rel);
		if (p == NULL || sd_topo_pci_cut(p, bus) != 0) {
			free(p);
			continue;
		}
		snprintf(rel, sizeof(rel), "%s/vendor", p);
		sd_topo_read_long(c, rel, 16, &vendor);
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
			d->numa = sd_topo_numa_of(c, p);
			o = cJSON_CreateObject();
			cJSON_AddItemToArray(c->nic_arr, o);
			cJSON_AddStringToObject(o, "name", ib[i]);
			cJSON_AddStringToObject(o, "pci_bus_id", bus);
			cJSON_AddItemToObject(o, "numa_node", sd_topo_num_or_null(d->numa));
			/* "100 Gb/sec (4X EDR)" */
			snprintf(rel, sizeof(rel), "/sys/class/infiniband/%s/ports/1/rate", ib[i]);
			cJSON_AddItemToObject(o, "speed_mbps",
					      sd_topo_num_or_null(sd_topo_read(c, rel, rate, sizeof(rate)) == 0 &&
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
	sd_topo_free_list(net);
	sd_topo_free_list(ib);
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

void sd_topo_fabric_providers(struct ctx *c)
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
