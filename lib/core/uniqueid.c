/* uniqueid.c - explicit initialisation: smddp_get_unique_id and smddp_comm_init_rank.
 *
 * The id carries what the other ranks need to reach rank 0 (address, port,
 * a random token) and a key under which the process that made it keeps its
 * listening socket until smddp_comm_init_rank takes it.  Listening before
 * the id leaves the process means the port is never guessed or raced for,
 * which is what lets a backend rendezvous through a store that owns
 * MASTER_PORT already.
 */
#include "config.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "base/errors.h"
#include "bootstrap/bootstrap.h"
#include "config/param.h"
#include "core/comm.h"

#define ID_MAGIC "SMDDPU1"
#define TOKEN_HEX 32

struct wire_id {
	char magic[8];
	uint64_t key;
	int32_t port;
	char token[TOKEN_HEX + 1];
	char addr[SMDDP_UNIQUE_ID_BYTES - 8 - 8 - 4 - TOKEN_HEX - 1];
};
_Static_assert(sizeof(struct wire_id) <= SMDDP_UNIQUE_ID_BYTES, "id too large");

/* Sockets listening for ids not used yet.  Few: one per communicator being
 * made at a time. */
#define MAX_OPEN 64
static struct {
	uint64_t key;
	int fd;
} open_ids[MAX_OPEN];
static int nopen;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static int take(uint64_t key)
{
	int fd = -1;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < nopen; i++) {
		if (open_ids[i].key == key) {
			fd = open_ids[i].fd;
			open_ids[i] = open_ids[--nopen];
			break;
		}
	}
	pthread_mutex_unlock(&lock);
	return fd;
}

static int random_bytes(void *buf, size_t len)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = getrandom(p, len, 0);

		if (n < 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

SD_EXPORT int smddp_get_unique_id(struct smddp_unique_id *id)
{
	struct wire_id w;
	uint8_t tok[TOKEN_HEX / 2];
	int rc, fd, port;

	sd_err_clear(sd_init_err());
	if (!id)
		return sd_err_set(sd_init_err(), SMDDP_EINVAL, "smddp_get_unique_id: id is NULL");
	sd_log_init();
	rc = sd_params_load(sd_init_err());
	if (rc)
		return rc;
	memset(&w, 0, sizeof(w));
	memcpy(w.magic, ID_MAGIC, sizeof(w.magic));
	if (random_bytes(&w.key, sizeof(w.key)) || random_bytes(tok, sizeof(tok)))
		return sd_err_set(sd_init_err(), SMDDP_ESYSTEM,
				  "smddp_get_unique_id: no random numbers from the kernel");
	for (size_t i = 0; i < sizeof(tok); i++)
		snprintf(w.token + 2 * i, 3, "%02x", tok[i]);
	sd_boot_local_addr(w.addr, sizeof(w.addr));
	pthread_mutex_lock(&lock);
	if (nopen == MAX_OPEN) {
		pthread_mutex_unlock(&lock);
		return sd_err_set(sd_init_err(), SMDDP_EINVAL,
				  "smddp_get_unique_id: %d ids made and not used yet: pass each to "
				  "smddp_comm_init_rank before making more", MAX_OPEN);
	}
	rc = sd_boot_listen(&fd, &port, sd_init_err());
	if (rc) {
		pthread_mutex_unlock(&lock);
		return rc;
	}
	open_ids[nopen].key = w.key;
	open_ids[nopen].fd = fd;
	nopen++;
	pthread_mutex_unlock(&lock);
	w.port = port;
	memset(id, 0, sizeof(*id));
	memcpy(id->internal, &w, sizeof(w));
	SD_INFO(SD_SUB_INIT, "unique id: rendezvous at %s port %d", w.addr, port);
	return SMDDP_OK;
}

SD_EXPORT int smddp_comm_init_rank(struct smddp_comm **comm, int nranks,
				   const struct smddp_unique_id *id, int rank,
				   const struct smddp_config *config)
{
	struct sd_init_how how = {0};
	struct wire_id w;
	char port[16];

	sd_err_clear(sd_init_err());
	if (!comm || !id)
		return sd_err_set(sd_init_err(), SMDDP_EINVAL, "smddp_comm_init_rank: %s is NULL",
				  comm ? "id" : "comm");
	*comm = NULL;
	memcpy(&w, id->internal, sizeof(w));
	if (memcmp(w.magic, ID_MAGIC, sizeof(w.magic)) != 0 || w.port < 1 || w.port > 65535 ||
	    !memchr(w.addr, 0, sizeof(w.addr)) || !memchr(w.token, 0, sizeof(w.token)))
		return sd_err_set(sd_init_err(), SMDDP_EINVAL,
				  "smddp_comm_init_rank: the id was not made by smddp_get_unique_id "
				  "(or was damaged on its way to this rank)");
	if (nranks < 1 || rank < 0 || rank >= nranks)
		return sd_err_set(sd_init_err(), SMDDP_EINVAL,
				  "smddp_comm_init_rank: rank %d of %d: the rank must be at least 0 "
				  "and below the number of ranks", rank, nranks);
	if (config && config->size < sizeof(size_t))
		return sd_err_set(sd_init_err(), SMDDP_EINVAL,
				  "smddp_comm_init_rank: config->size is %zu: set it to "
				  "sizeof(struct smddp_config)", config->size);
	if (config && config->size >= offsetof(struct smddp_config, timeout_ms) + sizeof(int)) {
		if (config->timeout_ms < 0)
			return sd_err_set(sd_init_err(), SMDDP_EINVAL,
					  "smddp_comm_init_rank: timeout_ms %d is negative",
					  config->timeout_ms);
		how.timeout_ns = (uint64_t)config->timeout_ms * 1000000ull;
	}
	how.listen_fd = -1;
	if (rank == 0) {
		how.listen_fd = take(w.key);
		if (how.listen_fd < 0)
			return sd_err_set(sd_init_err(), SMDDP_EINVAL,
					  "smddp_comm_init_rank: rank 0 must be the process that made "
					  "the id with smddp_get_unique_id, and an id serves one "
					  "communicator only");
	}
	snprintf(port, sizeof(port), "%d", (int)w.port);
	how.rank = rank;
	how.size = nranks;
	how.addr = w.addr;
	how.port = port;
	how.token = w.token;
	return sd_comm_init(comm, &how);
}
