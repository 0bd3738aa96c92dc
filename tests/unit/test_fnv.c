/* test_fnv.c - FNV-1a 64 against the published vectors, and a hash carried on equals one in one go. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "hash/fnv.h"
#include "check.h"

int main(void)
{
	/* Landon Curt Noll's FNV test vectors (fnv1a64). */
	CHECK(sd_fnv1a_str(SD_FNV1A_BASIS, "") == 0xcbf29ce484222325ull, "fnv1a64(\"\")");
	CHECK(sd_fnv1a_str(SD_FNV1A_BASIS, "a") == 0xaf63dc4c8601ec8cull, "fnv1a64(\"a\")");
	CHECK(sd_fnv1a_str(SD_FNV1A_BASIS, "foobar") == 0x85944171f73967e8ull, "fnv1a64(\"foobar\")");
	CHECK(sd_fnv1a(SD_FNV1A_BASIS, "foobar", 6) == 0x85944171f73967e8ull, "fnv1a64 of bytes");
	CHECK(sd_fnv1a(sd_fnv1a_str(SD_FNV1A_BASIS, "foo"), "bar", 3) == 0x85944171f73967e8ull,
	      "carried on: foo, then bar");
	/* bytes above 127 hash as unsigned, whatever char's sign */
	CHECK(sd_fnv1a_str(SD_FNV1A_BASIS, "\xff") == sd_fnv1a(SD_FNV1A_BASIS, "\xff", 1),
	      "a byte above 127, as string and as bytes");
	return check_done("test_fnv");
}
