/*
 * test_auth_b64.c: common/auth_b64: strict base64 for credentials, one
 * text per value in each alphabet.
 */
#include <string.h>

#include "common/auth_b64.h"
#include "tests/unit/unit.h"

static long dec(const char *s, uint8_t *out, size_t cap, int url)
{
	return auth_b64_decode(s, strlen(s), out, cap, url);
}

static void test_standard_with_padding(void)
{
	uint8_t b[64];

	CU_ASSERT_EQUAL(dec("Ym9iOnB3", b, sizeof b, 0), 6);
	CU_ASSERT_EQUAL(memcmp(b, "bob:pw", 6), 0);
	CU_ASSERT_EQUAL(dec("Ym9iOnB3MQ==", b, sizeof b, 0), 7);
	CU_ASSERT_EQUAL(memcmp(b, "bob:pw1", 7), 0);
	CU_ASSERT_EQUAL(dec("Ym9iOnB3MTI=", b, sizeof b, 0), 8);
	CU_ASSERT_EQUAL(dec("", b, sizeof b, 0), 0);
	CU_ASSERT_EQUAL(dec("+/+/", b, sizeof b, 0), 3);
}

static void test_standard_refuses_what_is_not_canonical(void)
{
	uint8_t b[64];

	CU_ASSERT_EQUAL(dec("Ym9iOnB3MQ", b, sizeof b, 0), -1);   /* padding missing */
	CU_ASSERT_EQUAL(dec("Ym9iOnB3M===", b, sizeof b, 0), -1); /* three '=' */
	CU_ASSERT_EQUAL(dec("Ym9i=nB3", b, sizeof b, 0), -1);     /* '=' inside */
	CU_ASSERT_EQUAL(dec("Ym9iOnB3MR==", b, sizeof b, 0), -1); /* unused bits set */
	CU_ASSERT_EQUAL(dec("Ym9i OnB3", b, sizeof b, 0), -1);    /* a space */
	CU_ASSERT_EQUAL(dec("-_-_", b, sizeof b, 0), -1);         /* the URL alphabet */
}

static void test_url_safe_without_padding(void)
{
	uint8_t b[64];

	CU_ASSERT_EQUAL(dec("eyJhbGciOiJFUzI1NiJ9", b, sizeof b, 1), 15);
	CU_ASSERT_EQUAL(memcmp(b, "{\"alg\":\"ES256\"}", 15), 0);
	CU_ASSERT_EQUAL(dec("-_-_", b, sizeof b, 1), 3);
	CU_ASSERT_EQUAL(dec("QQ", b, sizeof b, 1), 1);
	CU_ASSERT_EQUAL(b[0], 'A');
	CU_ASSERT_EQUAL(dec("QR", b, sizeof b, 1), -1);    /* the same byte, other unused bits */
	CU_ASSERT_EQUAL(dec("QQ==", b, sizeof b, 1), -1);  /* padding is not JWS */
	CU_ASSERT_EQUAL(dec("+/+/", b, sizeof b, 1), -1);  /* the standard alphabet */
	CU_ASSERT_EQUAL(dec("QUJDR", b, sizeof b, 1), -1); /* a length no bytes encode to */
}

static void test_output_room_is_respected(void)
{
	uint8_t b[8];

	memset(b, 0x55, sizeof b);
	CU_ASSERT_EQUAL(dec("QUJDREVGRw", b, 6, 1), -1); /* 7 bytes into 6 */
	CU_ASSERT_EQUAL(b[6], 0x55);
	CU_ASSERT_EQUAL(dec("QUJDREVGRw", b, 7, 1), 7);
}

static const struct unit_test tests[] = {
    {"the standard alphabet decodes with its padding", test_standard_with_padding},
    {"the standard alphabet refuses missing or stray padding, set unused bits, spaces and '-_'",
     test_standard_refuses_what_is_not_canonical},
    {"the URL-safe alphabet decodes without padding and refuses padding, '+/' and set unused bits",
     test_url_safe_without_padding},
    {"decoding never writes past the room given", test_output_room_is_respected},
};

UNIT_MAIN("common/auth_b64", tests)
