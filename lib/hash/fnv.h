/* hash/fnv.h - FNV-1a, 64 bits: a quick hash of names, for identities that every rank or host computes alike.
 *
 * Not for secrets (sha256.h is): anyone who knows the input computes the
 * same number.  Its values travel between ranks and hosts (a machine's
 * boot_id in the socket transport's names, a host identity at rejoin,
 * smddp-run's shared identifiers), so the constants never change.  Header
 * only, libc only, like the rest of lib/hash/: the library and the tools
 * both include it.
 */
#ifndef SD_HASH_FNV_H
#define SD_HASH_FNV_H

#include <stddef.h>
#include <stdint.h>

#define SD_FNV1A_BASIS 0xcbf29ce484222325ull /* the offset basis: where a hash starts */
#define SD_FNV1A_PRIME 0x100000001b3ull

/* h (SD_FNV1A_BASIS, or the hash so far) carried on over len bytes of data. */
static inline uint64_t sd_fnv1a(uint64_t h, const void *data, size_t len)
{
	const unsigned char *p = data;

	for (size_t i = 0; i < len; i++)
		h = (h ^ p[i]) * SD_FNV1A_PRIME;
	return h;
}

/* The same over a string, without its NUL. */
static inline uint64_t sd_fnv1a_str(uint64_t h, const char *s)
{
	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * SD_FNV1A_PRIME;
	return h;
}

#endif
