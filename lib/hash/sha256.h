/* hash/sha256.h - SHA-256 and HMAC-SHA-256, for the challenge-responses of the library and the tools.
 *
 * lib/hash/ is, like lib/text/, libc only and includes nothing else of
 * lib/: it is compiled into libsmddp (the ranks' rendezvous, in
 * lib/bootstrap/) and into the tools' cmd/common/libtoolcommon.a
 * (smddp-run's per-node launchers, cmd/run/nodes-join.c), so that both
 * prove a job token with the same, tested code and smddp-run still does not
 * link the library.  The names keep the library's sd_ prefix: the
 * library hides them (-fvisibility=hidden), so the two copies never meet.
 */
#ifndef SD_HASH_SHA256_H
#define SD_HASH_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SD_SHA256_LEN 32
struct sd_sha256 {
	uint32_t h[8];
	uint64_t len;  /* bytes hashed */
	uint8_t buf[64];
	size_t used;
};
struct sd_hmac_sha256 {
	struct sd_sha256 inner, outer;
};
void sd_sha256_init(struct sd_sha256 *s);
void sd_sha256_update(struct sd_sha256 *s, const void *data, size_t len);
void sd_sha256_final(struct sd_sha256 *s, uint8_t out[SD_SHA256_LEN]); /* wipes s */
void sd_hmac_sha256_init(struct sd_hmac_sha256 *m, const void *key, size_t keylen);
void sd_hmac_sha256_update(struct sd_hmac_sha256 *m, const void *data, size_t len);
void sd_hmac_sha256_final(struct sd_hmac_sha256 *m, uint8_t out[SD_SHA256_LEN]);
/* 1 when equal; time depends on len only (for MACs). */
int sd_memeq_ct(const void *a, const void *b, size_t len);

#endif
