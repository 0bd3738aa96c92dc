/* test_sha256.c - SHA-256 and HMAC-SHA-256 against the FIPS 180-4 and RFC 4231 vectors. */
#include "config.h"

#include <stdio.h>
#include <string.h>

#include "hash/sha256.h"
#include "check.h"


static void hex(const uint8_t *d, char *out)
{
	for (int i = 0; i < SD_SHA256_LEN; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

static void check(const char *what, const uint8_t *got, const char *want)
{
	char h[2 * SD_SHA256_LEN + 1];

	hex(got, h);
	if (strcmp(h, want)) {
		FAIL("%s: %s, expected %s", what, h, want);
	} else {
		printf("ok   %s\n", what);
	}
}

static void sha(const char *what, const void *d, size_t n, const char *want)
{
	struct sd_sha256 s;
	uint8_t out[SD_SHA256_LEN];

	sd_sha256_init(&s);
	sd_sha256_update(&s, d, n);
	sd_sha256_final(&s, out);
	check(what, out, want);
}

static void hmac(const char *what, const void *k, size_t kl, const void *d, size_t dl, const char *want)
{
	struct sd_hmac_sha256 m;
	uint8_t out[SD_SHA256_LEN];

	sd_hmac_sha256_init(&m, k, kl);
	/* in two pieces: the update is incremental */
	sd_hmac_sha256_update(&m, d, dl / 2);
	sd_hmac_sha256_update(&m, (const uint8_t *)d + dl / 2, dl - dl / 2);
	sd_hmac_sha256_final(&m, out);
	check(what, out, want);
}

int main(void)
{
	static uint8_t big[1000000], k20[20], k131[131];
	struct sd_sha256 s;
	uint8_t out[SD_SHA256_LEN];

	sha("sha256(\"\")", "", 0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	sha("sha256(abc)", "abc", 3, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	sha("sha256(448 bits)", "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56,
	    "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
	memset(big, 'a', sizeof(big));
	sha("sha256(10^6 x a)", big, sizeof(big), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	sd_sha256_init(&s);
	for (int i = 0; i < 1000; i++) /* odd pieces across block boundaries */
		sd_sha256_update(&s, big, 1000);
	sd_sha256_final(&s, out);
	check("sha256(10^6 x a) in 1000 pieces", out, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");

	memset(k20, 0x0b, sizeof(k20));
	memset(k131, 0xaa, sizeof(k131));
	hmac("RFC 4231 case 1", k20, 20, "Hi There", 8,
	     "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	hmac("RFC 4231 case 2", "Jefe", 4, "what do ya want for nothing?", 28,
	     "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	hmac("RFC 4231 case 6 (key longer than a block)", k131, 131,
	     "Test Using Larger Than Block-Size Key - Hash Key First", 54,
	     "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
	CHECK(sd_memeq_ct("abcd", "abcd", 4) && !sd_memeq_ct("abcd", "abce", 4), "sd_memeq_ct");
	return check_done("test_sha256");
}
